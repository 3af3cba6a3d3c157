//! Records that wait for their fate, packed and kept under one memory budget, spilled to an
//! unnamed file past it (docs/architecture.md, "Held records"). Outside decoders/ because it does
//! file I/O: the session owns the stores and hands them to the decoders with the rest of `Shared`.

pub mod pack;
pub mod spill;
pub(crate) mod waiting;
