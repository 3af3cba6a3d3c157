//! Cassandra CQL native protocol v3/v4/v5 (reference/cql.md): envelopes, v5 CRC/LZ4 frames,
//! every opcode, typed values, request/response pairing and prepared statements.
//!
//! Modules, one job each: `envelope` (9-byte headers), `frame_v5` (v5 frames, CRC24/CRC32),
//! `compression` (capped LZ4/Snappy), `types` (notation readers and cell values), `messages`
//! (bodies per opcode and version), `decoder` (the per-connection state machine), `findings`,
//! `fuzz` (the fuzz target's body). Detection stays in Python (wirelog/decoders/cql/detect.py).

mod compression;
mod decoder;
mod envelope;
mod findings;
mod frame_v5;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
mod messages;
#[cfg(test)]
mod tests;
mod types;

pub use decoder::{CqlDecoder, Shared};
