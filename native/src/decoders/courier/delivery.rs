//! Delivery truth for one connection: which events each ACKN acknowledged, and which never were.
//!
//! ACKN semantics (reference/courier.md §3): `sequence` = events of that payload accepted so
//! far; an unknown nonce is ignored, a lower or equal sequence has no effect, a sequence at or
//! above the count completes the payload. Both servers acknowledge in payload order and repeat the
//! same sequence every 5 s while their pipeline is blocked. Events are held back until
//! acknowledged (or the connection closes) so each is emitted once with its final `acked`;
//! `max_pending` bounds what is held.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::decoders::CloseRoom;
use crate::held::spill::SpillStore;
use crate::model::{Direction, Held, Message, Record, Value};

use super::findings::{finding, At, PROTOCOL};

/// One JDAT/EVNT sent on this connection.
#[derive(Debug)]
pub struct Payload {
    pub nonce: String,
    pub kind: &'static str,
    pub at: At,
    /// None while an EVNT is still streaming.
    pub count: Option<u64>,
    pub acked: u64,
    /// `acked` as other connections see it (a resend there quotes it).
    pub acked_live: Arc<AtomicU64>,
    /// Highest ACKN sequence seen, possibly before `count` is known.
    seen_seq: u64,
    seen_at: At,
    ack_frames: Vec<Option<u64>>,
    /// Events not yet emitted; the first `released` of the payload are out.
    events: VecDeque<Held>,
    released: u64,
    pub resend: bool,
    over_count: bool,
    closed: bool,
}

impl Payload {
    pub fn complete(&self) -> bool {
        self.count.is_some_and(|c| self.acked >= c)
    }

    fn total(&self) -> u64 {
        self.released + self.events.len() as u64
    }
}

/// Consecutive ACKNs repeating one sequence for one nonce (back-pressure or partial progress).
#[derive(Debug)]
struct AckRun {
    seq: i64,
    count: u64,
    first: At,
    last: At,
    unknown_reported: bool,
}

impl Default for AckRun {
    fn default() -> Self {
        AckRun {
            seq: -1,
            count: 0,
            first: At::default(),
            last: At::default(),
            unknown_reported: false,
        }
    }
}

impl AckRun {
    fn push(&mut self, seq: u32, at: At, nonce: &str, out: &mut Vec<Record>) {
        if i64::from(seq) == self.seq {
            self.count += 1;
            self.last = at;
            return;
        }
        self.flush(nonce, out);
        (self.seq, self.count, self.first, self.last) = (i64::from(seq), 1, at, at);
    }

    fn flush(&mut self, nonce: &str, out: &mut Vec<Record>) {
        let count = std::mem::take(&mut self.count);
        if count < 2 {
            return;
        }
        let interval = match (self.first.ts, self.last.ts) {
            (Some(t0), Some(t1)) => {
                // capture times are any i64 (pcapng offsets): their difference is not
                let span = (i128::from(t1) - i128::from(t0)) as f64;
                Some(round3(span / (count - 1) as f64 / 1e9))
            }
            _ => None,
        };
        let every = interval.map_or(String::new(), |i| format!(", every {} s", py_float(i)));
        let why = if self.seq == 0 {
            "back-pressure: the server's pipeline is blocked"
        } else {
            "partial progress repeated"
        };
        let msg = format!(
            "ACKN sequence {} for nonce {nonce} sent {count} times{every} ({why})",
            self.seq
        );
        let f = finding(
            "courier.ack-repeated",
            msg,
            Some(Direction::S2C),
            self.first,
        )
        .field("nonce", nonce)
        .field("sequence", self.seq)
        .field("count", count)
        .field("interval_s", interval.map_or(Value::Null, Value::from))
        .field("first_frame", self.first.frame)
        .field("last_frame", self.last.frame);
        out.push(f.into());
    }
}

/// Python's `round(x, 3)`: correctly rounded through the decimal text.
fn round3(x: f64) -> f64 {
    format!("{x:.3}").parse().unwrap_or(x)
}

/// Python's `str(float)` for the values met here (|x| < 1e16: no exponent form to mimic).
fn py_float(x: f64) -> String {
    Value::from(x).to_string()
}

/// Payloads and acknowledgements of one connection, in wire order.
#[derive(Debug)]
pub struct Delivery {
    /// The latest payload per nonce (index into `history`).
    by_nonce: HashMap<String, usize>,
    /// Incomplete payloads in send order.
    order: BTreeSet<usize>,
    runs: Vec<(String, AckRun)>,
    run_index: HashMap<String, usize>,
    held: u64,
    max_pending: u64,
    overflowed: bool,
    /// Every payload ever sent here, for the summary.
    pub history: Vec<Payload>,
    /// The payloads `close` has still to give (those incomplete when it began).
    closing: Option<VecDeque<usize>>,
}

impl Delivery {
    pub fn new(max_pending: usize) -> Self {
        Delivery {
            by_nonce: HashMap::new(),
            order: BTreeSet::new(),
            runs: Vec::new(),
            run_index: HashMap::new(),
            held: 0,
            max_pending: max_pending as u64,
            overflowed: false,
            history: Vec::new(),
            closing: None,
        }
    }

    /// Payloads sent and not fully acknowledged (Go receivers drop a PING then).
    pub fn pending(&self) -> bool {
        !self.order.is_empty()
    }

    /// A payload's nonce was read; an earlier one with the same nonce here is superseded
    /// (resend). Returns the new payload's serial.
    pub fn open(
        &mut self,
        nonce: &str,
        kind: &'static str,
        at: At,
        store: &mut SpillStore,
        out: &mut Vec<Record>,
    ) -> usize {
        let old = self.by_nonce.get(nonce).copied();
        if let Some(old) = old {
            self.finish(old, Some(false), true, store, out);
        }
        let serial = self.history.len();
        self.history.push(Payload {
            nonce: nonce.to_owned(),
            kind,
            at,
            count: None,
            acked: 0,
            acked_live: Arc::default(),
            seen_seq: 0,
            seen_at: At::default(),
            ack_frames: Vec::new(),
            events: VecDeque::new(),
            released: 0,
            resend: old.is_some(),
            over_count: false,
            closed: false,
        });
        self.by_nonce.insert(nonce.to_owned(), serial);
        self.order.insert(serial);
        if let Some(&i) = self.run_index.get(nonce) {
            let (n, run) = &mut self.runs[i];
            run.flush(n, out);
            run.seq = -1;
        }
        serial
    }

    /// The payload's events are known: hold them and apply any ACKN that came first (EVNT).
    pub fn fill(
        &mut self,
        serial: usize,
        events: Vec<Message>,
        store: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let p = &mut self.history[serial];
        p.count = Some(events.len() as u64);
        self.held += events.len() as u64;
        p.events = events.iter().map(|m| store.hold(m)).collect();
        if p.seen_seq > 0 {
            let at = p.seen_at;
            self.apply(serial, at, store, out);
        }
        if self.history[serial].complete() {
            self.finish(serial, Some(true), false, store, out);
        }
        self.bound(store, out);
    }

    /// `acks_lost`: server→client bytes are missing before this ACKN (earlier ACKNs may be in them).
    pub fn ack(
        &mut self,
        nonce: &str,
        seq: u32,
        at: At,
        acks_lost: bool,
        store: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let i = match self.run_index.get(nonce) {
            Some(&i) => i,
            None => {
                self.runs.push((nonce.to_owned(), AckRun::default()));
                self.run_index.insert(nonce.to_owned(), self.runs.len() - 1);
                self.runs.len() - 1
            }
        };
        let run = &mut self.runs[i].1;
        run.push(seq, at, nonce, out);
        let Some(&serial) = self.by_nonce.get(nonce) else {
            if !run.unknown_reported {
                run.unknown_reported = true;
                let msg = format!(
                    "ACKN for nonce {nonce} matches no payload seen on this connection \
                     (a late duplicate, or a payload sent before the capture began)"
                );
                let f = finding("courier.unknown-nonce", msg, Some(Direction::S2C), at)
                    .field("nonce", nonce)
                    .field("sequence", seq);
                out.push(f.into());
            }
            return;
        };
        let seq = u64::from(seq);
        let p = &self.history[serial];
        if seq < p.seen_seq {
            let msg = format!(
                "ACKN sequence for nonce {nonce} went back from {} to {seq}",
                p.seen_seq
            );
            let f = finding("courier.ack-regressed", msg, Some(Direction::S2C), at)
                .field("nonce", nonce)
                .field("sequence", seq)
                .field("previous", p.seen_seq);
            out.push(f.into());
            return;
        }
        if seq == p.seen_seq || p.closed {
            return;
        }
        if let Some(&first) = self.order.first() {
            if first != serial && self.order.contains(&serial) {
                let earlier = &self.history[first];
                // the earlier payload's ACKN may be in a server→client capture gap
                let (code, why) = if acks_lost {
                    (
                        "courier.ack-after-gap",
                        "its ACKN may be in a server→client capture gap",
                    )
                } else {
                    (
                        "courier.ack-out-of-order",
                        "both servers acknowledge in order",
                    )
                };
                let msg = format!(
                    "ACKN advances payload {nonce} while the earlier payload {} is not fully \
                     acknowledged ({why})",
                    earlier.nonce
                );
                let f = finding(code, msg, Some(Direction::S2C), at)
                    .field("nonce", nonce)
                    .field("earlier_nonce", earlier.nonce.as_str())
                    .field("earlier_frame", earlier.at.frame);
                out.push(f.into());
            }
        }
        let p = &mut self.history[serial];
        (p.seen_seq, p.seen_at) = (seq, at);
        if p.count.is_some() {
            self.apply(serial, at, store, out);
            if self.history[serial].complete() {
                self.finish(serial, Some(true), false, store, out);
            }
        }
    }

    fn apply(&mut self, serial: usize, at: At, store: &mut SpillStore, out: &mut Vec<Record>) {
        let p = &mut self.history[serial];
        let count = p.count.unwrap_or(0);
        let target = p.seen_seq;
        if target > count && !p.over_count {
            p.over_count = true;
            let msg = format!(
                "ACKN sequence {target} for {} exceeds its {count} events: treated as complete",
                p.nonce
            );
            let f = finding("courier.ack-over-count", msg, Some(Direction::S2C), at)
                .field("nonce", p.nonce.as_str())
                .field("sequence", target)
                .field("events", count);
            out.push(f.into());
        }
        let target = target.min(count);
        if target > p.acked {
            p.acked = target;
            p.acked_live.store(target, Ordering::Relaxed);
            p.ack_frames.push(at.frame);
            let frame = at.frame.map_or(Value::Null, Value::from);
            self.release(
                serial,
                target,
                Some(true),
                Some(("ack_frame", frame)),
                store,
                out,
            );
        }
    }

    fn release(
        &mut self,
        serial: usize,
        upto: u64,
        acked: Option<bool>,
        extra: Option<(&'static str, Value)>,
        store: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let p = &mut self.history[serial];
        if upto <= p.released {
            return;
        }
        let n = (upto - p.released).min(p.events.len() as u64);
        for held in p.events.drain(..n as usize) {
            let Some(mut ev) = store.take(held) else {
                continue; // lost with the spill file: store.finding() says so
            };
            ev.acked = acked;
            match &extra {
                // the events' fifth field, set where it stands (no search per event)
                Some(("ack_frame", v)) if ev.fields.get(4).is_some_and(|f| f.0 == "ack_frame") => {
                    ev.fields[4].1 = v.clone().into();
                }
                Some((k, v)) => ev.set(k, v.clone()),
                None => {}
            }
            out.push(ev.into());
        }
        p.released += n;
        self.held -= n;
        if p.events.is_empty() {
            // `history` keeps every payload for the summary: not their spent event buffers.
            p.events = VecDeque::new();
        }
    }

    /// Emit the events of a payload still held (with acked = `rest`) and its delivery record.
    fn finish(
        &mut self,
        serial: usize,
        rest: Option<bool>,
        superseded: bool,
        store: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        if self.history[serial].closed {
            return;
        }
        self.history[serial].closed = true;
        self.order.remove(&serial);
        let total = self.history[serial].total();
        let extra = superseded.then(|| ("resent", Value::Bool(true)));
        self.release(serial, total, rest, extra, store, out);
        let p = &mut self.history[serial];
        let count = p.count.unwrap_or(0);
        let mut m = Message::new(PROTOCOL, "delivery");
        m.direction = Some(Direction::C2S);
        (m.offset, m.frame, m.ts) = (p.at.offset, p.at.frame, p.at.ts);
        let frames: Vec<Value> = p
            .ack_frames
            .iter()
            .map(|f| f.map_or(Value::Null, Value::from))
            .collect();
        m.fields = vec![
            ("nonce", p.nonce.as_str().into()),
            ("payload", p.kind.into()),
            ("events", count.into()),
            ("acked_events", p.acked.into()),
            ("unacked_events", (count - p.acked.min(count)).into()),
            ("ack_frames", Value::Array(frames)),
            ("complete", p.complete().into()),
            ("resend", p.resend.into()),
            ("superseded", superseded.into()),
            ("acks_lost", rest.is_none().into()),
        ]
        .into();
        out.push(m.into());
    }

    /// Emit the oldest held events with acked = None when more than `max_pending` wait.
    fn bound(&mut self, store: &mut SpillStore, out: &mut Vec<Record>) {
        if self.held <= self.max_pending {
            return; // the usual case, without walking the open payloads
        }
        let serials: Vec<usize> = self.order.iter().copied().collect();
        for serial in serials {
            if self.held <= self.max_pending {
                break;
            }
            let p = &self.history[serial];
            let upto = p.total().min(p.released + self.held - self.max_pending);
            self.release(serial, upto, None, None, store, out);
            if !self.overflowed {
                self.overflowed = true;
                let msg = format!(
                    "over {} events wait for an ACKN; the oldest go out with acked=null",
                    self.max_pending
                );
                let at = self.history[serial].at;
                let f = finding("courier.pending-overflow", msg, Some(Direction::C2S), at)
                    .field("limit", self.max_pending);
                out.push(f.into());
            }
        }
    }

    /// End of connection: unacknowledged events go out with acked = false (None when ACKNs may
    /// be lost), payload by payload in send order while there is room; whether payloads are
    /// left (then it is called again).
    pub fn close(
        &mut self,
        acks_lost: bool,
        store: &mut SpillStore,
        out: &mut Vec<Record>,
    ) -> bool {
        let room = CloseRoom::new(out, store);
        let mut left = match self.closing.take() {
            Some(left) => left,
            None => {
                for (nonce, run) in &mut self.runs {
                    run.flush(nonce, out);
                }
                self.order.iter().copied().collect()
            }
        };
        while room.left(out, store) {
            let Some(serial) = left.pop_front() else {
                return false;
            };
            let p = &self.history[serial];
            let count = p.count.unwrap_or(0);
            if count > p.acked {
                let missing = count - p.acked;
                let cause = if acks_lost {
                    " (the capture lost server bytes, so an ACKN may be missing)"
                } else {
                    ""
                };
                let msg = format!(
                    "payload {}: {missing} of {count} events never acknowledged by the close{cause}",
                    p.nonce
                );
                let f = finding("courier.unacked-at-close", msg, Some(Direction::C2S), p.at)
                    .field("nonce", p.nonce.as_str())
                    .field("events", count)
                    .field("unacked", missing);
                out.push(f.into());
            }
            self.finish(
                serial,
                if acks_lost { None } else { Some(false) },
                false,
                store,
                out,
            );
        }
        let more = !left.is_empty();
        self.closing = Some(left);
        more
    }
}
