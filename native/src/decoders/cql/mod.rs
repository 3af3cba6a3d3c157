//! Cassandra CQL native protocol v3/v4/v5 (reference/cql.md): envelopes, v5 CRC/LZ4 frames,
//! every opcode, typed values, request/response pairing and prepared statements.
//!
//! Modules, one job each: `envelope` (9-byte headers), `frame_v5` (v5 frames, CRC24/CRC32),
//! `compression` (capped LZ4/Snappy), `types` (notation readers and cell values), `messages`
//! (bodies per opcode and version), `rows` (a result's rows, written from their bytes),
//! `decoder` (the per-connection state machine), `findings`, `detect` (content detection),
//! `fuzz` (the fuzz target's body).

mod compression;
mod decoder;
pub mod detect;
mod envelope;
mod findings;
mod frame_v5;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
mod messages;
mod rows;
#[cfg(test)]
mod tests;
mod types;

pub use decoder::{CqlDecoder, Shared};
pub use envelope::KINDS;

/// The Cassandra CQL native protocol, v3 to v5.
pub const PROTOCOL: super::detect::Protocol = super::detect::Protocol {
    name: "cql",
    ports: &detect::PORTS,
    detect: detect::detect,
    find_start: None,
    kinds: &KINDS,
    decoder: Some(|ctx| Box::new(CqlDecoder::new(ctx))),
};

/// Detection's evidence (`detect`): does the complete envelope at the start of
/// `data` decode with no bytes left over? Compressed pre-v5 bodies are the caller's to judge.
fn envelope_decodes(data: &[u8]) -> bool {
    let Some(head) = envelope::parse(data) else {
        return false;
    };
    let Some(body) = data.get(envelope::HEADER..head.total() as usize) else {
        return false;
    };
    let prepared = messages::PreparedMap::new();
    let budget =
        crate::decoders::budget::Budget::new(crate::decoders::Limits::default().max_inflated);
    let ctx = messages::BodyContext {
        version: head.version,
        show_secrets: false,
        max_depth: 16,
        prepared: &prepared,
        request_query: None,
        result_types: None,
        specs: None,
        max_cells: budget.values_left(),
        cap: budget.cap(),
    };
    let decoded = messages::decode(&head, body, &ctx, messages::Fields::default());
    decoded.error.is_none() && decoded.trailing == 0
}
