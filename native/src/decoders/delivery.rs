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

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map};

use crate::model::{Direction, Finding, Message, Record, Severity, Value};

/// Unacknowledged events and resends remembered; beyond, counts are lower bounds.
pub const KEYS_LIMIT: usize = 1_000_000;
/// Places of never-acknowledged events listed.
const FIRST: usize = 5;

/// Where an event is: (stream, frame, seq). None sorts last, as in the Python engine.
type Place = (Option<u64>, Option<u64>, Option<i64>);

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

#[derive(Debug, Default)]
struct Lumberjack {
    events: u64,
    resends: u64,
    /// First copies not acknowledged: refused or lost (false) or unknown (None), in arrival order.
    open: Vec<(Place, Option<bool>)>,
    open_index: HashMap<Place, usize>,
    open_in: HashMap<u64, Vec<Place>>,
    resent_ok: HashSet<Place>,
    resent_unknown: HashSet<Place>,
    resends_in: HashMap<u64, Vec<Place>>,
    resends_waiting: usize,
    capped: bool,
}

impl Lumberjack {
    fn add(&mut self, stream: u64, m: &Message) {
        self.events += 1;
        let resend_of = m.get("resend_of").filter(|v| !v.is_null());
        if m.acked == Some(true) && resend_of.is_none() {
            return;
        }
        if let Some(first) = resend_of {
            self.resends += 1;
            let key = (
                first.get("stream").and_then(Value::as_u64),
                first.get("frame").and_then(Value::as_u64),
                first.get("seq").and_then(Value::as_i64),
            );
            if self.resent_ok.len() + self.resent_unknown.len() + self.resends_waiting >= KEYS_LIMIT
            {
                self.capped = true;
            } else if m.acked == Some(true) {
                self.resent_ok.insert(key);
            } else if m.acked.is_none() {
                self.resent_unknown.insert(key);
            } else {
                self.resends_in.entry(stream).or_default().push(key);
                self.resends_waiting += 1;
            }
        } else if self.open.len() < KEYS_LIMIT {
            let key = (Some(stream), m.frame, m.get("seq").and_then(Value::as_i64));
            match self.open_index.get(&key) {
                Some(&i) => self.open[i].1 = m.acked,
                None => {
                    self.open_index.insert(key, self.open.len());
                    self.open.push((key, m.acked));
                }
            }
            self.open_in.entry(stream).or_default().push(key);
        } else {
            self.capped = true;
        }
    }

    fn stream_ended(&mut self, stream: u64, closed: bool) {
        let keys = self.open_in.remove(&stream).unwrap_or_default();
        let resent = self.resends_in.remove(&stream).unwrap_or_default();
        self.resends_waiting -= resent.len();
        if !closed {
            for key in keys {
                if let Some(&i) = self.open_index.get(&key) {
                    self.open[i].1 = None;
                }
            }
            self.resent_unknown.extend(resent);
        }
    }

    fn result(&self, capture: &str) -> Value {
        let (ok, pending) = (&self.resent_ok, &self.resent_unknown);
        let mut lost: Vec<&Place> = self
            .open
            .iter()
            .filter(|(k, a)| *a == Some(false) && !ok.contains(k) && !pending.contains(k))
            .map(|(k, _)| k)
            .collect();
        lost.sort_by_key(|k| order(k));
        let unknown = self
            .open
            .iter()
            .filter(|(k, a)| !ok.contains(k) && (a.is_none() || pending.contains(k)))
            .count() as u64;
        let distinct = self.events - self.resends;
        let at: Vec<Value> = lost
            .iter()
            .take(FIRST)
            .map(|(s, f, q)| json!({"capture": capture, "stream": s, "frame": f, "seq": q}))
            .collect();
        let open_keys: HashSet<&Place> = self.open.iter().map(|(k, _)| k).collect();
        json!({
            "events": self.events,
            "distinct_events": distinct,
            "resent": self.resends,
            "delivered": distinct - lost.len() as u64 - unknown,
            "recovered_by_resend": self.open.iter().filter(|(k, _)| ok.contains(k)).count(),
            "delivered_twice": ok.iter().filter(|k| !open_keys.contains(k)).count(),
            "never_acknowledged": lost.len(),
            "ack_unknown": unknown,
            "never_acknowledged_at": at,
            "lower_bounds": self.capped,
        })
    }
}

#[derive(Debug, Default)]
struct Payload {
    events: u64,
    best_acked: u64,
    sendings: u64,
    complete_sendings: u64,
    /// (stream, frame) of the sendings that were not complete.
    open_sendings: Vec<(Option<u64>, Option<u64>)>,
    /// A sending was cut by the end of the capture, not by its connection's end.
    cut: bool,
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
    fn add(&mut self, stream: u64, m: &Message) {
        let nonce = match m.get("nonce") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => "None".to_owned(),
            Some(other) => other.to_string(),
        };
        let i = match self.by_nonce.get(&nonce) {
            Some(&i) => i,
            None if self.payloads.len() >= KEYS_LIMIT => {
                self.capped = true;
                return;
            }
            None => {
                self.by_nonce.insert(nonce, self.payloads.len());
                self.payloads.push(Payload::default());
                self.payloads.len() - 1
            }
        };
        let int = |name| m.get(name).and_then(Value::as_u64).unwrap_or(0);
        let p = &mut self.payloads[i];
        p.events = p.events.max(int("events"));
        p.best_acked = p.best_acked.max(int("acked_events"));
        p.sendings += 1;
        if m.get("complete").is_some_and(|c| c.as_bool() == Some(true)) {
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

    fn result(&self, capture: &str) -> Value {
        let ps = &self.payloads;
        let missing: Vec<&Payload> = ps.iter().filter(|p| p.best_acked < p.events).collect();
        let lost: Vec<&&Payload> = missing.iter().filter(|p| !p.cut).collect();
        let never: u64 = lost.iter().map(|p| p.events - p.best_acked).sum();
        let unknown: u64 = missing
            .iter()
            .filter(|p| p.cut)
            .map(|p| p.events - p.best_acked)
            .sum();
        let events: u64 = ps.iter().map(|p| p.events).sum();
        let mut first: Vec<Place> = lost
            .iter()
            .filter_map(|p| p.open_sendings.first())
            .map(|&(s, f)| (s, f, None))
            .collect();
        first.sort_by_key(order);
        let at: Vec<Value> = first
            .iter()
            .take(FIRST)
            .map(|(s, f, _)| json!({"capture": capture, "stream": s, "frame": f}))
            .collect();
        json!({
            "payloads": ps.len(),
            "distinct_events": events,
            "resent_payloads": ps.iter().filter(|p| p.sendings > 1).count(),
            "delivered": events - never - unknown,
            "payloads_recovered_by_resend": ps
                .iter()
                .filter(|p| p.sendings > 1 && p.best_acked == p.events && p.complete_sendings < p.sendings)
                .count(),
            "payloads_delivered_twice": ps.iter().filter(|p| p.complete_sendings > 1).count(),
            "never_acknowledged": never,
            "ack_unknown": unknown,
            "never_acknowledged_at": at,
            "lower_bounds": self.capped,
        })
    }
}

/// Both trackers behind one feed: the records of any stream and the stream ends go in.
#[derive(Debug, Default)]
pub struct Verdict {
    lumberjack: Option<Lumberjack>,
    courier: Option<Courier>,
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
                _ => {}
            }
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
    }

    /// The numbers per protocol seen (`inspect`'s delivery section), by protocol name.
    pub fn results(&self, capture: &str) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(c) = &self.courier {
            out.insert("courier".into(), c.result(capture));
        }
        if let Some(l) = &self.lumberjack {
            out.insert("lumberjack".into(), l.result(capture));
        }
        out
    }

    /// The verdict as findings: loss (error) and duplicates (warning), where there are any.
    pub fn findings(&self, capture: &str) -> Vec<Finding> {
        let mut out = Vec::new();
        for (name, r) in self.results(capture) {
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
                let code = if name == "lumberjack" {
                    "lumberjack.never-acknowledged"
                } else {
                    "courier.never-acknowledged"
                };
                let mut f = Finding::new(
                    code,
                    Severity::Error,
                    format!(
                        "{bound}{lost} of {} distinct events were never acknowledged on a connection \
                         that ended, nor resent and acknowledged on another (first: {place}): data \
                         lost between client and server unless sent again later",
                        num("distinct_events")
                    ),
                )
                .field("events", lost)
                .field("first", at.clone());
                f.direction = Some(Direction::C2S);
                f.frame = frame;
                f.stream = stream;
                out.push(f);
            }
            let (twice, what, code) = if name == "lumberjack" {
                (
                    num("delivered_twice"),
                    "events",
                    "lumberjack.delivered-twice",
                )
            } else {
                (
                    num("payloads_delivered_twice"),
                    "payloads",
                    "courier.delivered-twice",
                )
            };
            if twice > 0 {
                out.push(
                    Finding::new(
                        code,
                        Severity::Warning,
                        format!(
                            "{bound}{twice} {what} were acknowledged on one connection and again, \
                             resent, on another: the server received them twice (duplicates \
                             downstream unless deduplicated)"
                        ),
                    )
                    .field(what, twice),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
