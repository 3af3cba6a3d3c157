//! Fuzz body.
