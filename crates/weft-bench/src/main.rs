//! `weft-bench`: the framework-overhead workloads of `bench/WORKLOAD.md` (W1 sequential tool
//! loop, W2 1,000 concurrent runs, W3 checkpointed loop, W4 idle memory) run against Weft's
//! public API under the same rules as the peer frameworks.
//!
//! ```text
//! weft-bench w1|w1rt|w2|w3|w4|all [--durability async|sync]
//! ```
//!
//! `w1rt` is W1 through `weft_runtime::Runtime::start` (a durable run on SQLite: argument
//! validation, the event log, the tool ledger, checkpoints), reported beside W1; it needs a
//! build with `--features runtime` (kept apart so that W2's resident memory does not include
//! the runtime's code). Its store lives in a temporary directory: `TMPDIR=/dev/shm` puts it in
//! memory (tmpfs), which leaves the disk out of the measure.
//!
//! Prints one JSON line per workload on stdout (and nothing else there); progress goes to
//! stderr. Build with `cargo build --release -p weft-bench`.

mod memory;
mod workloads;

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: weft-bench w1|w1rt|w2|w3|w4|all [--durability async|sync]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(which) = args.next() else {
        return usage();
    };
    let mut durability = workloads::Durability::Async;
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next().as_deref()) {
            ("--durability", Some("async")) => durability = workloads::Durability::Async,
            ("--durability", Some("sync")) => durability = workloads::Durability::Sync,
            _ => return usage(),
        }
    }
    let selected: Vec<&str> = match which.as_str() {
        "all" => vec!["w1", "w2", "w3", "w4"],
        "w1" | "w1rt" | "w2" | "w3" | "w4" => vec![which.as_str()],
        _ => return usage(),
    };
    for workload in selected {
        let result = match workload {
            "w1" => workloads::w1(),
            #[cfg(feature = "runtime")]
            "w1rt" => workloads::w1_runtime(durability),
            #[cfg(not(feature = "runtime"))]
            "w1rt" => Err("w1rt needs a build with `--features runtime`".into()),
            "w2" => workloads::w2(),
            "w3" => workloads::w3(durability),
            _ => workloads::w4(),
        };
        match result {
            Ok(line) => println!("{line}"),
            Err(error) => {
                eprintln!("weft-bench: {workload} failed: {error}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}
