//! Event records whose fate depends on other connections, held until the verdict knows it
//! (docs/records.md, "Delivery").
//!
//! A copy that was not acknowledged on its connection may still be delivered by a resend on a
//! later one, and a resend's class depends on what became of its first copy; so such records
//! wait here (in their protocol's budgeted store, `held/spill.rs`: 32 bytes of memory each, the
//! record itself spills past `--held-memory`) until the capture ends or `HORIZON` of capture time
//! has passed since they came, and are then written with the verdict's class as it stands. A
//! resend after the horizon no longer changes the records of its earlier copies (the verdict's
//! numbers still count it). Acknowledged first copies, nearly every event, never wait.

use std::collections::{HashMap, VecDeque};

use crate::held::spill::SpillStore;
use crate::model::{Held, Stamp, Value};

/// Records waiting at most (32 bytes each here); past it the oldest go out early.
pub const MAX_WAITING: usize = 1 << 21;
/// Records the end of the input writes a call (`Session::finish`), as a stream's end does
/// (`decoders::CloseRoom`): the caller takes each part before the next is read back.
pub const PART: usize = 4096;

/// Where a waiting record is written: its stream, the stream's stamp, protocol and TLS description
/// (kept after the stream ended while records of it wait).
struct Origin {
    stream: u64,
    stamp: Stamp,
    protocol: &'static str,
    tls: Option<Value>,
    waiting: usize,
}

/// One waiting record, in 32 bytes: millions wait in a stalled pipeline's capture.
pub struct Waiting {
    since: i64,
    pub record: Held,
    /// Its origin's slot (`Fates::origin`).
    pub origin: u32,
    /// A lent record's `acked` (its decoder held it before it knew; `Message::lent`).
    pub acked: Option<Option<bool>>,
}

// what MAX_WAITING's memory is counted by
const _: () = assert!(std::mem::size_of::<Waiting>() == 32);

#[derive(Default)]
pub struct Fates {
    /// `Limits::fate_horizon_ns`.
    horizon: Option<i64>,
    queue: VecDeque<Waiting>,
    /// The origins of waiting records, in slots a record names (fewer than `MAX_WAITING`, as
    /// every origin has a record waiting), a freed slot reused.
    origins: Vec<Option<Origin>>,
    free: Vec<u32>,
    /// The slot of each stream's origin.
    slot: HashMap<u64, u32, foldhash::fast::RandomState>,
    /// The stream and slot of the last record held, in front of `slot`: a connection's end
    /// holds its thousands of unacknowledged events one after another (SipHash and the map's
    /// lookup were half of holding one).
    last: Option<(u64, u32)>,
    /// The latest capture time of the records seen (ns).
    now: i64,
}

impl Fates {
    pub fn new(horizon: Option<i64>) -> Self {
        Fates {
            horizon,
            ..Fates::default()
        }
    }

    /// The capture has reached time `ts`.
    pub fn saw(&mut self, ts: Option<i64>) {
        if let Some(ts) = ts {
            self.now = self.now.max(ts);
        }
    }

    /// Hold a record's packed form (`record`, in its protocol's store; `acked`: what it says
    /// instead, when lent; `ts`: its time) until `due`.
    #[allow(clippy::too_many_arguments)]
    pub fn hold(
        &mut self,
        stream: u64,
        record: Held,
        acked: Option<Option<bool>>,
        ts: Option<i64>,
        stamp: &Stamp,
        protocol: &'static str,
        tls: Option<&Value>,
    ) {
        let slot = match self.last {
            Some((s, slot)) if s == stream => slot,
            _ => self.slot_of(stream, stamp, protocol, tls),
        };
        if let Some(Some(origin)) = self.origins.get_mut(slot as usize) {
            origin.waiting = origin.waiting.saturating_add(1);
        }
        self.queue.push_back(Waiting {
            since: ts.unwrap_or(self.now),
            record,
            origin: slot,
            acked,
        });
    }

    /// The slot of `stream`'s origin, made when it has none.
    fn slot_of(
        &mut self,
        stream: u64,
        stamp: &Stamp,
        protocol: &'static str,
        tls: Option<&Value>,
    ) -> u32 {
        let slot = *self.slot.entry(stream).or_insert_with(|| {
            let origin = Some(Origin {
                stream,
                stamp: stamp.clone(),
                protocol,
                tls: tls.cloned(),
                waiting: 0,
            });
            match self.free.pop() {
                Some(i) => {
                    self.origins[i as usize] = origin;
                    i
                }
                None => {
                    // at most MAX_WAITING + 1 origins: each has a record waiting
                    let next = u32::try_from(self.origins.len()).unwrap_or(u32::MAX);
                    self.origins.push(origin);
                    next
                }
            }
        });
        self.last = Some((stream, slot));
        slot
    }

    /// The first waiting record when it is due: all of them at the end (`all`), else one past the
    /// horizon (live inputs) or beyond `MAX_WAITING`.
    pub fn due(&mut self, all: bool) -> Option<Waiting> {
        let front = self.queue.front()?;
        let late = self
            .horizon
            .is_some_and(|h| self.now.saturating_sub(front.since) > h);
        (all || late || self.queue.len() > MAX_WAITING)
            .then(|| self.queue.pop_front())
            .flatten()
    }

    /// A horizon of 0: records are judged as they come, in their place (nothing waits).
    pub fn at_once(&self) -> bool {
        self.horizon == Some(0)
    }

    pub fn waiting(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Where a due record goes (stream, stamp, protocol, TLS description), by its `origin`
    /// slot; the origin is forgotten with its stream's last waiting record (`done`).
    pub fn origin(&self, slot: u32) -> Option<(u64, &Stamp, &'static str, Option<&Value>)> {
        let o = self.origins.get(slot as usize)?.as_ref()?;
        Some((o.stream, &o.stamp, o.protocol, o.tls.as_ref()))
    }

    /// A record of the origin in `slot` went out.
    pub fn done(&mut self, slot: u32) {
        let Some(Some(o)) = self.origins.get_mut(slot as usize) else {
            return;
        };
        o.waiting = o.waiting.saturating_sub(1);
        if o.waiting == 0 {
            self.slot.remove(&o.stream);
            if self.last.is_some_and(|(_, last)| last == slot) {
                self.last = None;
            }
            self.origins[slot as usize] = None;
            self.free.push(slot);
        }
    }
}

/// The store a protocol's waiting records go into (the one its decoder holds its records in).
pub fn store<'a>(shared: &'a mut crate::decoders::Shared, protocol: &str) -> &'a mut SpillStore {
    match protocol {
        "hercules" => &mut shared.hercules.held,
        "courier" => &mut shared.courier.held,
        _ => &mut shared.lumberjack.held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(stream: u64) -> Stamp {
        Stamp {
            stream,
            client: format!("10.0.0.{stream}:4000"),
            server: "10.0.0.9:5044".to_owned(),
        }
    }

    #[test]
    fn each_record_goes_out_with_its_own_streams_origin_and_acked() {
        let mut store = SpillStore::new(usize::MAX);
        let mut fates = Fates::new(None);
        let mut hold = |fates: &mut Fates, stream: u64, acked| {
            let record = store.hold(&crate::model::Message::new("lumberjack", "event"));
            fates.hold(
                stream,
                record,
                acked,
                None,
                &stamp(stream),
                "lumberjack",
                None,
            );
        };
        // stream 1's origin is forgotten with its last record, and its slot is stream 3's
        hold(&mut fates, 1, Some(Some(false)));
        hold(&mut fates, 2, None);
        hold(&mut fates, 2, Some(None));
        let mut out = Vec::new();
        let next = |fates: &mut Fates, out: &mut Vec<_>| {
            let w = fates.due(true).expect("a waiting record");
            let (stream, stamp, protocol, _) = fates.origin(w.origin).expect("its origin");
            out.push((stream, stamp.client.clone(), protocol, w.acked));
            fates.done(w.origin);
        };
        next(&mut fates, &mut out);
        hold(&mut fates, 3, None);
        while fates.waiting() {
            next(&mut fates, &mut out);
        }
        let client = |s: u64| format!("10.0.0.{s}:4000");
        assert_eq!(
            out,
            [
                (1, client(1), "lumberjack", Some(Some(false))),
                (2, client(2), "lumberjack", None),
                (2, client(2), "lumberjack", Some(None)),
                (3, client(3), "lumberjack", None),
            ]
        );
        assert_eq!(fates.origins.len(), 2, "stream 3 took stream 1's slot");
        assert!(fates.origins.iter().all(Option::is_none) && fates.slot.is_empty());
    }
}
