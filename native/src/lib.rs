//! wirelog's native core: the per-packet and per-message path (capture reading, TCP reassembly,
//! record emission). Layers import one way: python → pipeline → records → tcp → capture → model.
//! The core parses hostile bytes: `unsafe` is refused everywhere but the FFI glue (python.rs).
#![deny(unsafe_code)]

pub mod capture;
pub mod decoders;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod held;
pub mod model;
pub mod pipeline;
pub mod records;
pub mod report;
pub mod tcp;

#[cfg(feature = "python")]
mod python;
