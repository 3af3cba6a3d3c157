//! wirelog's native core: the per-packet and per-message path (capture reading, TCP reassembly,
//! record emission). Layers import one way: python → pipeline → records → tcp → capture → model.

pub mod capture;
pub mod decoders;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod model;
pub mod pipeline;
pub mod records;
pub mod tcp;

#[cfg(feature = "python")]
mod python;
