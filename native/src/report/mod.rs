//! What `wirelog report` draws, aggregated while the records go by (docs/architecture.md, Report):
//! time series in bins that coarsen as the capture's span grows, one lane of counts per
//! connection, at most `MARKS` marks (windows, requests, ACKs, never-acknowledged events, findings,
//! gaps, closes) and the stalls. Everything is bounded whatever the capture's size; nothing here
//! knows Python (python/ hands `Timeline::json` over as one string).

use std::collections::{BTreeMap, HashMap};

mod lanes;
use lanes::Lanes;

use serde_json::{json, Map, Value};

use crate::model::{Delivery, Direction, Finding, Message, Record, Severity, Stamp};
use crate::tcp::Event;

/// How long an answer may take before the wait is a stall, unless the caller says otherwise.
pub const DEFAULT_STALL_NS: i64 = 2_000_000_000;
/// The narrowest bin: 1 ms. Bins are aligned to multiples of their width since the epoch and the
/// width grows 1, 2, 10, 20, 100, 200 ms ... (each a multiple of the one before), so the series of
/// several captures merge bin for bin and the page can sum them into bins of a round interval
/// (1, 2 or 5 × 10^k: every such interval at least the width is a multiple of it).
const BASE_BIN_NS: i64 = 1_000_000;
/// Bins a series spans at most; past it the width grows (× 2 or × 5) and neighbours merge.
const MAX_BINS: i64 = 2048;
/// Latency histogram: four buckets an octave from 1 µs (2^10 ns) up, the last one open.
const LAT_BUCKETS: usize = 128;
const LAT_FIRST_OCTAVE: f64 = 10.0;
const LAT_PER_OCTAVE: f64 = 4.0;
/// Routine marks (windows, requests, answers, keep-alives) kept: past it every other one is
/// dropped and then only one in `stride` drawn; the series still count them all.
const ROUTINE_MARKS: usize = 15_000;
/// Notable marks (never-acknowledged events, resends, findings, gaps, closes): the first ones.
const NOTABLE_MARKS: usize = 5_000;
/// Requests waiting for their answer (or answers for their request, when a protocol holds the
/// request's record until its fate is known): past it new ones are not paired.
const PAIRS: usize = 100_000;
/// Stalls kept before merging (each is an answer later than the threshold).
const STALLS: usize = 20_000;

/// The latency bucket of `ns`.
fn bucket(ns: i64) -> usize {
    if ns <= 1 << 10 {
        return 0;
    }
    let b = ((ns as f64).log2() - LAT_FIRST_OCTAVE) * LAT_PER_OCTAVE;
    (b as usize).min(LAT_BUCKETS - 1)
}

#[derive(Clone, Default)]
struct Bin {
    events: u64,
    /// Distinct events the verdict says were never acknowledged, at their first copy's time.
    unacked: u64,
    /// Distinct events delivered only by a resend, at their first copy's time.
    recovered: u64,
    bytes: [u64; 2],
    /// Findings by severity: info, warning, error.
    findings: [u64; 3],
    /// Error responses (CQL ERROR, Hercules 4xx/5xx).
    errors: u64,
    /// Latencies of the answers that came in this bin; allocated at the first one.
    latency: Option<Box<[u32; LAT_BUCKETS]>>,
}

impl Bin {
    fn merge(&mut self, o: Bin) {
        self.events += o.events;
        self.unacked += o.unacked;
        self.recovered += o.recovered;
        for i in 0..2 {
            self.bytes[i] += o.bytes[i];
        }
        for i in 0..3 {
            self.findings[i] += o.findings[i];
        }
        self.errors += o.errors;
        if let Some(theirs) = o.latency {
            let mine = self
                .latency
                .get_or_insert_with(|| Box::new([0; LAT_BUCKETS]));
            for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                *a = a.saturating_add(*b);
            }
        }
    }
}

/// Bins keyed by `ts.div_euclid(width)`; sparse, so a capture with an idle hour costs nothing.
struct Series {
    width: i64,
    bins: BTreeMap<i64, Bin>,
}

impl Series {
    fn bin(&mut self, ts: i64) -> &mut Bin {
        loop {
            let key = ts.div_euclid(self.width);
            let lo = self.bins.keys().next().map_or(key, |&k| k.min(key));
            let hi = self.bins.keys().next_back().map_or(key, |&k| k.max(key));
            if hi - lo < MAX_BINS || self.width > i64::MAX / 4 {
                return self.bins.entry(key).or_default();
            }
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        let factor = coarser(self.width);
        self.width *= factor;
        let old = std::mem::take(&mut self.bins);
        for (k, b) in old {
            self.bins.entry(k.div_euclid(factor)).or_default().merge(b);
        }
    }
}

/// The factor from a bin width (1 or 2 × 10^k ns) to the next: 1 → 2 → 10 → 20 → 100 ...
fn coarser(width: i64) -> i64 {
    let mut digits = width;
    while digits % 10 == 0 {
        digits /= 10;
    }
    if digits == 1 {
        2
    } else {
        5
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Send,
    Answer,
    Keepalive,
    Unacked,
    Recovered,
    Resend,
    Finding,
    Gap,
    Close,
    Reset,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Answer => "answer",
            Kind::Keepalive => "keepalive",
            Kind::Unacked => "unacked",
            Kind::Recovered => "recovered",
            Kind::Resend => "resend",
            Kind::Finding => "finding",
            Kind::Gap => "gap",
            Kind::Close => "close",
            Kind::Reset => "reset",
        }
    }
}

/// One thing drawn on a lane. `label`: the message kind or finding code; `first`/`last`: the
/// sequence numbers (or ACK value, status) a tooltip shows; `latency`: an answer's, in ns.
struct Mark {
    ts: i64,
    stream: u64,
    kind: Kind,
    label: &'static str,
    frame: Option<u64>,
    count: u64,
    first: Option<i64>,
    last: Option<i64>,
    latency: Option<i64>,
    /// Frame of the first copy of a resent event.
    of_frame: Option<u64>,
}

impl Mark {
    fn new(kind: Kind, stream: u64, ts: i64, label: &'static str, frame: Option<u64>) -> Self {
        Mark {
            ts,
            stream,
            kind,
            label,
            frame,
            count: 1,
            first: None,
            last: None,
            latency: None,
            of_frame: None,
        }
    }
}

#[derive(Default)]
struct Marks {
    routine: Vec<Mark>,
    notable: Vec<Mark>,
    /// One routine mark in `stride` is kept (1 until the first thinning).
    stride: u64,
    seen: u64,
    notable_dropped: u64,
}

impl Marks {
    fn routine(&mut self, m: Mark) {
        self.seen += 1;
        if self.seen % self.stride != 0 {
            return;
        }
        if self.routine.len() >= ROUTINE_MARKS {
            // Keep the marks a stride twice as long would have kept: those at even positions.
            let mut i = 0;
            self.routine.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            self.stride *= 2;
            if self.seen % self.stride != 0 {
                return;
            }
        }
        self.routine.push(m);
    }

    /// A never-acknowledged (or recovered) event joins the mark of the one before it when they
    /// share a frame and kind.
    fn unacked(&mut self, m: Mark) {
        if let Some(last) = self.notable.last_mut() {
            if last.kind == m.kind && last.stream == m.stream && last.frame == m.frame {
                last.count += 1;
                last.last = m.last.or(last.last);
                return;
            }
        }
        self.notable(m);
    }

    fn notable(&mut self, m: Mark) {
        if self.notable.len() < NOTABLE_MARKS {
            self.notable.push(m);
        } else {
            self.notable_dropped += 1;
        }
    }
}

#[derive(Clone, Copy)]
enum Side {
    Sent,
    Answered,
}

#[derive(Clone, Copy)]
struct Half {
    side: Side,
    ts: i64,
    frame: Option<u64>,
    /// The window's (or request's) sequence numbers and kind, when it is the sent half.
    seq: (Option<i64>, Option<i64>),
    kind: &'static str,
}

/// One window or request that waited too long, drawn over its own wait only (several of a
/// connection may overlap: pipelined windows wait together, and each is its own bar).
struct Stall {
    stream: u64,
    start: i64,
    /// None: still unanswered when the capture ended.
    end: Option<i64>,
    /// Where to draw it to: its answer, else its connection's last packet when it was closed (FIN
    /// or RST: no answer can come), else the capture's last timestamp.
    until: i64,
    sent_frame: Option<u64>,
    answer_frame: Option<u64>,
    /// The window's first and last sequence numbers, when it has them.
    seq: (Option<i64>, Option<i64>),
    /// What waited: "window", "request", a CQL opcode.
    request: &'static str,
}

/// The two ends of a request and its answer (frames and times), as `pair` takes them.
struct Wait {
    sent: i64,
    sent_frame: Option<u64>,
    answered: i64,
    answer_frame: Option<u64>,
    seq: (Option<i64>, Option<i64>),
}

/// The report's aggregation of one capture (or one set of raw dumps).
pub struct Timeline {
    stall_ns: i64,
    series: Series,
    lanes: Lanes,
    marks: Marks,
    halves: HashMap<(u64, u64), Half>,
    unpaired: u64,
    stalls: Vec<Stall>,
    stalls_dropped: u64,
    /// The earliest and latest timestamps seen (the page's x axis spans them).
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    /// Latency histograms per request kind (CQL opcode, Lumberjack window, Gate request).
    latency_by: BTreeMap<&'static str, Box<[u32; LAT_BUCKETS]>>,
    /// Lumberjack/Courier events per window or payload, by power of two (bucket i: < 2^i).
    window_sizes: [u64; 24],
    /// Hercules Gate answers by status.
    statuses: BTreeMap<u16, u64>,
}

/// How a protocol's message takes part in the request/answer pairing.
enum Role {
    /// A request or window, paired by token.
    Send(u64),
    /// Its answer, paired by token (`waits`: the request's record may come later).
    Answer(u64, bool),
    /// An answer that carries its latency (CQL).
    Timed(i64),
    Keepalive,
    Other,
}

fn u64_field(m: &Message, name: &str) -> Option<u64> {
    m.get(name).and_then(Value::as_u64)
}

fn token_of(text: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(text)
}

fn role(m: &Message) -> Role {
    match (m.protocol, m.kind) {
        ("lumberjack", "window") => u64_field(m, "window").map_or(Role::Other, Role::Send),
        ("lumberjack", "ack") if m.get("keepalive").and_then(Value::as_bool) == Some(true) => {
            Role::Keepalive
        }
        ("lumberjack", "ack") => {
            u64_field(m, "window").map_or(Role::Other, |w| Role::Answer(w, true))
        }
        ("courier", "jdat" | "evnt") => m
            .get("nonce")
            .and_then(Value::as_str)
            .map_or(Role::Other, |n| Role::Send(token_of(n))),
        ("courier", "ackn") => m
            .get("nonce")
            .and_then(Value::as_str)
            .map_or(Role::Other, |n| Role::Answer(token_of(n), false)),
        ("hercules", "request") => m.offset.map_or(Role::Other, Role::Send),
        ("hercules", "response") => {
            u64_field(m, "request_offset").map_or(Role::Other, |o| Role::Answer(o, false))
        }
        ("cql", _) => match m.get("latency_ns").and_then(Value::as_i64) {
            Some(ns) => Role::Timed(ns),
            None => Role::Other,
        },
        _ => Role::Other,
    }
}

fn severity_index(s: Severity) -> usize {
    match s {
        Severity::Info => 0,
        Severity::Warning => 1,
        Severity::Error => 2,
    }
}

fn direction_index(d: Direction) -> usize {
    match d {
        Direction::C2S => 0,
        Direction::S2C => 1,
    }
}

impl Timeline {
    /// `stall_ns`: how long an answer may take before the wait is drawn as a stall.
    pub fn new(stall_ns: i64) -> Self {
        Timeline {
            stall_ns: stall_ns.max(0),
            series: Series {
                width: BASE_BIN_NS,
                bins: BTreeMap::new(),
            },
            lanes: Lanes::default(),
            marks: Marks {
                stride: 1,
                ..Marks::default()
            },
            halves: HashMap::new(),
            unpaired: 0,
            stalls: Vec::new(),
            stalls_dropped: 0,
            first_ts: None,
            last_ts: None,
            latency_by: BTreeMap::new(),
            window_sizes: [0; 24],
            statuses: BTreeMap::new(),
        }
    }

    fn saw(&mut self, ts: i64) {
        self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
    }

    /// A record the filter kept (pipeline/out.rs).
    pub fn record(&mut self, r: &Record, stamp: Option<&Stamp>) {
        match r {
            Record::Message(m) => {
                if let Some(s) = stamp {
                    self.message(m, s.stream);
                }
            }
            Record::Finding(f) => self.finding(f),
        }
    }

    /// A reassembler event (pipeline/mod.rs): bytes per direction, gaps, TCP findings, stream ends.
    pub fn event(&mut self, e: &Event) {
        match e {
            Event::Chunk {
                direction,
                data,
                ts,
                ..
            } => {
                self.saw(*ts);
                self.series.bin(*ts).bytes[direction_index(*direction)] += data.len() as u64;
            }
            Event::Gap {
                stream,
                length,
                frame,
                ts,
                ..
            } => {
                let mut m = Mark::new(Kind::Gap, *stream, *ts, "tcp.gap", Some(*frame));
                m.count = *length;
                self.marks.notable(m);
            }
            Event::Finding(f) => self.finding(f),
            Event::End(info) => {
                self.saw(info.first_ts);
                self.saw(info.last_ts); // a close without data still ends the wait of what is unanswered
                let lane = self.lanes.get(info.stream);
                lane.client.clone_from(&info.client);
                lane.server.clone_from(&info.server);
                lane.saw(Some(info.first_ts));
                lane.saw(Some(info.last_ts));
                lane.protocol = lane.protocol.or(info.protocol);
                let closed = if info.reset {
                    Some(Kind::Reset)
                } else if info.fin_c2s || info.fin_s2c {
                    Some(Kind::Close)
                } else {
                    None
                };
                lane.closed = closed.map(Kind::as_str);
                if let Some(kind) = closed {
                    let label = kind.as_str();
                    let m = Mark::new(
                        kind,
                        info.stream,
                        info.last_ts,
                        label,
                        Some(info.last_frame),
                    );
                    self.marks.notable(m);
                }
                self.lanes.end(info.stream);
            }
        }
    }

    /// Whether `stream`'s lane, after its end, can no longer change the report's ranking: no
    /// stall in it and no request waiting for an answer (one may become a stall at the end).
    pub fn settled(&self, stream: u64) -> bool {
        self.lanes
            .peek(stream)
            .is_none_or(|l| l.stalls == 0 && l.waiting == 0)
    }

    fn finding(&mut self, f: &Finding) {
        let Some(ts) = f.ts else { return };
        self.saw(ts);
        self.series.bin(ts).findings[severity_index(f.severity)] += 1;
        if let Some(stream) = f.stream {
            self.lanes.get(stream).findings += 1;
            if f.code != "tcp.gap" {
                // gaps are drawn from the reassembler's Gap, with their length
                self.marks
                    .notable(Mark::new(Kind::Finding, stream, ts, f.code, f.frame));
            }
        }
    }

    fn message(&mut self, m: &Message, stream: u64) {
        let lane = self.lanes.get(stream);
        lane.protocol = Some(m.protocol);
        lane.messages += 1;
        lane.saw(m.ts);
        let Some(ts) = m.ts else { return };
        self.saw(ts);
        if m.kind == "event" {
            self.event_message(m, stream, ts);
            return;
        }
        let mut mark = Mark::new(Kind::Send, stream, ts, m.kind, m.frame);
        let lane = self.lanes.get(stream);
        match role(m) {
            Role::Send(token) => {
                lane.sends += 1;
                self.send(m, stream, token, ts, &mut mark);
            }
            Role::Answer(token, waits) => {
                lane.answers += 1;
                mark.kind = Kind::Answer;
                mark.latency = self.answer(m, stream, token, waits, ts);
            }
            Role::Timed(ns) => {
                lane.answers += 1;
                mark.kind = Kind::Answer;
                let opcode = m.get("request_opcode").and_then(Value::as_str);
                let request = opcode.and_then(intern_opcode).unwrap_or("request");
                let wait = Wait {
                    sent: ts.saturating_sub(ns),
                    sent_frame: u64_field(m, "request_frame"),
                    answered: ts,
                    answer_frame: m.frame,
                    seq: (None, None),
                };
                self.pair(stream, wait, request);
                mark.latency = Some(ns);
            }
            Role::Keepalive => {
                lane.keepalives += 1;
                mark.kind = Kind::Keepalive;
            }
            Role::Other if m.direction == Some(Direction::C2S) => lane.sends += 1,
            Role::Other if m.direction == Some(Direction::S2C) => {
                lane.answers += 1;
                mark.kind = Kind::Answer;
            }
            Role::Other => return, // per-connection summaries: nothing happened at their time
        }
        if m.kind == "error"
            || m.get("status")
                .and_then(Value::as_u64)
                .is_some_and(|s| s >= 400)
        {
            self.series.bin(ts).errors += 1;
        }
        if let Some(status) = m.get("status").and_then(Value::as_u64) {
            if m.protocol == "hercules" && m.kind == "response" {
                *self.statuses.entry(status.min(999) as u16).or_default() += 1;
            }
            mark.first = Some(status as i64);
        }
        if let Some(v) = m.get("value").and_then(Value::as_i64) {
            mark.first = Some(v); // an ACK's value
        }
        self.marks.routine(mark);
    }

    fn send(&mut self, m: &Message, stream: u64, token: u64, ts: i64, mark: &mut Mark) {
        mark.first = m.get("seq_first").and_then(Value::as_i64);
        mark.last = m.get("seq_last").and_then(Value::as_i64);
        if m.protocol == "lumberjack" {
            let received = u64_field(m, "received").unwrap_or(0);
            mark.count = received;
            self.window_sizes[(64 - received.leading_zeros() as usize).min(23)] += 1;
            if u64_field(m, "resends").unwrap_or(0) > 0 {
                let mut r = Mark::new(Kind::Resend, stream, ts, "window", m.frame);
                r.count = u64_field(m, "resends").unwrap_or(0);
                self.marks.notable(r);
            }
        } else if let Some(n) = u64_field(m, "events").or_else(|| u64_field(m, "count")) {
            mark.count = n;
        }
        let key = (stream, token);
        let seq = (mark.first, mark.last);
        match self.halves.get(&key).copied() {
            Some(Half {
                side: Side::Answered,
                ts: answered,
                frame,
                ..
            }) => {
                self.halves.remove(&key);
                let wait = Wait {
                    sent: ts,
                    sent_frame: m.frame,
                    answered,
                    answer_frame: frame,
                    seq,
                };
                self.pair(stream, wait, m.kind);
            }
            Some(Half {
                side: Side::Sent, ..
            }) => {} // the same token again (a resent request): the first copy is waited on
            None => self.wait(key, Side::Sent, ts, m.frame, seq, m.kind),
        }
    }

    /// An answer: the latency when its request is known.
    fn answer(
        &mut self,
        m: &Message,
        stream: u64,
        token: u64,
        waits: bool,
        ts: i64,
    ) -> Option<i64> {
        let key = (stream, token);
        match self.halves.get(&key).copied() {
            Some(Half {
                side: Side::Sent,
                ts: sent,
                frame,
                seq,
                ..
            }) => {
                self.halves.remove(&key);
                let lane = self.lanes.get(stream);
                lane.waiting = lane.waiting.saturating_sub(1);
                let request = if m.protocol == "lumberjack" {
                    "window"
                } else {
                    "request"
                };
                let wait = Wait {
                    sent,
                    sent_frame: frame,
                    answered: ts,
                    answer_frame: m.frame,
                    seq,
                };
                self.pair(stream, wait, request);
                Some(ts.saturating_sub(sent))
            }
            Some(_) => None, // a later ACK of an answered window: the first one is its latency
            None => {
                if waits {
                    self.wait(key, Side::Answered, ts, m.frame, (None, None), m.kind);
                }
                None
            }
        }
    }

    fn wait(
        &mut self,
        key: (u64, u64),
        side: Side,
        ts: i64,
        frame: Option<u64>,
        seq: (Option<i64>, Option<i64>),
        kind: &'static str,
    ) {
        if self.halves.len() < PAIRS {
            if matches!(side, Side::Sent) {
                self.lanes.get(key.0).waiting += 1;
            }
            self.halves.insert(
                key,
                Half {
                    side,
                    ts,
                    frame,
                    seq,
                    kind,
                },
            );
        } else {
            self.unpaired += 1;
        }
    }

    fn pair(&mut self, stream: u64, w: Wait, request: &'static str) {
        let latency = w.answered.saturating_sub(w.sent);
        if latency < 0 {
            return; // skewed clocks of a merged capture: no latency to tell
        }
        let b = bucket(latency);
        let bin = self.series.bin(w.answered);
        let hist = bin
            .latency
            .get_or_insert_with(|| Box::new([0; LAT_BUCKETS]));
        hist[b] = hist[b].saturating_add(1);
        let by = self
            .latency_by
            .entry(request)
            .or_insert_with(|| Box::new([0; LAT_BUCKETS]));
        by[b] = by[b].saturating_add(1);
        if latency > self.stall_ns {
            self.stall(Stall {
                stream,
                start: w.sent,
                end: Some(w.answered),
                until: w.answered,
                sent_frame: w.sent_frame,
                answer_frame: w.answer_frame,
                seq: w.seq,
                request,
            });
        }
    }

    fn stall(&mut self, s: Stall) {
        if self.stalls.len() < STALLS {
            self.lanes.get(s.stream).stalls += 1;
            self.stalls.push(s);
        } else {
            self.stalls_dropped += 1;
        }
    }

    fn event_message(&mut self, m: &Message, stream: u64, ts: i64) {
        let lane = self.lanes.get(stream);
        lane.events += 1;
        let bin = self.series.bin(ts);
        bin.events += 1;
        let seq = m
            .get("seq")
            .or_else(|| m.get("sequence"))
            .and_then(Value::as_i64);
        if m.acked == Some(false) {
            lane.unacked += 1; // on this connection
        }
        // the verdict's classes, once per distinct event: at its first copy (the others name it)
        let first_copy = m.get("resend_of").is_none_or(Value::is_null);
        match m.delivery {
            Some(Delivery::NeverAcknowledged) if first_copy => {
                bin.unacked += 1;
                let mut mark = Mark::new(Kind::Unacked, stream, ts, "event", m.frame);
                (mark.first, mark.last) = (seq, seq);
                self.marks.unacked(mark);
            }
            Some(Delivery::RecoveredByResend) if first_copy => {
                bin.recovered += 1;
                let mut mark = Mark::new(Kind::Recovered, stream, ts, "event", m.frame);
                (mark.first, mark.last) = (seq, seq);
                self.marks.unacked(mark);
            }
            _ => {}
        }
        if let Some(first) = m.get("resend_of").and_then(Value::as_object) {
            let mut mark = Mark::new(Kind::Resend, stream, ts, "event", m.frame);
            (mark.first, mark.last) = (seq, seq);
            mark.of_frame = first.get("frame").and_then(Value::as_u64);
            self.marks.unacked(mark);
        }
    }

    /// Requests never answered, as stalls up to the capture's end when they waited long enough.
    fn unanswered(&mut self) {
        let Some(end) = self.last_ts else { return };
        let mut waiting: Vec<((u64, u64), Half)> = self
            .halves
            .iter()
            .filter(|(_, h)| {
                matches!(h.side, Side::Sent) && end.saturating_sub(h.ts) > self.stall_ns
            })
            .map(|(k, h)| (*k, *h))
            .collect();
        waiting.sort_by_key(|((stream, _), h)| (*stream, h.ts));
        for ((stream, _), h) in waiting {
            // a closed connection waits no longer than its last packet; an open one, to the end
            let lane = self.lanes.peek(stream);
            let last = lane.filter(|l| l.closed.is_some()).and_then(|l| l.last_ts);
            self.stall(Stall {
                stream,
                start: h.ts,
                end: None,
                until: last.unwrap_or(end).max(h.ts),
                sent_frame: h.frame,
                answer_frame: None,
                seq: h.seq,
                request: h.kind,
            });
        }
    }

    /// The aggregation as one JSON object (docs/architecture.md, Report): the `top` worst lanes
    /// and the others folded, marks as columns, each stall on its own window.
    pub fn json(&mut self, top: usize) -> String {
        self.unanswered();
        let (lanes, folded) = self.lanes.json(top);
        let series = self.series_json();
        let marks = marks_json(self.marks.routine.iter().chain(&self.marks.notable));
        let stalls = self.stalls_json();
        let latency_by: Map<String, Value> = self
            .latency_by
            .iter()
            .map(|(k, h)| ((*k).to_owned(), json!(h.to_vec())))
            .collect();
        json!({
            "bin_ns": self.series.width,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "series": series,
            "lanes": lanes,
            "folded": folded,
            "marks": marks,
            "mark_stride": self.marks.stride,
            "notable_dropped": self.marks.notable_dropped,
            "stalls": stalls,
            "stalls_dropped": self.stalls_dropped,
            "unpaired": self.unpaired,
            "stall_ns": self.stall_ns,
            "latency_by": latency_by,
            "latency_buckets": [LAT_FIRST_OCTAVE, LAT_PER_OCTAVE, LAT_BUCKETS],
            "window_sizes": self.window_sizes.to_vec(),
            "gate_statuses": self.statuses.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        })
        .to_string()
    }

    /// Columns, one entry per non-empty bin; latency as sparse (bin index, bucket, count) rows.
    fn series_json(&self) -> Value {
        let bins = &self.series.bins;
        let col = |f: &dyn Fn(&Bin) -> u64| -> Vec<u64> { bins.values().map(f).collect() };
        let mut latency = Vec::new();
        for (i, b) in bins.values().enumerate() {
            for (bucket, &n) in b.latency.iter().flat_map(|h| h.iter().enumerate()) {
                if n > 0 {
                    latency.push(json!([i, bucket, n]));
                }
            }
        }
        json!({
            "bin": bins.keys().collect::<Vec<_>>(),
            "events": col(&|b| b.events),
            "unacked": col(&|b| b.unacked),
            "recovered": col(&|b| b.recovered),
            "bytes_c2s": col(&|b| b.bytes[0]),
            "bytes_s2c": col(&|b| b.bytes[1]),
            "info": col(&|b| b.findings[0]),
            "warning": col(&|b| b.findings[1]),
            "error": col(&|b| b.findings[2]),
            "errors": col(&|b| b.errors),
            "latency": latency,
        })
    }

    /// Each stall on its own window (in time order per connection).
    fn stalls_json(&mut self) -> Vec<Value> {
        self.stalls.sort_by_key(|s| (s.stream, s.start, s.until));
        self.stalls
            .iter()
            .map(|s| {
                json!({"stream": s.stream, "start": s.start, "end": s.end, "until": s.until,
                       "sent_frame": s.sent_frame, "answer_frame": s.answer_frame,
                       "seq_first": s.seq.0, "seq_last": s.seq.1, "request": s.request})
            })
            .collect()
    }
}

fn marks_json<'a>(marks: impl Iterator<Item = &'a Mark>) -> Value {
    let marks: Vec<&Mark> = marks.collect();
    json!({
        "ts": marks.iter().map(|m| m.ts).collect::<Vec<_>>(),
        "stream": marks.iter().map(|m| m.stream).collect::<Vec<_>>(),
        "kind": marks.iter().map(|m| m.kind.as_str()).collect::<Vec<_>>(),
        "label": marks.iter().map(|m| m.label).collect::<Vec<_>>(),
        "frame": marks.iter().map(|m| m.frame).collect::<Vec<_>>(),
        "count": marks.iter().map(|m| m.count).collect::<Vec<_>>(),
        "first": marks.iter().map(|m| m.first).collect::<Vec<_>>(),
        "last": marks.iter().map(|m| m.last).collect::<Vec<_>>(),
        "latency": marks.iter().map(|m| m.latency).collect::<Vec<_>>(),
        "of_frame": marks.iter().map(|m| m.of_frame).collect::<Vec<_>>(),
    })
}

/// CQL opcodes as the static names the latency histograms are keyed by.
fn intern_opcode(name: &str) -> Option<&'static str> {
    const OPCODES: &[&str] = &[
        "startup",
        "options",
        "query",
        "prepare",
        "execute",
        "register",
        "batch",
        "auth_response",
    ];
    OPCODES
        .iter()
        .find(|o| o.eq_ignore_ascii_case(name))
        .copied()
}

#[cfg(test)]
mod tests;
