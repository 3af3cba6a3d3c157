//! Lumberjack v1/v2 (logstash-forwarder, Elastic Beats → Logstash / go-lumber), ported from
//! the former Python decoder with the same records, byte for byte.
//!
//! Modules: `framing` (frame layouts), `inflate` (capped zlib), `sequence` (seq profiles),
//! `delivery` (windows, ACKs, per-event delivery truth), `waiting` (what a window keeps of its
//! waiting events), `resend` (resends across connections), `decoder` (the stream state machine),
//! `detect` (content detection and the mid-stream window start), `buffer` (the receive buffer),
//! `report` (positions and findings); event documents are `model::json`'s. Record kinds and
//! finding codes: docs/protocols/lumberjack.md.

#[allow(
    clippy::arithmetic_side_effects,
    reason = "frame ends come from `parse` and `whole_j2`, which return a frame only when it lies whole inside the slice they were given (at most max_frame + 10 bytes), so `at + end` and `p += end` stay within the buffer; nesting depth stays below max_depth; the rest are u64 counters of frames, bytes and ACKs"
)]
mod decoder;
#[allow(
    clippy::arithmetic_side_effects,
    reason = "no wire number is added here: seqs and ACK values are compared, capture times subtracted as i128; `new - done` and `seqs.len() - acked_n` are not negative (an ACK moves acked_n up to at most the events held); the rest are u64 and usize counters of events and windows"
)]
mod delivery;
pub mod detect;
mod framing;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
mod inflate;
mod kept;
mod report;
#[allow(
    clippy::arithmetic_side_effects,
    reason = "one sum of two table lengths, each bounded by the registry's capacity"
)]
mod resend;
mod sequence;
#[allow(
    clippy::arithmetic_side_effects,
    reason = "a run grows only when first + len == seq was checked (so len < u32::MAX), and positions are one past an index below the range's end"
)]
mod waiting;

use super::{Chunk, Closing, Decoder, Gap, Shared as AllShared, StreamContext};
use crate::held::spill::SpillStore;
use crate::model::Record;

pub use resend::ResendRegistry;

/// Lumberjack v1 (logstash-forwarder) and v2 (Beats).
pub const PROTOCOL: super::detect::Protocol = super::detect::Protocol {
    name: "lumberjack",
    ports: &detect::PORTS,
    detect: detect::detect,
    find_start: Some(detect::find_start),
    kinds: &["window", "compressed", "event", "ack", "connection"],
    decoder: Some(|ctx| Box::new(LumberjackDecoder::new(ctx))),
};

/// State shared by the lumberjack connections of one capture: the payload fingerprints that
/// recognise a resend on a later connection, and the inflate buffers (one per nesting depth:
/// connections decode one at a time, and an idle connection should not hold a window's worth).
#[derive(Debug, Default)]
pub struct Shared {
    pub resends: ResendRegistry,
    /// Held events and compressed frames (waiting for their window's ACK).
    pub held: SpillStore,
    scratch: Vec<Vec<u8>>,
    /// One inflater for every C frame: a frame is inflated whole before the frames inside it.
    inflater: inflate::Inflater,
}

/// One Lumberjack connection (both directions).
#[derive(Debug)]
pub struct LumberjackDecoder(decoder::LumberjackDecoder);

impl LumberjackDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        LumberjackDecoder(decoder::LumberjackDecoder::new(ctx))
    }

    #[cfg(test)]
    fn without_parking(self) -> Self {
        LumberjackDecoder(self.0.without_parking())
    }

    #[cfg(test)]
    fn parked_windows(&self) -> usize {
        self.0.parked_windows()
    }
}

impl Decoder for LumberjackDecoder {
    fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut AllShared, out: &mut Vec<Record>) {
        self.0.feed(chunk, &mut shared.lumberjack, out);
    }

    fn gap(&mut self, gap: &Gap, _shared: &mut AllShared, out: &mut Vec<Record>) {
        self.0.gap(gap, out);
    }

    fn close(&mut self, shared: &mut AllShared, out: &mut Vec<Record>) -> Closing {
        self.0.close(&mut shared.lumberjack.held, out)
    }
}

#[cfg(test)]
mod tests;
