//! wirelog's native core: the per-packet and per-message path (capture reading, TCP reassembly,
//! record emission). Layers import one way: python → pipeline → records → tcp → capture → model.
//! The core parses hostile bytes: `unsafe` is refused everywhere but the FFI glue (python/).
//! No arithmetic on a number from the wire may overflow (issue 29): in the layers that parse,
//! every `+ - * /` is checked, saturating or wrapping by choice, or allowed where a comment
//! proves its bound. Test code is exempt (`not(test)`); `held/`, `report/` (it sees records, not
//! wire bytes) and python/ are reviewed apart.
#![deny(unsafe_code)]

// The bounds those comments state take a 64-bit usize (a u32 length plus a position fits it).
#[cfg(not(target_pointer_width = "64"))]
compile_error!("the core is built for 64-bit targets only");

#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod capture;
#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod decoders;
#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod formats;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod held;
#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod model;
#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod pipeline;
#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod records;
pub mod report;
#[cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]
pub mod tcp;

#[cfg(feature = "python")]
mod python;
