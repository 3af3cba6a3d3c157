//! The timeline's lanes: one per connection while it is open, then, once it has ended, only the
//! worst `KEPT` of the ended ones (by the problems they show: never-acknowledged events, stalls,
//! findings, then size) stay lanes and the others are folded into counts, so memory does not grow
//! with the number of connections (issue 44, item 5).

use std::cmp::Reverse;
use std::collections::HashMap;

use serde_json::{json, Map, Value};

/// Ended lanes kept whole: `--top` is at most 10,000, so the top of the page is among them.
pub const KEPT: usize = 10_000;
/// Stream numbers past this are never folded (the folded ones are a bitset indexed by number;
/// streams are numbered from 0 in the order they open, so a real capture stays far below it).
const FOLDABLE_STREAMS: u64 = 1 << 28;

/// Per connection: what ranks it and what its lane's label says.
#[derive(Default)]
pub struct Lane {
    pub protocol: Option<&'static str>,
    pub client: String,
    pub server: String,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    pub events: u64,
    pub unacked: u64,
    pub messages: u64,
    pub sends: u64,
    pub answers: u64,
    pub keepalives: u64,
    pub findings: u64,
    pub stalls: u64,
    pub closed: Option<&'static str>,
    /// Requests sent and not answered yet: a lane waiting on one may still become a stall at the
    /// capture's end (drawn to its last packet), so it is not folded.
    pub waiting: u64,
    ended: bool,
}

impl Lane {
    pub fn saw(&mut self, ts: Option<i64>) {
        if let Some(ts) = ts {
            self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
            self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
        }
    }

    /// The order lanes are shown and kept in: the worst first (docs/commands/report.md).
    pub fn rank(&self, stream: u64) -> impl Ord {
        (
            Reverse((
                self.unacked,
                self.stalls,
                self.findings,
                self.events,
                self.messages,
            )),
            stream,
        )
    }
}

type LaneCount = (&'static str, fn(&Lane) -> u64);
pub const LANE_COUNTS: &[LaneCount] = &[
    ("events", |l| l.events),
    ("unacked", |l| l.unacked),
    ("messages", |l| l.messages),
    ("sends", |l| l.sends),
    ("answers", |l| l.answers),
    ("keepalives", |l| l.keepalives),
    ("findings", |l| l.findings),
    ("stalls", |l| l.stalls),
];

#[derive(Default)]
pub struct Lanes {
    live: HashMap<u64, Lane>,
    ended: usize,
    /// Ended lanes past which the next fold runs (twice what the last one left, at least 2 × KEPT).
    fold_at: usize,
    /// Streams whose lane was folded, as bits by stream number.
    folded: Vec<u64>,
    /// Connections folded and their counts (each count of `LANE_COUNTS`).
    folded_connections: u64,
    folded_counts: Lane,
}

impl Lanes {
    fn is_folded(&self, stream: u64) -> bool {
        let word = (stream / 64) as usize;
        self.folded
            .get(word)
            .is_some_and(|w| w & (1 << (stream % 64)) != 0)
    }

    /// The lane of `stream`; for a folded one (a record can come after its connection's end: the
    /// events whose fate waited for the end of the input), the folded counts.
    pub fn get(&mut self, stream: u64) -> &mut Lane {
        if self.is_folded(stream) {
            return &mut self.folded_counts;
        }
        self.live.entry(stream).or_default()
    }

    /// Lanes held whole (open connections and the ended ones not folded).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.live.len()
    }

    pub fn peek(&self, stream: u64) -> Option<&Lane> {
        self.live.get(&stream)
    }

    /// `stream` ended: past 2 × `KEPT` ended lanes, the ended ones not waiting on an answer are
    /// ranked and all but the `KEPT` worst folded (so this costs O(log n) a connection, amortised).
    pub fn end(&mut self, stream: u64) {
        let Some(lane) = self.live.get_mut(&stream) else {
            return;
        };
        if !lane.ended {
            lane.ended = true;
            self.ended += 1;
        }
        if self.ended > self.fold_at.max(2 * KEPT) {
            self.fold();
        }
    }

    fn fold(&mut self) {
        let mut ended: Vec<(u64, &Lane)> = self
            .live
            .iter()
            .filter(|(&id, l)| l.ended && l.waiting == 0 && id < FOLDABLE_STREAMS)
            .map(|(&id, l)| (id, l))
            .collect();
        ended.sort_by_key(|(id, l)| l.rank(*id));
        let out: Vec<u64> = ended.iter().skip(KEPT).map(|(id, _)| *id).collect();
        for id in out {
            let lane = self.live.remove(&id).expect("listed above");
            self.ended -= 1;
            self.add_folded(&lane);
            let word = (id / 64) as usize;
            if self.folded.len() <= word {
                self.folded.resize(word + 1, 0);
            }
            self.folded[word] |= 1 << (id % 64);
        }
        // lanes waiting on an answer stay: when they are many, fold again only when they doubled
        self.fold_at = 2 * self.ended;
    }

    fn add_folded(&mut self, l: &Lane) {
        self.folded_connections += 1;
        let f = &mut self.folded_counts;
        f.events += l.events;
        f.unacked += l.unacked;
        f.messages += l.messages;
        f.sends += l.sends;
        f.answers += l.answers;
        f.keepalives += l.keepalives;
        f.findings += l.findings;
        f.stalls += l.stalls;
    }

    /// The `top` worst lanes, and the others folded into counts (with `connections`).
    pub fn json(&self, top: usize) -> (Vec<Value>, Map<String, Value>) {
        let mut order: Vec<(u64, &Lane)> = self.live.iter().map(|(&id, l)| (id, l)).collect();
        order.sort_by_key(|(id, l)| l.rank(*id));
        let lanes = order
            .iter()
            .take(top)
            .map(|(id, l)| lane_json(*id, l))
            .collect();
        let rest = &order[top.min(order.len())..];
        let mut folded = Map::new();
        folded.insert(
            "connections".into(),
            json!(rest.len() as u64 + self.folded_connections),
        );
        for (name, get) in LANE_COUNTS {
            let sum = rest.iter().map(|(_, l)| get(l)).sum::<u64>() + get(&self.folded_counts);
            folded.insert((*name).into(), json!(sum));
        }
        (lanes, folded)
    }
}

fn lane_json(stream: u64, l: &Lane) -> Value {
    let mut o = Map::new();
    o.insert("stream".into(), json!(stream));
    o.insert("protocol".into(), json!(l.protocol));
    o.insert("client".into(), json!(l.client));
    o.insert("server".into(), json!(l.server));
    o.insert("first_ts".into(), json!(l.first_ts));
    o.insert("last_ts".into(), json!(l.last_ts));
    o.insert("closed".into(), json!(l.closed));
    for (name, get) in LANE_COUNTS {
        o.insert((*name).into(), json!(get(l)));
    }
    Value::Object(o)
}
