//! The Lumberjack v1/v2 stream decoder: frames in both directions, C recursion,
//! resynchronisation.
//!
//! Client→server carries W/J/D/C frames, server→client only 6-byte A frames. Frames have no length
//! prefix, so after a capture gap or a corrupt frame the decoder scans for the next plausible
//! `[12][WJDC]` header and reports how many bytes it skipped. Window/ACK bookkeeping lives in
//! `delivery`, sequence checks in `sequence`; this module only frames and dispatches.

use super::delivery::Delivery;
use super::framing::{self, decode_pairs, is_version, parse, plausible, whole_j2, Frame, Parsed};
use super::inflate::Problem;
use super::kept::{Event, Item};
use super::report::{finding, message, py_repr_latin1, version_str, Pos, PROTOCOL};
use super::sequence::{SeqIssue, SequenceChecker};
use super::Shared;
use crate::decoders::budget::{Budget, RECORD_COST};
use crate::decoders::buffer::StreamBuffer;
use crate::decoders::fingerprint::fingerprint;
use crate::decoders::{Chunk, Closing, Gap, Limits, StreamContext};
use crate::held::spill::SpillStore;
use crate::model::json::canon::{canonical, Dialect};
use crate::model::json::orjson;
use crate::model::{Direction, Document, Fields, Finding, Message, Record, Severity, Value};

const C2S: usize = 0;
const S2C: usize = 1;

fn side(d: Direction) -> usize {
    match d {
        Direction::C2S => C2S,
        Direction::S2C => S2C,
    }
}

fn direction(d: usize) -> Direction {
    if d == C2S {
        Direction::C2S
    } else {
        Direction::S2C
    }
}

/// Inflated buffers kept for reuse up to this size; bigger ones are freed after their C frame.
const KEEP_SCRATCH: usize = 4 << 20;

/// Whether one direction is at a frame boundary, and what was skipped while it was not.
#[derive(Debug)]
struct Sync {
    synced: bool,
    start: Option<Pos>,
    skipped: u64,
    reason: String,
    /// An error at the very first bytes, reported only if no frame follows.
    held: Option<Finding>,
    /// A frame was parsed in this direction.
    seen: bool,
}

impl Default for Sync {
    fn default() -> Self {
        Sync {
            synced: true,
            start: None,
            skipped: 0,
            reason: String::new(),
            held: None,
            seen: false,
        }
    }
}

impl Sync {
    fn lose(&mut self, start: Pos, skipped: u64, reason: String) {
        self.synced = false;
        self.start = Some(start);
        self.skipped = skipped;
        self.reason = reason;
        self.held = None;
    }
}

/// Findings reported once per connection.
#[derive(Debug, Default)]
struct Once {
    version_changed: bool,
    frame_version_mismatch: bool,
    keepalive_v2_on_v1: bool,
}

/// Everything but the receive buffers, so that a frame borrowed from a buffer can be handled
/// while the state changes.
#[derive(Debug)]
struct Conn {
    limits: Limits,
    sync: [Sync; 2],
    /// D-frame walk state at the C2S read position.
    resume: Option<framing::Resume>,
    version: Option<u8>,
    once: Once,
    delivery: Delivery,
    seq: SequenceChecker,
    issues: Vec<SeqIssue>,
    acks: u64,
    keepalives: u64,
    /// Identity of each C frame (a surplus is reported once per C frame).
    c_frames: u64,
}

/// One connection: see the module docstring.
#[derive(Debug)]
pub struct LumberjackDecoder {
    bufs: [StreamBuffer; 2],
    conn: Conn,
    /// `close` has begun (it gives the held windows over several calls).
    closing: bool,
}

impl LumberjackDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        let delivery = Delivery::new(ctx.stream, ctx.limits.max_pending_events);
        LumberjackDecoder {
            bufs: Default::default(),
            conn: Conn {
                limits: ctx.limits,
                sync: Default::default(),
                resume: None,
                version: None,
                once: Once::default(),
                delivery,
                seq: SequenceChecker::default(),
                issues: Vec::new(),
                acks: 0,
                keepalives: 0,
                c_frames: 0,
            },
            closing: false,
        }
    }

    /// Waiting windows stay live (tests compare parked windows with live ones).
    #[cfg(test)]
    pub fn without_parking(mut self) -> Self {
        self.conn.delivery.without_parking();
        self
    }

    #[cfg(test)]
    pub fn parked_windows(&self) -> usize {
        self.conn.delivery.parked()
    }

    pub fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut Shared, out: &mut Vec<Record>) {
        let d = side(chunk.direction);
        self.bufs[d].append(chunk.offset, chunk.data, chunk.frame, chunk.ts);
        self.drain(d, shared, out);
    }

    pub fn gap(&mut self, gap: &Gap, out: &mut Vec<Record>) {
        let d = side(gap.direction);
        let buf = &mut self.bufs[d];
        let lost = buf.len();
        let end = gap.offset.saturating_add(gap.length);
        buf.reset(end);
        let conn = &mut self.conn;
        conn.flush_skipped(d, false, "until the next plausible frame header", out);
        let mut reason = format!("after a {}-byte capture gap", gap.length);
        if lost > 0 {
            reason.push_str(&format!(
                " ({lost} bytes of an incomplete frame before it were dropped)"
            ));
        }
        let pos = Pos {
            direction: gap.direction,
            offset: end,
            frame: gap.frame,
            ts: gap.ts,
        };
        conn.sync[d].lose(pos, 0, reason);
        if d == C2S {
            conn.resume = None;
            conn.seq.forget();
        }
        conn.delivery.gap(d == C2S);
    }

    /// `Decoder::close`: once, what the stream left unfinished; then its held windows, a part
    /// at a time; the summary last.
    pub fn close(&mut self, held: &mut SpillStore, out: &mut Vec<Record>) -> Closing {
        if !std::mem::replace(&mut self.closing, true) {
            self.begin_close(held, out);
        }
        if self.conn.delivery.release(held, out) {
            return Closing::More;
        }
        out.push(self.conn.summary().into());
        Closing::Done
    }

    fn begin_close(&mut self, held: &mut SpillStore, out: &mut Vec<Record>) {
        for d in [C2S, S2C] {
            let buf = &mut self.bufs[d];
            let conn = &mut self.conn;
            if !conn.sync[d].synced {
                conn.sync[d].skipped += buf.len() as u64;
                conn.flush_skipped(d, false, "until the end of the stream", out);
            } else if !buf.is_empty() {
                out.push(conn.truncated(d, buf).into());
            }
            buf.skip(buf.len());
        }
        self.conn.delivery.close(held, out);
    }

    fn drain(&mut self, d: usize, shared: &mut Shared, out: &mut Vec<Record>) {
        let buf = &mut self.bufs[d];
        let conn = &mut self.conn;
        let max_frame = conn.limits.max_frame;
        while !buf.is_empty() {
            if !conn.sync[d].synced && !conn.resync(d, buf, out) {
                break;
            }
            let data = buf.view();
            if d == S2C
                && data.len() >= 2
                && is_version(data[0])
                && matches!(data[1], b'W' | b'J' | b'D' | b'C')
            {
                let header = [data[0], data[1]];
                out.push(wrong_direction(&header, &pos(d, buf)).into());
                conn.desync(d, buf, "after a client frame sent by the server".into());
                continue;
            }
            let resume = if d == C2S { conn.resume } else { None };
            match parse(data, max_frame, resume) {
                Parsed::Incomplete { resume, .. } => {
                    if d == C2S {
                        conn.resume = resume;
                    }
                    break;
                }
                Parsed::Error(e) => {
                    let at = pos(d, buf);
                    let error = finding(e.code, Severity::Error, e.detail, &at, e.fields);
                    if conn.sync[d].seen {
                        out.push(error.into());
                        let short = e.code.trim_start_matches("lumberjack.");
                        conn.desync(d, buf, format!("after {short}"));
                    } else {
                        // a capture started mid-frame, or not Lumberjack at all: wait and see
                        let reason = "before the first frame (capture started mid-stream?)";
                        conn.desync(d, buf, reason.into());
                        conn.sync[d].held = Some(error);
                    }
                }
                Parsed::Frame(f) => {
                    conn.sync[d].seen = true;
                    conn.resume = None;
                    let at = pos(d, buf);
                    if d == S2C {
                        conn.ack(&f, &at, &mut shared.held, out);
                    } else {
                        let mut budget = Budget::new(conn.limits.max_inflated);
                        let budget = &mut budget;
                        conn.client_frame(&f, 0, data, &at, 0, None, budget, shared, out);
                    }
                    buf.skip(f.end);
                }
            }
        }
    }
}

fn pos(d: usize, buf: &StreamBuffer) -> Pos {
    let (frame, ts) = buf.origin();
    Pos {
        direction: direction(d),
        offset: buf.offset(),
        frame,
        ts,
    }
}

fn wrong_direction(header: &[u8; 2], pos: &Pos) -> Finding {
    let who = if pos.direction == Direction::S2C {
        "server"
    } else {
        "client"
    };
    let header_text = String::from_utf8_lossy(header);
    finding(
        "lumberjack.wrong-direction",
        Severity::Error,
        format!(
            "{header_text} frame sent by the {who} (servers send only A frames, clients never do)"
        ),
        pos,
        vec![("frame_type", (header[1] as char).to_string().into())],
    )
}

impl Conn {
    /// Drop the bad header's first byte and scan for the next plausible frame.
    fn desync(&mut self, d: usize, buf: &mut StreamBuffer, reason: String) {
        self.sync[d].lose(pos(d, buf), 1, reason);
        self.resume = None;
        buf.skip(1);
    }

    /// Skip to the next plausible header; false when more bytes are needed to find one.
    fn resync(&mut self, d: usize, buf: &mut StreamBuffer, out: &mut Vec<Record>) -> bool {
        let view = buf.view();
        let end = view.len();
        let mut p = 0;
        let (skip, found) = loop {
            let candidate = (p..end.saturating_sub(1)).find(|&i| {
                is_version(view[i])
                    && if d == C2S {
                        matches!(view[i + 1], b'W' | b'J' | b'D' | b'C')
                    } else {
                        view[i + 1] == b'A'
                    }
            });
            let Some(m) = candidate else {
                let last_is_version = end > 0 && is_version(view[end - 1]);
                break (if last_is_version { end - 1 } else { end }, false);
            };
            match plausible(&view[m..], self.limits.max_frame) {
                None => break (m, false),
                Some(true) => break (m, true),
                Some(false) => p = m + 1,
            }
        };
        buf.skip(skip);
        self.sync[d].skipped += skip as u64;
        if found {
            self.flush_skipped(d, true, "until the next plausible frame header", out);
        }
        found
    }

    /// Report the bytes skipped while out of sync. A held first-bytes error is reported only when
    /// no frame was found after it (then the stream is not Lumberjack from its start).
    fn flush_skipped(&mut self, d: usize, found: bool, until: &str, out: &mut Vec<Record>) {
        let sync = &mut self.sync[d];
        let skipped = std::mem::take(&mut sync.skipped);
        let held = sync.held.take();
        sync.synced = true;
        let Some(start) = sync.start.filter(|_| skipped > 0) else {
            return;
        };
        if let Some(held) = held.filter(|_| !found) {
            out.push(held.into());
        }
        out.push(
            finding(
                "lumberjack.resync",
                Severity::Warning,
                format!("{skipped} bytes skipped {} {until}", sync.reason),
                &start,
                vec![("skipped", skipped.into())],
            )
            .into(),
        );
    }

    fn truncated(&self, d: usize, buf: &StreamBuffer) -> Finding {
        let data = buf.view();
        let resume = if d == C2S { self.resume } else { None };
        let need = match parse(data, self.limits.max_frame, resume) {
            Parsed::Incomplete { need, .. } => need,
            _ => data.len() as u64,
        };
        let kind = py_repr_latin1(&data[..data.len().min(2)]);
        finding(
            "lumberjack.truncated",
            Severity::Warning,
            format!(
                "stream ends inside a {kind} frame: {} of at least {need} bytes",
                data.len()
            ),
            &pos(d, buf),
            vec![("have", (data.len() as u64).into()), ("need", need.into())],
        )
    }

    /// One `connection` record: what the connection carried and what the decoder learned.
    fn summary(&self) -> Message {
        let delivery = &self.delivery;
        let stats = &delivery.stats;
        let unacked = stats.events - stats.acked_events;
        let lost = delivery.acks_lost();
        let mut m = Message::new(PROTOCOL, "connection");
        m.version = self.version.map(version_str);
        m.fields = vec![
            ("windows", stats.windows.into()),
            ("events", stats.events.into()),
            ("acked_events", stats.acked_events.into()),
            ("unacked_events", (if lost { 0 } else { unacked }).into()),
            ("unknown_events", (if lost { unacked } else { 0 }).into()),
            ("acks", self.acks.into()),
            ("keepalives", self.keepalives.into()),
            ("seq_profile", self.seq.profile.into()),
            ("server_kind", delivery.server_kind.into()),
            ("acks_lost", lost.into()),
        ]
        .into();
        m
    }

    // client frames -------------------------------------------------------------------------------

    /// Dispatch one client frame `data[at..at + f.end]`; records go to `out`.
    #[allow(clippy::too_many_arguments)]
    fn client_frame(
        &mut self,
        f: &Frame,
        at: usize,
        data: &[u8],
        pos: &Pos,
        depth: usize,
        c_frame: Option<u64>,
        budget: &mut Budget,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        self.check_version(f.version, f.typ, pos, out);
        let inner = c_frame.map(|_| at as u64);
        match f.typ {
            b'J' | b'D' => {
                let frame = &data[at..at + f.end];
                self.event(f, frame, inner, None, pos, c_frame, shared, out);
            }
            b'W' => {
                let fields = vec![("inflated_offset", inner.into())];
                let record = message("window", pos, f.end as u64, f.version, fields);
                self.seq.start_window();
                let in_c = c_frame.is_some();
                self.delivery
                    .open_window(f.value, record, pos, in_c, &mut shared.held, out);
            }
            b'C' => self.compressed(
                f,
                &data[at..at + f.end],
                inner,
                pos,
                depth,
                budget,
                shared,
                out,
            ),
            _ => out.push(wrong_direction(&[f.version, b'A'], pos).into()),
        }
    }

    fn check_version(&mut self, version: u8, typ: u8, pos: &Pos, out: &mut Vec<Record>) {
        let conn = *self.version.get_or_insert(version);
        if version != conn && !self.once.version_changed {
            self.once.version_changed = true;
            out.push(
                finding(
                    "lumberjack.version-changed",
                    Severity::Error,
                    format!(
                        "{}{} frame on a v{} connection (go-lumber: 'Event protocol version error')",
                        version as char, typ as char, conn as char
                    ),
                    pos,
                    vec![
                        ("connection_version", version_str(conn).into()),
                        ("frame_version", version_str(version).into()),
                    ],
                )
                .into(),
            );
        }
        if !framing::belongs(version, typ) && !self.once.frame_version_mismatch {
            self.once.frame_version_mismatch = true;
            let home = if typ == b'J' { '2' } else { '1' };
            out.push(
                finding(
                    "lumberjack.frame-version-mismatch",
                    Severity::Warning,
                    format!(
                        "{t} frame with version byte '{v}' ({t} belongs to v{home})",
                        t = typ as char,
                        v = version as char
                    ),
                    pos,
                    vec![
                        ("frame_type", (typ as char).to_string().into()),
                        ("frame_version", version_str(version).into()),
                    ],
                )
                .into(),
            );
        }
    }

    /// One J or D frame (the per-event path). `inner`: its offset in the inflated content;
    /// `print`: its payload's fingerprint if already made.
    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        f: &Frame,
        frame: &[u8],
        inner: Option<u64>,
        print: Option<u64>,
        pos: &Pos,
        c_frame: Option<u64>,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        let payload = &frame[f.body..];
        let seq = f.value;
        // what an invalid payload adds to its record (`raw`, `raw_base64`): seldom anything
        let mut extra = Fields::default();
        let doc = if f.count == 0 {
            let (what, word) = if f.typ == b'J' {
                ("Invalid json length", "length")
            } else {
                ("Invalid number of fields", "fields")
            };
            out.push(
                finding(
                    "lumberjack.bad-length",
                    Severity::Error,
                    format!("{} frame with {word} 0 (Logstash: '{what}')", f.typ as char),
                    pos,
                    vec![
                        ("frame_type", (f.typ as char).to_string().into()),
                        ("declared", 0.into()),
                    ],
                )
                .into(),
            );
            (f.typ == b'D').then(|| Value::Object(serde_json::Map::new()).into())
        } else if f.typ == b'J' {
            json_document(payload, pos, &mut extra, out)
        } else {
            let (doc, bad) = decode_pairs(payload);
            if bad {
                out.push(
                    finding(
                        "lumberjack.kv-invalid-utf8",
                        Severity::Warning,
                        "D frame text is not UTF-8".into(),
                        pos,
                        vec![("seq", seq.into())],
                    )
                    .into(),
                );
            }
            Some(doc)
        };
        self.seq.check(seq, &mut self.issues);
        for issue in self.issues.drain(..) {
            out.push(finding(issue.code, issue.severity, issue.text, pos, issue.fields).into());
        }
        let event = Event {
            pos: *pos,
            length: frame.len() as u64,
            version: f.version,
            seq,
            window: None,
            compressed: c_frame.is_some(),
            inflated_offset: inner,
            document: doc,
        };
        let item = if extra.is_empty() {
            Item::Event(event)
        } else {
            let mut record = event.into_message();
            Vec::extend(&mut *record.fields, extra); // after the event's own fields
            Item::Record(Box::new(record))
        };
        self.delivery.add_event(
            item,
            seq,
            print.unwrap_or_else(|| fingerprint(payload)),
            pos,
            c_frame,
            &mut shared.resends,
            &mut shared.held,
            out,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn compressed(
        &mut self,
        f: &Frame,
        frame: &[u8],
        inner_offset: Option<u64>,
        pos: &Pos,
        depth: usize,
        budget: &mut Budget,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        let max_depth = self.limits.max_depth;
        if depth > 0 {
            out.push(
                finding(
                    "lumberjack.nested-compressed",
                    Severity::Warning,
                    format!(
                        "C frame nested inside a C frame (depth {}); servers accept it, no client \
                         sends it",
                        depth + 1
                    ),
                    pos,
                    vec![("depth", (depth as u64 + 1).into())],
                )
                .into(),
            );
        }
        if depth + 1 > max_depth {
            out.push(
                finding(
                    "lumberjack.compressed-too-deep",
                    Severity::Error,
                    format!("C frames nested deeper than {max_depth}: not inflated"),
                    pos,
                    vec![("depth", (depth as u64 + 1).into())],
                )
                .into(),
            );
            return;
        }
        if f.value == 0 {
            let text = "C frame with length 0 (Logstash reads it as a signed int and rejects it)";
            out.push(
                finding(
                    "lumberjack.bad-length",
                    Severity::Error,
                    text.into(),
                    pos,
                    vec![("frame_type", "C".into()), ("declared", 0.into())],
                )
                .into(),
            );
            return;
        }
        if shared.scratch.len() <= depth {
            shared.scratch.resize_with(depth + 1, Vec::new);
        }
        let mut inflated = std::mem::take(&mut shared.scratch[depth]);
        let inf = shared
            .inflater
            .inflate(&frame[f.body..], budget.left(), &mut inflated);
        budget.spend(match inf.problem {
            Some((Problem::InflateLimit, _)) => usize::MAX,
            _ => inflated.len(),
        });
        let max_frame = self.limits.max_frame;
        let frames = count_frames(&inflated, max_frame);
        let fields = vec![
            ("window", Value::Null),
            ("compressed_length", f.value.into()),
            ("inflated_length", (inflated.len() as u64).into()),
            ("zlib_header", inf.header.into()),
            ("zlib_level", inf.level.into()),
            ("depth", (depth as u64 + 1).into()),
            ("frames", frames.into()),
            ("inflated_offset", inner_offset.filter(|_| depth > 0).into()),
        ];
        let record = message("compressed", pos, frame.len() as u64, f.version, fields);
        self.c_frames += 1;
        let c_id = self.c_frames;
        self.delivery
            .begin_compressed(record, pos, &mut shared.held, out);
        let problem = inf.problem.as_ref().map(|p| p.0);
        if let Some((problem, detail)) = inf.problem {
            let text = format!("{}: {detail}", problem.text());
            let fields = match problem {
                Problem::InflateLimit => vec![("cap", budget.cap().into())],
                _ => Vec::new(),
            };
            out.push(finding(problem.code(), Severity::Error, text, pos, fields).into());
        }
        if inf.trailing > 0 {
            out.push(
                finding(
                    "lumberjack.compressed-trailing-bytes",
                    Severity::Warning,
                    format!(
                        "{} bytes after the end of the zlib stream inside the C frame",
                        inf.trailing
                    ),
                    pos,
                    vec![("trailing", (inf.trailing as u64).into())],
                )
                .into(),
            );
        }
        self.inner_frames(&inflated, problem, pos, depth, c_id, budget, shared, out);
        if inflated.capacity() <= KEEP_SCRATCH {
            shared.scratch[depth] = inflated;
        }
    }

    /// The frames inside one inflated C body, in order, until the first one that is not whole.
    #[allow(clippy::too_many_arguments)]
    fn inner_frames(
        &mut self,
        inner: &[u8],
        problem: Option<Problem>,
        pos: &Pos,
        depth: usize,
        c_id: u64,
        budget: &mut Budget,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        let max_frame = self.limits.max_frame;
        let end = inner.len();
        let mut p = 0;
        let (mut ahead, mut next) = (Vec::new(), 0);
        while p < end {
            // Each frame is paid from the budget its inflated bytes came from (a bomb of tiny
            // frames would otherwise cost a record per 10 bytes).
            if !budget.record() {
                let cap = budget.cap();
                let text = format!(
                    "{}: the frames decoded from it exceed the {cap}-byte cap ({RECORD_COST} \
                     bytes per frame besides the inflated bytes); its last {} bytes skipped",
                    Problem::InflateLimit.text(),
                    end - p
                );
                let fields = vec![("cap", cap.into()), ("inflated_offset", (p as u64).into())];
                let code = Problem::InflateLimit.code();
                out.push(finding(code, Severity::Error, text, pos, fields).into());
                break;
            }
            // The Beats path: a whole 2J frame needs neither the general parser nor a version
            // check once the connection is known to be v2.
            if self.version == Some(b'2') {
                if let Some((seq, size)) = whole_j2(&inner[p..], max_frame) {
                    if next == ahead.len() {
                        prints_ahead(inner, p, max_frame, &mut ahead);
                        shared.resends.warm(ahead.iter().map(|&(_, print)| print));
                        next = 0;
                    }
                    let print = match ahead.get(next) {
                        Some(&(at, print)) if at == p => {
                            next += 1;
                            Some(print)
                        }
                        // not the frame they were made for: made again from here on
                        _ => {
                            ahead.clear();
                            next = 0;
                            None
                        }
                    };
                    let f = Frame {
                        version: b'2',
                        typ: b'J',
                        end: 10 + size,
                        value: seq,
                        count: size as u32,
                        body: 10,
                    };
                    let frame = &inner[p..p + f.end];
                    let inner_offset = Some(p as u64);
                    self.event(&f, frame, inner_offset, print, pos, Some(c_id), shared, out);
                    p += f.end;
                    continue;
                }
            }
            let (code, text) = match parse(&inner[p..], max_frame, None) {
                Parsed::Frame(f) => {
                    self.client_frame(
                        &f,
                        p,
                        inner,
                        pos,
                        depth + 1,
                        Some(c_id),
                        budget,
                        shared,
                        out,
                    );
                    p += f.end;
                    continue;
                }
                Parsed::Incomplete { need, .. } => {
                    if problem.is_some() {
                        break; // already reported: the zlib stream itself is cut
                    }
                    (
                        "lumberjack.compressed-truncated",
                        format!(
                            "inflated content ends inside a frame: {} of at least {need} bytes \
                             (Logstash: 'Insufficient bytes in compressed content to decode')",
                            end - p
                        ),
                    )
                }
                Parsed::Error(e) => (
                    e.code,
                    format!("{} (inside a C frame; rest of it skipped)", e.detail),
                ),
            };
            let fields = vec![("inflated_offset", (p as u64).into())];
            out.push(finding(code, Severity::Error, text, pos, fields).into());
            break;
        }
    }

    // server frames -------------------------------------------------------------------------------

    fn ack(&mut self, f: &Frame, pos: &Pos, held: &mut SpillStore, out: &mut Vec<Record>) {
        let conn = *self.version.get_or_insert(f.version);
        if f.version != conn {
            if f.version == b'2' && f.value == 0 {
                if !self.once.keepalive_v2_on_v1 {
                    self.once.keepalive_v2_on_v1 = true;
                    out.push(
                        finding(
                            "lumberjack.keepalive-v2-on-v1",
                            Severity::Info,
                            "v2 keep-alive 32 41 00000000 on a v1 connection (Logstash does this; \
                             npm lumberjack-protocol disconnects: 'Version should be 1, is 2')"
                                .into(),
                            pos,
                            Vec::new(),
                        )
                        .into(),
                    );
                }
            } else {
                self.check_version(f.version, f.typ, pos, out);
            }
        }
        let record = message("ack", pos, 6, f.version, vec![("value", f.value.into())]);
        if f.value > 0 {
            self.acks += 1;
        } else {
            self.keepalives += 1;
        }
        self.delivery.ack(f.value, record, pos, held, out);
    }
}

/// A J frame's document as Logstash's decoder (orjson in the Python reference) reads it, as its
/// canonical text: made in one pass, or, for a text that repeats a key or is not JSON, by the full
/// parser (which words the error); findings for a document that is not an object or not JSON
/// (then its text goes in the `raw` field).
fn json_document(
    payload: &[u8],
    pos: &Pos,
    fields: &mut Fields,
    out: &mut Vec<Record>,
) -> Option<Document> {
    let parsed = match canonical(payload, Dialect::Orjson) {
        Ok(c) => Ok(Document::from(c)),
        Err(_) => orjson::loads(payload).map(Document::from),
    };
    match parsed {
        Ok(doc) => {
            if !doc.is_object() {
                out.push(
                    finding(
                        "lumberjack.json-not-object",
                        Severity::Warning,
                        format!(
                            "J payload is a JSON {}, not an object (Logstash expects a map)",
                            doc.python_type()
                        ),
                        pos,
                        Vec::new(),
                    )
                    .into(),
                );
            }
            (!doc.is_null()).then_some(doc)
        }
        Err(text) => {
            let raw = String::from_utf8_lossy(payload).into_owned();
            fields.push(("raw", raw.into()));
            if let Some(bytes) = crate::decoders::raw_base64(payload) {
                fields.push(("raw_base64", bytes));
            }
            out.push(
                finding(
                    "lumberjack.json-invalid",
                    Severity::Error,
                    format!("J payload is not JSON: {text}"),
                    pos,
                    Vec::new(),
                )
                .into(),
            );
            None
        }
    }
}

/// Whole 2J frames whose fingerprints are made at once, so that their lookups in the resend
/// registry are warmed together (a few KiB of cache lines, still cached when their turn comes).
const AHEAD: usize = 32;

/// The offsets and payload fingerprints of up to AHEAD whole 2J frames from `p` on.
fn prints_ahead(inner: &[u8], mut p: usize, max_frame: usize, ahead: &mut Vec<(usize, u64)>) {
    ahead.clear();
    while ahead.len() < AHEAD {
        let Some((_, size)) = whole_j2(&inner[p..], max_frame) else {
            break;
        };
        ahead.push((p, fingerprint(&inner[p + 10..p + 10 + size])));
        p += 10 + size;
    }
}

/// How many whole frames an inflated body starts with (the `frames` of its C record, known
/// before its events are emitted).
fn count_frames(inner: &[u8], max_frame: usize) -> u64 {
    let mut p = 0;
    let mut n = 0;
    while p < inner.len() {
        match parse(&inner[p..], max_frame, None) {
            Parsed::Frame(f) => {
                p += f.end;
                n += 1;
            }
            _ => break,
        }
    }
    n
}
