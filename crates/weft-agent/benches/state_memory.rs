//! Memory per live state, counted with a counting global allocator: 10,000 independent states
//! of 20 messages each, and 10,000 branches of one 20-message state.
//! Run with `cargo bench -p weft-agent --bench state_memory`.
#![allow(missing_docs, clippy::unwrap_used)]

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft_agent::AgentState;
use weft_provider::Message;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn live_bytes(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize + change.bytes_reallocated
}

fn main() {
    const STATES: usize = 10_000;
    const MESSAGES: usize = 20;

    // One message alone, for reference.
    let region = Region::new(GLOBAL);
    let one = Message::user("message 00 of a typical short conversation");
    let message_bytes = live_bytes(&region);
    drop(one);

    let region = Region::new(GLOBAL);
    let states: Vec<AgentState> = (0..STATES)
        .map(|s| {
            let mut state = AgentState::initial();
            for m in 0..MESSAGES {
                state = state.with_message(Message::user(format!(
                    "message {m:02} of conversation {s:05}"
                )));
            }
            state
        })
        .collect();
    let independent = live_bytes(&region);
    println!(
        "{STATES} independent states x {MESSAGES} messages: {} bytes live, {} bytes per state ({} per message incl. the message; a bare message is {message_bytes} bytes)",
        independent,
        independent / STATES as isize,
        independent / (STATES * MESSAGES) as isize
    );
    drop(states);

    let base = (0..MESSAGES).fold(AgentState::initial(), |s, m| {
        s.with_message(Message::user(format!("message {m:02}")))
    });
    let region = Region::new(GLOBAL);
    let branches: Vec<AgentState> = (0..STATES)
        .map(|i| base.with_metadata("branch", i.into()))
        .collect();
    let shared = live_bytes(&region);
    println!(
        "{STATES} branches of one {MESSAGES}-message state: {} bytes live, {} bytes per branch",
        shared,
        shared / STATES as isize
    );
    println!(
        "size_of::<AgentState>() = {} bytes",
        std::mem::size_of::<AgentState>()
    );
    drop(branches);
}
