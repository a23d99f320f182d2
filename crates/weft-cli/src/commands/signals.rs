//! Stopping a run from outside: Ctrl-C (SIGINT), SIGTERM and SIGHUP all stop it the same
//! way — at the next safe point, with in-flight tool calls left pending (uncertain) and the
//! run resumable. A second signal exits at once with 130.

use tokio_util::sync::CancellationToken;

/// Waits for the first interrupting signal, cancels `abort`, then exits the process on the
/// second.
pub(crate) async fn stop_on_signals(abort: CancellationToken) {
    interrupted().await;
    abort.cancel();
    interrupted().await;
    eprintln!("\nweft: interrupted again; exiting now");
    super::telemetry::finish();
    std::process::exit(130);
}

#[cfg(unix)]
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

#[cfg(not(unix))]
async fn interrupted() {
    let _ = tokio::signal::ctrl_c().await;
}
