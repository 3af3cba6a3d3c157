//! wirelog's native core: the per-packet and per-message path (capture reading, TCP reassembly,
//! record emission). Layers import one way: python → pipeline → tcp → capture → records.

pub mod capture;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod pipeline;
pub mod records;
pub mod tcp;

#[cfg(feature = "python")]
mod python;
