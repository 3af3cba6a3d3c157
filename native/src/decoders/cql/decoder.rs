//! The per-connection CQL state machine: envelopes, v5 frames, pairing, resynchronisation.
//!
//! Each direction is in one of four modes: `Probe` (nothing known yet: the first bytes decide
//! between a v5 frame header with a valid CRC24 and an envelope header), `Envelope` (v3/v4, or v5
//! before the handshake), `Crc` or `Lz4` (v5 frames). A STARTUP at version >= 5 switches the client
//! side to frames right after the STARTUP and the server side right after its answer
//! (reference/cql.md §1, §13).
//!
//! When the position is lost (bad header CRC, implausible envelope header, a gap) the direction
//! searches forward. Every decision depends only on the bytes, never on how they were chunked: a
//! candidate that needs more bytes to be confirmed makes the search wait, and only the end of the
//! data may give up on it. A frame candidate needs a valid CRC24 and CRC32; an envelope candidate a
//! plausible header and a body that decodes without leftovers.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one frame's payload (in memory) and frame lengths of 17 bits; stream offsets below 2^63 (see tcp/); counts of frames and messages"
)]

use std::borrow::Cow;
use std::sync::Mutex;

use crate::decoders::buffer::StreamBuffer;
use crate::decoders::{
    Chunk, CloseRoom, Closing, Decoder, Gap, Shared as AllShared, StreamContext,
};
use crate::held::spill::SpillStore;
use crate::model::text::unhex;
use crate::model::{Delivery, Direction, EventId, Held, Message, Record, Value};

use super::compression::{lz4_block, lz4_body, snappy_body};
use super::envelope::{self, Header, HEADER};
use super::findings::{finding, At};
use super::frame_v5::{self, FrameHeader, MAX_PAYLOAD};
use super::messages::{decode, put, query_of, Body, BodyContext, Fields, PreparedMap, SpecCache};
use super::types::hex;
use crate::decoders::budget::Budget;

pub const PROTOCOL: &str = "cql";
/// Statements remembered per server.
const MAX_PREPARED: usize = 10_000;
/// Room for a message's fields: the header's and most bodies' (no regrowth while they are added).
const FIELDS: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Probe,
    Envelope,
    Crc,
    Lz4,
}

impl Mode {
    fn frames(lz4: bool) -> Mode {
        if lz4 {
            Mode::Lz4
        } else {
            Mode::Crc
        }
    }

    fn name(self) -> &'static str {
        if self == Mode::Lz4 {
            "lz4"
        } else {
            "crc"
        }
    }
}

enum Verdict {
    Accept,
    Reject,
    Wait,
}

/// An envelope arriving in non-self-contained frames.
struct Partial {
    data: Vec<u8>,
    at: At,
    frames: u64,
}

struct Side {
    direction: Direction,
    buf: StreamBuffer,
    mode: Mode,
    searching: bool,
    /// Bytes dropped by the current search, and the stream offset where it began.
    skipped: u64,
    skip_from: u64,
    partial: Option<Partial>,
}

impl Side {
    fn new(direction: Direction) -> Self {
        Side {
            direction,
            buf: StreamBuffer::default(),
            mode: Mode::Probe,
            searching: false,
            skipped: 0,
            skip_from: 0,
            partial: None,
        }
    }

    fn response(&self) -> bool {
        self.direction == Direction::S2C
    }

    fn here(&self) -> At {
        let (frame, ts) = self.buf.origin();
        At {
            offset: self.buf.offset(),
            frame,
            ts,
        }
    }

    fn start_search(&mut self, offset: u64) {
        self.searching = true;
        self.skipped = 0;
        self.skip_from = offset;
    }

    fn left(&self) -> usize {
        self.buf.len() + self.partial.as_ref().map_or(0, |p| p.data.len())
    }
}

/// A request waiting for its response (`seq` keeps the order requests were seen in).
struct Pending {
    opcode: &'static str,
    at: At,
    seq: u64,
    query: Option<String>,
    prepared_id: Option<Vec<u8>>,
    /// The request's record, written with its outcome once the response (or the end) decides it.
    record: Option<Waiting>,
    id: EventId,
    /// Gaps in the server's bytes before it was sent: a later one may hold its response.
    gaps: u64,
    /// The client reused its stream id for another request: it gave up on this one.
    reused: bool,
}

/// State shared by the CQL connections of one capture: prepared statements per server and port,
/// and the requests' records waiting for their outcome (docs/records.md, "Delivery").
#[derive(Debug, Default)]
pub struct Shared {
    prepared: foldhash::HashMap<String, foldhash::HashMap<u16, PreparedMap>>,
    pub held: SpillStore,
}

/// Requests whose stream id was reused that wait for the end at most (their outcome depends on
/// whether the server's bytes had a gap after them, which the capture may show only later).
const MAX_REUSED: usize = 4096;

/// What a connection's decoding uses of the capture's shared CQL state.
struct Stores<'s> {
    prepared: &'s mut PreparedMap,
    held: &'s mut SpillStore,
}

/// A request's record while it waits for its response: as it is while the store lets it be kept
/// (nearly all wait for milliseconds; packing every request cost ~5 % of a CQL conversion), else
/// packed into the held store, whose budget spills.
enum Waiting {
    /// As it is, with its estimated cost (`SpillStore::keep`).
    Kept(Box<Message>, usize),
    Packed(Held),
}

impl Waiting {
    /// Keep `m` (whose envelope is `wire` bytes) as it is while the store has room, else packed.
    fn of(m: Message, wire: u64, held: &mut SpillStore) -> Waiting {
        // a record's tree costs a few times its wire bytes
        let cost = usize::try_from(wire)
            .unwrap_or(usize::MAX)
            .saturating_mul(4)
            .saturating_add(256);
        if held.keep(cost) {
            Waiting::Kept(Box::new(m), cost)
        } else {
            Waiting::Packed(held.hold(&m))
        }
    }

    /// The record back (None when the spill file lost it: the store says so).
    fn take(self, held: &mut SpillStore) -> Option<Message> {
        match self {
            Waiting::Kept(m, cost) => {
                held.unkeep(cost);
                Some(*m)
            }
            Waiting::Packed(h) => held.take(h),
        }
    }
}

/// Decodes both directions of one CQL connection.
pub struct CqlDecoder {
    ctx: StreamContext,
    max: usize,
    sides: [Side; 2],
    /// Fixed by the first STARTUP.
    version: Option<u8>,
    /// STARTUP COMPRESSION, lower case.
    compression: Option<String>,
    startup_stream: Option<i16>,
    framing_after_startup: Option<Mode>,
    /// (foldhash: looked up for every message; drained in a sorted order)
    inflight: foldhash::HashMap<i16, Pending>,
    seq: u64,
    specs: Mutex<SpecCache>,
    /// `Decoder::ending`: the connection ended by FIN or RST.
    closed: bool,
    /// At the end: the requests never answered, in the order they were sent, last first.
    unanswered: Vec<(i16, Pending)>,
    /// Gaps in the server's bytes so far.
    s2c_gaps: u64,
    /// Requests whose stream id the client reused, oldest first.
    reused: std::collections::VecDeque<(i16, Pending)>,
}

fn ix(d: Direction) -> usize {
    match d {
        Direction::C2S => 0,
        Direction::S2C => 1,
    }
}

impl Decoder for CqlDecoder {
    fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut AllShared, out: &mut Vec<Record>) {
        let d = chunk.direction;
        self.sides[ix(d)]
            .buf
            .append(chunk.offset, chunk.data, chunk.frame, chunk.ts);
        let mut st = self.stores(shared);
        self.run(d, false, &mut st, out);
    }

    fn gap(&mut self, gap: &Gap, shared: &mut AllShared, out: &mut Vec<Record>) {
        let d = gap.direction;
        let mut st = self.stores(shared);
        self.run(d, true, &mut st, out);
        if d == Direction::S2C {
            // the responses of the requests sent before it may be in the gap
            self.s2c_gaps = self.s2c_gaps.saturating_add(1);
        }
        let side = &mut self.sides[ix(d)];
        let lost = side.left();
        if lost > 0 {
            let offset = if side.buf.is_empty() {
                gap.offset
            } else {
                side.buf.offset()
            };
            let at = At {
                offset,
                frame: gap.frame,
                ts: gap.ts,
            };
            let msg = format!(
                "{lost} bytes of an incomplete frame or envelope dropped at a {}-byte gap",
                gap.length
            );
            out.push(
                finding("cql.truncated", msg, d, at)
                    .field("bytes", lost)
                    .into(),
            );
        }
        side.buf.reset(gap.offset.saturating_add(gap.length));
        side.partial = None;
        if side.mode != Mode::Probe {
            let offset = side.buf.offset();
            side.start_search(offset);
        }
    }

    /// The requests still waiting for a response go out with their outcome (unanswered, or unknown
    /// when the capture may have missed the response), a `CloseRoom` at a time.
    fn close(&mut self, shared: &mut AllShared, out: &mut Vec<Record>) -> Closing {
        if self.unanswered.is_empty() {
            self.flush(shared, out);
        }
        let held = &mut shared.cql.held;
        let room = CloseRoom::new(out, held);
        while let Some((stream, p)) = self.unanswered.pop() {
            let outcome = self.silent(&p);
            // (a reused stream id was said when the client reused it)
            let f = (!p.reused).then(|| {
                let msg = format!(
                    "{} on stream {stream} got no response in the capture",
                    p.opcode.to_uppercase()
                );
                finding("cql.unanswered-request", msg, Direction::C2S, p.at)
                    .field("stream_id", stream)
                    .field("opcode", p.opcode)
            });
            settle(p, outcome, held, out);
            out.extend(f.map(Record::from));
            if !room.left(out, held) {
                break;
            }
        }
        if self.unanswered.is_empty() {
            Closing::Done
        } else {
            Closing::More
        }
    }

    fn ending(&mut self, closed: bool) {
        self.closed = closed;
    }
}

/// A request's held record, written with its outcome (nothing when the spill file lost it: the
/// store says so).
fn settle(p: Pending, outcome: Delivery, held: &mut SpillStore, out: &mut Vec<Record>) {
    if let Some(mut m) = p.record.and_then(|w| w.take(held)) {
        m.event_id = Some(p.id);
        m.delivery = Some(outcome);
        out.push(m.into());
    }
}

impl CqlDecoder {
    /// The outcome of a request without a response: unknown when a gap in the server's bytes after
    /// it may hold the response, or when the connection was still open at the capture's end (and
    /// the client had not given up on it by reusing its stream id); else unanswered.
    fn silent(&self, p: &Pending) -> Delivery {
        if self.s2c_gaps > p.gaps || !(self.closed || p.reused) {
            Delivery::Unknown
        } else {
            Delivery::Unanswered
        }
    }

    /// The end of both directions: decode what is left, say what is incomplete, and line up the
    /// requests never answered for `close`.
    fn flush(&mut self, shared: &mut AllShared, out: &mut Vec<Record>) {
        for d in [Direction::C2S, Direction::S2C] {
            let mut st = self.stores(shared);
            self.run(d, true, &mut st, out);
            let side = &mut self.sides[ix(d)];
            end_search(side, out);
            let left = side.left();
            if left > 0 {
                let msg = format!(
                    "stream ended inside a frame or envelope ({left} bytes left undecoded)"
                );
                out.push(
                    finding("cql.truncated", msg, d, side.here())
                        .field("bytes", left)
                        .into(),
                );
                side.buf.skip(side.buf.len());
                side.partial = None;
            }
        }
        let mut pending: Vec<(i16, Pending)> = self.inflight.drain().collect();
        pending.extend(self.reused.drain(..));
        pending.sort_by_key(|(_, p)| std::cmp::Reverse((p.at.offset, p.seq)));
        self.unanswered = pending;
    }
}

/// Report the bytes a search skipped (if any) and leave search mode.
fn end_search(side: &mut Side, out: &mut Vec<Record>) {
    if side.searching && side.skipped > 0 {
        let (frame, ts) = side.buf.origin_at(side.skip_from);
        let at = At {
            offset: side.skip_from,
            frame,
            ts,
        };
        let msg = format!("skipped {} bytes to resynchronise", side.skipped);
        out.push(
            finding("cql.resync", msg, side.direction, at)
                .field("bytes", side.skipped)
                .into(),
        );
    }
    side.searching = false;
    side.skipped = 0;
}

/// The next offset >= 1 holding a version byte for this direction.
/// What a response says of its request.
fn outcome_of(response: &Header) -> Delivery {
    if response.opcode == envelope::ERROR {
        Delivery::Error
    } else {
        Delivery::Answered
    }
}

fn next_version_byte(data: &[u8], response: bool) -> Option<usize> {
    data.get(1..)?
        .iter()
        .position(|&b| (b >= 0x80) == response && envelope::known_version(b & 0x7F).is_some())
        .map(|i| i + 1)
}

impl CqlDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        CqlDecoder {
            max: ctx.limits.max_frame.min(envelope::MAX_LENGTH),
            ctx,
            sides: [Side::new(Direction::C2S), Side::new(Direction::S2C)],
            version: None,
            compression: None,
            startup_stream: None,
            framing_after_startup: None,
            inflight: Default::default(),
            seq: 0,
            specs: Mutex::default(),
            closed: false,
            unanswered: Vec::new(),
            s2c_gaps: 0,
            reused: std::collections::VecDeque::new(),
        }
    }

    /// The prepared statements of this connection's server, and the store requests wait in.
    fn stores<'s>(&self, shared: &'s mut AllShared) -> Stores<'s> {
        // looked up by reference: this runs for every chunk, the key is made once per server
        let servers = &mut shared.cql.prepared;
        if !servers.contains_key(&self.ctx.server) {
            servers.insert(self.ctx.server.clone(), Default::default());
        }
        let ports = servers.get_mut(&self.ctx.server).expect("inserted above");
        Stores {
            prepared: ports.entry(self.ctx.server_port).or_default(),
            held: &mut shared.cql.held,
        }
    }

    fn run(&mut self, d: Direction, last: bool, st: &mut Stores<'_>, out: &mut Vec<Record>) {
        loop {
            let side = &self.sides[ix(d)];
            if side.buf.is_empty() {
                return;
            }
            let progressed = if side.searching {
                self.search(d, last, st.prepared, out)
            } else {
                match side.mode {
                    Mode::Probe => self.probe(d, out),
                    Mode::Envelope => self.envelope(d, st, out),
                    Mode::Crc | Mode::Lz4 => self.frame(d, last, st, out),
                }
            };
            if !progressed {
                return;
            }
        }
    }

    // ---- probe and search ----------------------------------------------------------------------

    /// Decide the framing of a direction from its first bytes.
    fn probe(&mut self, d: Direction, out: &mut Vec<Record>) -> bool {
        let max = self.max;
        let side = &mut self.sides[ix(d)];
        let head = side.buf.peek(0, HEADER);
        let Some(envelope) = envelope::parse(head) else {
            return false; // even at the end: a few stray bytes are reported as truncated, not searched
        };
        for lz4 in [false, true] {
            if frame_v5::parse_header(head, lz4).is_some_and(|h| h.crc_ok()) {
                side.mode = Mode::frames(lz4);
                return true;
            }
        }
        match envelope.problem(Some(side.response()), max) {
            None => side.mode = Mode::Envelope,
            Some(problem) => {
                if envelope::known_version(envelope.version).is_some()
                    && envelope.response == side.response()
                {
                    report_header(side, problem, out); // an envelope header, but not a sane one
                }
                let offset = side.buf.offset();
                side.start_search(offset);
            }
        }
        true
    }

    /// Look for the next frame or envelope boundary; true once found.
    fn search(
        &mut self,
        d: Direction,
        last: bool,
        prepared: &PreparedMap,
        out: &mut Vec<Record>,
    ) -> bool {
        let kinds: &[Mode] = match self.sides[ix(d)].mode {
            Mode::Probe => &[Mode::Crc, Mode::Lz4, Mode::Envelope],
            Mode::Envelope => &[Mode::Envelope],
            Mode::Crc => &[Mode::Crc, Mode::Lz4],
            Mode::Lz4 => &[Mode::Lz4, Mode::Crc],
        };
        while !self.sides[ix(d)].buf.is_empty() {
            let mut wait = false;
            for &kind in kinds {
                match self.candidate(d, kind, last, prepared) {
                    Verdict::Accept => {
                        let side = &mut self.sides[ix(d)];
                        side.mode = kind;
                        end_search(side, out);
                        return true;
                    }
                    Verdict::Wait => wait = true,
                    Verdict::Reject => {}
                }
            }
            if wait {
                return false;
            }
            let side = &mut self.sides[ix(d)];
            let mut step = next_candidate(side, kinds);
            if step == 0 {
                if !last {
                    return false;
                }
                step = side.buf.len();
            }
            side.skipped += step as u64;
            side.buf.skip(step);
        }
        if last {
            end_search(&mut self.sides[ix(d)], out);
        }
        false
    }

    /// Is there a boundary of `kind` at the read position?
    fn candidate(&self, d: Direction, kind: Mode, last: bool, prepared: &PreparedMap) -> Verdict {
        let side = &self.sides[ix(d)];
        let view = side.buf.view();
        let short = if last { Verdict::Reject } else { Verdict::Wait };
        if kind == Mode::Envelope {
            let Some(head) = envelope::parse(view) else {
                return short;
            };
            if !head.plausible(Some(side.response()), self.max)
                || self.version.is_some_and(|v| v != head.version)
            {
                return Verdict::Reject;
            }
            let Some(body) = view.get(HEADER..head.total() as usize) else {
                return short;
            };
            let Ok(body) = self.inflate(&head, body) else {
                return Verdict::Reject;
            };
            let ctx = self.body_context(&head, &body, None, prepared);
            let decoded = decode(&head, &body, &ctx, Fields::default());
            return if decoded.error.is_none() && decoded.trailing == 0 {
                Verdict::Accept
            } else {
                Verdict::Reject
            };
        }
        let Some(h) = frame_v5::parse_header(view, kind == Mode::Lz4) else {
            return short;
        };
        if !h.crc_ok() || h.padding != 0 {
            return Verdict::Reject; // senders write the padding bits as 0 (next_candidate relies on it)
        }
        let Some(frame) = view.get(..h.total()) else {
            return short;
        };
        let (stored, computed) = h.trailer_crc32(frame);
        if stored == computed {
            Verdict::Accept
        } else {
            Verdict::Reject
        }
    }

    // ---- unframed envelopes --------------------------------------------------------------------

    fn envelope(&mut self, d: Direction, st: &mut Stores<'_>, out: &mut Vec<Record>) -> bool {
        let side = &mut self.sides[ix(d)];
        let Some(head) = envelope::parse(side.buf.view()) else {
            return false;
        };
        if let Some(problem) = head.problem(Some(side.response()), self.max) {
            report_header(side, problem, out);
            let offset = side.buf.offset();
            side.start_search(offset);
            side.skipped = 1;
            side.buf.skip(1);
            return true;
        }
        let total = head.total() as usize;
        if side.buf.len() < total {
            return false;
        }
        let at = side.here();
        let data = side.buf.view()[HEADER..total].to_vec();
        side.buf.skip(total);
        let body = match self.inflate(&head, &data) {
            Ok(body) => Some(body),
            Err((errors, algorithm)) => {
                let msg = format!(
                    "compressed {} body could not be decompressed ({errors})",
                    head.opcode_name().to_uppercase()
                );
                out.push(
                    finding("cql.decompression-failed", msg, d, at)
                        .field("algorithm", algorithm)
                        .into(),
                );
                None
            }
        };
        let fields = Fields::with_capacity(FIELDS);
        self.message(d, &head, body.as_deref(), at, fields, st, out);
        true
    }

    /// The pre-v5 body, decompressed if flagged; else ("algo: error; ...", "algo/algo").
    fn inflate<'b>(
        &self,
        head: &Header,
        body: &'b [u8],
    ) -> Result<Cow<'b, [u8]>, (String, String)> {
        if head.flags & envelope::FLAG_COMPRESSION == 0 || head.version >= 5 || body.is_empty() {
            return Ok(Cow::Borrowed(body));
        }
        let algorithms: &[&str] = match self.compression.as_deref() {
            Some("lz4") => &["lz4"],
            Some("snappy") => &["snappy"],
            _ => &["lz4", "snappy"],
        };
        // The frame's budget (decoders/budget.rs): its inflated bytes spend it first (every
        // algorithm tried may use all of it), then the cells of a rows result (body_context).
        let budget = Budget::new(self.ctx.limits.max_inflated);
        let mut errors = Vec::new();
        for &algorithm in algorithms {
            let inflated = if algorithm == "lz4" {
                lz4_body(body, budget.left())
            } else {
                snappy_body(body, budget.left())
            };
            match inflated {
                Ok(b) => return Ok(Cow::Owned(b)),
                Err(e) => errors.push(format!("{algorithm}: {e}")),
            }
        }
        Err((errors.join("; "), algorithms.join("/")))
    }

    // ---- v5 frames -----------------------------------------------------------------------------

    fn frame(
        &mut self,
        d: Direction,
        last: bool,
        st: &mut Stores<'_>,
        out: &mut Vec<Record>,
    ) -> bool {
        let side = &mut self.sides[ix(d)];
        let Some(h) = frame_v5::parse_header(side.buf.view(), side.mode == Mode::Lz4) else {
            return false;
        };
        if !h.crc_ok() {
            if side.buf.len() < HEADER && !last {
                return false;
            }
            return self.bad_frame_header(d, &h, out);
        }
        if side.buf.len() < h.total() {
            return false;
        }
        let at = side.here();
        let raw = side.buf.view()[..h.total()].to_vec();
        side.buf.skip(h.total());
        let (stored, computed) = h.trailer_crc32(&raw);
        if stored != computed {
            let msg = format!("frame payload CRC32 is {stored:08x}, computed {computed:08x}");
            let f = finding("cql.crc32-mismatch", msg, d, at)
                .field("stored", format!("{stored:08x}"))
                .field("computed", format!("{computed:08x}"))
                .field("payload_length", h.payload_length);
            out.push(f.into());
        }
        let mut payload = Cow::Borrowed(&raw[h.size()..h.size() + h.payload_length]);
        if h.uncompressed_length > 0 {
            match lz4_block(&payload, h.uncompressed_length, MAX_PAYLOAD) {
                Ok(p) => payload = Cow::Owned(p),
                Err(e) => {
                    out.push(
                        finding("cql.decompression-failed", e, d, at)
                            .field("algorithm", "lz4")
                            .into(),
                    );
                    drop_partial(side, at, out);
                    return true;
                }
            }
        }
        // envelope offsets exist only when the payload is on the wire as it is
        let base = (h.uncompressed_length == 0).then(|| at.offset + h.size() as u64);
        if h.self_contained {
            self.split(d, &payload, base, at, st, out);
        } else {
            self.assemble(d, &payload, at, st, out);
        }
        true
    }

    fn bad_frame_header(&mut self, d: Direction, h: &FrameHeader, out: &mut Vec<Record>) -> bool {
        let max = self.max;
        let side = &mut self.sides[ix(d)];
        let view = side.buf.view();
        if let Some(other) = frame_v5::parse_header(view, !h.lz4).filter(FrameHeader::crc_ok) {
            let kind = |lz4: bool| if lz4 { "LZ4" } else { "uncompressed" };
            let msg = format!(
                "{} frame where {} frames were negotiated",
                kind(other.lz4),
                kind(h.lz4)
            );
            out.push(finding("cql.frame-kind-mismatch", msg, d, side.here()).into());
            side.mode = Mode::frames(other.lz4);
            return true;
        }
        if let Some(head) = envelope::parse(view) {
            if envelope::framed(head.version) && head.plausible(Some(side.response()), max) {
                let msg =
                    "unframed v5 envelope where v5 frames were expected (pre-final v5-beta peer?)";
                out.push(finding("cql.unframed-envelope", msg.to_owned(), d, side.here()).into());
                side.mode = Mode::Envelope;
                return true;
            }
        }
        let (stored, computed) = (h.stored_crc24, h.computed_crc24);
        let msg = format!(
            "frame header CRC24 is {stored:06x}, computed {computed:06x}: length not trusted"
        );
        let f = finding("cql.crc24-mismatch", msg, d, side.here())
            .field("stored", format!("{stored:06x}"))
            .field("computed", format!("{computed:06x}"))
            .field("header", hex(&view[..h.size()]));
        out.push(f.into());
        let offset = side.buf.offset();
        side.start_search(offset);
        side.skipped = 1;
        side.buf.skip(1);
        true
    }

    /// The complete envelopes of a self-contained frame.
    fn split(
        &mut self,
        d: Direction,
        payload: &[u8],
        base: Option<u64>,
        frame_at: At,
        st: &mut Stores<'_>,
        out: &mut Vec<Record>,
    ) {
        let mut pos = 0;
        while pos < payload.len() {
            let at = At {
                offset: base.map_or(frame_at.offset, |b| b + pos as u64),
                ..frame_at
            };
            let left = payload.len() - pos;
            let Some(head) = envelope::parse(&payload[pos..]) else {
                overrun(
                    d,
                    at,
                    format!("{left} bytes left in frame, less than a header"),
                    out,
                );
                return;
            };
            let total = head.total();
            if total > left as u64 {
                overrun(
                    d,
                    at,
                    format!("envelope of {total} bytes, {left} left in the frame"),
                    out,
                );
                return;
            }
            let total = total as usize;
            let mut fields = Fields::with_capacity(FIELDS);
            fields.push(("framing", Value::from(self.sides[ix(d)].mode.name())));
            self.message(
                d,
                &head,
                Some(&payload[pos + HEADER..pos + total]),
                at,
                fields,
                st,
                out,
            );
            pos += total;
        }
    }

    /// Append a non-self-contained frame's payload and emit the envelopes it completes.
    fn assemble(
        &mut self,
        d: Direction,
        payload: &[u8],
        at: At,
        st: &mut Stores<'_>,
        out: &mut Vec<Record>,
    ) {
        let mut part = self.sides[ix(d)].partial.take().unwrap_or(Partial {
            data: Vec::new(),
            at,
            frames: 0,
        });
        part.data.extend_from_slice(payload);
        part.frames += 1;
        while let Some(head) = envelope::parse(&part.data) {
            if head.total() > self.max as u64 {
                let msg = format!(
                    "envelope body length {} exceeds the limit of {}",
                    head.length, self.max
                );
                out.push(finding("cql.envelope-too-large", msg, d, part.at).into());
                return;
            }
            let total = head.total() as usize;
            if part.data.len() < total {
                break;
            }
            let mut fields = Fields::with_capacity(FIELDS);
            fields.push(("framing", Value::from(self.sides[ix(d)].mode.name())));
            fields.push(("frames", Value::from(part.frames)));
            self.message(
                d,
                &head,
                Some(&part.data[HEADER..total]),
                part.at,
                fields,
                st,
                out,
            );
            part.data.drain(..total);
            if part.data.is_empty() {
                return;
            }
            part.at = at;
            part.frames = 1;
        }
        self.sides[ix(d)].partial = Some(part);
    }

    // ---- messages ------------------------------------------------------------------------------

    /// The context a body is decoded in; `pending` is the request a response answers. An
    /// inflated body has spent its frame's budget on its bytes; its cells are paid from the rest.
    fn body_context<'a>(
        &'a self,
        head: &Header,
        body: &[u8],
        pending: Option<&'a Pending>,
        prepared: &'a PreparedMap,
    ) -> BodyContext<'a> {
        let mut budget = Budget::new(self.ctx.limits.max_inflated);
        if head.flags & envelope::FLAG_COMPRESSION != 0 && head.version < 5 {
            budget.spend(body.len());
        }
        let request_query = pending
            .filter(|p| p.opcode == "prepare")
            .and_then(|p| p.query.as_deref());
        let result_types = pending
            .and_then(|p| p.prepared_id.as_ref())
            .and_then(|pid| prepared.get(pid))
            .and_then(|p| p.result_types.as_ref());
        BodyContext {
            version: head.version,
            show_secrets: self.ctx.show_secrets,
            max_depth: self.ctx.limits.max_depth,
            prepared,
            request_query,
            result_types,
            specs: Some(&self.specs),
            max_cells: budget.values_left(),
            cap: budget.cap(),
        }
    }

    /// Validate, decode, pair and record one envelope (body None: it could not be decompressed).
    #[allow(clippy::too_many_arguments)]
    fn message(
        &mut self,
        d: Direction,
        head: &Header,
        body: Option<&[u8]>,
        at: At,
        mut fields: Fields,
        st: &mut Stores<'_>,
        out: &mut Vec<Record>,
    ) {
        let response = d == Direction::S2C;
        let opname = head.opcode_name();
        put(&mut fields, "opcode", opname);
        put(&mut fields, "stream_id", head.stream);
        put(&mut fields, "flags", head.flags);
        if head.flags != 0 {
            put(&mut fields, "flag_names", head.flag_names());
        }
        self.check_header(d, head, at, out);
        let pending = self.pair(d, head, at, &mut fields, st, out);
        // the body's fields follow (no body field is named like one above: messages.rs)
        let Body {
            fields,
            trailing,
            error,
            prepared: learnt,
        } = match body {
            Some(b) => decode(
                head,
                b,
                &self.body_context(head, b, pending.as_ref(), st.prepared),
                fields,
            ),
            None => Body {
                fields,
                ..Body::default()
            },
        };
        let query = (head.opcode == envelope::PREPARE)
            .then(|| query_of(&fields))
            .flatten();
        let pid = (head.opcode == envelope::EXECUTE)
            .then(|| fields.iter().find(|(k, _)| *k == "prepared_id"))
            .flatten()
            .and_then(|(_, v)| v.as_str())
            .map(unhex);
        let startup_compression = (head.opcode == envelope::STARTUP && !response)
            .then(|| compression_option(&fields))
            .flatten();
        if let Some(e) = error {
            let msg = format!("{} body is malformed: {e}", opname.to_uppercase());
            out.push(
                finding("cql.malformed-body", msg, d, at)
                    .field("stream_id", head.stream)
                    .into(),
            );
        } else if trailing > 0 {
            let upper = opname.to_uppercase();
            let msg = format!("{trailing} bytes after the end of the {upper} body");
            out.push(
                finding("cql.trailing-bytes", msg, d, at)
                    .field("bytes", trailing)
                    .into(),
            );
        }
        if let Some((pid, prep)) = learnt {
            if st.prepared.len() < MAX_PREPARED {
                st.prepared.insert(pid, prep);
            }
        }
        let mut m = Message::new(PROTOCOL, opname);
        m.direction = Some(d);
        m.offset = Some(at.offset);
        m.length = head.total();
        m.frame = at.frame;
        m.ts = at.ts;
        m.version = Some(envelope::version_name(head.version));
        m.fields = fields;
        if let Some(p) = &pending {
            // the response says what became of its request, under the request's id
            m.event_id = Some(p.id);
            m.delivery = Some(outcome_of(head));
        }
        if !response && envelope::is_request(head.opcode) {
            // its record waits for the response (`pair` made room for its stream id)
            self.seq += 1;
            let id = EventId::Request {
                stream: self.ctx.stream,
                offset: at.offset,
            };
            let p = Pending {
                opcode: opname,
                at,
                seq: self.seq,
                query,
                prepared_id: pid,
                record: Some(Waiting::of(m, head.total(), st.held)),
                id,
                gaps: self.s2c_gaps,
                reused: false,
            };
            self.inflight.insert(head.stream, p);
        } else {
            out.push(m.into());
        }
        self.handshake(d, head, startup_compression);
    }

    fn check_header(&mut self, d: Direction, head: &Header, at: At, out: &mut Vec<Record>) {
        if envelope::known_version(head.version).is_none() {
            let msg = format!("unknown protocol version 0x{:02x}", head.version);
            out.push(finding("cql.unknown-version", msg, d, at).into());
        } else if envelope::opcode_name(head.opcode).is_none() {
            let msg = format!("unknown opcode 0x{:02x}", head.opcode);
            out.push(finding("cql.unknown-opcode", msg, d, at).into());
        }
        if head.version == 5 && head.flags & envelope::FLAG_BETA != 0 {
            let msg = "v5 envelope with USE_BETA: a pre-final v5-beta peer".to_owned();
            out.push(finding("cql.v5-beta", msg, d, at).into());
        }
        if let Some(v) = self.version {
            // servers answer version errors in their own version: that is negotiation, not a change
            if head.version != v && head.opcode != envelope::ERROR {
                let was = match envelope::known_version(v) {
                    Some(name) => name.to_owned(),
                    None => v.to_string(),
                };
                let msg = format!(
                    "envelope version {} on a connection at {was}",
                    envelope::version_name(head.version)
                );
                let f = finding("cql.version-changed", msg, d, at)
                    .field("expected", v)
                    .field("seen", head.version);
                out.push(f.into());
                self.version = Some(head.version); // report each change once
            }
        }
    }

    /// Pair a response with its request by stream id (the request's record goes out, with its
    /// outcome, just before the response's); flag reused ids and orphan responses.
    fn pair(
        &mut self,
        d: Direction,
        head: &Header,
        at: At,
        fields: &mut Fields,
        st: &mut Stores<'_>,
        out: &mut Vec<Record>,
    ) -> Option<Pending> {
        if d == Direction::C2S {
            if let Some(mut first) = self.inflight.remove(&head.stream) {
                let msg = format!(
                    "stream id {} reused while its {} is still unanswered",
                    head.stream,
                    first.opcode.to_uppercase()
                );
                let f = finding("cql.stream-id-reused", msg, d, at)
                    .field("stream_id", head.stream)
                    .field("first_frame", first.at.frame);
                out.push(f.into());
                // the client gave up on it; whether the capture missed its response may show
                // later (a gap in the server's bytes before this point is found with later bytes)
                first.reused = true;
                self.reused.push_back((head.stream, first));
                if self.reused.len() > MAX_REUSED {
                    if let Some((_, oldest)) = self.reused.pop_front() {
                        let outcome = self.silent(&oldest);
                        settle(oldest, outcome, st.held, out);
                    }
                }
            }
            return None;
        }
        if head.opcode == envelope::EVENT {
            return None; // server-initiated, stream -1
        }
        let Some(pending) = self.inflight.remove(&head.stream) else {
            let msg = format!(
                "{} on stream {} answers no request seen in the capture",
                head.opcode_name().to_uppercase(),
                head.stream
            );
            let f =
                finding("cql.response-without-request", msg, d, at).field("stream_id", head.stream);
            out.push(f.into());
            return None;
        };
        let mut pending = pending;
        if let Some(mut m) = pending.record.take().and_then(|w| w.take(st.held)) {
            m.event_id = Some(pending.id);
            m.delivery = Some(outcome_of(head));
            out.push(m.into());
        }
        put(fields, "request_opcode", pending.opcode);
        put(fields, "request_frame", pending.at.frame);
        // pcapng interfaces' time offsets put capture times anywhere in i64: a latency that
        // does not fit one is no latency
        if let Some(latency) = at
            .ts
            .zip(pending.at.ts)
            .and_then(|(ts, then)| ts.checked_sub(then))
        {
            put(fields, "latency_ns", latency);
        }
        Some(pending)
    }

    /// STARTUP fixes the version and compression; at v5+ it switches both sides to frames.
    fn handshake(
        &mut self,
        d: Direction,
        head: &Header,
        startup_compression: Option<Option<String>>,
    ) {
        let side_mode = self.sides[ix(d)].mode;
        if let Some(compression) = startup_compression {
            self.compression = compression;
            self.version.get_or_insert(head.version);
            if envelope::framed(head.version) && side_mode == Mode::Envelope {
                let kind = Mode::frames(self.compression.as_deref() == Some("lz4"));
                self.sides[ix(d)].mode = kind;
                self.framing_after_startup = Some(kind);
                self.startup_stream = Some(head.stream);
            }
        } else if d == Direction::S2C
            && side_mode == Mode::Envelope
            && self.startup_stream == Some(head.stream)
        {
            let Some(kind) = self.framing_after_startup.take() else {
                return;
            };
            if envelope::framed(head.version) {
                self.sides[ix(d)].mode = kind;
            } else {
                // a server without v5 refused the STARTUP (driver downgrade): nobody frames
                let client = &mut self.sides[ix(Direction::C2S)];
                if matches!(client.mode, Mode::Crc | Mode::Lz4) {
                    client.mode = Mode::Envelope;
                }
            }
        }
    }
}

/// A STARTUP's COMPRESSION option, lower case (the inner None: absent or empty).
fn compression_option(fields: &Fields) -> Option<Option<String>> {
    let options = fields
        .iter()
        .find(|(k, _)| *k == "options")
        .and_then(|(_, v)| v.as_object());
    let value = options
        .and_then(|o| o.iter().find(|(k, _)| k.to_uppercase() == "COMPRESSION"))
        .and_then(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty());
    Some(value.map(str::to_lowercase))
}

/// Bytes to skip to the next position worth testing (0: only undecidable tail bytes remain).
fn next_candidate(side: &Side, kinds: &[Mode]) -> usize {
    let view = side.buf.view();
    let mut best = view.len().saturating_sub(frame_v5::LZ4_HEADER - 1);
    for &kind in kinds {
        let pos = match kind {
            Mode::Envelope => next_version_byte(view, side.response()),
            _ => frame_v5::next_candidate(view, 1, kind == Mode::Lz4),
        };
        if let Some(p) = pos {
            best = best.min(p);
        }
    }
    best
}

fn report_header(side: &Side, (code, sentence): (&'static str, String), out: &mut Vec<Record>) {
    let header = hex(side.buf.peek(0, HEADER));
    let msg = format!("bad envelope header: {sentence}");
    out.push(
        finding(code, msg, side.direction, side.here())
            .field("header", header)
            .into(),
    );
}

fn overrun(d: Direction, at: At, detail: String, out: &mut Vec<Record>) {
    let msg = format!("envelope runs past its frame: {detail}");
    out.push(finding("cql.envelope-overrun", msg, d, at).into());
}

fn drop_partial(side: &mut Side, at: At, out: &mut Vec<Record>) {
    if let Some(p) = side.partial.take() {
        let n = p.data.len();
        let msg = format!("{n} bytes of a multi-frame envelope dropped with an undecodable frame");
        out.push(
            finding("cql.truncated", msg, side.direction, at)
                .field("bytes", n)
                .into(),
        );
    }
}
