//! Injectable time source for stream assembly ("receipt time" when events carry no timestamp).

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Timestamp;

/// Where the assembler gets the current time.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let nanos = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => since.as_nanos() as i128,
            Err(before) => -(before.duration().as_nanos() as i128),
        };
        Timestamp::from_unix_nanos(nanos)
    }
}

/// A clock that always returns the same instant.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub Timestamp);

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }
}

/// A deterministic clock for tests: starts at an instant and advances a fixed step per reading.
#[derive(Debug, Clone)]
pub struct SteppingClock {
    next: Cell<i128>,
    step_nanos: i128,
}

impl SteppingClock {
    /// Starts at `start`, advancing `step_millis` milliseconds after each reading.
    pub fn new(start: Timestamp, step_millis: i64) -> Self {
        Self {
            next: Cell::new(start.unix_nanos()),
            step_nanos: i128::from(step_millis) * 1_000_000,
        }
    }
}

impl Clock for SteppingClock {
    fn now(&self) -> Timestamp {
        let now = self.next.get();
        self.next.set(now + self.step_nanos);
        Timestamp::from_unix_nanos(now)
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}
