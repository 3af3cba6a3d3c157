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

use crate::held::spill::{Held, SpillStore};
use crate::model::{Stamp, Value};

/// Records waiting at most (32 bytes each here); past it the oldest go out early.
pub const MAX_WAITING: usize = 1 << 21;
/// Records the end of the input writes a call (`Session::finish`), as a stream's end does
/// (`decoders::CloseRoom`): the caller takes each part before the next is read back.
pub const PART: usize = 4096;

/// Where a waiting record is written: its stream's stamp, protocol and TLS description (kept
/// after the stream ended while records of it wait).
struct Origin {
    stamp: Stamp,
    protocol: &'static str,
    tls: Option<Value>,
    waiting: usize,
}

/// One waiting record.
pub struct Waiting {
    pub stream: u64,
    since: i64,
    pub record: Held,
}

#[derive(Default)]
pub struct Fates {
    /// `Limits::fate_horizon_ns`.
    horizon: Option<i64>,
    queue: VecDeque<Waiting>,
    origins: HashMap<u64, Origin>,
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

    /// Hold a record's packed form (`record`, in its protocol's store; `ts`: its time) until
    /// `due`.
    #[allow(clippy::too_many_arguments)]
    pub fn hold(
        &mut self,
        stream: u64,
        record: Held,
        ts: Option<i64>,
        stamp: &Stamp,
        protocol: &'static str,
        tls: Option<&Value>,
    ) {
        let origin = self.origins.entry(stream).or_insert_with(|| Origin {
            stamp: stamp.clone(),
            protocol,
            tls: tls.cloned(),
            waiting: 0,
        });
        origin.waiting = origin.waiting.saturating_add(1);
        self.queue.push_back(Waiting {
            stream,
            since: ts.unwrap_or(self.now),
            record,
        });
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

    /// Where a due record goes (stamp, protocol, TLS description); its origin is forgotten with
    /// its stream's last waiting record (`done`).
    pub fn origin(&self, stream: u64) -> Option<(&Stamp, &'static str, Option<&Value>)> {
        self.origins
            .get(&stream)
            .map(|o| (&o.stamp, o.protocol, o.tls.as_ref()))
    }

    pub fn done(&mut self, stream: u64) {
        if let Some(o) = self.origins.get_mut(&stream) {
            o.waiting = o.waiting.saturating_sub(1);
            if o.waiting == 0 {
                self.origins.remove(&stream);
            }
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
