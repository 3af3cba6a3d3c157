//! The Hercules stream decoder: Gate HTTP traffic, or bare events/batches in either direction. The
//! first bytes of a direction decide: an HTTP start line makes the connection Gate traffic (both
//! directions then), anything else bare events.

use super::gateway::Gateway;
use super::records::Reporter;
use super::stream::RawEvents;
use super::Codec;
use super::Shared;
use crate::decoders::buffer::StreamBuffer;
use crate::decoders::{Chunk, Closing, Gap, StreamContext};
use crate::formats::hercules::reader::EventParser;
use crate::model::{Direction, Record};

/// Bytes that tell an HTTP start line from bare events.
const DECIDE: usize = 8;

#[derive(Debug)]
pub struct HerculesDecoder {
    ctx: StreamContext,
    parser: EventParser,
    reporter: Reporter,
    bufs: [StreamBuffer; 2],
    gateway: Option<Gateway>,
    raw: [Option<RawEvents>; 2],
    /// `close` has begun (it gives the unanswered requests over several calls).
    closing: bool,
}

fn ix(d: Direction) -> usize {
    match d {
        Direction::C2S => 0,
        Direction::S2C => 1,
    }
}

/// Whether a direction starts like an HTTP/1.x request or response: `HTTP/`, or up to ten
/// capitals followed by a space or the end (`[A-Z]{1,10}(?: |$)`, where `$` also matches before a
/// final newline).
pub fn looks_like_http(data: &[u8]) -> bool {
    if data.starts_with(b"HTTP/") {
        return true;
    }
    let data = &data[..data.len().min(11)];
    let n = data.iter().take_while(|b| b.is_ascii_uppercase()).count();
    if n == 0 || n > 10 {
        return false;
    }
    matches!(&data[n..], [] | [b'\n'] | [b' ', ..])
}

impl HerculesDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        let parser = EventParser::new(ctx.limits.max_frame);
        HerculesDecoder {
            ctx,
            parser,
            reporter: Reporter::default(),
            bufs: Default::default(),
            gateway: None,
            raw: [None, None],
            closing: false,
        }
    }

    /// A decoder of bare events or batches only (a Hercules file): the client direction is never
    /// taken for HTTP, whatever its first bytes.
    pub fn events(ctx: StreamContext) -> Self {
        let mut dec = Self::new(ctx);
        dec.raw[ix(Direction::C2S)] = Some(RawEvents::new(Direction::C2S));
        dec
    }

    pub fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut Shared, out: &mut Vec<Record>) {
        self.bufs[ix(chunk.direction)].append(chunk.offset, chunk.data, chunk.frame, chunk.ts);
        self.run(chunk.direction, false, shared, out);
    }

    pub fn gap(&mut self, gap: &Gap, out: &mut Vec<Record>) {
        let i = ix(gap.direction);
        let resume = gap.end();
        if let Some(raw) = self.raw[i].as_mut() {
            raw.gap(&mut self.bufs[i], resume);
        } else if let Some(gw) = self.gateway.as_mut() {
            gw.gap(gap, &mut self.bufs[i], out);
        } else {
            self.bufs[i].reset(resume);
        }
    }

    /// `Decoder::close`: once, the last bytes of both directions; then the requests left
    /// unanswered, a part at a time; the summaries last.
    pub fn close(&mut self, shared: &mut Shared, out: &mut Vec<Record>) -> Closing {
        if !std::mem::replace(&mut self.closing, true) {
            self.run(Direction::C2S, true, shared, out);
            self.run(Direction::S2C, true, shared, out);
            if let Some(gw) = self.gateway.as_mut() {
                let mut codec = Codec {
                    parser: &mut self.parser,
                    reporter: &mut self.reporter,
                    names: &mut shared.tag_names,
                    held: &mut shared.held,
                    event_bytes: self.ctx.event_bytes,
                };
                gw.close(&mut self.bufs[1], &self.ctx, &mut codec, out);
            }
        }
        if let Some(gw) = self.gateway.as_mut() {
            if gw.release(&mut shared.held, out) {
                return Closing::More;
            }
        }
        self.reporter.summaries(out);
        Closing::Done
    }

    fn run(&mut self, d: Direction, fin: bool, shared: &mut Shared, out: &mut Vec<Record>) {
        let i = ix(d);
        let buf = &mut self.bufs[i];
        let mut codec = Codec {
            parser: &mut self.parser,
            reporter: &mut self.reporter,
            names: &mut shared.tag_names,
            held: &mut shared.held,
            event_bytes: self.ctx.event_bytes,
        };
        if let Some(raw) = self.raw[i].as_mut() {
            raw.feed(buf, &mut codec, fin, out);
            return;
        }
        if self.gateway.is_none() {
            if buf.len() < DECIDE && !fin {
                return;
            }
            let head = &buf.view()[..buf.len().min(DECIDE)];
            if !looks_like_http(head) {
                if buf.is_empty() {
                    return;
                }
                let raw = self.raw[i].insert(RawEvents::new(d));
                raw.feed(buf, &mut codec, fin, out);
                return;
            }
        }
        let gw = self.gateway.get_or_insert_with(|| Gateway::new(&self.ctx));
        gw.feed(d, buf, &self.ctx, &mut codec, out);
    }
}
