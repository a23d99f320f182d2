//! Test support for Weft.
