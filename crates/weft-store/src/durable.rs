//! Durable tools.
