//! Windows, ACKs and the delivery truth of every event on one connection.
//!
//! The first question about a log pipeline capture is "which events never made it", so event
//! records are held back until their fate is known (acknowledged, or the stream ended without an
//! ACK) and are emitted once, with their final `acked` state and the ACK that covered them. Holding
//! is bounded by `limits.max_pending_events`: beyond it the oldest window goes out early with
//! `acked` left null.
//!
//! ACKs are paired with windows in FIFO order (Beats pipeline several windows, each starting at
//! seq 1, so values cannot be matched to windows). An ACK's value is a count of events on go-lumber
//! servers and the highest seq on Logstash; when the window's seqs are not 1..n the two readings
//! differ, which tells the server kind, and exposes the pylogbeat-vs-go-lumber stall.

use std::collections::VecDeque;

use super::kept::{acknowledged, Item};
use super::report::{finding, Pos, PROTOCOL};
use super::resend::{FirstCopy, ResendRegistry};
use super::waiting::Seqs;
use crate::decoders::delivery::LUMBERJACK_FACTS;
use crate::decoders::CloseRoom;
use crate::held::spill::SpillStore;
use crate::held::waiting::{Items, Records};
use crate::model::{Direction, Held, Message, Record, Severity, Value};

const GO_LUMBER_MAX_WINDOW: u32 = 10_000;
pub const COUNT: &str = "count";
pub const HIGHEST: &str = "highest-seq";
const BOTH: &str = "count=highest-seq";

fn server_text(kind: &str) -> &'static str {
    if kind == COUNT {
        "the server ACKs the number of events in the window (go-lumber / Filebeat lumberjack input)"
    } else {
        "the server ACKs the highest sequence number of the window (Logstash beats input)"
    }
}

/// Which surplus of a full window was reported: none, plain events, or one C frame's.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Extra {
    None,
    Plain,
    Compressed(u64),
}

/// One `W` batch (or an implicit batch of events that arrived without a `W`).
#[derive(Debug)]
struct Window {
    index: u64,
    count: Option<u32>,
    record: Option<Held>, // taken when emitted
    pos: Pos,
    items: Records<Item>, // compressed frames and events, in order (emptied on emission)
    frames_at: Vec<u32>,  // positions in `items` of the compressed frames (the rest are events)
    /// The ACKs of the held events: (events acknowledged once it came, its frame, its offset).
    acks: Vec<(usize, Option<u64>, u64)>,
    seqs: Seqs, // every event's seq: the window's size
    acked_n: usize,
    ack_value: Option<u32>,
    ack_frame: Option<u64>,
    c_frames: u64,
    extra: Extra,
    closed: bool,
    truncated: bool,
    gap: bool,
    emitted: bool,
    resends: u64,
    outstanding: bool,
}

impl Window {
    /// An event whose seq does not follow the window's last one, after a client→server capture
    /// gap in the window: the first captured event of the next window, whose W (and first events)
    /// the gap took (seqs only grow within a window, whichever way the client numbers them).
    fn next_after_gap(&self, seq: u32) -> bool {
        self.gap && self.seqs.last().is_some_and(|last| seq <= last)
    }

    fn full(&self) -> bool {
        self.count
            .is_some_and(|c| self.seqs.len() as u64 >= u64::from(c))
    }

    /// A complete window waiting for its ACK keeps one handle for its records, not one each.
    fn settle(&mut self, held: &mut SpillStore) {
        self.items.pack(held);
        self.seqs.shrink();
    }

    /// The events an ACK of `value` acknowledges in all, read as a count and as a highest seq
    /// (None for a reading that does not fit the unacknowledged events).
    fn readings(&self, value: u32) -> (Option<usize>, Option<usize>) {
        let (done, n, v) = (self.acked_n, self.seqs.len(), value as usize);
        let by_count = (done < v && v <= n).then_some(v);
        (by_count, self.seqs.after_last(done..n, value))
    }

    fn explains(&self, value: u32) -> bool {
        self.readings(value) != (None, None)
    }

    fn resolved(&self) -> bool {
        self.acked_n == self.seqs.len() && (self.closed || self.full())
    }

    /// A complete window that waits for its first ACK: all it still needs fits in bytes.
    fn parkable(&self) -> bool {
        self.outstanding
            && !self.emitted
            && self.acked_n == 0
            && self.acks.is_empty()
            && self.ack_value.is_none()
            && self.ack_frame.is_none()
            && (self.closed || self.full())
            && self.seqs.len() > 0
    }

    /// The state of a parkable window as bytes (its handles move into them, its kept records
    /// into the store first).
    fn into_bytes(self, held: &mut SpillStore) -> Vec<u8> {
        let items = self.items.into_held(held);
        let mut b = Vec::with_capacity(96);
        let opt = |b: &mut Vec<u8>, v: Option<u64>| match v {
            Some(v) => {
                b.push(1);
                b.extend_from_slice(&v.to_le_bytes());
            }
            None => b.push(0),
        };
        opt(&mut b, self.count.map(u64::from));
        match &self.record {
            Some(h) => {
                b.push(1);
                h.write_to(&mut b);
            }
            None => b.push(0),
        }
        b.push(u8::from(self.pos.direction == Direction::S2C));
        b.extend_from_slice(&self.pos.offset.to_le_bytes());
        opt(&mut b, self.pos.frame);
        opt(&mut b, self.pos.ts.map(|t| t as u64));
        match &items {
            Items::Loose(v) => {
                b.push(0);
                b.extend_from_slice(&(v.len() as u64).to_le_bytes());
                v.iter().for_each(|h| h.write_to(&mut b));
            }
            Items::Packed { list, len } => {
                b.push(1);
                list.write_to(&mut b);
                b.extend_from_slice(&(*len as u64).to_le_bytes());
            }
        }
        let u32s = |b: &mut Vec<u8>, v: &[u32]| {
            b.extend_from_slice(&(v.len() as u64).to_le_bytes());
            v.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
        };
        u32s(&mut b, &self.frames_at);
        match &self.seqs {
            Seqs::Run { first, len } => {
                b.push(0);
                b.extend_from_slice(&first.to_le_bytes());
                b.extend_from_slice(&len.to_le_bytes());
            }
            Seqs::List(v) => {
                b.push(1);
                u32s(&mut b, v);
            }
        }
        b.extend_from_slice(&self.c_frames.to_le_bytes());
        match self.extra {
            Extra::None => b.push(0),
            Extra::Plain => b.push(1),
            Extra::Compressed(c) => {
                b.push(2);
                b.extend_from_slice(&c.to_le_bytes());
            }
        }
        b.push(u8::from(self.closed) | u8::from(self.truncated) << 1 | u8::from(self.gap) << 2);
        b.extend_from_slice(&self.resends.to_le_bytes());
        b
    }

    /// The window `into_bytes` made (None for bytes it did not make: a damaged spill file).
    fn from_bytes(index: u64, bytes: &[u8]) -> Option<Window> {
        let mut r = Bytes(bytes);
        let count = r.opt()?.map(u32::try_from).transpose().ok()?;
        let record = if r.u8()? == 1 { Some(r.held()?) } else { None };
        let direction = if r.u8()? == 1 {
            Direction::S2C
        } else {
            Direction::C2S
        };
        let pos = Pos {
            direction,
            offset: r.u64()?,
            frame: r.opt()?,
            ts: r.opt()?.map(|t| t as i64),
        };
        let items = match r.u8()? {
            0 => {
                let n = r.len(16)?;
                Items::Loose((0..n).map(|_| r.held()).collect::<Option<_>>()?)
            }
            1 => Items::Packed {
                list: r.held()?,
                len: usize::try_from(r.u64()?).ok()?,
            },
            _ => return None,
        };
        let frames_at = r.u32s()?;
        let seqs = match r.u8()? {
            0 => Seqs::Run {
                first: r.u32()?,
                len: r.u32()?,
            },
            1 => Seqs::List(r.u32s()?),
            _ => return None,
        };
        let c_frames = r.u64()?;
        let extra = match r.u8()? {
            0 => Extra::None,
            1 => Extra::Plain,
            2 => Extra::Compressed(r.u64()?),
            _ => return None,
        };
        let flags = r.u8()?;
        let resends = r.u64()?;
        // what emission relies on: one item per event plus the compressed frames, at their places
        let fits = items.len() == seqs.len().checked_add(frames_at.len())?
            && frames_at.iter().all(|&f| (f as usize) < items.len());
        (r.0.is_empty() && fits).then_some(Window {
            index,
            count,
            record,
            pos,
            items: Records::Held(items),
            frames_at,
            acks: Vec::new(),
            seqs,
            acked_n: 0,
            ack_value: None,
            ack_frame: None,
            c_frames,
            extra,
            closed: flags & 1 != 0,
            truncated: flags & 2 != 0,
            gap: flags & 4 != 0,
            emitted: false,
            resends,
            outstanding: true,
        })
    }
}

/// Reads what `Window::into_bytes` wrote; every length is checked against the bytes left.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn opt(&mut self) -> Option<Option<u64>> {
        match self.u8()? {
            0 => Some(None),
            1 => self.u64().map(Some),
            _ => None,
        }
    }
    fn held(&mut self) -> Option<Held> {
        Held::read_from(&self.take::<16>()?)
    }
    /// A count of `size`-byte items that the bytes left can hold.
    fn len(&mut self, size: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n <= self.0.len() / size).then_some(n)
    }
    fn u32s(&mut self) -> Option<Vec<u32>> {
        let n = self.len(4)?;
        (0..n).map(|_| self.u32()).collect()
    }
}

/// Windows past the first `LIVE_FRONT` that wait for their first ACK are parked: their state goes
/// to the held store as bytes, and the connection keeps 32 bytes of each. A stalled pipeline's
/// connection keeps every window it sent waiting; live, each cost ~290 bytes of memory that grew
/// with the capture (bench/bench_held.py). ACKs answer the oldest windows, which stay live.
const LIVE_FRONT: usize = 2;

#[derive(Debug)]
enum Slot {
    Live(Box<Window>),
    Parked {
        index: u64,
        events: u32,
        state: Held,
    },
}

impl Slot {
    fn index(&self) -> u64 {
        match self {
            Slot::Live(w) => w.index,
            Slot::Parked { index, .. } => *index,
        }
    }

    fn live(&self) -> Option<&Window> {
        match self {
            Slot::Live(w) => Some(w),
            Slot::Parked { .. } => None,
        }
    }

    fn live_mut(&mut self) -> Option<&mut Window> {
        match self {
            Slot::Live(w) => Some(w),
            Slot::Parked { .. } => None,
        }
    }

    /// Events that still wait for an ACK here.
    fn waiting(&self) -> bool {
        match self {
            Slot::Live(w) => w.outstanding && w.acked_n < w.seqs.len(),
            Slot::Parked { events, .. } => *events > 0,
        }
    }
}

/// What the connection summary reports.
#[derive(Debug, Default)]
pub struct Stats {
    pub windows: u64,
    pub events: u64,
    pub acked_events: u64,
}

/// Window/event/ACK bookkeeping for one connection; records to emit are appended to `out`.
#[derive(Debug)]
pub struct Delivery {
    stream: u64,
    max_pending: usize,
    /// `LIVE_FRONT`; tests turn parking off to compare.
    live_front: usize,
    /// Unresolved windows oldest first, plus the current (newest) window even when resolved; the
    /// first `LIVE_FRONT` and the current one are live, the others may be parked.
    windows: VecDeque<Slot>,
    pending: usize,
    overflowed: bool,
    pub server_kind: Option<&'static str>,
    last_ack_ts: Option<i64>,
    keepalives: u64, // keep-alives while windows were outstanding
    keepalive_span: Option<(f64, f64)>,
    first_keepalive: Option<Pos>,
    s2c_gap: bool,
    c2s_gap: bool,
    pub stats: Stats,
}

impl Delivery {
    pub fn new(stream: u64, max_pending: usize) -> Self {
        Delivery {
            stream,
            max_pending,
            live_front: LIVE_FRONT,
            windows: VecDeque::new(),
            pending: 0,
            overflowed: false,
            server_kind: None,
            last_ack_ts: None,
            keepalives: 0,
            keepalive_span: None,
            first_keepalive: None,
            s2c_gap: false,
            c2s_gap: false,
            stats: Stats::default(),
        }
    }

    #[cfg(test)]
    pub fn without_parking(&mut self) {
        self.live_front = usize::MAX;
    }

    #[cfg(test)]
    pub fn parked(&self) -> usize {
        (self.windows.iter())
            .filter(|s| matches!(s, Slot::Parked { .. }))
            .count()
    }

    fn current(&mut self) -> Option<&mut Window> {
        self.windows.back_mut().and_then(Slot::live_mut)
    }

    fn newest(&self) -> Option<&Window> {
        self.windows.back().and_then(Slot::live)
    }

    fn outstanding(&self) -> impl Iterator<Item = &Window> {
        self.windows
            .iter()
            .filter_map(Slot::live)
            .filter(|w| w.outstanding)
    }

    fn at(&self, index: u64) -> usize {
        self.windows.partition_point(|w| w.index() < index)
    }

    /// The window before the newest one goes to the store when it only waits for its first ACK
    /// and is not among the oldest (those ACKs answer first).
    fn park_previous(&mut self, held: &mut SpillStore) {
        let front = self.live_front;
        let Some(at) = self.windows.len().checked_sub(2).filter(|&at| at >= front) else {
            return;
        };
        if !self.windows[at].live().is_some_and(Window::parkable) {
            return;
        }
        if let Some(Slot::Live(w)) = self.windows.remove(at) {
            let (index, events) = (w.index, u32::try_from(w.seqs.len()).unwrap_or(u32::MAX));
            let bytes = w.into_bytes(held);
            let state = held.hold_bytes(&bytes);
            self.windows.insert(
                at,
                Slot::Parked {
                    index,
                    events,
                    state,
                },
            );
        }
    }

    /// Make the window at `at` live; false when its state could not be read back (it is gone,
    /// and its events are counted lost by the store's finding).
    fn unpark(&mut self, at: usize, held: &mut SpillStore) -> bool {
        match self.windows.get(at) {
            None => return false,
            Some(Slot::Live(_)) => return true,
            Some(Slot::Parked { .. }) => {}
        }
        let Some(slot) = self.windows.remove(at) else {
            return false;
        };
        match revive(slot, held, &mut self.pending) {
            Some(w) => {
                self.windows.insert(at, Slot::Live(w));
                true
            }
            None => false,
        }
    }

    /// The oldest `LIVE_FRONT` windows live again (after one of them left).
    fn unpark_front(&mut self, held: &mut SpillStore) {
        let mut at = 0;
        while at < self.live_front.min(self.windows.len()) {
            if self.unpark(at, held) {
                at += 1;
            }
        }
    }

    // client side --------------------------------------------------------------------------------

    pub fn open_window(
        &mut self,
        count: u32,
        record: Message,
        pos: &Pos,
        inside_c: bool,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        if inside_c {
            out.push(
                finding(
                    "lumberjack.window-in-compressed",
                    Severity::Error,
                    "W frame inside a compressed frame (go-lumber rejects it)".into(),
                    pos,
                    vec![("count", count.into())],
                )
                .into(),
            );
        }
        self.close_current(pos, held, out);
        if count == 0 {
            out.push(
                finding(
                    "lumberjack.window-empty",
                    Severity::Warning,
                    "W 0: an empty window (Logstash >= 6.7 answers ACK 0, go-lumber never answers)"
                        .into(),
                    pos,
                    Vec::new(),
                )
                .into(),
            );
        } else if count > GO_LUMBER_MAX_WINDOW {
            out.push(
                finding(
                    "lumberjack.window-too-large",
                    Severity::Warning,
                    format!(
                        "window of {count} events is above go-lumber's MaxWindowSize \
                         {GO_LUMBER_MAX_WINDOW} (ErrWindowTooLarge)"
                    ),
                    pos,
                    vec![("count", count.into())],
                )
                .into(),
            );
        }
        self.new_window(Some(count), record, *pos, held, out);
    }

    /// Attach a C frame's record to its window; flag a window spread over several C frames.
    pub fn begin_compressed(
        &mut self,
        mut record: Message,
        pos: &Pos,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let Some(w) = self.current().filter(|w| !w.emitted) else {
            out.push(record.into());
            return;
        };
        if w.c_frames > 0 && !w.full() {
            out.push(
                finding(
                    "lumberjack.window-split-compressed",
                    Severity::Warning,
                    format!(
                        "window {} continues in another C frame (go-lumber fails: EOF inside the \
                         first inflated stream; Logstash accepts it)",
                        w.index
                    ),
                    pos,
                    vec![
                        ("window", w.index.into()),
                        ("received", (w.seqs.len() as u64).into()),
                        ("count", w.count.map_or(Value::Null, Value::from)),
                    ],
                )
                .into(),
            );
        }
        w.c_frames += 1;
        record.set("window", w.index);
        w.frames_at.push(w.items.len() as u32);
        w.items.push(Item::Record(Box::new(record)), held);
    }

    /// Add an event (the per-event path). `c_frame` identifies the enclosing C frame; `print` is
    /// the payload's fingerprint.
    #[allow(clippy::too_many_arguments)]
    pub fn add_event(
        &mut self,
        mut record: Item,
        seq: u32,
        print: u64,
        pos: &Pos,
        c_frame: Option<u64>,
        resends: &mut ResendRegistry,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let room = self.newest().is_some_and(|w| {
            w.count
                .is_some_and(|c| (w.seqs.len() as u64) < u64::from(c))
                && !w.emitted
                && !w.next_after_gap(seq)
        });
        if !room {
            self.place(&record, seq, pos, c_frame, held, out);
        }
        let first = resends.first_copy(self.stream, print, pos.frame, seq);
        let Some(w) = self.windows.back_mut().and_then(Slot::live_mut) else {
            return; // place() always leaves a current window
        };
        record.set_window(w.index);
        if let Some(first) = first {
            let mut m = record.record();
            resent(w, &mut m, first, pos, out);
            record = Item::Record(Box::new(m));
        }
        w.seqs.push(seq);
        self.stats.events += 1;
        if w.emitted {
            out.push(record.record().into());
            return;
        }
        w.items.push(record, held);
        if w.full() {
            w.settle(held);
        }
        self.pending += 1;
        if self.pending > self.max_pending {
            self.overflow(pos, held, out);
        }
    }

    /// Make the current window the right one for an event when it has no room left (or there is
    /// none).
    fn place(
        &mut self,
        event: &Item,
        seq: u32,
        pos: &Pos,
        c_frame: Option<u64>,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        // After a client→server capture gap, an event no window has room for most likely
        // belongs to a window whose W frame is in the gap: the capture's loss, not the client's.
        let in_gap = match self.newest() {
            None => self.c2s_gap,
            Some(w) => w.gap && (w.resolved() || w.full()) || w.next_after_gap(seq),
        };
        let new = match self.newest() {
            _ if in_gap => Some((
                "lumberjack.window-in-gap",
                Severity::Info,
                "event after a client→server capture gap that no captured W frame announces: its \
                 window's W is in the gap"
                    .to_owned(),
            )),
            None => Some((
                "lumberjack.event-without-window",
                Severity::Error,
                "event before any W frame (go-lumber: 'Expected window frame')".to_owned(),
            )),
            Some(w) if w.resolved() => Some((
                "lumberjack.window-exceeded",
                Severity::Error,
                format!(
                    "event after window {} was complete, without a new W",
                    w.index
                ),
            )),
            Some(_) => None,
        };
        if let Some((code, severity, text)) = new {
            out.push(finding(code, severity, text, pos, vec![("seq", seq.into())]).into());
            let mut implicit = Message::new(PROTOCOL, "window");
            implicit.direction = Some(pos.direction);
            implicit.offset = Some(pos.offset);
            implicit.frame = pos.frame;
            implicit.ts = pos.ts;
            implicit.version = event.version();
            self.new_window(None, implicit, *pos, held, out);
            if let Some(w) = self.current().filter(|_| in_gap) {
                w.gap = true; // its W, and maybe some of its events, are missing
            }
            return;
        }
        let Some(w) = self.current() else {
            return;
        };
        if !w.full() {
            return;
        }
        match c_frame {
            None if w.extra == Extra::None => {
                // once per window: a v1 sliding-window client exceeds it forever
                w.extra = Extra::Plain;
                out.push(
                    finding(
                        "lumberjack.window-exceeded",
                        Severity::Error,
                        format!(
                            "more events than window {} announced ({}); go-lumber drops the \
                             connection ('Expected window frame')",
                            w.index,
                            count_text(w.count)
                        ),
                        pos,
                        vec![
                            ("window", w.index.into()),
                            ("count", w.count.map_or(Value::Null, Value::from)),
                            ("seq", seq.into()),
                        ],
                    )
                    .into(),
                );
            }
            Some(c) if w.extra != Extra::Compressed(c) => {
                w.extra = Extra::Compressed(c);
                out.push(
                    finding(
                        "lumberjack.compressed-extra-frames",
                        Severity::Warning,
                        format!(
                            "frames left in the C frame after window {} is full ({} events); \
                             go-lumber silently discards them, Logstash keeps them",
                            w.index,
                            count_text(w.count)
                        ),
                        pos,
                        vec![
                            ("window", w.index.into()),
                            ("count", w.count.map_or(Value::Null, Value::from)),
                        ],
                    )
                    .into(),
                );
            }
            _ => {}
        }
    }

    pub fn gap(&mut self, client_side: bool) {
        if client_side {
            self.c2s_gap = true;
            if let Some(w) = self.current() {
                w.gap = true;
            }
        } else {
            self.s2c_gap = true;
        }
    }

    // server side --------------------------------------------------------------------------------

    /// Apply one ACK: released windows/events and findings, then the ACK record, go to `out`.
    pub fn ack(
        &mut self,
        value: u32,
        mut record: Message,
        pos: &Pos,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        record.set("keepalive", value == 0);
        record.set("window", Value::Null);
        record.set("acked_events", 0);
        record.set("interpretation", Value::Null);
        if value == 0 {
            self.keepalive(&mut record, pos);
        } else {
            let mut waiting = self.windows.iter().filter(|w| w.waiting());
            let first = waiting.next();
            let mut target = first.map(Slot::index);
            // The ACK of the oldest window may be in a server→client capture gap: an ACK that
            // only a later (live) window explains is that window's, and the older one's fate
            // stays unknown, instead of every later ACK being "too high" for the older one.
            let explains = |s: &Slot| s.live().is_some_and(|w| w.explains(value));
            if self.s2c_gap && first.is_some_and(|s| s.live().is_some() && !explains(s)) {
                if let Some(later) = waiting.find(|s| explains(s)) {
                    target = Some(later.index());
                }
            }
            match target {
                None => {
                    let lost = if self.c2s_gap {
                        " (its window may be in a client→server capture gap)"
                    } else {
                        ""
                    };
                    out.push(
                        finding(
                            "lumberjack.ack-unexpected",
                            if self.c2s_gap {
                                Severity::Info
                            } else {
                                Severity::Warning
                            },
                            format!(
                                "ACK {value} while no event is waiting for an acknowledgement{lost}"
                            ),
                            pos,
                            vec![("value", value.into())],
                        )
                        .into(),
                    );
                }
                Some(index) => {
                    self.unknown_before(index, held, out);
                    self.apply(index, value, &mut record, pos, held, out);
                }
            }
        }
        if pos.ts.is_some() {
            self.last_ack_ts = pos.ts;
        }
        out.push(record.into());
    }

    /// An ACK only a later window explains: the older waiting windows' ACKs are in a
    /// server→client capture gap, their fate stays unknown whatever comes, so their records go
    /// out now (`acked: null`, as at the stream's end), before the later window's: records come
    /// out in stream order.
    fn unknown_before(&mut self, index: u64, held: &mut SpillStore, out: &mut Vec<Record>) {
        self.emit_early(held, out, |d, at| d.windows[at].index() < index);
    }

    /// The outstanding windows' records, oldest first while `more` says so, before their fate is
    /// known (`acked: null`); the windows stay outstanding.
    fn emit_early(
        &mut self,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
        more: impl Fn(&Self, usize) -> bool,
    ) {
        let mut at = 0;
        while at < self.windows.len() && more(self, at) {
            if !self.unpark(at, held) {
                continue; // gone: the next one is at `at` now
            }
            if let Some(w) = self.windows[at]
                .live_mut()
                .filter(|w| w.outstanding && !w.emitted)
            {
                emit(w, false, &mut self.pending, held, out);
            }
            at += 1;
        }
    }

    fn apply(
        &mut self,
        index: u64,
        value: u32,
        record: &mut Message,
        pos: &Pos,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let at = self.at(index);
        let server_kind = self.server_kind;
        if !self.unpark(at, held) {
            return;
        }
        let Some(w) = self.windows[at].live_mut() else {
            return;
        };
        let (done, n) = (w.acked_n, w.seqs.len());
        let v = value as usize;
        let (by_count, by_seq) = w.readings(value);
        record.set("window", w.index);
        if by_count.is_none() && by_seq.is_none() {
            let stale = v <= done || w.seqs.before(done, value);
            // A window with bytes missing from the capture: the ACK may count events the capture
            // lost, so it is the capture's shortfall, not the server's error; pairing goes on.
            let beyond = (!stale && w.gap)
                .then(|| beyond_capture(w, value))
                .flatten();
            let (code, sev, text) = if beyond.is_some() {
                (
                    "lumberjack.ack-beyond-capture",
                    Severity::Info,
                    format!(
                        "ACK {value} acknowledges more of window {} than the capture holds ({n} \
                         events, seqs {}..{}): the others are in a client→server capture gap",
                        w.index,
                        count_text(w.seqs.first()),
                        count_text(w.seqs.last())
                    ),
                )
            } else if stale {
                (
                    "lumberjack.ack-stale",
                    Severity::Warning,
                    format!(
                        "ACK {value} repeats an acknowledgement already received for window {}",
                        w.index
                    ),
                )
            } else {
                (
                    "lumberjack.ack-too-high",
                    Severity::Error,
                    format!(
                        "ACK {value} is above what window {} can acknowledge ({n} events, seqs \
                         {}..{}); go-lumber clients fail: 'invalid sequence number received'",
                        w.index,
                        count_text(w.seqs.get(done)),
                        count_text(w.seqs.last())
                    ),
                )
            };
            out.push(
                finding(
                    code,
                    sev,
                    text,
                    pos,
                    vec![
                        ("value", value.into()),
                        ("window", w.index.into()),
                        ("events", (n as u64).into()),
                    ],
                )
                .into(),
            );
            if let Some(new) = beyond {
                self.acknowledge(at, new.max(done), value, record, pos, held, out);
            }
            return;
        }
        let (interp, new) = match (by_count, by_seq) {
            (Some(c), None) => (COUNT, c),
            (None, Some(s)) => (HIGHEST, s),
            (Some(c), Some(s)) if c == s => (BOTH, c),
            (Some(c), Some(s)) => {
                if server_kind == Some(COUNT) || (server_kind.is_none() && c == n) {
                    (COUNT, c)
                } else {
                    (HIGHEST, s)
                }
            }
            (None, None) => return,
        };
        record.set("interpretation", interp);
        let mut found: Vec<Record> = Vec::new();
        // a window with missing events cannot tell a count from a highest seq
        let gap = self.windows[at].live().is_some_and(|w| w.gap);
        if (interp == COUNT || interp == HIGHEST) && server_kind.is_none() && !gap {
            self.server_kind = Some(interp);
            found.push(
                finding(
                    "lumberjack.server-kind",
                    Severity::Info,
                    server_text(interp).into(),
                    pos,
                    vec![("server_kind", interp.into())],
                )
                .into(),
            );
        }
        let Some(w) = self.windows[at].live_mut() else {
            return;
        };
        let last_seq = w.seqs.get(new - 1).unwrap_or(value);
        if interp == COUNT && last_seq != value {
            found.push(
                finding(
                    "lumberjack.ack-stall",
                    Severity::Warning,
                    format!(
                        "ACK {value} counts events but the client numbers them continuously (last \
                         seq {last_seq}): a sender waiting for the highest seq (pylogbeat) hangs here"
                    ),
                    pos,
                    vec![
                        ("value", value.into()),
                        ("expected_seq", last_seq.into()),
                        ("window", w.index.into()),
                    ],
                )
                .into(),
            );
        }
        if new < n
            || w.count
                .is_some_and(|c| (n as u64) < u64::from(c) && !w.closed && !gap)
        {
            let of = w.count.map_or(n as u64, u64::from);
            found.push(
                finding(
                    "lumberjack.ack-partial",
                    Severity::Info,
                    format!(
                        "partial ACK {value}: {new} of {of} events of window {} acknowledged",
                        w.index
                    ),
                    pos,
                    vec![
                        ("value", value.into()),
                        ("window", w.index.into()),
                        ("acked", (new as u64).into()),
                    ],
                )
                .into(),
            );
        }
        self.acknowledge(at, new, value, record, pos, held, out);
        out.append(&mut found);
    }

    /// The first `new` events of the window at `at` are acknowledged by this ACK.
    #[allow(clippy::too_many_arguments)]
    fn acknowledge(
        &mut self,
        at: usize,
        new: usize,
        value: u32,
        record: &mut Message,
        pos: &Pos,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        let Some(w) = self.windows[at].live_mut() else {
            return;
        };
        let done = w.acked_n;
        record.set("acked_events", (new - done) as u64);
        self.stats.acked_events += (new - done) as u64;
        if !w.emitted {
            w.acks.push((new, pos.frame, pos.offset));
        }
        w.acked_n = new;
        w.ack_value = Some(value);
        w.ack_frame = pos.frame;
        // A window with bytes in a client→server gap, acknowledged up to its announced count (a
        // count ACK, or the highest seq of a window numbered from 1): the server holds all its
        // events, those in the gap too, so it is complete; later events belong to the next window
        // (whose W may be in the gap too), not to this one.
        w.closed |= w.gap && w.count == Some(value);
        if w.resolved() {
            self.resolve(at, held, out);
        }
    }

    fn keepalive(&mut self, record: &mut Message, pos: &Pos) {
        let oldest = self.outstanding().next().map(|w| w.pos.ts);
        let reference = match (self.last_ack_ts, oldest.flatten()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let interval = match (reference, pos.ts) {
            (Some(r), Some(ts)) => Some((i128::from(ts) - i128::from(r)) as f64 / 1e6),
            _ => None,
        };
        record.set("interval_ms", interval);
        if self.first_keepalive.is_none() {
            self.first_keepalive = Some(*pos);
        }
        if oldest.is_some() {
            self.keepalives += 1;
            if let Some(i) = interval {
                self.keepalive_span = Some(match self.keepalive_span {
                    None => (i, i),
                    Some((lo, hi)) => (lo.min(i), hi.max(i)),
                });
            }
        }
    }

    // emission -----------------------------------------------------------------------------------

    pub fn acks_lost(&self) -> bool {
        self.s2c_gap
    }

    /// Stream end: every held event goes out; unacknowledged windows become one finding.
    ///
    /// Events never acknowledged are `acked: false`, or `acked: null` when server→client bytes
    /// are missing from the capture (their ACK may be in the gap).
    /// Then `release` gives the windows' records.
    pub fn close(&mut self, held: &mut SpillStore, out: &mut Vec<Record>) {
        // the first waiting window says where; the others are read back one by one below, each
        // just before its records (in the order they went to the spill file)
        while let Some(at) = self.windows.iter().position(Slot::waiting) {
            if self.unpark(at, held) {
                break;
            }
        }
        let unacked: Vec<&Slot> = self.windows.iter().filter(|s| s.waiting()).collect();
        if let Some(first) = unacked.first().and_then(|s| s.live()) {
            let total: u64 = unacked
                .iter()
                .map(|s| match s {
                    Slot::Live(w) => (w.seqs.len() - w.acked_n) as u64,
                    Slot::Parked { events, .. } => u64::from(*events),
                })
                .sum();
            let note = if self.s2c_gap {
                "; server→client bytes are missing, ACKs may be in the gap"
            } else {
                ""
            };
            let windows: Vec<Value> = unacked.iter().map(|s| s.index().into()).collect();
            let f = finding(
                "lumberjack.unacked",
                Severity::Warning,
                format!(
                    "{total} events unacknowledged in {} window(s) at stream end{note}",
                    unacked.len()
                ),
                &first.pos,
                vec![
                    ("events", total.into()),
                    ("windows", Value::Array(windows)),
                    ("s2c_gap", self.s2c_gap.into()),
                ],
            );
            out.push(f.into());
        }
        if let (true, Some(first)) = (self.keepalives > 0, self.first_keepalive) {
            let span = match self.keepalive_span {
                Some((lo, hi)) => format!(", interval {lo:.0}..{hi:.0} ms"),
                None => String::new(),
            };
            let (lo, hi) = self.keepalive_span.unzip();
            out.push(
                finding(
                    "lumberjack.keepalive",
                    Severity::Info,
                    format!(
                        "{} keep-alive ACK 0 while windows were outstanding{span} (go-lumber sends \
                         one every 3 s, Logstash every 5 s)",
                        self.keepalives
                    ),
                    &first,
                    vec![
                        ("count", self.keepalives.into()),
                        ("min_ms", lo.into()),
                        ("max_ms", hi.into()),
                    ],
                )
                .into(),
            );
        }
    }

    /// After `close`: the held windows' records, oldest first, while there is room; whether
    /// windows are left.
    pub fn release(&mut self, held: &mut SpillStore, out: &mut Vec<Record>) -> bool {
        let final_ = !self.s2c_gap;
        let room = CloseRoom::new(out, held);
        while room.left(out, held) {
            let Some(slot) = self.windows.pop_front() else {
                return false;
            };
            let Some(mut w) = revive(slot, held, &mut self.pending) else {
                continue; // lost with the spill file: held.finding() says so
            };
            if w.outstanding && !w.emitted {
                w.closed = true;
                emit(&mut w, final_, &mut self.pending, held, out);
            }
        }
        !self.windows.is_empty()
    }

    fn new_window(
        &mut self,
        count: Option<u32>,
        record: Message,
        pos: Pos,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) {
        // The previous current window stays only while it is outstanding.
        if self.newest().is_some_and(|w| !w.outstanding) {
            self.windows.pop_back();
        }
        self.stats.windows += 1;
        // some room at once; a complete window packs its handles (a W costs 6 bytes on the wire:
        // its announced count is no reason to allocate)
        let room = count.map_or(0, |c| c.min(64) as usize);
        // Records are kept as they are in the newest two windows only; behind two that still wait
        // (a stalled server), this one will wait as well: held at once, not kept then packed.
        let items = if self.windows.len() >= 2 {
            Records::held(room + 1)
        } else {
            Records::with_capacity(room + 1)
        };
        self.windows.push_back(Slot::Live(Box::new(Window {
            index: self.stats.windows,
            count,
            record: Some(held.hold(&record)),
            pos,
            items,
            frames_at: Vec::new(),
            acks: Vec::new(),
            seqs: Seqs::default(),
            acked_n: 0,
            ack_value: None,
            ack_frame: None,
            c_frames: 0,
            extra: Extra::None,
            closed: false,
            truncated: false,
            gap: false,
            emitted: false,
            resends: 0,
            outstanding: true,
        })));
        // the window now third newest waits: its records go to the store
        let third = self.windows.len().checked_sub(3);
        if let Some(w) = third.and_then(|at| self.windows[at].live_mut()) {
            w.items.hold(held);
            if w.closed || w.full() {
                w.settle(held);
            }
        }
        self.park_previous(held);
        let at = self.windows.len() - 1;
        if self.newest().is_some_and(Window::resolved) {
            self.resolve(at, held, out);
        }
    }

    fn close_current(&mut self, pos: &Pos, held: &mut SpillStore, out: &mut Vec<Record>) {
        let Some(w) = self.current() else {
            return;
        };
        if w.closed {
            return;
        }
        w.closed = true;
        w.settle(held);
        if let Some(count) = w.count.filter(|&c| (w.seqs.len() as u64) < u64::from(c)) {
            w.truncated = true;
            let why = if w.gap {
                " (bytes of this window are missing from the capture)"
            } else {
                ""
            };
            out.push(
                finding(
                    "lumberjack.window-truncated",
                    if w.gap {
                        Severity::Info
                    } else {
                        Severity::Warning
                    },
                    format!(
                        "new W before window {} filled: {} of {count} events (Logstash flushes the \
                         partial batch){why}",
                        w.index,
                        w.seqs.len()
                    ),
                    pos,
                    vec![
                        ("window", w.index.into()),
                        ("received", (w.seqs.len() as u64).into()),
                        ("count", count.into()),
                    ],
                )
                .into(),
            );
        }
        if w.resolved() {
            let at = self.windows.len() - 1;
            self.resolve(at, held, out);
        }
    }

    /// A resolved window leaves the outstanding ones (the current one stays as current).
    fn resolve(&mut self, at: usize, held: &mut SpillStore, out: &mut Vec<Record>) {
        let current = at + 1 == self.windows.len();
        let Some(w) = self.windows.get_mut(at).and_then(Slot::live_mut) else {
            return;
        };
        w.outstanding = false;
        if !w.emitted {
            emit(w, true, &mut self.pending, held, out);
        }
        if !current {
            self.windows.remove(at);
            self.unpark_front(held);
        }
    }

    fn overflow(&mut self, pos: &Pos, held: &mut SpillStore, out: &mut Vec<Record>) {
        if !self.overflowed {
            self.overflowed = true;
            out.push(
                finding(
                    "lumberjack.pending-overflow",
                    Severity::Warning,
                    format!(
                        "more than {} events wait for an ACK: the oldest windows are output before \
                         their ACK, with acked = null",
                        self.max_pending
                    ),
                    pos,
                    vec![("limit", (self.max_pending as u64).into())],
                )
                .into(),
            );
        }
        self.emit_early(held, out, |d, _| d.pending > d.max_pending);
    }
}

/// The window a slot stands for: a parked one read back from the store (None when it could not
/// be: its events are counted lost, and no longer pending).
fn revive(slot: Slot, held: &mut SpillStore, pending: &mut usize) -> Option<Box<Window>> {
    match slot {
        Slot::Live(w) => Some(w),
        Slot::Parked {
            index,
            events,
            state,
        } => {
            let events = events as usize;
            let bytes = held.take_bytes(state, events); // counts them lost when it fails
            let w = bytes.as_deref().and_then(|b| Window::from_bytes(index, b));
            if w.is_none() {
                if bytes.is_some() {
                    held.lose(events); // bytes came back, but not a window's
                }
                *pending = pending.saturating_sub(events);
            }
            w.map(Box::new)
        }
    }
}

/// Window record first, then its compressed frames and events.
///
/// `final_`: the window's fate is known (resolved or stream end), so events without an ACK are
/// `acked: false`; otherwise (early release) they are `acked: null`.
fn emit(
    w: &mut Window,
    final_: bool,
    pending: &mut usize,
    held: &mut SpillStore,
    out: &mut Vec<Record>,
) {
    w.emitted = true;
    let n = w.seqs.len();
    if let Some(mut record) = w.record.take().and_then(|r| held.take(r)) {
        record.acked = (n > 0).then_some(w.acked_n == n);
        record.fields.reserve(12); // the fields below, at once (a realloc each doubling else)
        record.set("window", w.index);
        record.set("count", w.count);
        record.set("received", n as u64);
        record.set("acked_events", w.acked_n as u64);
        record.set("ack_value", w.ack_value);
        record.set("ack_frame", w.ack_frame);
        record.set("seq_first", w.seqs.first());
        record.set("seq_last", w.seqs.last());
        record.set("compressed_frames", w.c_frames);
        record.set("truncated", w.truncated);
        record.set("implicit", w.count.is_none());
        record.set("resends", w.resends);
        out.push(record.into());
    }
    let unacked = if final_ { Some(false) } else { None };
    *pending -= w.items.len() - w.frames_at.len();
    let mut frames = std::mem::take(&mut w.frames_at).into_iter().peekable();
    let (mut event, mut acks) = (0, w.acks.iter().peekable());
    let mut records = w.items.take(held);
    let mut i = 0u32;
    loop {
        // an event's ACK, if any: ACKs cover events in order
        let fate = frames.next_if_eq(&i).is_none().then(|| {
            while acks.next_if(|a| a.0 <= event).is_some() {}
            event += 1;
            acks.peek().map(|&&(_, frame, offset)| (frame, offset))
        });
        i += 1;
        // an event no ACK covers waits for its fate again, in the session: lent, not read whole
        let record = match fate {
            Some(None) => records.lend_next(held, &LUMBERJACK_FACTS),
            Some(Some(ack)) => records.next_with(
                held,
                |item| item.acked_record(ack),
                |m| acknowledged(m, ack),
            ),
            None => records.next(held),
        };
        let Some(record) = record else {
            break;
        };
        let Some(mut m) = record else {
            continue; // lost with the spill file: held.finding() says so
        };
        if fate == Some(None) {
            m.acked = unacked;
        }
        out.push(m.into());
    }
    w.acks = Vec::new();
}

/// How many of a window's captured events an ACK acknowledges when no reading of them explains
/// it but bytes of the window are missing from the capture; None when the ACK is above anything
/// the window's announced count allows (then it is the server's error, gap or not).
fn beyond_capture(w: &Window, value: u32) -> Option<usize> {
    let n = w.seqs.len();
    if let Some(count) = w.count {
        let by_seq = w
            .seqs
            .first()
            .is_some_and(|s| value.wrapping_sub(s) < count);
        if value > count && !by_seq {
            return None;
        }
        if value == count {
            return Some(n); // a count ACK of the whole window
        }
    }
    // the captured events up to the ACK's seq (seqs skip the ones in the gap)
    Some(
        (0..n)
            .take_while(|&i| w.seqs.get(i).is_some_and(|s| s <= value))
            .count(),
    )
}

fn count_text(count: Option<u32>) -> String {
    count.map_or_else(|| "None".to_owned(), |c| c.to_string())
}

fn resent(
    w: &mut Window,
    record: &mut Message,
    first: FirstCopy,
    pos: &Pos,
    out: &mut Vec<Record>,
) {
    let mut place = serde_json::Map::new();
    place.insert("stream".into(), first.stream.into());
    place.insert("frame".into(), first.frame.into());
    place.insert("seq".into(), first.seq.into());
    record.set("resend_of", Value::Object(place));
    w.resends += 1;
    if w.resends == 1 {
        out.push(
            finding(
                "lumberjack.resend",
                Severity::Info,
                format!(
                    "window {} resends events first sent on stream {} (same content)",
                    w.index, first.stream
                ),
                pos,
                vec![
                    ("window", w.index.into()),
                    ("first_stream", first.stream.into()),
                    ("first_frame", first.frame.into()),
                ],
            )
            .into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parkable(store: &mut SpillStore, packed: bool) -> Window {
        let mut items = Items::with_capacity(4);
        for i in 0..5u8 {
            items.push(store.hold_bytes(&[i]), store);
        }
        if packed {
            items.pack(store);
        }
        let mut seqs = Seqs::default();
        for s in [1, 2, 4, 3] {
            seqs.push(s);
        }
        Window {
            index: 9,
            count: Some(4),
            record: Some(store.hold_bytes(b"w")),
            pos: Pos {
                direction: Direction::C2S,
                offset: 77,
                frame: None,
                ts: Some(-5),
            },
            items: Records::Held(items),
            frames_at: vec![0],
            acks: Vec::new(),
            seqs,
            acked_n: 0,
            ack_value: None,
            ack_frame: None,
            c_frames: 1,
            extra: Extra::Compressed(3),
            closed: true,
            truncated: false,
            gap: true,
            emitted: false,
            resends: 2,
            outstanding: true,
        }
    }

    #[test]
    fn a_parked_window_reads_back_as_it_was_and_damaged_bytes_do_not() {
        let mut store = SpillStore::new(1 << 20);
        for packed in [false, true] {
            let w = parkable(&mut store, packed);
            assert!(w.parkable());
            let bytes = w.into_bytes(&mut store);
            let back = Window::from_bytes(9, &bytes).expect("reads back");
            assert_eq!(
                (
                    back.index,
                    back.count,
                    back.pos,
                    back.seqs.len(),
                    back.seqs.get(2)
                ),
                (
                    9,
                    Some(4),
                    Pos {
                        direction: Direction::C2S,
                        offset: 77,
                        frame: None,
                        ts: Some(-5)
                    },
                    4,
                    Some(4)
                )
            );
            assert_eq!(
                (back.items.len(), back.frames_at.clone(), back.extra),
                (5, vec![0], Extra::Compressed(3))
            );
            assert_eq!(
                (back.closed, back.truncated, back.gap, back.resends),
                (true, false, true, 2)
            );
            assert_eq!(back.into_bytes(&mut store), bytes);
            for cut in 0..bytes.len() {
                assert!(
                    Window::from_bytes(9, &bytes[..cut]).is_none(),
                    "cut at {cut}"
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Window::from_bytes(9, &longer).is_none());
            for i in 0..bytes.len() {
                let mut damaged = bytes.clone();
                damaged[i] ^= 0xff;
                let _ = Window::from_bytes(9, &damaged); // never a panic, never a huge allocation
            }
        }
        let mut w = parkable(&mut store, true);
        w.frames_at = vec![7]; // past the items: emission would miscount what is pending
        assert!(Window::from_bytes(9, &w.into_bytes(&mut store)).is_none());
        let mut huge = vec![0u8, 0, 0, 0, 0]; // no count, no record, c2s, then offset...
        huge.extend(0u64.to_le_bytes());
        huge.extend([0, 0, 0]); // no frame, no ts, loose items
        huge.extend(u64::MAX.to_le_bytes()); // as many as a hostile file says
        assert!(Window::from_bytes(1, &huge).is_none());
    }
}
