//! Per-stream protocol decoders: sans-IO state machines fed the reassembled bytes and gaps of both
//! directions of one connection, returning records (docs/architecture.md, "Decoders").
//!
//! A decoder never fails on bad bytes: every violation becomes a `Finding` and the decoder
//! resynchronises. It never allocates from a length on the wire before checking it against
//! `Limits`. Records it returns carry only their protocol-level columns; the session stamps the
//! capture, stream and endpoints. State that spans the connections of one capture (resends seen on
//! another connection) lives in `Shared`, handed to every call.

pub mod budget;
pub mod buffer;
pub mod courier;
pub mod cql;
#[allow(
    clippy::arithmetic_side_effects,
    reason = "u64 counters of records and ranks below them; differences of counts one of which contains the other (never + unknown <= distinct events, a sending's events <= its payload's, acknowledged <= sent, found keys among the resent ones)"
)]
pub mod delivery;
pub mod detect;
pub mod fingerprint;
pub mod hercules;
pub mod lumberjack;
pub mod tls;

use crate::held::spill::SpillStore;
pub use crate::model::{Chunk, Gap, OwnedChunk};
use crate::model::{Record, Value};

/// Caps that protect memory against hostile input; every decoder honours them.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// One frame or message on the wire.
    pub max_frame: usize,
    /// What one compressed frame may cost (zlib/LZ4/Snappy bombs): its inflated bytes plus
    /// `budget::RECORD_COST` per record decoded from them (`budget.rs`).
    pub max_inflated: usize,
    /// Nesting of compressed frames, containers, ...
    pub max_depth: usize,
    /// Events held back per stream while they wait for their acknowledgement.
    pub max_pending_events: usize,
    /// Packed bytes of the records of all streams waiting for their fate kept in memory; past it
    /// they wait in a spill file (`spill.rs`).
    pub held_memory: usize,
    /// How long (capture time, ns) an event record waits for a resend on another connection to
    /// decide its fate (`pipeline/fates.rs`); None: until the input ends. Set for live inputs;
    /// 0 writes each record as its connection gives it (tests of one connection's decoding).
    pub fate_horizon_ns: Option<i64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame: 64 << 20,
            max_inflated: 64 << 20,
            max_depth: 8,
            max_pending_events: 100_000,
            held_memory: crate::held::spill::DEFAULT_BUDGET,
            fate_horizon_ns: None,
        }
    }
}

/// What a decoder may know about its stream besides the bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamContext {
    pub stream: u64,
    pub client: String,
    pub server: String,
    pub client_port: u16,
    pub server_port: u16,
    /// `--show-secrets`: credentials are written as they are (else `<redacted>`).
    pub show_secrets: bool,
    /// Hercules event records carry `bytes_base64`, the event's bytes as captured (`wirelog
    /// replay` sends them to a Gate: the record's `event` keeps neither the tags' widths, Byte to
    /// Long, Float to Double, nor UUID values). Off for every other command, whose outputs stay
    /// as they are.
    pub event_bytes: bool,
    /// No SYN seen: offset 0 is where the capture began, not where the connection did.
    pub midstream: bool,
    pub limits: Limits,
}

/// State shared by the connections of one capture, one part per protocol.
#[derive(Debug, Default)]
pub struct Shared {
    pub lumberjack: lumberjack::Shared,
    pub courier: courier::Shared,
    pub cql: cql::Shared,
    pub hercules: hercules::Shared,
}

impl Shared {
    /// Each protocol holds the records waiting for their fate in its own store; the budget counts
    /// the bytes of all (`spill.rs`).
    pub fn new(limits: &Limits) -> Self {
        let mut shared = Shared::default();
        for store in shared.stores() {
            store.set_budget(limits.held_memory);
        }
        shared
    }

    /// Held records keep where their document's message lies (`SpillStore::set_notes`).
    pub fn set_notes(&mut self, notes: bool) {
        for store in self.stores() {
            store.set_notes(notes);
        }
    }

    /// What went wrong with a spill file since the last call.
    pub fn spill_findings(&mut self) -> impl Iterator<Item = crate::model::Finding> + '_ {
        self.stores()
            .into_iter()
            .filter_map(crate::held::spill::SpillStore::finding)
    }

    fn stores(&mut self) -> [&mut crate::held::spill::SpillStore; 4] {
        [
            &mut self.lumberjack.held,
            &mut self.courier.held,
            &mut self.cql.held,
            &mut self.hercules.held,
        ]
    }
}

/// What the session calls; see the module docstring for the contract. Records go to `out`.
pub trait Decoder: Send + Sync {
    fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut Shared, out: &mut Vec<Record>);
    fn gap(&mut self, gap: &Gap, shared: &mut Shared, out: &mut Vec<Record>);
    /// The end of the stream (both directions): flush what is pending, say what is incomplete.
    /// Held events go out a `CloseRoom` at a time: while it returns `Closing::More`, the caller
    /// hands on the records so far and calls it again.
    fn close(&mut self, shared: &mut Shared, out: &mut Vec<Record>) -> Closing;
    /// Before the first `close`: whether the connection ended by FIN or RST (`closed`), or was
    /// still open when the capture ended (an answer may have come after it).
    fn ending(&mut self, _closed: bool) {}
}

/// Whether a stream's `close` gave all its records.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closing {
    Done,
    More,
}

/// Every part of a stream's end, a list of records per `close` call (tests).
#[cfg(test)]
pub fn close_in_parts(dec: &mut dyn Decoder, shared: &mut Shared) -> Vec<Vec<Record>> {
    let mut parts = Vec::new();
    loop {
        let mut part = Vec::new();
        let closing = dec.close(shared, &mut part);
        parts.push(part);
        if closing == Closing::Done {
            return parts;
        }
    }
}

/// What one `close` call gives at most: `CLOSE_RECORDS` records or `CLOSE_BYTES` of held records
/// taken back, whichever comes first (and then the rest of one window or payload). A stalled
/// connection holds up to `max_pending_events` (100,000) at its end: made all at once, their
/// records (~1.7 KB each for a Filebeat line, before they are text) cost 170 MB beyond the
/// held-memory budget, more for bigger events.
pub struct CloseRoom {
    records: usize,
    bytes: u64,
}

const CLOSE_RECORDS: usize = 4096;
const CLOSE_BYTES: u64 = 16 << 20;

impl CloseRoom {
    /// The room of a call that starts with `out` and `held` as they are.
    pub fn new(out: &[Record], held: &SpillStore) -> Self {
        CloseRoom {
            records: out.len().saturating_add(CLOSE_RECORDS),
            bytes: held.taken().saturating_add(CLOSE_BYTES),
        }
    }

    /// Whether the call may give more.
    pub fn left(&self, out: &[Record], held: &SpillStore) -> bool {
        out.len() < self.records && held.taken() < self.bytes
    }
}

/// The bytes of an event that is not UTF-8, in base64 (its `raw` text lost them), for the field
/// `raw_base64`; None when the bytes are text.
pub fn raw_base64(bytes: &[u8]) -> Option<Value> {
    use base64::Engine;
    std::str::from_utf8(bytes).is_err().then(|| {
        base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .into()
    })
}

/// The protocols the core decodes (`wirelog._core.NATIVE`): those with a decoder. TLS is not one
/// of them: the session decrypts a TLS stream (tls/) and its plaintext is decoded by these.
pub fn engine() -> impl Iterator<Item = &'static str> {
    detect::PROTOCOLS
        .iter()
        .filter(|p| p.decoder.is_some())
        .map(|p| p.name)
}

/// A decoder for `protocol` (with the protocol's static name), None when the core has none.
pub fn native(protocol: &str, ctx: StreamContext) -> Option<(&'static str, Box<dyn Decoder>)> {
    if protocol == "hercules-events" {
        // A Hercules file's bytes (wirelog.engine.hercules_events.decode_event_stream), not a stream.
        return Some(("hercules", Box::new(hercules::HerculesDecoder::events(ctx))));
    }
    let p = detect::protocol(protocol)?;
    Some((p.name, (p.decoder?)(ctx)))
}
