//! `hook_payload`: harness hook payloads as `weft gate hook` reads them (weft-gate).

use std::path::Path;

use serde_json::Value;
use weft_gate::{Harness, HookEvent, run_hook};

const EVENTS: [HookEvent; 8] = [
    HookEvent::SessionStart,
    HookEvent::PreToolUse,
    HookEvent::PostToolUse,
    HookEvent::PreCompact,
    HookEvent::PostCompact,
    HookEvent::UserPromptSubmit,
    HookEvent::Stop,
    HookEvent::SubagentStop,
];

/// Any bytes as a hook's stdin. A payload that is not a JSON object is refused without
/// touching a file: every harness's `PreToolUse` denies it (exit 2, a JSON answer on stdout
/// saying `deny`), and every other event answers exit 0 (Cursor: JSON on stdout). An object
/// payload is read the same way twice, and the call's audit summary is one line.
pub fn hook_payload(data: &[u8]) {
    let cwd = Path::new("/weft-fuzz-no-such-dir");
    let Some(read) = weft_gate::read_payload(data, cwd) else {
        for harness in [Harness::Claude, Harness::Cursor, Harness::Codex] {
            for event in EVENTS {
                let answer = run_hook(event, Some(harness), data, cwd);
                if event == HookEvent::PreToolUse {
                    assert_eq!(answer.exit_code, 2, "{harness:?}: refused fail-closed");
                    let json: Value =
                        serde_json::from_str(answer.stdout.trim()).expect("a deny answer is JSON");
                    assert!(json.to_string().contains("deny"), "{json}");
                } else {
                    assert_eq!(answer.exit_code, 0, "{harness:?} {event:?}");
                    if harness == Harness::Cursor && event != HookEvent::SessionStart {
                        let _: Value = serde_json::from_str(answer.stdout.trim())
                            .expect("a Cursor answer is JSON");
                    }
                }
            }
        }
        return;
    };
    let again = weft_gate::read_payload(data, cwd).expect("reads again");
    assert_eq!(format!("{read:?}"), format!("{again:?}"));
    if let Some(invocation) = read.invocation {
        let summary = invocation.summary();
        assert!(
            !summary.chars().any(char::is_control),
            "summary on one line: {summary:?}"
        );
    }
}
