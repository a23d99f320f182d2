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

/// Bytes allocated and not freed in the region. (The counter books a reallocation's growth
/// or shrinkage in `bytes_allocated` / `bytes_deallocated` already; its `bytes_reallocated`
/// is the same change again, so it is not added.)
fn live_bytes(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize
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
    w4_shape();
}

/// The shape of the peer workload W4 (bench/WORKLOAD.md): 10,000 conversations of 20 messages
/// of exactly 200 characters, alternating user and assistant, built with one `with_messages`.
/// Prints where the bytes go: the requested bytes per conversation (what the allocator was
/// asked for; the process's RSS adds the allocator's own rounding and headers, about 8–16
/// bytes per allocation) and the fixed sizes of the types involved.
fn w4_shape() {
    const CONVERSATIONS: usize = 10_000;
    // Exactly 200 bytes in one allocation.
    let text = |i: usize, j: usize| {
        let mut scratch = String::with_capacity(256);
        scratch.push_str(&format!("c{i:05}m{j:02} "));
        while scratch.len() < 200 {
            scratch.push_str("lorem ipsum dolor sit amet ");
        }
        scratch.truncate(200);
        scratch.as_str().to_owned()
    };
    let region = Region::new(GLOBAL);
    let one = Message::user(text(0, 0));
    let bare = live_bytes(&region);
    drop(one);
    let region = Region::new(GLOBAL);
    let mut conversations = Vec::with_capacity(CONVERSATIONS);
    for i in 0..CONVERSATIONS {
        conversations.push(AgentState::initial().with_messages((0..20).map(|j| {
            if j % 2 == 0 {
                Message::user(text(i, j))
            } else {
                Message::assistant(text(i, j))
            }
        })));
    }
    let change = region.change();
    let live = live_bytes(&region);
    println!(
        "W4 shape: {} bytes requested per conversation in {:.1} live allocations ({} per \
         message; a bare 200-character message is {bare} bytes in 3 allocations: its text, its \
         id, its content vector; the state keeps it as one 228-byte record in the history's \
         segment, which with its header is the conversation's one allocation); the list of \
         states itself adds {} bytes per conversation",
        live / CONVERSATIONS as isize,
        (change.allocations - change.deallocations) as f64 / CONVERSATIONS as f64,
        live / (CONVERSATIONS * 20) as isize,
        std::mem::size_of::<AgentState>(),
    );
    println!(
        "sizes: Message {}, ContentBlock {}, Arc<Message> allocation {}, AgentState {}",
        std::mem::size_of::<Message>(),
        std::mem::size_of::<weft_provider::ContentBlock>(),
        std::mem::size_of::<Message>() + 16,
        std::mem::size_of::<AgentState>(),
    );
    drop(conversations);
}
