//! The body of the `lumberjack` fuzz target (native/fuzz/fuzz_targets/lumberjack.rs).
