//! Vostok Hercules (binary events, Hercules Gate HTTP traffic, bare event streams); records and
//! findings in docs/protocols/hercules.md.
//!
//! Modules: `types` (wire constants, export-name escaping), `reader` (validating one event),
//! `render` (an event as a document), `batch` (Count + events, streamed), `tree` (the codec's
//! value tree and `encode`), `records` (event records, findings, repeat limits), `stream` (bare events and batches),
//! `http` (HTTP/1.1 framing), `url` (request targets), `gateway` (Gate requests and answers), `decoder` (the per-connection state machine),
//! `detect` (recognising Hercules traffic), `pyrepr` (Python's repr in finding texts). The receive
//! buffer is the decoders' shared one (`decoders/buffer.rs`).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one event (in memory)"
)]

mod batch;
mod decoder;
pub mod detect;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
mod gateway;
mod http;
mod records;
mod stream;
mod url;

use super::{Chunk, Closing, Decoder, Gap, Shared as AllShared, StreamContext};
use crate::formats::hercules::{reader, render};
use crate::model::{Record, Value};

pub use records::TagNames;

/// Vostok Hercules: the Gate's HTTP API and the event binary.
pub const PROTOCOL: super::detect::Protocol = super::detect::Protocol {
    name: "hercules",
    ports: &detect::PORTS,
    detect: detect::detect,
    find_start: None,
    kinds: &["event", "batch", "request", "response"],
    decoder: Some(|ctx| Box::new(HerculesDecoder::new(ctx))),
};

/// State shared by the Hercules connections of one capture: the tag names already reported (a
/// name that breaks the convention is reported once per capture).
#[derive(Debug, Default)]
pub struct Shared {
    pub tag_names: TagNames,
    /// Gate events held until their request's answer.
    pub held: crate::held::spill::SpillStore,
}

/// What the codec's users share per connection: the parser (with its tag-name cache), the
/// finding reporter, and the capture's reported names.
pub struct Codec<'a> {
    pub parser: &'a mut reader::EventParser,
    pub reporter: &'a mut records::Reporter,
    pub names: &'a mut TagNames,
    pub held: &'a mut crate::held::spill::SpillStore,
    /// Event records carry `bytes_base64` (`StreamContext::event_bytes`).
    pub event_bytes: bool,
}

/// One Hercules connection (both directions).
#[derive(Debug)]
pub struct HerculesDecoder(decoder::HerculesDecoder);

impl HerculesDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        HerculesDecoder(decoder::HerculesDecoder::new(ctx))
    }

    /// Bare events or batches in the client direction, never HTTP (`decode_event_stream`).
    pub fn events(ctx: StreamContext) -> Self {
        HerculesDecoder(decoder::HerculesDecoder::events(ctx))
    }
}

impl Decoder for HerculesDecoder {
    fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut AllShared, out: &mut Vec<Record>) {
        self.0.feed(chunk, &mut shared.hercules, out);
    }

    fn gap(&mut self, gap: &Gap, _shared: &mut AllShared, out: &mut Vec<Record>) {
        self.0.gap(gap, out);
    }

    fn close(&mut self, shared: &mut AllShared, out: &mut Vec<Record>) -> Closing {
        self.0.close(&mut shared.hercules, out)
    }
}

/// The events of a Hercules file as a plain reader sees them, up to the first that does not parse:
/// `version`, `timestamp`, `uuid` and `tags` (the payload as a document, never unmapped even when
/// wirelog exported it). What the Java reader's cross-check compares with (`wirelog._core`).
pub fn documents(data: &[u8], max_event: usize) -> Vec<Value> {
    let mut parser = reader::EventParser::new(max_event);
    let (mut pos, mut out, mut problems) = (0, Vec::new(), Vec::new());
    while let Ok(ev) = parser.parse(data, pos, &mut problems) {
        let plain = render::Renderer { mapped: false };
        let tags = plain.tags(&mut render::Cursor::new(data, pos + 25));
        out.push(serde_json::json!({
            "version": ev.version,
            "timestamp": ev.timestamp,
            "uuid": crate::model::text::uuid(&ev.uuid),
            "tags": tags,
        }));
        pos += ev.length;
        problems.clear();
    }
    out
}

#[cfg(test)]
mod tests;
