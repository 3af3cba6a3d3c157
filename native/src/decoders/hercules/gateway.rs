//! Hercules Gate traffic: HTTP requests carrying event batches, paired with the Gate's answers.
//!
//! A request is held until its response arrives (HTTP/1.1 answers in order, also when pipelined),
//! so the `request` record carries the status and its events carry `acked` (true for 2xx, false for
//! a rejection, None when the capture has no answer). A 4xx/5xx answer to a batch is a finding
//! naming the events it rejected. `Content-Encoding: lz4` bodies are raw LZ4 blocks whose size comes
//! from `Original-Content-Length`, checked against the Gate's range and our inflate cap before
//! anything is allocated.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within a body held in memory; a read answer's count is an i32 times 36 in i64; held event counts only subtract what was added"
)]

use std::borrow::Cow;
use std::collections::VecDeque;

use super::batch::{decode_batch, BatchSink};
use super::http::{ascii_digits, latin1_lower, HttpMessage, HttpProblem, HttpReader};
use super::records::{event_message, Origin, PROTOCOL};
use super::url;
use super::Codec;
use crate::decoders::budget::{Budget, RECORD_COST};
use crate::decoders::buffer::StreamBuffer;
use crate::decoders::{CloseRoom, Gap, StreamContext};
use crate::formats::hercules::reader::{hex, Parsed, Problem};
use crate::held::spill::SpillStore;
use crate::held::waiting::Records;
use crate::model::pyrepr::str_repr;
use crate::model::text::py_strip;
use crate::model::{Direction, EventId, Field, Finding, Message, Record, Severity, Shared, Value};

const SEND_PATHS: [&str; 2] = ["/stream/send", "/stream/sendAsync"];
/// State entries kept in a read answer's record.
const MAX_STATE: usize = 1000;
/// SendRequestProcessor's accepted range for Original-Content-Length.
const MAX_ORIGINAL_LENGTH: usize = 100 * 1024 * 1024;
/// Rejected events named by UUID in one finding.
const MAX_NAMED: usize = 100;
/// Response body text kept.
const MAX_TEXT: usize = 512;
const REDACTED: &str = "<redacted>";

#[derive(Debug)]
struct Pending {
    request: Message,
    /// Its events: kept as they are while the request is among the connection's newest two
    /// unanswered ones (nearly every request is answered before the next is sent), else held.
    events: Records,
}

/// Both directions of one Gate connection.
#[derive(Debug)]
pub struct Gateway {
    requests: HttpReader,
    responses: HttpReader,
    pending: VecDeque<Pending>,
    held_events: usize,
}

fn field<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.get(name).and_then(Value::as_str)
}

fn finding(
    msg: &HttpMessage,
    d: Direction,
    code: &'static str,
    severity: Severity,
    text: String,
) -> Finding {
    let mut f = Finding::new(code, severity, text).at(msg.origin.0, msg.origin.1);
    f.direction = Some(d);
    f.offset = Some(msg.offset);
    f
}

/// (key, header it came in), as AuthUtil reads it: Authorization first, then apiKey.
fn api_key(msg: &HttpMessage) -> Option<(String, &'static str)> {
    if let Some(auth) = msg.header("Authorization").filter(|a| !a.is_empty()) {
        let (scheme, rest) = auth.split_once(' ').unwrap_or((auth, ""));
        let rest = py_strip(rest);
        let (kind, key) = rest.split_once(' ').unwrap_or((rest, ""));
        if scheme == "Hercules" && matches!(kind, "apiKey" | "masterApiKey") && !key.is_empty() {
            return Some((py_strip(key).to_owned(), "Authorization"));
        }
    }
    for name in ["apiKey", "masterApiKey"] {
        if let Some(key) = msg.header(name) {
            return Some((key.to_owned(), name));
        }
    }
    None
}

/// Collects a batch's event records and findings (events are held with their request).
struct Collect<'c> {
    reporter: &'c mut super::records::Reporter,
    names: &'c mut super::records::TagNames,
    buf: &'c StreamBuffer,
    d: Direction,
    msg_offset: u64,
    msg_origin: Origin,
    /// Stream offset of the decoded body part, when it lies on the wire as is.
    base: Option<u64>,
    start: usize,
    /// Fields every event of the batch carries (its request's offset, its stream name).
    extra: Vec<(&'static str, Field)>,
    events: Vec<Message>,
    findings: Vec<Record>,
    /// What the body may still cost (its inflated bytes were paid first).
    budget: &'c mut Budget,
    /// Offset in the part of the first event the budget could not pay for.
    stopped: Option<usize>,
    event_bytes: bool,
}

impl BatchSink for Collect<'_> {
    fn event(&mut self, body: &[u8], index: usize, ev: &Parsed) -> bool {
        if !self.budget.record() {
            self.stopped = Some(ev.offset);
            return false;
        }
        let (offset, origin) = match self.base {
            None => (self.msg_offset, self.msg_origin),
            Some(base) => {
                let at = base + ev.offset as u64;
                (at, self.buf.origin_at(at))
            }
        };
        let extra = self.extra.iter().cloned().chain([
            ("batch_index", Field::Value(index.into())),
            ("body_offset", Field::Value((self.start + ev.offset).into())),
        ]);
        let mut m = event_message(body, ev, (self.d, offset, origin), extra, self.event_bytes);
        if self.d == Direction::C2S {
            // a copy the Gate was asked to take: the delivery verdict follows it by this id, made
            // here from its bytes (reading the UUID back from its text was 3 % of a conversion)
            m.event_id = Some(EventId::from_uuid(&ev.uuid));
        }
        self.events.push(m);
        true
    }

    fn problem(&mut self, p: Problem) {
        let (offset, origin, extra) = match self.base {
            None => (
                self.msg_offset,
                self.msg_origin,
                vec![("body_offset", Value::from(self.start + p.offset))],
            ),
            Some(base) => {
                let at = base + p.offset as u64;
                (at, self.buf.origin_at(at), vec![])
            }
        };
        if let Some(f) =
            self.reporter
                .finding(self.names, p, Some(self.d), Some(offset), origin, extra)
        {
            self.findings.push(f.into());
        }
    }
}

impl Gateway {
    pub fn new(ctx: &StreamContext) -> Self {
        Gateway {
            requests: HttpReader::new(false, ctx.limits.max_frame),
            responses: HttpReader::new(true, ctx.limits.max_frame),
            pending: VecDeque::new(),
            held_events: 0,
        }
    }

    pub fn feed(
        &mut self,
        d: Direction,
        buf: &mut StreamBuffer,
        ctx: &StreamContext,
        codec: &mut Codec<'_>,
        out: &mut Vec<Record>,
    ) {
        let mut msgs = Vec::new();
        let mut probs = Vec::new();
        let reader = match d {
            Direction::C2S => &mut self.requests,
            Direction::S2C => &mut self.responses,
        };
        reader.feed(buf, &mut msgs, &mut probs);
        for p in probs {
            out.push(framing_finding(d, p).into());
        }
        for msg in msgs {
            match d {
                Direction::C2S => self.request(&msg, buf, ctx, codec, out),
                Direction::S2C => self.response(&msg, buf, ctx, codec, out),
            }
        }
        match d {
            Direction::C2S => self.requests.commit(buf),
            Direction::S2C => self.responses.commit(buf),
        }
    }

    /// Missing bytes: a request they cut short still takes its place in the response order.
    pub fn gap(&mut self, gap: &Gap, buf: &mut StreamBuffer, out: &mut Vec<Record>) {
        let reader = match gap.direction {
            Direction::C2S => &mut self.requests,
            Direction::S2C => &mut self.responses,
        };
        let cut = reader.lost(buf, gap.end());
        let (Some((start, origin)), Direction::C2S) = (cut, gap.direction) else {
            return;
        };
        let mut req = Message::new(PROTOCOL, "request");
        req.direction = Some(gap.direction);
        req.offset = Some(start);
        req.length = gap.offset.saturating_sub(start);
        (req.frame, req.ts) = origin;
        req.fields = vec![
            ("method", Value::Null),
            ("path", Value::Null),
            ("incomplete", true.into()),
        ]
        .into();
        self.pending.push_back(Pending {
            request: req,
            events: Records::with_capacity(0),
        });
        // the bytes are missing from the capture, not from the Gate: the capture's loss
        let mut f = Finding::new(
            "hercules.request-in-gap",
            Severity::Warning,
            format!(
                "{} bytes of the request at offset {start} are missing from the capture: its \
                 events are not in the output (the Gate's answer still pairs)",
                gap.length
            ),
        )
        .at(gap.frame, gap.ts)
        .field("missing", gap.length);
        f.direction = Some(gap.direction);
        f.offset = Some(start);
        out.push(f.into());
    }

    pub fn close(
        &mut self,
        s2c: &mut StreamBuffer,
        ctx: &StreamContext,
        codec: &mut Codec<'_>,
        out: &mut Vec<Record>,
    ) {
        if let Some(last) = self.responses.close(s2c) {
            self.response(&last, s2c, ctx, codec, out);
        }
        self.responses.commit(s2c);
    }

    /// After `close`: the requests never answered, with their events, oldest first, while there
    /// is room; whether any are left.
    pub fn release(&mut self, held: &mut SpillStore, out: &mut Vec<Record>) -> bool {
        let room = CloseRoom::new(out, held);
        while room.left(out, held) {
            let Some(p) = self.pending.pop_front() else {
                return false;
            };
            let show = |name| field(&p.request, name).unwrap_or("None").to_owned();
            let text = format!(
                "no Gate response in the capture for {} {}; delivery of its {} event(s) is unknown",
                show("method"),
                show("path"),
                p.events.len()
            );
            unanswered(p, "hercules.no-response", text, held, out);
        }
        !self.pending.is_empty()
    }

    fn request(
        &mut self,
        msg: &HttpMessage,
        buf: &StreamBuffer,
        ctx: &StreamContext,
        codec: &mut Codec<'_>,
        out: &mut Vec<Record>,
    ) {
        let [method, target, version] = &msg.start;
        let (path, query) = url::split(target);
        let mut req = Message::new(PROTOCOL, "request");
        req.direction = Some(Direction::C2S);
        req.offset = Some(msg.offset);
        req.length = msg.length;
        (req.frame, req.ts) = msg.origin;
        req.version = Some(msg.version(false));
        req.fields.push(("method", method.as_str().into()));
        req.fields.push(("path", path.as_str().into()));
        req.fields.push(("http_version", version.as_str().into()));
        if let Some(v) = url::query_value(&query, "stream") {
            req.fields.push(("stream_name", v.into()));
        }
        if let Some(v) = url::query_value(&query, "timeline") {
            req.fields.push(("timeline", v.into()));
        }
        if let Some((key, header)) = api_key(msg) {
            let key = if ctx.show_secrets {
                key
            } else {
                REDACTED.to_owned()
            };
            req.fields.push(("api_key", key.into()));
            req.fields.push(("api_key_header", header.into()));
        }
        for (name, as_field) in [
            ("Content-Type", "content_type"),
            ("Content-Encoding", "content_encoding"),
            ("Original-Content-Length", "original_content_length"),
        ] {
            if let Some(v) = msg.header(name) {
                req.fields.push((as_field, v.into()));
            }
        }
        req.fields.push(("content_length", msg.declared.into()));
        req.fields.push(("chunked", msg.chunked.into()));
        let mut entry = Pending {
            request: req,
            events: Records::with_capacity(0),
        };
        if method == "POST" && SEND_PATHS.contains(&path.as_str()) {
            self.batch(msg, buf, ctx, codec, &mut entry, out);
        }
        self.held_events += entry.events.len();
        self.pending.push_back(entry);
        if let Some(older) = self.pending.len().checked_sub(3) {
            self.pending[older].events.hold(codec.held);
        }
        self.release_overflow(ctx, codec.held, out);
    }

    /// The body after Content-Encoding, or None (with findings saying why).
    /// An lz4 body is paid from `budget` before it is inflated.
    fn body<'b>(
        msg: &'b HttpMessage,
        buf: &'b StreamBuffer,
        d: Direction,
        budget: &mut Budget,
        out: &mut Vec<Record>,
    ) -> Option<Cow<'b, [u8]>> {
        let raw = msg.body(buf)?;
        let encoding = latin1_lower(py_strip(
            msg.header("Content-Encoding")
                .filter(|e| !e.is_empty())
                .unwrap_or("identity"),
        ));
        if encoding == "identity" {
            return Some(Cow::Borrowed(raw));
        }
        if encoding != "lz4" {
            let text = format!(
                "Content-Encoding {} is not lz4: the Gate answers 415; body not decoded",
                str_repr(&encoding)
            );
            out.push(
                finding(msg, d, "hercules.content-encoding", Severity::Error, text)
                    .field("content_encoding", encoding)
                    .into(),
            );
            return None;
        }
        let ocl = py_strip(msg.header("Original-Content-Length").unwrap_or(""));
        let cap = MAX_ORIGINAL_LENGTH.min(budget.cap());
        let size = Some(ocl)
            .filter(|s| ascii_digits(s))
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n <= MAX_ORIGINAL_LENGTH && budget.take(n));
        let Some(size) = size else {
            let shown: String = ocl.chars().take(40).collect();
            let text = format!(
                "lz4 body with Original-Content-Length {}, not an integer in [0, {cap}]: the Gate answers 400; body not decoded",
                str_repr(&shown)
            );
            out.push(
                finding(msg, d, "hercules.original-length", Severity::Error, text)
                    .field("original_content_length", shown)
                    .into(),
            );
            return None;
        };
        if size == 0 {
            return Some(Cow::Owned(Vec::new()));
        }
        // The output buffer is sized from the header, paid from the budget above, and no larger
        // than the block could fill (an LZ4 sequence writes at most 255 bytes per input byte).
        let mut inflated = vec![0u8; size.min(raw.len().saturating_mul(255).saturating_add(64))];
        match lz4_flex::block::decompress_into(raw, &mut inflated) {
            Ok(n) => {
                inflated.truncate(n);
                if n != size {
                    let text = format!(
                        "lz4 body inflates to {n} bytes, Original-Content-Length says {size}"
                    );
                    out.push(
                        finding(msg, d, "hercules.original-length", Severity::Warning, text)
                            .field("original_content_length", size)
                            .field("inflated", n)
                            .into(),
                    );
                }
                Some(Cow::Owned(inflated))
            }
            Err(_) => {
                let text = format!(
                    "lz4 body does not inflate to {size} bytes (Decompression failed: corrupt input or insufficient space in destination buffer.): the Gate answers 400"
                );
                out.push(finding(msg, d, "hercules.lz4-error", Severity::Error, text).into());
                None
            }
        }
    }

    /// A request to a send path: its events are held in `entry` until the answer.
    fn batch(
        &mut self,
        msg: &HttpMessage,
        buf: &StreamBuffer,
        ctx: &StreamContext,
        codec: &mut Codec<'_>,
        entry: &mut Pending,
        out: &mut Vec<Record>,
    ) {
        if msg.header("Content-Length").is_none() {
            let how = if msg.chunked {
                "a chunked body"
            } else {
                "no body"
            };
            let text = format!("request without Content-Length ({how}): the Gate answers 411");
            out.push(
                finding(
                    msg,
                    Direction::C2S,
                    "hercules.no-content-length",
                    Severity::Warning,
                    text,
                )
                .into(),
            );
        }
        let mut budget = Budget::new(ctx.limits.max_inflated);
        let Some(body) = Self::body(msg, buf, Direction::C2S, &mut budget, out) else {
            return;
        };
        let req = &mut entry.request;
        req.fields.push(("body_length", body.len().into()));
        let mut extra = vec![("request_offset", Field::Value(msg.offset.into()))];
        if let Some(name) = req.get("stream_name") {
            extra.push(("stream_name", Field::Shared(Shared::new(name.clone()))));
        }
        let (count, events, findings) = events(
            msg,
            Direction::C2S,
            buf,
            &body,
            0,
            extra,
            codec,
            &mut budget,
        );
        req.fields.push(("count", count.into()));
        req.fields.push(("events", events.len().into()));
        entry.events = Records::with_capacity(events.len());
        for m in events {
            entry.events.push(m, codec.held);
        }
        entry.events.pack(codec.held);
        out.extend(findings);
    }

    fn release_overflow(
        &mut self,
        ctx: &StreamContext,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let max = ctx.limits.max_pending_events;
        while self.held_events > max && self.pending.len() > 1 {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            self.held_events -= p.events.len();
            let text = format!(
                "more than {max} events wait for Gate answers: the request at offset {} is emitted before its answer (acked unknown)",
                p.request.offset.unwrap_or(0)
            );
            unanswered(p, "hercules.pending-overflow", text, held, out);
        }
    }

    fn response(
        &mut self,
        msg: &HttpMessage,
        buf: &StreamBuffer,
        ctx: &StreamContext,
        codec: &mut Codec<'_>,
        out: &mut Vec<Record>,
    ) {
        let [_, status_text, reason] = &msg.start;
        let status: u16 = status_text.parse().unwrap_or(0);
        let binary = msg
            .header("Content-Type")
            .unwrap_or("")
            .starts_with("application/octet-stream");
        let text = if binary {
            String::new()
        } else {
            let body = msg.body(buf).unwrap_or(&[]);
            String::from_utf8_lossy(&body[..body.len().min(MAX_TEXT)]).into_owned()
        };
        let mut resp = Message::new(PROTOCOL, "response");
        resp.direction = Some(Direction::S2C);
        resp.offset = Some(msg.offset);
        resp.length = msg.length;
        (resp.frame, resp.ts) = msg.origin;
        resp.version = Some(msg.version(true));
        resp.fields.push(("status", status.into()));
        resp.fields.push(("reason", reason.as_str().into()));
        resp.fields.push(("body", text.as_str().into()));
        resp.fields.push(("content_length", msg.declared.into()));
        if status < 200 {
            out.push(resp.into());
            return;
        }
        let Some(mut p) = self.pending.pop_front() else {
            resp.fields.push(("unpaired", true.into()));
            out.push(resp.into());
            return;
        };
        self.held_events -= p.events.len();
        let req = &mut p.request;
        req.set("status", status);
        req.set("reason", reason.as_str());
        req.set("response_offset", msg.offset);
        req.set("response_frame", msg.origin.0);
        resp.fields
            .push(("request_offset", req.offset.unwrap_or(0).into()));
        let acked = status < 300;
        let mut events = p.events.take_all(codec.held);
        for ev in &mut events {
            ev.acked = Some(acked);
        }
        let path = field(req, "path").unwrap_or("").to_owned();
        let rejected = (status >= 400 && SEND_PATHS.contains(&path.as_str()))
            .then(|| rejected(&p.request, &events, msg, status, reason, &text));
        let mut read = Vec::new();
        if status == 200 && matches!(path.as_str(), "/stream/read" | "/timeline/read") {
            Self::read(
                msg, buf, &p.request, &mut resp, &path, ctx, codec, &mut read,
            );
        }
        out.push(p.request.into());
        out.extend(events.into_iter().map(Record::from));
        out.push(resp.into());
        out.extend(rejected.map(Record::from));
        out.extend(read);
    }

    /// Events a Stream/Timeline API read returned, after the read state.
    #[allow(clippy::too_many_arguments)]
    fn read(
        msg: &HttpMessage,
        buf: &StreamBuffer,
        req: &Message,
        resp: &mut Message,
        path: &str,
        ctx: &StreamContext,
        codec: &mut Codec<'_>,
        out: &mut Vec<Record>,
    ) {
        let mut notes = Vec::new();
        let mut budget = Budget::new(ctx.limits.max_inflated);
        let Some(body) = Self::body(msg, buf, Direction::S2C, &mut budget, &mut notes) else {
            out.extend(notes);
            return;
        };
        // State = Count:i32 and per shard (Partition:i32, Offset:i64), or per timeline slice
        // (Slice:i32, Offset:i64, EventId:24 bytes).
        let timeline = path == "/timeline/read";
        let size: i64 = if timeline { 36 } else { 12 };
        let count = match body.get(..4) {
            Some(b) => i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64,
            None => -1,
        };
        let start = 4 + count * size;
        if count < 0 || start + 4 > body.len() as i64 {
            let text = format!(
                "read answer of {} bytes does not hold its state ({count} entries) and event count",
                body.len()
            );
            out.extend(notes);
            out.push(
                finding(
                    msg,
                    Direction::S2C,
                    "hercules.read-state",
                    Severity::Error,
                    text,
                )
                .field("entries", count)
                .into(),
            );
            return;
        }
        let mut state = Vec::with_capacity((count as usize).min(MAX_STATE));
        for i in 0..(count as usize).min(MAX_STATE) {
            let e = &body[4 + i * size as usize..][..size as usize];
            let num = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            let offset = crate::formats::hercules::reader::be_i64(&e[4..12]);
            let mut item = serde_json::Map::new();
            item.insert(
                if timeline { "slice" } else { "partition" }.to_owned(),
                num.into(),
            );
            item.insert("offset".to_owned(), offset.into());
            if timeline {
                item.insert("event_id".to_owned(), hex(&e[12..36]).into());
            }
            state.push(Value::Object(item));
        }
        resp.fields.push(("state", Value::Array(state)));
        let offset = req.offset.unwrap_or(0);
        let mut extra = vec![("request_offset", Field::Value(offset.into()))];
        for name in ["stream_name", "timeline"] {
            if let Some(v) = req.get(name) {
                extra.push((name, Field::Shared(Shared::new(v.clone()))));
            }
        }
        let start = start as usize;
        let (count, events, findings) = events(
            msg,
            Direction::S2C,
            buf,
            &body[start..],
            start,
            extra,
            codec,
            &mut budget,
        );
        resp.fields.push(("count", count.into()));
        resp.fields.push(("events", events.len().into()));
        out.extend(events.into_iter().map(Record::from));
        out.extend(notes);
        out.extend(findings);
    }
}

/// The `Count:i32` + events part of a body (`part` starts `start` bytes into the decoded body).
/// Every event is paid from `budget`; past it the rest of the body is skipped, with a finding.
#[allow(clippy::too_many_arguments)]
fn events(
    msg: &HttpMessage,
    d: Direction,
    buf: &StreamBuffer,
    part: &[u8],
    start: usize,
    extra: Vec<(&'static str, Field)>,
    codec: &mut Codec<'_>,
    budget: &mut Budget,
) -> (Option<i32>, Vec<Message>, Vec<Record>) {
    // Positions in the stream exist only for a plain Content-Length body; otherwise events and
    // findings sit at the message, with their place inside the decoded body in `body_offset`.
    let encoded = msg
        .header("Content-Encoding")
        .is_some_and(|e| !e.is_empty());
    let base = match msg.body_offset {
        Some(at) if !encoded => Some(at + start as u64),
        _ => None,
    };
    let mut sink = Collect {
        reporter: &mut *codec.reporter,
        names: &mut *codec.names,
        buf,
        d,
        msg_offset: msg.offset,
        msg_origin: msg.origin,
        base,
        start,
        extra,
        events: Vec::new(),
        findings: Vec::new(),
        budget,
        stopped: None,
        event_bytes: codec.event_bytes,
    };
    let (count, got) = decode_batch(part, codec.parser, &mut sink);
    if let Some(at) = sink.stopped {
        let cap = sink.budget.cap();
        let lz4 = if encoded { "inflated " } else { "" };
        let text = format!(
            "the events of this {}-byte {lz4}body exceed the {cap}-byte inflate cap \
             ({RECORD_COST} bytes per event besides the inflated bytes): {got} of {} event(s) \
             decoded, the {} bytes after them skipped",
            start + part.len(),
            count.unwrap_or(0),
            part.len() - at
        );
        let f = finding(msg, d, "hercules.inflate-limit", Severity::Error, text)
            .field("cap", cap)
            .field("events", got)
            .field("body_offset", start + at);
        sink.findings.push(f.into());
    }
    (count, sink.events, sink.findings)
}

fn framing_finding(d: Direction, p: HttpProblem) -> Finding {
    let message = if p.fatal {
        p.message + "; looking for the next message"
    } else {
        p.message
    };
    let mut f = Finding::new(p.code, Severity::Error, message).at(p.origin.0, p.origin.1);
    f.direction = Some(d);
    f.offset = Some(p.offset);
    f.fields = p.fields;
    f
}

/// A request and its events emitted without an answer (acked stays None), and why.
fn unanswered(
    mut p: Pending,
    code: &'static str,
    text: String,
    held: &mut SpillStore,
    out: &mut Vec<Record>,
) {
    let req = &p.request;
    let mut note = Finding::new(code, Severity::Info, text)
        .at(req.frame, req.ts)
        .field("events", p.events.len());
    note.direction = Some(Direction::C2S);
    note.offset = req.offset;
    let events = p.events.take_all(held);
    out.push(p.request.into());
    out.extend(events.into_iter().map(Record::from));
    out.push(note.into());
}

fn rejected(
    req: &Message,
    events: &[Message],
    msg: &HttpMessage,
    status: u16,
    reason: &str,
    text: &str,
) -> Finding {
    let uuids: Vec<Value> = events
        .iter()
        .take(MAX_NAMED)
        .filter_map(|ev| ev.get("uuid").cloned())
        .collect();
    let count = req.get("count").and_then(Value::as_i64);
    let body = py_strip(text);
    let mut answer = py_strip(&format!("{status} {reason}")).to_owned();
    if !body.is_empty() {
        answer.push_str(&format!(" ({body})"));
    }
    let stream = field(req, "stream_name")
        .map(|s| format!(" for stream {s}"))
        .unwrap_or_default();
    let mut message = format!(
        "Gate answered {answer} to {}{stream}: {} decoded event(s) of a batch of {} rejected",
        field(req, "path").unwrap_or("None"),
        events.len(),
        count.map_or("None".to_owned(), |c| c.to_string())
    );
    if status == 400 && count.is_some_and(|c| (events.len() as i64) < c) {
        message.push_str("; events before the failure may already be in Kafka");
    }
    let mut f = Finding::new("hercules.request-rejected", Severity::Error, message)
        .at(msg.origin.0, msg.origin.1)
        .field("status", status)
        .field("request_offset", req.offset)
        .field("request_frame", req.frame)
        .field("events", events.len())
        .field("uuids", Value::Array(uuids));
    f.direction = Some(Direction::S2C);
    f.offset = Some(msg.offset);
    f
}
