//! Did every log event of a capture reach the server? The verdict across connections
//! (docs/records.md, "Delivery").
//!
//! Per-connection ACK states overstate loss when a client resends: Beats and Log Courier resend an
//! unacknowledged batch on a new connection, so an event unacknowledged on the first connection may
//! be delivered by its copy — or delivered twice, when the server had processed the first copy but
//! its ACK was lost. Lumberjack events carry `resend_of` (the first copy) and Courier deliveries
//! their payload nonce; from those the trackers count distinct events and sort them into delivered,
//! recovered by a resend, delivered twice, never acknowledged, and unknown (no ACK in the capture
//! because the connection was still open when it ended). Memory holds keys of unacknowledged events
//! and of resends only (at most `KEYS_LIMIT`; beyond it the counts are lower bounds), never events.
//! Hercules events carry their own identity, the UUID, and a client retries a batch with the same
//! UUIDs: the Gate's answer (2xx or not) to each request holding a copy decides. Any UUID may be sent
//! again later, so every distinct UUID of Gate traffic is remembered (24 bytes with its counters,
//! at most `UUIDS_LIMIT` of them; past it, events are judged by their own answer alone).

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map};

use crate::held::pack::{Parts, Scalar};
use crate::model::{Delivery, Direction, EventId, Finding, Message, Record, Severity, Value};

/// Unacknowledged events and resends remembered; beyond, counts are lower bounds. 7/8 of 2^21, the
/// most a table of 2^21 slots holds before it doubles (~52 MB of Lumberjack keys).
pub const KEYS_LIMIT: usize = 1_835_008;
/// Places of never-acknowledged events listed.
const FIRST: usize = 5;

/// Where an event is: (stream, frame, seq). None sorts last, as in the Python engine.
type Place = (Option<u64>, Option<u64>, Option<i64>);

/// By stream, None last; a stable sort keeps the order in which each stream decoded its events (not
/// their frames: a packet written late in the file does not make its events later).
fn by_stream(stream: Option<u64>) -> impl Ord {
    (stream.is_none(), stream.unwrap_or(0))
}

fn order(p: &Place) -> impl Ord {
    (
        (p.0.is_none(), p.0.unwrap_or(0)),
        (p.1.is_none(), p.1.unwrap_or(0)),
        (p.2.is_none(), p.2.unwrap_or(0)),
    )
}

/// Python's `str()` of an optional integer, for sentences.
fn text(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "None".to_owned(), |v| v.to_string())
}

/// An event's place in 16 bytes (a `Place` takes 48): (stream, seq, frame), None as the type's
/// MAX, which sorts last as None does. Lumberjack seqs are u32 on the wire; None when a stream id
/// does not fit (then the counts are lower bounds).
type Key = (u32, u32, u64);

fn key(p: Place) -> Option<Key> {
    let stream = match p.0 {
        None => u32::MAX,
        Some(s) => u32::try_from(s).ok().filter(|&s| s != u32::MAX)?,
    };
    let seq = p.2.and_then(|q| u32::try_from(q).ok()).unwrap_or(u32::MAX);
    Some((stream, seq, p.1.unwrap_or(u64::MAX)))
}

fn place(k: &Key) -> Place {
    (
        (k.0 != u32::MAX).then_some(u64::from(k.0)),
        (k.2 != u64::MAX).then_some(k.2),
        (k.1 != u32::MAX).then_some(i64::from(k.1)),
    )
}

type Set<T> = HashSet<T, foldhash::fast::RandomState>;

/// First copies not acknowledged, in decoding order, as runs: consecutive events of one stream and
/// frame with consecutive seqs and the same state (the events of a C frame are one run). 24 bytes
/// a run: a stalled pipeline's capture has millions of such events, and a table of 24-byte keys
/// took 52 MB for 1M of them.
#[derive(Debug, Clone, Copy)]
struct Run {
    stream: u32,
    seq: u32,
    frame: u64,
    len: u32,
    /// Refused or lost (false) or unknown (None).
    acked: Option<bool>,
}

impl Run {
    /// Takes the event `k` in state `acked` when it continues this run.
    fn extend(&mut self, k: &Key, acked: Option<bool>) -> bool {
        let next = self.seq.checked_add(self.len).filter(|&n| n != u32::MAX);
        let fits = (self.stream, next, self.frame, self.acked) == (k.0, Some(k.1), k.2, acked);
        if fits {
            self.len += 1; // below u32::MAX: seq + len is
        }
        fits
    }

    fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        (0..self.len).map(|i| (self.stream, self.seq.wrapping_add(i), self.frame))
    }
}

/// The first `FIRST` never-acknowledged events by (stream, rank), from events seen in rank order.
#[derive(Debug, Default)]
struct Earliest(Vec<(u32, u64, Key)>);

impl Earliest {
    /// Offers `n` events of a run, keys from `k` on with ranks from `rank` on.
    fn offer(&mut self, run: &Run, from: u32, rank: u64, n: u32) {
        for i in 0..n.min(FIRST as u32) {
            let k = (
                run.stream,
                run.seq.wrapping_add(from).wrapping_add(i),
                run.frame,
            );
            let entry = (run.stream, rank + u64::from(i), k);
            if self.0.len() == FIRST && self.0.last().is_some_and(|last| *last <= entry) {
                return; // later events of this run rank later still
            }
            let at = self.0.partition_point(|e| *e < entry);
            self.0.insert(at, entry);
            self.0.truncate(FIRST);
        }
    }
}

#[derive(Debug, Default)]
struct Lumberjack {
    events: u64,
    resends: u64,
    open: Vec<Run>,
    /// Streams that ended without a close: their unacknowledged events are unknown.
    unclosed: Set<u32>,
    resent_ok: Set<Key>,
    resent_unknown: Set<Key>,
    resends_in: HashMap<u64, Vec<Key>>,
    resends_waiting: usize,
    capped: bool,
    /// Client host of each connection (at most `KEYS_LIMIT`), and per host the latest connection
    /// whose client bytes the capture missed some of: a later connection from the same host with
    /// such a gap may have carried a resend the capture cannot show (`hidden`).
    hosts: HashMap<u32, u64>,
    missed: HashMap<u64, u32>,
    /// `open` sorted by place, for `first_state` (built when asked, again when `open` changed).
    index: Vec<((u32, u64, u32), u32, usize)>,
    indexed: (usize, u32),
}

/// The fields of a Lumberjack event record the verdict reads (`first_place`, `Lumberjack::add`,
/// by these names only), with its frame, time and `acked`: all that is read back of an event lent
/// to wait for its fate (`SpillStore::lend`).
pub const LUMBERJACK_FACTS: [&str; 2] = [SEQ, RESEND_OF];
const SEQ: &str = "seq";
const RESEND_OF: &str = "resend_of";

/// Where an event was first sent: its own place, or the first copy a resend names.
fn first_place(stream: u64, m: &Message) -> (Place, bool) {
    match m.get(RESEND_OF).filter(|v| !v.is_null()) {
        Some(first) => (
            (
                first.get("stream").and_then(Value::as_u64),
                first.get("frame").and_then(Value::as_u64),
                first.get("seq").and_then(Value::as_i64),
            ),
            true,
        ),
        None => (
            (Some(stream), m.frame, m.get(SEQ).and_then(Value::as_i64)),
            false,
        ),
    }
}

/// The event id of the event first sent at `p` (docs/records.md, "Delivery").
fn place_id(p: Place) -> EventId {
    EventId::First {
        stream: p.0.unwrap_or(EventId::NONE),
        frame: p.1.unwrap_or(EventId::NONE),
        // (a wire seq is 32 bits: a negative one was never sent)
        seq: p
            .2
            .and_then(|q| u64::try_from(q).ok())
            .unwrap_or(EventId::NONE),
    }
}

/// What a copy's own ACK state says when the verdict could not follow its event.
fn alone(acked: Option<bool>) -> Delivery {
    match acked {
        Some(true) => Delivery::Delivered,
        Some(false) => Delivery::NeverAcknowledged,
        None => Delivery::Unknown,
    }
}

impl Lumberjack {
    fn add(&mut self, stream: u64, m: &Message) {
        self.events += 1;
        let resend_of = m.get(RESEND_OF).filter(|v| !v.is_null());
        if m.acked == Some(true) && resend_of.is_none() {
            return;
        }
        if let Some(first) = resend_of {
            self.resends += 1;
            let k = key((
                first.get("stream").and_then(Value::as_u64),
                first.get("frame").and_then(Value::as_u64),
                first.get("seq").and_then(Value::as_i64),
            ));
            let Some(k) = k.filter(|_| {
                self.resent_ok.len() + self.resent_unknown.len() + self.resends_waiting < KEYS_LIMIT
            }) else {
                self.capped = true;
                return;
            };
            if m.acked == Some(true) {
                self.resent_ok.insert(k);
            } else if m.acked.is_none() {
                self.resent_unknown.insert(k);
            } else {
                self.resends_in.entry(stream).or_default().push(k);
                self.resends_waiting += 1;
            }
            return;
        }
        let Some(k) = key((Some(stream), m.frame, m.get(SEQ).and_then(Value::as_i64))) else {
            self.capped = true;
            return;
        };
        if self.open.last_mut().is_some_and(|r| r.extend(&k, m.acked)) {
            return;
        }
        if self.open.len() >= KEYS_LIMIT {
            self.capped = true;
            return;
        }
        self.open.push(Run {
            stream: k.0,
            seq: k.1,
            frame: k.2,
            len: 1,
            acked: m.acked,
        });
    }

    fn stream_ended(&mut self, stream: u64, closed: bool) {
        let resent = self.resends_in.remove(&stream).unwrap_or_default();
        self.resends_waiting -= resent.len();
        if !closed {
            self.unclosed
                .insert(u32::try_from(stream).unwrap_or(u32::MAX));
            self.resent_unknown.extend(resent);
        }
    }

    /// The id of an event record and, when it is already final, its fate: a first copy that
    /// was acknowledged is delivered whatever comes after it; every other copy waits (`fate`).
    fn judge(&self, stream: u64, m: &Message) -> (EventId, Option<Delivery>) {
        let (place, resend) = first_place(stream, m);
        let now = (!resend && m.acked == Some(true)).then_some(Delivery::Delivered);
        (place_id(place), now)
    }

    /// The fate of a copy that waited, as the verdict stands: the classes `result` counts.
    fn fate(&mut self, stream: u64, m: &Message) -> Delivery {
        let (place, resend) = first_place(stream, m);
        self.fate_at(place, resend, m.acked)
    }

    /// `fate` and `judge`'s id at once, from one reading of where the event was first sent.
    fn fate_and_id(&mut self, stream: u64, m: &Message) -> (Delivery, EventId) {
        let (place, resend) = first_place(stream, m);
        (self.fate_at(place, resend, m.acked), place_id(place))
    }

    /// `fate` of a copy of the event first sent at `place` (`resend`: this copy is not that one).
    fn fate_at(&mut self, place: Place, resend: bool, acked: Option<bool>) -> Delivery {
        let Some(k) = key(place) else {
            return alone(acked);
        };
        let first = if resend {
            self.first_state(&k)
        } else if acked == Some(true) {
            None
        } else {
            // a first copy not acknowledged is one of `open` (unless the verdict was full)
            Some(self.state_of(k.0, acked))
        };
        match first {
            // the first copy was not acknowledged: the event's fate is its resends'
            Some(_) if acked == Some(true) => Delivery::Delivered,
            Some(_) if self.resent_ok.contains(&k) => Delivery::RecoveredByResend,
            Some(None) => Delivery::Unknown,
            Some(Some(_)) if self.resent_unknown.contains(&k) => Delivery::Unknown,
            Some(Some(_)) => Delivery::NeverAcknowledged,
            // the first copy was acknowledged
            None if resend && (acked == Some(true) || self.resent_ok.contains(&k)) => {
                Delivery::DeliveredTwice
            }
            None => Delivery::Delivered,
        }
    }

    /// Whether a resend of the events of `stream` may lie in a capture gap: a later connection
    /// from its client's host lost client bytes in the capture. Their fate is then unknown, as
    /// that of events whose ACK may be in a gap.
    fn hidden(&self, stream: u32) -> bool {
        self.hosts
            .get(&stream)
            .and_then(|host| self.missed.get(host))
            .is_some_and(|&later| later > stream)
    }

    /// The ACK state the verdict gives a connection's unacknowledged events: unknown (None) when
    /// the connection did not end in the capture or a resend of them may be hidden in a gap.
    fn state_of(&self, stream: u32, acked: Option<bool>) -> Option<bool> {
        if self.unclosed.contains(&stream) || self.hidden(stream) {
            None
        } else {
            acked
        }
    }

    /// The ACK state of the unacknowledged first copy at `k` (None inside: unknown), or None
    /// when `k` is not one (it was acknowledged).
    fn first_state(&mut self, k: &Key) -> Option<Option<bool>> {
        let now = (self.open.len(), self.open.last().map_or(0, |r| r.len));
        if self.indexed != now {
            self.index = (0..self.open.len())
                .map(|i| {
                    let r = &self.open[i];
                    ((r.stream, r.frame, r.seq), r.len, i)
                })
                .collect();
            self.index.sort_unstable();
            self.indexed = now;
        }
        // the last run of k's stream and frame starting at or before k's seq, if it reaches k
        let at_k = (k.0, k.2, k.1);
        let at = self.index.partition_point(|(start, _, _)| *start <= at_k);
        let (start, len, i) = *self.index[..at].last()?;
        let inside = (start.0, start.1) == (k.0, k.2) && k.1.wrapping_sub(start.2) < len;
        let run = &self.open[i];
        inside.then_some(self.state_of(run.stream, run.acked))
    }

    fn result(&self, capture: &str) -> Value {
        let (ok, pending) = (&self.resent_ok, &self.resent_unknown);
        let (mut never, mut unknown, mut recovered) = (0u64, 0u64, 0u64);
        let mut earliest = Earliest::default();
        let mut found: Set<Key> = Set::default(); // resent and acknowledged keys among the first copies
        let mut rank = 0u64;
        for run in &self.open {
            let acked = self.state_of(run.stream, run.acked);
            if ok.is_empty() && pending.is_empty() {
                match acked {
                    None => unknown += u64::from(run.len),
                    Some(_) => {
                        never += u64::from(run.len);
                        earliest.offer(run, 0, rank, run.len);
                    }
                }
            } else {
                for (i, k) in (0u32..).zip(run.keys()) {
                    if ok.contains(&k) {
                        recovered += 1;
                        found.insert(k);
                    } else if acked.is_none() || pending.contains(&k) {
                        unknown += 1;
                    } else {
                        never += 1;
                        earliest.offer(run, i, rank + u64::from(i), 1);
                    }
                }
            }
            rank += u64::from(run.len);
        }
        let distinct = self.events - self.resends;
        let at: Vec<Value> = earliest
            .0
            .iter()
            .map(|(_, _, k)| {
                let (s, f, q) = place(k);
                json!({"capture": capture, "stream": s, "frame": f, "seq": q})
            })
            .collect();
        json!({
            "events": self.events,
            "distinct_events": distinct,
            "resent": self.resends,
            "delivered": distinct - never - unknown,
            "recovered_by_resend": recovered,
            "delivered_twice": ok.len() - found.len(),
            "never_acknowledged": never,
            "ack_unknown": unknown,
            "never_acknowledged_at": at,
            "lower_bounds": self.capped,
        })
    }
}

/// One sending of a Log Courier payload.
#[derive(Clone, Copy, Debug)]
struct Sending {
    stream: u64,
    frame: Option<u64>,
    /// Its events: Log Courier resends only the events its payload has not had acknowledged,
    /// under the same nonce, numbered from 1 again, so a sending of `n` events is the payload's
    /// last `n`, and its ACKN covers the first of those.
    events: u64,
    acked: u64,
}

impl Sending {
    /// Whether it carried the payload's event `g` (of `total`), and acknowledged it.
    fn has(&self, total: u64, g: u64) -> (bool, bool) {
        let start = total.saturating_sub(self.events);
        let carried = g >= start && g < total;
        (carried, carried && g - start < self.acked)
    }
}

#[derive(Debug, Default)]
struct Payload {
    /// Events of the payload as first sent (the most any sending carried).
    events: u64,
    /// Its sendings, in the order they were sent (by frame).
    sent: Vec<Sending>,
    complete_sendings: u64,
    /// (stream, frame) of the sendings that were not complete.
    open_sendings: Vec<(Option<u64>, Option<u64>)>,
    /// A sending was cut by the end of the capture, or its ACKNs may lie in a capture gap.
    cut: bool,
}

/// What became of one event of a payload: acknowledged by its first copy, by how many copies.
#[derive(Clone, Copy, Debug, PartialEq)]
struct EventFate {
    first_acked: bool,
    acks: u32,
}

impl Payload {
    fn event(&self, g: u64) -> EventFate {
        let mut fate = EventFate {
            first_acked: false,
            acks: 0,
        };
        let mut seen = false;
        for s in &self.sent {
            let (carried, acked) = s.has(self.events, g);
            if carried && !seen {
                seen = true;
                fate.first_acked = acked;
            }
            fate.acks += u32::from(acked);
        }
        fate
    }

    /// Distinct events acknowledged by any sending.
    fn delivered(&self) -> u64 {
        (0..self.events).filter(|&g| self.event(g).acks > 0).count() as u64
    }
}

/// A Log Courier nonce (32 hex digits) as two words for an event id.
fn nonce_words(nonce: &str) -> [u64; 2] {
    let word = |hex: Option<&str>| hex.and_then(|h| u64::from_str_radix(h, 16).ok());
    match (word(nonce.get(..16)), word(nonce.get(16..))) {
        (Some(a), Some(b)) if nonce.len() == 32 => [a, b],
        // not a wire nonce: its bytes, folded (FNV-1a), still the same for every copy
        _ => [fnv1a(nonce), u64::MAX],
    }
}

fn nonce_of(m: &Message) -> std::borrow::Cow<'_, str> {
    match m.get("nonce") {
        Some(Value::String(s)) => s.as_str().into(),
        None | Some(Value::Null) => "None".into(),
        Some(other) => other.to_string().into(),
    }
}

#[derive(Debug, Default)]
struct Courier {
    /// Payloads by nonce, in order of first sighting.
    payloads: Vec<Payload>,
    by_nonce: HashMap<String, usize>,
    open_in: HashMap<u64, Vec<usize>>,
    capped: bool,
}

impl Courier {
    fn payload(&mut self, nonce: String) -> Option<usize> {
        match self.by_nonce.get(&nonce) {
            Some(&i) => Some(i),
            None if self.payloads.len() >= KEYS_LIMIT => {
                self.capped = true;
                None
            }
            None => {
                self.by_nonce.insert(nonce, self.payloads.len());
                self.payloads.push(Payload::default());
                Some(self.payloads.len() - 1)
            }
        }
    }

    /// A sending's delivery record.
    fn add(&mut self, stream: u64, m: &Message) {
        let Some(i) = self.payload(nonce_of(m).into_owned()) else {
            return;
        };
        let int = |name| m.get(name).and_then(Value::as_u64).unwrap_or(0);
        let flag = |name| m.get(name).and_then(Value::as_bool) == Some(true);
        let p = &mut self.payloads[i];
        let events = int("events");
        p.events = p.events.max(events);
        let sending = Sending {
            stream,
            frame: m.frame,
            events,
            acked: int("acked_events").min(events),
        };
        // in the order sent: a sending ends (and is recorded) after later ones began
        let at = p
            .sent
            .partition_point(|s| (s.frame.is_none(), s.frame) <= (m.frame.is_none(), m.frame));
        p.sent.insert(at, sending);
        p.cut |= flag("acks_lost");
        if flag("complete") {
            p.complete_sendings += 1;
        } else {
            p.open_sendings.push((Some(stream), m.frame));
            self.open_in.entry(stream).or_default().push(i);
        }
    }

    fn stream_ended(&mut self, stream: u64, closed: bool) {
        let payloads = self.open_in.remove(&stream).unwrap_or_default();
        if !closed {
            for i in payloads {
                self.payloads[i].cut = true;
            }
        }
    }

    /// An event copy's payload, and the event's place in it (its index in the payload as first
    /// sent); None when the verdict could not follow it.
    fn place(&self, stream: u64, m: &Message) -> Option<(&Payload, [u64; 2], u64)> {
        let nonce = nonce_of(m);
        let p = &self.payloads[*self.by_nonce.get(nonce.as_ref())?];
        let index = m.get("index").and_then(Value::as_u64)?;
        let sending = p
            .sent
            .iter()
            .find(|s| (s.stream, s.frame) == (stream, m.frame));
        let g = match sending {
            Some(s) => p.events.saturating_sub(s.events).saturating_add(index),
            None => index, // its delivery record is not made yet: it is in the first sending
        };
        Some((p, nonce_words(&nonce), g))
    }

    /// The id of an event copy and, when already final, its fate: a copy of a first sending
    /// (no `resend_of`: the decoder saw its nonce first) that was acknowledged is delivered
    /// whatever comes after it.
    fn judge(this: Option<&Self>, stream: u64, m: &Message) -> Option<(EventId, Option<Delivery>)> {
        let resend = m.get("resend_of").is_some_and(|v| !v.is_null());
        if !resend && m.acked == Some(true) {
            // nearly every event: in its first sending, its place is its index (no lookup)
            let nonce = nonce_words(&nonce_of(m));
            let index = m.get("index").and_then(Value::as_u64)?;
            let id = EventId::Payload { nonce, index };
            return Some((id, Some(Delivery::Delivered)));
        }
        let (nonce, g) = match this.and_then(|t| t.place(stream, m)) {
            Some((_, nonce, g)) => (nonce, g),
            // its payload's delivery record is not made yet: `fate` places it when it is
            None => (
                nonce_words(&nonce_of(m)),
                m.get("index").and_then(Value::as_u64)?,
            ),
        };
        Some((EventId::Payload { nonce, index: g }, None))
    }

    /// The fate of a copy that waited, as the verdict stands (the classes `result` counts).
    fn fate(&self, stream: u64, m: &Message) -> Delivery {
        let Some((p, _, g)) = self.place(stream, m) else {
            return alone(m.acked);
        };
        let mut earlier_acked = false;
        for s in &p.sent {
            if (s.stream, s.frame) == (stream, m.frame) {
                break;
            }
            earlier_acked |= s.has(p.events, g).1;
        }
        let fate = p.event(g);
        match (m.acked == Some(true), earlier_acked) {
            (true, true) => Delivery::DeliveredTwice,
            (true, false) | (false, true) => Delivery::Delivered,
            (false, false) if fate.acks > 0 => Delivery::RecoveredByResend,
            _ if p.cut => Delivery::Unknown,
            _ => Delivery::NeverAcknowledged,
        }
    }

    fn result(&self, capture: &str) -> Value {
        let ps = &self.payloads;
        let (mut recovered, mut twice) = (0u64, 0u64);
        let mut missing: Vec<(&Payload, u64)> = Vec::new();
        for p in ps {
            let mut lost = 0;
            for g in 0..p.events {
                let fate = p.event(g);
                recovered += u64::from(!fate.first_acked && fate.acks > 0);
                twice += u64::from(fate.acks > 1);
                lost += u64::from(fate.acks == 0);
            }
            if lost > 0 {
                missing.push((p, lost));
            }
        }
        let lost: Vec<&Payload> = missing
            .iter()
            .filter(|(p, _)| !p.cut)
            .map(|(p, _)| *p)
            .collect();
        let never: u64 = missing.iter().filter(|(p, _)| !p.cut).map(|(_, n)| n).sum();
        let unknown: u64 = missing.iter().filter(|(p, _)| p.cut).map(|(_, n)| n).sum();
        let events: u64 = ps.iter().map(|p| p.events).sum();
        let mut first: Vec<Place> = lost
            .iter()
            .filter_map(|p| p.open_sendings.first())
            .map(|&(s, f)| (s, f, None))
            .collect();
        first.sort_by_key(|p| by_stream(p.0));
        let at: Vec<Value> = first
            .iter()
            .take(FIRST)
            .map(|(s, f, _)| json!({"capture": capture, "stream": s, "frame": f}))
            .collect();
        let sendings = |p: &Payload| p.sent.len() as u64;
        json!({
            "payloads": ps.len(),
            "distinct_events": events,
            "resent_payloads": ps.iter().filter(|p| sendings(p) > 1).count(),
            "delivered": events - never - unknown,
            "recovered_by_resend": recovered,
            "delivered_twice": twice,
            "payloads_recovered_by_resend": ps
                .iter()
                .filter(|p| sendings(p) > 1 && p.delivered() == p.events && p.complete_sendings < sendings(p))
                .count(),
            "payloads_delivered_twice": ps.iter().filter(|p| p.complete_sendings > 1).count(),
            "never_acknowledged": never,
            "ack_unknown": unknown,
            "never_acknowledged_at": at,
            "lower_bounds": self.capped,
        })
    }
}

/// What is known of one Hercules UUID's copies: 8 bytes, so that a table entry with its key is
/// 24 (the table's memory is the verdict's; see `UUIDS_LIMIT`).
#[derive(Clone, Copy, Debug, Default)]
struct Copies {
    /// Copies without an answer on a connection that has not ended yet.
    waiting: u32,
    /// Copies accepted with a 2xx, counted to 2 (one or several is what the verdict asks).
    accepted: u8,
    /// A copy was without an answer when the capture ended with its connection open.
    unknown: bool,
}

/// Distinct Hercules UUIDs remembered: 7/8 of 2^20, the most a table of 2^20 slots holds before
/// it doubles (2^20 entries of 24 bytes and a control byte: 25 MiB at most).
pub const UUIDS_LIMIT: usize = 917_504;

/// A UUID as the table keys it (two words: 8-byte alignment keeps an entry at 24 bytes).
type Uuid = [u64; 2];

/// Where a copy was: (stream, frame).
type CopyPlace = (u64, Option<u64>);

#[derive(Debug, Default)]
struct Hercules {
    events: u64,
    uuids: foldhash::HashMap<Uuid, Copies>,
    /// Where the first copy was, for the UUIDs whose first copy was not accepted (only they can
    /// be lost, and only the lost are placed).
    failed_first: foldhash::HashMap<Uuid, CopyPlace>,
    waiting_in: foldhash::HashMap<u64, Vec<Uuid>>,
    /// Events of UUIDs past `UUIDS_LIMIT`, by their own answer: accepted, refused, unanswered.
    untracked: (u64, u64, u64),
}

/// A UUID's canonical text as a key (None for anything else).
fn uuid_key(text: &str) -> Option<Uuid> {
    let b: &[u8; 36] = text.as_bytes().try_into().ok()?;
    // one pass over the 32 digits in u64
    let mut key = [0u64; 2];
    let mut n = 0;
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let digit = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        key[n / 16] = key[n / 16] << 4 | u64::from(digit);
        n += 1;
    }
    Some(key)
}

/// A Gate copy's UUID as the table keys it: the id its decoder made from the event's bytes, or,
/// for a record the held store gave back (it keeps no id), its `uuid` text read again.
fn copy_key(m: &Message) -> Option<Uuid> {
    match m.event_id {
        Some(EventId::Uuid(key)) => Some(key),
        _ => m.get("uuid").and_then(Value::as_str).and_then(uuid_key),
    }
}

/// A key as an event id (its text is the canonical UUID).
fn uuid_id(key: &Uuid) -> EventId {
    EventId::Uuid(*key)
}

/// A key's canonical UUID text.
fn uuid_text(key: &Uuid) -> String {
    uuid_id(key).text()
}

impl Hercules {
    /// An event of Gate traffic (`acked`: the answer to its request, None while there is none).
    fn add(&mut self, stream: u64, m: &Message) {
        let Some(key) = copy_key(m) else {
            return;
        };
        self.events += 1;
        if self.uuids.len() >= UUIDS_LIMIT && !self.uuids.contains_key(&key) {
            let t = &mut self.untracked;
            match m.acked {
                Some(true) => t.0 += 1,
                Some(false) => t.1 += 1,
                None => t.2 += 1,
            }
            return;
        }
        let copies = self.uuids.entry(key).or_insert_with(|| {
            if m.acked != Some(true) {
                self.failed_first.insert(key, (stream, m.frame));
            }
            Copies::default()
        });
        match m.acked {
            Some(true) => copies.accepted = (copies.accepted + 1).min(2),
            Some(false) => {}
            None => {
                copies.waiting += 1;
                self.waiting_in.entry(stream).or_default().push(key);
            }
        }
    }

    /// Unanswered copies of an ended connection are refused when it closed, unknown when the
    /// capture ended first.
    fn stream_ended(&mut self, stream: u64, closed: bool) {
        for key in self.waiting_in.remove(&stream).unwrap_or_default() {
            if let Some(c) = self.uuids.get_mut(&key) {
                c.waiting -= 1;
                c.unknown |= !closed;
            }
        }
    }

    /// The id of a Gate event record and, when already final, its fate: an accepted copy is
    /// delivered, or delivered twice after an earlier accepted one; a copy the verdict cannot
    /// follow (past `UUIDS_LIMIT`) by its own answer.
    fn judge(&self, m: &Message) -> Option<(Uuid, Option<Delivery>)> {
        let key = copy_key(m)?;
        let now = match self.uuids.get(&key) {
            None => Some(alone(m.acked)),
            Some(c) if m.acked == Some(true) => Some(if c.accepted > 1 {
                Delivery::DeliveredTwice
            } else {
                Delivery::Delivered
            }),
            Some(_) => None,
        };
        Some((key, now))
    }

    /// The fate of a copy that was not accepted, as the verdict stands (`result`'s classes).
    fn fate(&self, key: &Uuid) -> Delivery {
        let Some(c) = self.uuids.get(key) else {
            return Delivery::Unknown;
        };
        if c.accepted > 0 {
            if self.failed_first.contains_key(key) {
                Delivery::RecoveredByResend
            } else {
                Delivery::Delivered
            }
        } else if c.unknown || c.waiting > 0 {
            Delivery::Unknown
        } else {
            Delivery::NeverAcknowledged
        }
    }

    fn result(&self, capture: &str) -> Value {
        let (accepted, refused, unanswered) = self.untracked;
        let mut lost: Vec<(&Uuid, CopyPlace)> = Vec::new();
        let (mut delivered, mut retried, mut twice, mut unknown) =
            (accepted, 0u64, 0u64, unanswered);
        for (key, c) in &self.uuids {
            let first = self.failed_first.get(key);
            if c.accepted > 0 {
                delivered += 1;
                retried += u64::from(first.is_some());
                twice += u64::from(c.accepted > 1);
            } else if c.unknown || c.waiting > 0 {
                unknown += 1;
            } else if let Some(&place) = first {
                // Never accepted: the first copy was not.
                lost.push((key, place));
            }
        }
        lost.sort_by_key(|&(key, (stream, frame))| (order(&(Some(stream), frame, None)), *key));
        let at: Vec<Value> = lost
            .iter()
            .take(FIRST)
            .map(|(key, (stream, frame))| {
                json!({"capture": capture, "stream": stream, "frame": frame, "uuid": uuid_text(key)})
            })
            .collect();
        let distinct = self.uuids.len() as u64 + accepted + refused + unanswered;
        json!({
            "events": self.events,
            "distinct_events": distinct,
            "resent": self.events - distinct,
            "delivered": delivered,
            "recovered_by_resend": retried,
            "delivered_twice": twice,
            "never_acknowledged": lost.len() as u64 + refused,
            "ack_unknown": unknown,
            "never_acknowledged_at": at,
            "lower_bounds": accepted + refused + unanswered > 0,
        })
    }
}

/// How a protocol's verdict findings are named and worded.
struct Wording {
    never: &'static str,
    twice: &'static str,
    /// The result's count of things delivered twice, and what they are.
    twice_key: &'static str,
    what: &'static str,
    lost: &'static str,
    dup: &'static str,
}

fn wording(protocol: &str) -> Wording {
    const LOST: &str = "were never acknowledged on a connection that ended, nor resent and \
                        acknowledged on another";
    const DUP: &str = "were acknowledged on one connection and again, resent, on another";
    match protocol {
        "lumberjack" => Wording {
            never: "lumberjack.never-acknowledged",
            twice: "lumberjack.delivered-twice",
            twice_key: "delivered_twice",
            what: "events",
            lost: LOST,
            dup: DUP,
        },
        "courier" => Wording {
            never: "courier.never-acknowledged",
            twice: "courier.delivered-twice",
            twice_key: "payloads_delivered_twice",
            what: "payloads",
            lost: LOST,
            dup: DUP,
        },
        _ => Wording {
            never: "hercules.never-acknowledged",
            twice: "hercules.delivered-twice",
            twice_key: "delivered_twice",
            what: "events",
            lost: "were never accepted by the Gate (answered 4xx/5xx, or unanswered on a \
                   connection that ended), nor retried and accepted",
            dup: "were accepted by the Gate in two requests (a retry of a batch it had accepted)",
        },
    }
}

/// The trackers behind one feed: the records of any stream and the stream ends go in.
/// The host of an `ip:port` (`[ipv6]:port`) endpoint, as a 64-bit key (FNV-1a): 8 bytes a
/// connection instead of the text; two hosts sharing a key only widen `Lumberjack::hidden`.
fn host_key(endpoint: &str) -> u64 {
    fnv1a(endpoint.rsplit_once(':').map_or(endpoint, |(host, _)| host))
}

/// FNV-1a of a text: a fixed 64-bit key.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A Hercules event the Gate was asked to take (a copy in a request), not one read back.
fn hercules_copy(m: &Message) -> bool {
    m.direction == Some(Direction::C2S) && m.get("request_offset").is_some()
}

/// CQL requests by outcome, as their records carry it (the decoder decides each on its own
/// connection: the response, or the connection's end, says).
#[derive(Debug, Default)]
struct Cql {
    answered: u64,
    error: u64,
    unanswered: u64,
    unknown: u64,
}

impl Cql {
    fn add(&mut self, outcome: Delivery) {
        let n = match outcome {
            Delivery::Answered => &mut self.answered,
            Delivery::Error => &mut self.error,
            Delivery::Unanswered => &mut self.unanswered,
            _ => &mut self.unknown,
        };
        *n = n.saturating_add(1);
    }

    fn result(&self) -> Value {
        let requests = [self.answered, self.error, self.unanswered, self.unknown]
            .iter()
            .fold(0u64, |a, &n| a.saturating_add(n));
        json!({
            "requests": requests,
            "answered": self.answered,
            "error": self.error,
            "unanswered": self.unanswered,
            "unknown": self.unknown,
        })
    }
}

#[derive(Debug, Default)]
pub struct Verdict {
    lumberjack: Option<Lumberjack>,
    courier: Option<Courier>,
    hercules: Option<Hercules>,
    cql: Option<Cql>,
}

impl Verdict {
    /// The records of one decoder step of `stream` (those without acknowledgements are ignored).
    pub fn add(&mut self, stream: u64, records: &[Record]) {
        for r in records {
            let Record::Message(m) = r else { continue };
            match (m.protocol, m.kind) {
                ("lumberjack", "event") => self
                    .lumberjack
                    .get_or_insert_with(Lumberjack::default)
                    .add(stream, m),
                ("courier", "delivery") => self
                    .courier
                    .get_or_insert_with(Courier::default)
                    .add(stream, m),
                // Gate traffic only: bare events and read answers have no acknowledgement.
                ("hercules", "event") if hercules_copy(m) => self
                    .hercules
                    .get_or_insert_with(Hercules::default)
                    .add(stream, m),
                // a request, with its outcome (its response carries the same, and is not counted)
                ("cql", _) if m.direction == Some(Direction::C2S) => {
                    if let Some(outcome) = m.delivery {
                        self.cql.get_or_insert_with(Cql::default).add(outcome);
                    }
                }
                _ => {}
            }
        }
    }

    /// An event record's id and, when its fate is already final, that fate; None for records
    /// that are not events of a protocol the verdict follows. Call after `add` gave it the record.
    pub fn judge(&self, stream: u64, m: &Message) -> Option<(EventId, Option<Delivery>)> {
        match (m.protocol, m.kind) {
            ("lumberjack", "event") => self.lumberjack.as_ref().map(|t| t.judge(stream, m)),
            // before its first delivery record there is no tracker: the events judge alone
            ("courier", "event") => Courier::judge(self.courier.as_ref(), stream, m),
            ("hercules", "event") if hercules_copy(m) => self
                .hercules
                .as_ref()
                .and_then(|t| t.judge(m))
                .map(|(key, now)| (uuid_id(&key), now)),
            _ => None,
        }
    }

    /// The fate of an event record `judge` left open, as the verdict stands now (at the end of
    /// the capture: final).
    pub fn fate(&mut self, stream: u64, m: &Message) -> Delivery {
        match m.protocol {
            "lumberjack" => self
                .lumberjack
                .as_mut()
                .map_or(alone(m.acked), |t| t.fate(stream, m)),
            "courier" => self
                .courier
                .as_ref()
                .map_or(alone(m.acked), |t| t.fate(stream, m)),
            _ => match (&self.hercules, copy_key(m)) {
                (Some(t), Some(key)) => t.fate(&key),
                _ => alone(m.acked),
            },
        }
    }

    /// `fate` and the id `judge` gives, at once: a Lumberjack event's place is read once (the
    /// session asks both of every event that waited).
    pub fn fate_and_id(&mut self, stream: u64, m: &Message) -> (Delivery, Option<EventId>) {
        match ((m.protocol, m.kind), self.lumberjack.as_mut()) {
            (("lumberjack", "event"), Some(t)) => {
                let (fate, id) = t.fate_and_id(stream, m);
                (fate, Some(id))
            }
            _ => (
                self.fate(stream, m),
                self.judge(stream, m).map(|(id, _)| id),
            ),
        }
    }

    /// `fate_and_id` of a record read in place from the held store (`held::pack::Parts`), when it
    /// is a Lumberjack event that is no resend (its own place is where it was first sent) and the
    /// verdict follows Lumberjack; None otherwise (the record is asked whole).
    pub fn parts_fate_and_id(&mut self, stream: u64, p: &Parts<'_>) -> Option<(Delivery, EventId)> {
        let m = &p.head;
        let first = (m.protocol, m.kind) == ("lumberjack", "event")
            && p.get(RESEND_OF).is_none_or(|v| v == Scalar::Null);
        let t = self.lumberjack.as_mut().filter(|_| first)?;
        let place = (Some(stream), m.frame, p.get(SEQ).and_then(Scalar::as_i64));
        Some((t.fate_at(place, false, m.acked), place_id(place)))
    }

    /// A Lumberjack connection from `client` (`ip:port`) began.
    pub fn lumberjack_client(&mut self, stream: u64, client: &str) {
        if let Ok(stream) = u32::try_from(stream) {
            let t = self.lumberjack.get_or_insert_with(Lumberjack::default);
            if t.hosts.len() < KEYS_LIMIT {
                t.hosts.insert(stream, host_key(client));
            }
        }
    }

    /// The capture missed client bytes of a Lumberjack connection.
    pub fn lumberjack_client_gap(&mut self, stream: u64) {
        let Some(t) = self.lumberjack.as_mut() else {
            return;
        };
        let Ok(stream) = u32::try_from(stream) else {
            return;
        };
        if let Some(&host) = t.hosts.get(&stream) {
            let latest = t.missed.entry(host).or_insert(stream);
            *latest = (*latest).max(stream);
        }
    }

    /// A stream ended; `closed`: by FIN or RST, so a missing ACK will not come later.
    pub fn stream_ended(&mut self, stream: u64, closed: bool) {
        if let Some(t) = self.lumberjack.as_mut() {
            t.stream_ended(stream, closed);
        }
        if let Some(t) = self.courier.as_mut() {
            t.stream_ended(stream, closed);
        }
        if let Some(t) = self.hercules.as_mut() {
            t.stream_ended(stream, closed);
        }
    }

    /// The numbers per protocol seen (`inspect`'s delivery section), by protocol name.
    pub fn results(&self, capture: &str) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(c) = &self.courier {
            out.insert("courier".into(), c.result(capture));
        }
        if let Some(h) = &self.hercules {
            out.insert("hercules".into(), h.result(capture));
        }
        if let Some(c) = &self.cql {
            out.insert("cql".into(), c.result());
        }
        // (a tracker that only learnt client hosts saw no event)
        if let Some(l) = self.lumberjack.as_ref().filter(|l| l.events > 0) {
            out.insert("lumberjack".into(), l.result(capture));
        }
        out
    }

    /// The verdict as findings: loss (error) and duplicates (warning), where there are any.
    pub fn findings(&self, capture: &str) -> Vec<Finding> {
        findings_of(&self.results(capture))
    }
}

/// The findings of a verdict's numbers (`Verdict::results`, or the sum of several, e.g. of the
/// flows a split capture was decoded in).
pub fn findings_of(results: &Map<String, Value>) -> Vec<Finding> {
    let mut out = Vec::new();
    // (CQL's unanswered requests are findings of their own, `cql.unanswered-request`)
    for (name, r) in results.iter().filter(|(name, _)| *name != "cql") {
        let w = wording(name);
        let num = |key: &str| r.get(key).and_then(Value::as_u64).unwrap_or(0);
        let bound = if r.get("lower_bounds") == Some(&Value::Bool(true)) {
            "at least "
        } else {
            ""
        };
        let lost = num("never_acknowledged");
        if let Some(at) = r["never_acknowledged_at"].get(0).filter(|_| lost > 0) {
            let (stream, frame) = (at["stream"].as_u64(), at["frame"].as_u64());
            let mut place = format!("stream {} frame {}", text(stream), text(frame));
            if let Some(seq) = at.get("seq") {
                place += &format!(" seq {}", text(seq.as_i64()));
            }
            if let Some(uuid) = at.get("uuid").and_then(Value::as_str) {
                place += &format!(" uuid {uuid}");
            }
            let mut f = Finding::new(
                w.never,
                Severity::Error,
                format!(
                    "{bound}{lost} of {} distinct events {} (first: {place}): data lost between \
                     client and server unless sent again later",
                    num("distinct_events"),
                    w.lost
                ),
            )
            .field("events", lost)
            .field("first", at.clone());
            f.direction = Some(Direction::C2S);
            f.frame = frame;
            f.stream = stream;
            out.push(f);
        }
        let twice = num(w.twice_key);
        if twice > 0 {
            out.push(
                Finding::new(
                    w.twice,
                    Severity::Warning,
                    format!(
                        "{bound}{twice} {} {}: the server received them twice (duplicates \
                         downstream unless deduplicated)",
                        w.what, w.dup
                    ),
                )
                .field(w.what, twice),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::held::pack::Back;

    fn event(frame: u64, seq: i64, acked: Option<bool>, resend_of: Option<Value>) -> Record {
        let mut m = Message::new("lumberjack", "event");
        m.frame = Some(frame);
        m.acked = acked;
        m.set("seq", seq);
        if let Some(r) = resend_of {
            m.set("resend_of", r);
        }
        m.into()
    }

    #[test]
    fn a_uuid_key_is_its_canonical_text_and_nothing_else() {
        let text = "01234567-89ab-cdef-0011-223344556677";
        let key = uuid_key(text).unwrap();
        assert_eq!(key, [0x0123_4567_89ab_cdef, 0x0011_2233_4455_6677]);
        assert_eq!(uuid_text(&key), text);
        assert_eq!(uuid_key(&text.to_uppercase()), Some(key));
        // the id a Gate decoder makes from the bytes is the key the text reads back as
        let bytes: [u8; 16] = crate::model::text::unhex(&text.replace('-', ""))
            .try_into()
            .unwrap();
        assert_eq!(EventId::from_uuid(&bytes), uuid_id(&key));
        for bad in [
            "01234567-89ab-cdef-0011-22334455667",
            "01234567-89ab-cdef-0011-2233445566778",
            "0123456789ab-cdef-0011-223344556677-",
            "01234567-89ab-cdef-0011_223344556677",
            "01234567-89ab-cdef-0011-22334455667g",
            "01234567-89ab-cdef-0011-2233445566\u{e9}", // 36 bytes, not ASCII
        ] {
            assert_eq!(uuid_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_resend_acknowledged_elsewhere_recovers_the_first_copy() {
        let mut v = Verdict::default();
        v.add(
            0,
            &[
                event(4, 1, Some(false), None),
                event(4, 2, Some(false), None),
            ],
        );
        v.stream_ended(0, true);
        let first = json!({"stream": 0, "frame": 4, "seq": 1});
        v.add(1, &[event(9, 1, Some(true), Some(first))]);
        v.stream_ended(1, true);
        let r = &v.results("c")["lumberjack"];
        assert_eq!(r["distinct_events"], 2);
        assert_eq!(r["recovered_by_resend"], 1);
        assert_eq!(r["never_acknowledged"], 1);
        assert_eq!(r["never_acknowledged_at"][0]["seq"], 2);
        let f = v.findings("c");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, "lumberjack.never-acknowledged");
        assert!(
            f[0].message.contains("1 of 2 distinct events")
                && f[0].message.contains("frame 4 seq 2")
        );
    }

    /// What the session reads of a waiting event at once is what it read with two questions:
    /// first copies and resends, acknowledged or not or unknown, an event the verdict has no
    /// place for, Courier events and records of no followed protocol.
    #[test]
    fn fate_and_id_at_once_are_fate_and_judges_id() {
        let mut v = Verdict::default();
        let first = json!({"stream": 0, "frame": 4, "seq": 1});
        let mut records = vec![
            event(4, 1, Some(false), None),
            event(4, 2, Some(false), None),
            event(4, 3, None, None),
            event(5, 4, Some(true), None),
            event(9, 1, Some(true), Some(first.clone())),
            event(
                9,
                2,
                Some(false),
                Some(json!({"stream": 0, "frame": 4, "seq": 2})),
            ),
            event(9, 3, None, Some(json!({"frame": 4}))),
            event(6, -1, Some(false), None),
        ];
        let mut courier = Message::new("courier", "event");
        courier.acked = Some(false);
        records.push(courier.into());
        records.push(Message::new("cql", "query").into());
        v.add(0, &records[..4]);
        v.stream_ended(0, true);
        v.add(1, &records[4..]);
        for stream in [0, 1, 7] {
            for r in &records {
                let Record::Message(m) = r else { continue };
                let two = (v.fate(stream, m), v.judge(stream, m).map(|(id, _)| id));
                assert_eq!(v.fate_and_id(stream, m), two, "{m:?} of stream {stream}");
            }
        }
        // read in place from the held store: a Lumberjack event that is no resend (a seq that
        // is no wire seq is a negative number, which is read whole) answers as whole; the rest
        // are read whole
        let mut store = crate::held::spill::SpillStore::new(1 << 20);
        for stream in [0, 1, 7] {
            for (i, r) in records.iter().enumerate() {
                let Record::Message(m) = r else { continue };
                let held = store.hold(m);
                let got = store.take_back(held, |back| match back {
                    Back::Parts(p) => v.parts_fate_and_id(stream, p),
                    Back::Whole(_) => None,
                });
                assert_eq!(got.flatten().is_some(), i < 4, "{m:?}");
                if let Some(Some((fate, id))) = got {
                    assert_eq!((fate, Some(id)), v.fate_and_id(stream, m), "{m:?}");
                }
            }
        }
        let lone = event(4, 1, Some(false), None);
        let Record::Message(m) = &lone else {
            unreachable!()
        };
        let held = store.hold(m);
        let got = store.take_back(held, |back| match back {
            Back::Parts(p) => Verdict::default().parts_fate_and_id(0, p),
            Back::Whole(_) => unreachable!("its fields are scalars"),
        });
        assert_eq!(got, Some(None), "no tracker: asked whole");
        // before any Lumberjack event is added there is no tracker: alone, no id
        let Record::Message(m) = &lone else {
            unreachable!()
        };
        assert_eq!(
            Verdict::default().fate_and_id(0, m),
            (Delivery::NeverAcknowledged, None)
        );
    }

    /// Streams 2, 1 and 0 each lose events in runs (a C frame's events) and events that break a
    /// run (a gap in seq, another frame, another state); stream 3 stays open.
    fn lossy_verdict(unrelated_resend: bool) -> Value {
        let mut v = Verdict::default();
        for stream in [2u64, 1, 0] {
            let mut events: Vec<Record> = (1..=40)
                .map(|seq| event(10 + stream, seq, Some(false), None))
                .collect();
            events.push(event(10 + stream, 42, Some(false), None)); // a seq skipped
            events.push(event(20 + stream, 43, Some(false), None)); // another frame
            events.push(event(20 + stream, 44, None, None)); // ACK state unknown
            events.push(event(20 + stream, 45, Some(true), None));
            v.add(stream, &events);
            v.stream_ended(stream, true);
        }
        v.add(
            3,
            &[
                event(30, 1, Some(false), None),
                event(30, 2, Some(false), None),
            ],
        );
        v.stream_ended(3, false);
        if unrelated_resend {
            let first = json!({"stream": 9, "frame": 99, "seq": 7});
            v.add(4, &[event(40, 1, Some(true), Some(first))]);
            v.stream_ended(4, true);
        }
        v.results("c")["lumberjack"].clone()
    }

    #[test]
    fn runs_of_lost_events_count_each_event_and_list_the_first_by_stream() {
        let r = lossy_verdict(false);
        assert_eq!(r["never_acknowledged"], 3 * 42);
        assert_eq!(r["ack_unknown"], 3 + 2);
        assert_eq!(r["delivered"], 3);
        let at: Vec<(u64, u64, i64)> = r["never_acknowledged_at"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["stream"].as_u64().unwrap(),
                    a["frame"].as_u64().unwrap(),
                    a["seq"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(at, (1..=5).map(|q| (0, 10, q)).collect::<Vec<_>>());
    }

    #[test]
    fn event_by_event_and_run_by_run_give_the_same_verdict() {
        // a resend acknowledged somewhere makes the verdict look at each event of each run
        let (runs, each) = (lossy_verdict(false), lossy_verdict(true));
        for field in [
            "never_acknowledged",
            "ack_unknown",
            "recovered_by_resend",
            "never_acknowledged_at",
        ] {
            assert_eq!(runs[field], each[field], "{field}");
        }
        assert_eq!(each["delivered_twice"], 1);
    }

    #[test]
    fn a_resend_recovers_one_event_inside_a_run() {
        let mut v = Verdict::default();
        let lost: Vec<Record> = (1..=10).map(|q| event(5, q, Some(false), None)).collect();
        v.add(0, &lost);
        v.stream_ended(0, true);
        let first = json!({"stream": 0, "frame": 5, "seq": 4});
        v.add(1, &[event(8, 1, Some(true), Some(first))]);
        v.stream_ended(1, true);
        let r = &v.results("c")["lumberjack"];
        assert_eq!(
            (
                r["never_acknowledged"].as_u64(),
                r["recovered_by_resend"].as_u64()
            ),
            (Some(9), Some(1))
        );
        assert_eq!(r["delivered_twice"], 0);
        let seqs: Vec<i64> = r["never_acknowledged_at"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3, 5, 6]);
    }

    #[test]
    fn an_open_connection_makes_missing_acks_unknown_not_lost() {
        let mut v = Verdict::default();
        v.add(0, &[event(4, 1, Some(false), None)]);
        v.stream_ended(0, false);
        let r = &v.results("c")["lumberjack"];
        assert_eq!(
            (r["never_acknowledged"].as_u64(), r["ack_unknown"].as_u64()),
            (Some(0), Some(1))
        );
        assert!(v.findings("c").is_empty());
    }

    #[test]
    fn courier_payload_acknowledged_on_two_connections_is_delivered_twice() {
        let mut v = Verdict::default();
        let delivery = |complete: bool| {
            let mut m = Message::new("courier", "delivery");
            m.set("nonce", "ab");
            m.set("events", 3u64);
            m.set("acked_events", if complete { 3u64 } else { 0 });
            m.set("complete", complete);
            Record::from(m)
        };
        v.add(0, &[delivery(true)]);
        v.add(1, &[delivery(true)]);
        let f = v.findings("c");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, "courier.delivered-twice");
        assert_eq!(f[0].fields, vec![("payloads", json!(1))]);
    }

    fn courier_sending(events: u64, acked: u64) -> Record {
        let mut m = Message::new("courier", "delivery");
        m.set("nonce", "cd");
        m.set("events", events);
        m.set("acked_events", acked);
        m.set("complete", acked == events);
        Record::from(m)
    }

    #[test]
    fn courier_events_acknowledged_before_a_resend_are_delivered_not_lost() {
        // 200 events, 24 acknowledged, the receiver gone; the 176 left are resent and acknowledged
        let mut v = Verdict::default();
        v.add(0, &[courier_sending(200, 24)]);
        v.stream_ended(0, true);
        v.add(1, &[courier_sending(176, 176)]);
        v.stream_ended(1, true);
        let r = &v.results("c")["courier"];
        assert_eq!(r["distinct_events"], 200);
        assert_eq!(r["delivered"], 200);
        assert_eq!(r["never_acknowledged"], 0);
        assert_eq!(r["payloads_recovered_by_resend"], 1);
        assert!(v.findings("c").is_empty());
    }

    #[test]
    fn courier_a_resend_acknowledged_in_part_leaves_only_its_tail_lost() {
        // 200 sent, 24 acknowledged; the 176 resent, 50 of them acknowledged; then nothing
        let mut v = Verdict::default();
        v.add(0, &[courier_sending(200, 24)]);
        v.stream_ended(0, true);
        v.add(1, &[courier_sending(176, 50)]);
        v.stream_ended(1, true);
        let r = &v.results("c")["courier"];
        assert_eq!(r["delivered"], 74);
        assert_eq!(r["never_acknowledged"], 126);
    }

    fn gate_event(uuid: u8, frame: u64, acked: Option<bool>) -> Record {
        let mut m = Message::new("hercules", "event");
        m.direction = Some(Direction::C2S);
        m.frame = Some(frame);
        m.acked = acked;
        m.set(
            "uuid",
            format!("00000000-0000-0000-0000-0000000000{uuid:02x}"),
        );
        m.set("request_offset", 0u64);
        m.into()
    }

    #[test]
    fn hercules_events_are_judged_by_uuid_across_retries() {
        let mut v = Verdict::default();
        // Connection 0: a batch of 1..=4 rejected (503), 5 unanswered when it closed.
        let rejected: Vec<Record> = (1..=4).map(|u| gate_event(u, 3, Some(false))).collect();
        v.add(0, &rejected);
        v.add(0, &[gate_event(5, 7, None)]);
        v.stream_ended(0, true);
        // Connection 1: 1 and 2 retried and accepted, 6 accepted twice, 7 waiting at the end.
        let retry = [1, 2, 6, 6].map(|u| gate_event(u, 9, Some(true)));
        v.add(1, &retry);
        v.add(1, &[gate_event(7, 11, None)]);
        v.stream_ended(1, false);
        // Bare events and read answers carry no answer of the Gate: ignored.
        let mut bare = Message::new("hercules", "event");
        bare.set("uuid", "00000000-0000-0000-0000-000000000008");
        v.add(2, &[bare.into()]);
        let r = &v.results("c")["hercules"];
        let n = |k: &str| r[k].as_u64().unwrap();
        assert_eq!((n("events"), n("distinct_events"), n("resent")), (10, 7, 3));
        assert_eq!((n("delivered"), n("recovered_by_resend")), (3, 2));
        assert_eq!((n("delivered_twice"), n("ack_unknown")), (1, 1));
        assert_eq!(n("never_acknowledged"), 3);
        let at = r["never_acknowledged_at"].as_array().unwrap();
        let uuids: Vec<&str> = at.iter().map(|a| a["uuid"].as_str().unwrap()).collect();
        assert_eq!(
            uuids,
            [3, 4, 5].map(|u| format!("00000000-0000-0000-0000-0000000000{u:02x}"))
        );
        assert_eq!(
            (at[2]["stream"].as_u64(), at[2]["frame"].as_u64()),
            (Some(0), Some(7))
        );
        let f = v.findings("c");
        let codes: Vec<_> = f.iter().map(|f| (f.code, f.severity)).collect();
        assert_eq!(
            codes,
            [
                ("hercules.never-acknowledged", Severity::Error),
                ("hercules.delivered-twice", Severity::Warning)
            ]
        );
        assert!(f[0]
            .message
            .contains("3 of 7 distinct events were never accepted"));
        assert!(f[0]
            .message
            .contains("frame 3 uuid 00000000-0000-0000-0000-000000000003"));
        assert_eq!(f[1].fields, vec![("events", json!(1))]);
    }

    #[test]
    fn hercules_uuids_past_the_limit_are_judged_alone() {
        let mut h = Hercules::default();
        h.uuids.extend((0..UUIDS_LIMIT as u64).map(|k| {
            (
                [7, k + 1000],
                Copies {
                    accepted: 1,
                    ..Copies::default()
                },
            )
        }));
        h.events = UUIDS_LIMIT as u64;
        for acked in [Some(true), Some(false), None] {
            if let Record::Message(m) = gate_event(1, 1, acked) {
                h.add(0, &m);
            }
        }
        let r = h.result("c");
        assert_eq!(r["lower_bounds"], true);
        assert_eq!(h.uuids.len(), UUIDS_LIMIT);
        let n = |k: &str| r[k].as_u64().unwrap();
        assert_eq!(n("delivered"), UUIDS_LIMIT as u64 + 1);
        assert_eq!((n("never_acknowledged"), n("ack_unknown")), (1, 1));
    }

    /// Each record's class as the session writes it (`judge` as it comes, `fate` at the end for
    /// the rest), counted per distinct id as docs/schema.md's query counts them.
    fn labelled(streams: &[(u64, Vec<Record>, bool)]) -> (Value, Map<String, Value>) {
        let mut v = Verdict::default();
        type Judged = Option<(EventId, Option<Delivery>)>;
        let mut labels: Vec<(u64, Message, Judged)> = Vec::new();
        for (stream, records, closed) in streams {
            v.add(*stream, records);
            for r in records {
                let Record::Message(m) = r else { continue };
                labels.push((*stream, m.clone(), v.judge(*stream, m)));
            }
            v.stream_ended(*stream, *closed);
        }
        let mut classes: HashMap<EventId, HashSet<Delivery>> = HashMap::new();
        for (stream, m, judged) in labels {
            let (id, now) = judged.expect("an event the verdict follows");
            let class = now.unwrap_or_else(|| v.fate(stream, &m));
            classes.entry(id).or_default().insert(class);
        }
        let mut n = Map::new();
        let count = |f: &dyn Fn(&HashSet<Delivery>) -> bool| {
            Value::from(classes.values().filter(|c| f(c)).count())
        };
        n.insert("distinct_events".into(), count(&|_| true));
        n.insert(
            "delivered".into(),
            count(&|c| c.contains(&Delivery::Delivered) || c.contains(&Delivery::DeliveredTwice)),
        );
        for (key, class) in [
            ("recovered_by_resend", Delivery::RecoveredByResend),
            ("delivered_twice", Delivery::DeliveredTwice),
            ("never_acknowledged", Delivery::NeverAcknowledged),
            ("ack_unknown", Delivery::Unknown),
        ] {
            n.insert(key.into(), count(&|c| c.contains(&class)));
        }
        let protocol = if v.lumberjack.is_some() {
            "lumberjack"
        } else {
            "hercules"
        };
        (v.results("c")[protocol].clone(), n)
    }

    fn numbers(r: &Value, n: &Map<String, Value>) {
        for (key, got) in n {
            assert_eq!(&r[key], got, "{key}");
        }
    }

    #[test]
    fn the_classes_of_the_records_count_to_the_verdict() {
        let first = |s: u64, f: u64, q: i64| Some(json!({"stream": s, "frame": f, "seq": q}));
        // runs of several frames on one stream: the run of each first copy must be found
        let a: Vec<Record> = (1..=6)
            .map(|q| event(10 + q as u64 % 2, q, Some(false), None))
            .chain((7..=9).map(|q| event(12, q, Some(true), None)))
            .chain([event(13, 10, None, None)])
            .collect();
        let b = vec![
            event(20, 1, Some(true), first(0, 11, 1)), // recovers a's seq 1
            event(20, 2, Some(false), first(0, 10, 2)), // a's seq 2 stays lost
            event(20, 3, Some(true), first(0, 12, 7)), // a's seq 7 again: twice
            event(20, 4, Some(true), first(0, 13, 10)), // recovers the unknown seq 10
            event(21, 5, Some(true), first(0, 11, 1)), // seq 1 a third time
        ];
        let c = vec![event(30, 1, Some(false), first(0, 11, 3))]; // still open: seq 3 unknown
        let (r, n) = labelled(&[(0, a, true), (1, b, true), (2, c, false)]);
        numbers(&r, &n);
        assert_eq!(
            (
                n["recovered_by_resend"].as_u64(),
                n["never_acknowledged"].as_u64()
            ),
            (Some(2), Some(4))
        );
        assert_eq!(n["ack_unknown"], 1);
        assert_eq!(n["delivered_twice"], 1);
    }

    #[test]
    fn the_classes_of_gate_records_count_to_the_verdict() {
        let (r, n) = labelled(&[
            (
                0,
                vec![
                    gate_event(1, 5, Some(false)),
                    gate_event(2, 5, Some(true)),
                    gate_event(3, 6, None),
                    gate_event(4, 6, Some(false)),
                ],
                true,
            ),
            (
                1,
                vec![
                    gate_event(1, 8, Some(true)),
                    gate_event(1, 9, Some(true)),
                    gate_event(2, 9, Some(false)),
                    gate_event(5, 9, None),
                ],
                false,
            ),
        ]);
        numbers(&r, &n);
        assert_eq!(
            (
                n["recovered_by_resend"].as_u64(),
                n["delivered_twice"].as_u64()
            ),
            (Some(1), Some(1))
        );
    }

    #[test]
    fn a_resend_the_capture_may_have_missed_makes_lost_events_unknown() {
        let run = |gap_from: &str| {
            let mut v = Verdict::default();
            v.lumberjack_client(0, "10.0.0.1:4000");
            let lost: Vec<Record> = (1..=3).map(|q| event(5, q, Some(false), None)).collect();
            v.add(0, &lost);
            v.stream_ended(0, true);
            v.lumberjack_client(1, gap_from);
            v.lumberjack_client_gap(1); // its client bytes (a resend?) partly missing
            v.add(1, &[event(9, 1, Some(true), None)]);
            v.stream_ended(1, true);
            let fates: Vec<Delivery> = lost
                .iter()
                .map(|r| match r {
                    Record::Message(m) => v.fate(0, m),
                    Record::Finding(_) => unreachable!(),
                })
                .collect();
            let r = v.results("c")["lumberjack"].clone();
            (
                r["never_acknowledged"].as_u64(),
                r["ack_unknown"].as_u64(),
                fates,
            )
        };
        // a later connection from the same host lost client bytes: a resend may be there
        let unknown = vec![Delivery::Unknown; 3];
        assert_eq!(run("10.0.0.1:4001"), (Some(0), Some(3), unknown));
        // from another host it cannot have carried these events
        let lost = vec![Delivery::NeverAcknowledged; 3];
        assert_eq!(run("10.0.0.2:4001"), (Some(3), Some(0), lost));
    }
}
