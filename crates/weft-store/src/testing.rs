//! Testing helpers.
