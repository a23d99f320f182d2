//! Asking a person at the terminal (the [`Approver`] of `weft run` / `weft resume` when
//! standard input is a terminal and `--no-input` is not given). One question at a time;
//! an empty answer or end of input leaves the decision pending (the run suspends, exit 4).

use std::io::{BufRead as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tokio::sync::Mutex;
use weft_runtime::approval::{ApprovalRequest, Approver};
use weft_store::Verdict;

/// Set while a question is on the terminal: the live view's status line stays quiet, so it
/// never draws over the question.
pub(crate) static ASKING: AtomicBool = AtomicBool::new(false);

/// Asks on stderr, reads the answer from stdin.
#[derive(Debug, Default)]
pub(crate) struct TerminalApprover {
    one_at_a_time: Mutex<()>,
}

impl TerminalApprover {
    pub(crate) fn shared() -> Arc<dyn Approver> {
        Arc::new(TerminalApprover::default())
    }
}

fn ask(request: &ApprovalRequest) -> Option<Verdict> {
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "\r\x1b[K? {} wants to run {} {}",
        request.run_id,
        request.tool,
        super::run::clip(&request.arguments.to_string(), 300)
    );
    let _ = write!(
        err,
        "  approve? [y]es / [n]o / [Enter] decide later (decision {}): ",
        request.decision_id
    );
    let _ = err.flush();
    let stdin = std::io::stdin();
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer).ok()? == 0 {
        return None;
    }
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "a" | "approve" => Some(Verdict::Approve),
        "n" | "no" | "d" | "deny" => {
            let _ = write!(err, "  reason (the model sees it; Enter for none): ");
            let _ = err.flush();
            let mut reason = String::new();
            let _ = stdin.lock().read_line(&mut reason);
            Some(Verdict::Deny(reason.trim().to_owned()))
        }
        _ => None,
    }
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn decide(&self, request: &ApprovalRequest) -> Option<Verdict> {
        let _turn = self.one_at_a_time.lock().await;
        let request = request.clone();
        ASKING.store(true, Ordering::SeqCst);
        let verdict = tokio::task::spawn_blocking(move || ask(&request))
            .await
            .ok()
            .flatten();
        ASKING.store(false, Ordering::SeqCst);
        verdict
    }
}
