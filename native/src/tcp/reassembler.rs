//! The flow table and the per-segment logic (see the module docs in mod.rs).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "stream offsets (i64) come from seq::unwrap, within 2^31 of where the direction stands, and advance at most 2^31 a segment: below 2^63 for any capture under 2^32 segments; byte and packet counts are bounded by the capture's size; pending bytes by the reorder window"
)]

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use super::causal::Merge;
use super::graves::Graves;
use super::half::{Half, Piece};
use super::seq::{at_or_after, HALF, MOD};
use super::{server_port, Config, Event, StreamIds, StreamInfo};
use crate::capture::{Segment, ACK, FIN, RST, SYN};
use crate::model::text::hex;
use crate::model::{Direction, Finding, Severity};

use super::graves::Key;

const C2S: usize = 0;
const S2C: usize = 1;

/// Where a connection's events go: the caller's output, unless the connection holds them while a
/// hole waits its reorder window.
struct Out<'a> {
    cfg: &'a Config,
    events: &'a mut Vec<Event>,
}

struct Conn {
    info: StreamInfo,
    halves: [Half; 2],
    closed: bool,
    client_key: Key,
    /// Produce Chunk events (false once nobody wants this stream's bytes).
    emit: bool,
    /// Data events in causal order across the two directions (tcp/causal.rs).
    merge: Merge,
}

/// Capture packets a hole waits whatever the capture time: a late packet is a few places late, and
/// in a sparse capture those few places may be seconds apart.
const MIN_REORDER_PACKETS: u64 = 32;

/// Whether the packet (`now`, `now_ts`) is still within the reorder window that began at
/// (`frame`, `ts`): in packets and in capture time (time that went backwards counts as none).
fn within(cfg: &Config, now: u64, now_ts: i64, frame: u64, ts: i64) -> bool {
    let packets = now.saturating_sub(frame);
    packets <= cfg.reorder_packets
        && (packets <= MIN_REORDER_PACKETS || now_ts.saturating_sub(ts) <= cfg.reorder_ns)
}

fn endpoint(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

impl Conn {
    fn stream(&self) -> u64 {
        self.info.stream
    }

    /// FIN both ways, every byte delivered, both FINs acknowledged: nothing more can come (issue
    /// 28: such a connection waits for no timer).
    fn closed_cleanly(&self) -> bool {
        // what still waits in `merge` can only be freed by bytes: all are in (finishing forces the
        // queues out in the order they would leave anyway, and whether chunks are produced or not)
        self.closed
            && !self.info.reset
            && self.halves.iter().all(|h| {
                h.fin_off.is_some_and(|fin| {
                    h.next_off == fin
                        && h.pending.is_empty()
                        && h.acked_offset().is_some_and(|a| a > fin)
                })
            })
    }

    /// Each direction's sequence numbers, its SYN to one past its FIN (`closed_cleanly`).
    fn seq_spaces(&self) -> [(u32, u32); 2] {
        self.halves.each_ref().map(|h| {
            let base = h.base.unwrap_or(0);
            let past_fin = h.fin_off.unwrap_or(0).saturating_add(1).rem_euclid(MOD) as u32;
            (base.wrapping_sub(1), base.wrapping_add(past_fin))
        })
    }

    /// Take over what a hollow connection of the same 4-tuple counted (its packets, its RST or
    /// FINs, its place in the capture: it was this connection, written before its SYN).
    fn adopt(&mut self, old: StreamInfo) {
        let same_client = old.client == self.info.client;
        let (c2s, s2c) = if same_client {
            (old.packets_c2s, old.packets_s2c)
        } else {
            (old.packets_s2c, old.packets_c2s)
        };
        let info = &mut self.info;
        info.packets_c2s += c2s;
        info.packets_s2c += s2c;
        info.first_frame = info.first_frame.min(old.first_frame);
        info.first_ts = info.first_ts.min(old.first_ts);
        info.port_reuse = old.port_reuse;
        info.reset |= old.reset;
        self.closed |= old.reset;
    }

    /// Send a data event (chunk, gap and its finding) of direction `h` out once the other
    /// direction has put out the bytes its packet acknowledged (`ack`).
    fn route(&mut self, h: usize, event: Event, frame: u64, ack: Option<u32>, out: &mut Out) {
        self.merge
            .push(h, event, frame, ack, &self.halves, out.events);
    }

    /// Put out the data events whose wait is over.
    fn settle(&mut self, out: &mut Out) {
        self.merge.drain(&self.halves, out.events, false);
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        h: usize,
        off: i64,
        data: &[u8],
        frame: u64,
        ts: i64,
        ack: Option<u32>,
        out: &mut Out,
    ) {
        let n = data.len();
        if self.emit {
            let event = Event::Chunk {
                stream: self.stream(),
                direction: self.halves[h].direction,
                offset: off.max(0) as u64,
                data: data.to_vec(),
                frame,
                ts,
            };
            self.route(h, event, frame, ack, out);
        }
        let half = &mut self.halves[h];
        half.next_off = off + n as i64;
        if half.fin_assumed.is_some_and(|fin| fin < half.next_off) {
            half.fin_assumed = None; // it was data after all
        }
        if half.is_c2s() {
            self.info.bytes_c2s += n as u64;
        } else {
            self.info.bytes_s2c += n as u64;
        }
        half.history.push(off, data, frame, out.cfg.history);
    }

    #[allow(clippy::too_many_arguments)]
    fn gap(
        &mut self,
        h: usize,
        off: i64,
        length: i64,
        frame: u64,
        ts: i64,
        why: &str,
        out: &mut Out,
    ) {
        self.info.gaps += 1;
        self.info.gap_bytes += length as u64;
        let half = &self.halves[h];
        let direction = half.direction;
        let seq_no = (i64::from(half.base.unwrap_or(0)) + off).rem_euclid(MOD);
        let stream = self.stream();
        let gap = Event::Gap {
            stream,
            direction,
            offset: off.max(0) as u64,
            length: length as u64,
            frame,
            ts,
        };
        let mut finding = Finding::new(
            "tcp.gap",
            Severity::Warning,
            format!("{length} bytes missing in capture ({direction} offset {off}){why}"),
        )
        .at(Some(frame), Some(ts))
        .field("length", length)
        .field("seq", seq_no);
        finding.direction = Some(direction);
        finding.offset = Some(off.max(0) as u64);
        finding.stream = Some(stream);
        self.halves[h].next_off = off + length;
        self.route(h, gap, frame, None, out);
        self.route(h, Event::Finding(finding), frame, None, out);
    }

    /// Deliver what a pending piece at `off` holds beyond the delivery point.
    fn deliver_beyond(&mut self, h: usize, off: i64, piece: &Piece, out: &mut Out) {
        let next = self.halves[h].next_off;
        if off + piece.data.len() as i64 > next {
            let rest = &piece.data[(next - off) as usize..];
            self.deliver(h, next, rest, piece.frame, piece.ts, piece.ack, out);
        }
    }

    /// Deliver pending pieces that are now in order (and acknowledged, under `last`).
    fn release(&mut self, h: usize, out: &mut Out) {
        if self.halves[h].provisional.is_some() {
            return;
        }
        let last_wins = out.cfg.last_wins;
        let limit = if last_wins {
            self.halves[h].acked_offset()
        } else {
            None
        };
        loop {
            let half = &mut self.halves[h];
            let Some(entry) = half.pending.first_entry() else {
                return;
            };
            let off = *entry.key();
            if off > half.next_off {
                return;
            }
            let end = off + entry.get().data.len() as i64;
            if last_wins
                && limit.is_none_or(|l| l < end)
                && half.pending_bytes <= out.cfg.max_pending
            {
                return;
            }
            let piece = entry.remove();
            half.pending_bytes -= piece.data.len();
            self.deliver_beyond(h, off, &piece, out);
        }
    }

    /// The slow path: retransmissions, overlaps and out-of-order segments.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        h: usize,
        mut off: i64,
        mut data: &[u8],
        frame: u64,
        ts: i64,
        ack: Option<u32>,
        out: &mut Out,
    ) {
        let end = off + data.len() as i64;
        let next = self.halves[h].next_off;
        let provisional = self.halves[h].provisional.is_some();
        if off < next && !provisional {
            self.compare_history(h, off, data, frame, ts, out);
            if end <= next {
                self.info.retransmissions += 1;
                return;
            }
            data = &data[(next - off) as usize..];
            off = next;
        } else if off > next && !provisional {
            self.info.out_of_order += 1;
        }
        for (p_off, piece) in self.fit(h, off, data, frame, ts, ack, out) {
            let half = &mut self.halves[h];
            half.pending_bytes += piece.data.len();
            half.pending.insert(p_off, piece);
        }
        self.release(h, out);
        if !self.halves[h].pending.is_empty() {
            self.maybe_gap(h, frame, ts, out);
        }
        let half = &self.halves[h];
        if half.pending_bytes > out.cfg.max_pending || half.pending.len() > out.cfg.max_segments {
            self.force(h, frame, ts, out);
        }
    }

    /// Fit a new segment among the pending ones under the policy; report differing bytes.
    #[allow(clippy::too_many_arguments)]
    fn fit(
        &mut self,
        h: usize,
        off: i64,
        data: &[u8],
        frame: u64,
        ts: i64,
        ack: Option<u32>,
        out: &mut Out,
    ) -> Vec<(i64, Piece)> {
        let end = off + data.len() as i64;
        let half = &self.halves[h];
        let from = half
            .pending
            .range(..=off)
            .next_back()
            .map_or(off, |(k, _)| *k);
        let touching: Vec<i64> = half.pending.range(from..end).map(|(k, _)| *k).collect();
        let mut pieces = Vec::new();
        let mut cursor = off;
        let piece = |a: i64, b: i64| Piece {
            data: data[(a - off) as usize..(b - off) as usize].to_vec(),
            frame,
            ts,
            ack,
        };
        for s_off in touching {
            let (s_len, s_frame) = {
                let s = &self.halves[h].pending[&s_off];
                (s.data.len() as i64, s.frame)
            };
            let s_end = s_off + s_len;
            let (lo, hi) = (off.max(s_off), end.min(s_end));
            if lo >= hi {
                continue;
            }
            let differs = {
                let s = &self.halves[h].pending[&s_off];
                s.data[(lo - s_off) as usize..(hi - s_off) as usize]
                    != data[(lo - off) as usize..(hi - off) as usize]
            };
            if differs {
                let old = self.halves[h].pending[&s_off].data
                    [(lo - s_off) as usize..(hi - s_off) as usize]
                    .to_vec();
                let new = &data[(lo - off) as usize..(hi - off) as usize];
                self.conflict(h, lo, &old, new, s_frame, frame, ts, false, out);
            }
            if out.cfg.last_wins {
                let half = &mut self.halves[h];
                let Some(s) = half.pending.remove(&s_off) else {
                    continue;
                };
                half.pending_bytes -= s.data.len();
                if s_off < off {
                    let head = s.data[..(off - s_off) as usize].to_vec();
                    pieces.push((
                        s_off,
                        Piece {
                            data: head,
                            frame: s.frame,
                            ts: s.ts,
                            ack: s.ack,
                        },
                    ));
                }
                if s_end > end {
                    let tail = s.data[(end - s_off) as usize..].to_vec();
                    pieces.push((
                        end,
                        Piece {
                            data: tail,
                            frame: s.frame,
                            ts: s.ts,
                            ack: s.ack,
                        },
                    ));
                }
            } else {
                if lo > cursor {
                    pieces.push((cursor, piece(cursor, lo)));
                }
                cursor = cursor.max(hi);
            }
        }
        if out.cfg.last_wins {
            pieces.push((off, piece(off, end)));
        } else if cursor < end {
            pieces.push((cursor, piece(cursor, end)));
        }
        pieces
    }

    /// A copy of bytes already delivered: equal is a plain retransmission, different is a finding.
    fn compare_history(
        &mut self,
        h: usize,
        off: i64,
        data: &[u8],
        frame: u64,
        ts: i64,
        out: &mut Out,
    ) {
        if let Some(d) = self.halves[h].history.first_difference(off, data) {
            self.conflict(
                h,
                d.start,
                &d.old,
                &d.new,
                d.old_frame,
                frame,
                ts,
                true,
                out,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn conflict(
        &mut self,
        h: usize,
        off: i64,
        old: &[u8],
        new: &[u8],
        old_frame: u64,
        frame: u64,
        ts: i64,
        delivered: bool,
        out: &mut Out,
    ) {
        self.info.conflicts += 1;
        let last_wins = out.cfg.last_wins;
        let kept = if delivered || !last_wins {
            "first"
        } else {
            "last"
        };
        let note = if delivered && last_wins {
            " (first copy already acknowledged and delivered)"
        } else {
            ""
        };
        let direction = self.halves[h].direction;
        let mut finding = Finding::new(
            "tcp.overlap-conflict",
            Severity::Warning,
            format!(
                "{} bytes at {direction} offset {off} were sent twice with different content \
                 (frames {old_frame} and {frame}); kept the {kept} copy{note}",
                new.len()
            ),
        )
        .at(Some(frame), Some(ts))
        .field("first_frame", old_frame)
        .field("length", new.len())
        .field("first_bytes", hex(&old[..old.len().min(64)]))
        .field("second_bytes", hex(&new[..new.len().min(64)]))
        .field("kept", kept);
        finding.direction = Some(direction);
        finding.offset = Some(off.max(0) as u64);
        finding.stream = Some(self.stream());
        out.events.push(Event::Finding(finding));
    }

    /// The peer acknowledged more of direction `h`: release held bytes, detect holes it skipped
    /// (before pending bytes, or past everything delivered: bytes still to come in the file).
    fn acked(&mut self, h: usize, frame: u64, ts: i64, out: &mut Out) {
        if !self.halves[h].pending.is_empty() {
            self.release(h, out);
        }
        self.maybe_gap(h, frame, ts, out);
    }

    /// A hole the peer acknowledged past starts its reorder window (at the proving packet).
    fn maybe_gap(&mut self, h: usize, frame: u64, ts: i64, out: &mut Out) {
        self.halves[h].start_window(frame, ts);
        self.check_window(h, frame, ts, out);
    }

    /// Declare the waiting hole a gap once its reorder window has passed (packets since the ACK
    /// that proved it, or bytes arrived since); forget it once filled. A later hole the peer also
    /// acknowledged then waits a window of its own, from now.
    fn check_window(&mut self, h: usize, now: u64, now_ts: i64, out: &mut Out) {
        if !self.halves[h].waiting() {
            return; // every packet asks: the common answer costs one test
        }
        if let Some((first_frame, first_ts)) = self.halves[h].provisional {
            let half = &self.halves[h];
            if within(out.cfg, now, now_ts, first_frame, first_ts)
                && half.pending_bytes + self.merge.bytes <= out.cfg.reorder_bytes
            {
                return;
            }
            self.begin(h, None, out);
        }
        if let Some((proof_frame, proof_ts)) = self.halves[h].hole_proven {
            let half = &self.halves[h];
            match half.hole_end().filter(|_| half.hole_acknowledged()) {
                None => self.halves[h].hole_proven = None,
                Some(first) => {
                    let arrived = half.pending_bytes.saturating_sub(half.pending_at_proof);
                    if within(out.cfg, now, now_ts, proof_frame, proof_ts)
                        && arrived + self.merge.bytes <= out.cfg.reorder_bytes
                    {
                        return;
                    }
                    let next = half.next_off;
                    if half.lost_fin(first) {
                        self.halves[h].fin_assumed = Some(next);
                    } else {
                        self.gap(h, next, first - next, proof_frame, proof_ts, "", out);
                    }
                    self.release(h, out);
                    self.halves[h].hole_proven = None;
                }
            }
        }
        self.settle(out);
        self.halves[h].start_window(now, now_ts);
    }

    /// A direction first seen without its SYN starts for good: at its SYN's `syn_base` when that
    /// came, else at the earliest byte that arrived within the window. Its bytes then flow.
    fn begin(&mut self, h: usize, syn_base: Option<u32>, out: &mut Out) {
        let half = &mut self.halves[h];
        if half.provisional.take().is_none() {
            return;
        }
        let base = match (syn_base, half.base, half.pending.keys().next()) {
            (Some(syn), _, _) => syn,
            (None, Some(base), Some(&first)) => base.wrapping_add(first as u32),
            (None, Some(base), None) => base,
            (None, None, _) => return,
        };
        half.rebase(base);
        self.release(h, out);
        if !self.halves[h].pending.is_empty() {
            let (frame, ts) = (self.info.last_frame, self.info.last_ts);
            self.maybe_gap(h, frame, ts, out);
        }
        self.settle(out);
    }

    /// Out-of-order buffer full: give up on the hole (or the ack wait) and deliver.
    fn force(&mut self, h: usize, frame: u64, ts: i64, out: &mut Out) {
        let half = &self.halves[h];
        let mut finding = Finding::new(
            "tcp.buffer-full",
            Severity::Warning,
            format!(
                "more than {} bytes or {} segments waiting in {}; \
                 delivering without waiting for missing or unacknowledged bytes",
                out.cfg.max_pending, out.cfg.max_segments, half.direction
            ),
        )
        .at(Some(frame), Some(ts));
        finding.direction = Some(half.direction);
        finding.offset = Some(half.next_off.max(0) as u64);
        finding.stream = Some(self.stream());
        out.events.push(Event::Finding(finding));
        self.flush(h, frame, ts, out);
    }

    /// Deliver everything pending, with gaps for the holes between. A hole the peer acknowledged
    /// keeps the frame of the packet that proved it.
    fn flush(&mut self, h: usize, frame: u64, ts: i64, out: &mut Out) {
        self.begin(h, None, out);
        let mut proof = self.halves[h].hole_proven;
        while let Some(entry) = self.halves[h].pending.first_entry() {
            let first = *entry.key();
            let next = self.halves[h].next_off;
            if first > next {
                let (g_frame, g_ts) = proof.take().unwrap_or((frame, ts));
                self.gap(h, next, first - next, g_frame, g_ts, "", out);
                continue;
            }
            let half = &mut self.halves[h];
            let Some(piece) = half.pending.remove(&first) else {
                break;
            };
            half.pending_bytes -= piece.data.len();
            self.deliver_beyond(h, first, &piece, out);
        }
        self.halves[h].hole_proven = None;
        self.settle(out);
    }

    /// Flush both directions and report what the peer acknowledged but the capture never held.
    fn finish(&mut self, out: &mut Out) {
        let (frame, ts) = (self.info.last_frame, self.info.last_ts);
        for h in [C2S, S2C] {
            self.flush(h, frame, ts, out);
            let half = &self.halves[h];
            if half.base.is_some() {
                let next = half.next_off;
                // Where the sent bytes end: at a captured FIN (its sequence number says every byte
                // before it was sent, acknowledged or not), else at what the peer acknowledged.
                let sent = match (half.fin_off, half.acked_offset()) {
                    (Some(fin), _) => Some((fin, " (sent before the FIN but not captured)")),
                    (None, Some(acked)) => {
                        Some((acked, " (acknowledged by the peer but not captured)"))
                    }
                    (None, None) => None,
                };
                if let Some((end, why)) = sent {
                    let beyond = end - next;
                    // One byte acknowledged past the data with no FIN captured is the FIN itself.
                    let lost_fin = half.fin_off.is_none() && beyond == 1;
                    if beyond > 0 && beyond < HALF && !lost_fin {
                        self.gap(h, next, beyond, frame, ts, why, out);
                    }
                }
            } else if let (Some(first), Some(last)) = (half.ack_first, half.ack_raw) {
                if first != last {
                    let unseen = i64::from(last.wrapping_sub(first));
                    let direction = half.direction;
                    let stream = self.stream();
                    let gap = Event::Gap {
                        stream,
                        direction,
                        offset: 0,
                        length: unseen as u64,
                        frame,
                        ts,
                    };
                    let mut finding = Finding::new(
                        "tcp.unseen-data",
                        Severity::Warning,
                        format!(
                            "the peer acknowledged {unseen} bytes of {direction} data that the capture \
                             does not contain"
                        ),
                    )
                    .at(Some(frame), Some(ts))
                    .field("length", unseen);
                    finding.direction = Some(direction);
                    finding.stream = Some(stream);
                    self.route(h, gap, frame, None, out);
                    self.route(h, Event::Finding(finding), frame, None, out);
                }
            }
        }
        self.merge.drain(&self.halves, out.events, true);
    }
}

/// Reassembles every TCP connection of one capture. Feed segments in capture order; events are
/// appended to the caller's vector.
pub struct Reassembler {
    cfg: Config,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    keys: HashMap<Key, (usize, usize)>, // 4-tuple as sent → (connection slot, direction index)
    live: BTreeMap<u64, usize>,         // stream id → slot, oldest first
    next_id: u64,
    now: i64,
    frame: u64,
    until_sweep: u32,
    graves: Graves,
}

impl Reassembler {
    pub fn new(cfg: Config) -> Self {
        let until_sweep = cfg.sweep_every.max(1);
        Reassembler {
            cfg,
            conns: Vec::new(),
            free: Vec::new(),
            keys: HashMap::new(),
            live: BTreeMap::new(),
            next_id: 0,
            now: i64::MIN,
            frame: 0,
            until_sweep,
            graves: Graves::default(),
        }
    }

    /// The StreamInfo of a live (not yet finished) stream.
    pub fn stream_info(&self, stream: u64) -> Option<&StreamInfo> {
        let slot = *self.live.get(&stream)?;
        self.conns[slot].as_ref().map(|c| &c.info)
    }

    /// Stop producing Chunks for a live stream (its protocol is unknown); gaps still come.
    pub fn mute(&mut self, stream: u64) {
        if let Some(&slot) = self.live.get(&stream) {
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.emit = false;
            }
        }
    }

    /// Account one TCP segment.
    pub fn segment(&mut self, seg: &Segment, events: &mut Vec<Event>) {
        self.now = self.now.max(seg.ts);
        self.frame = self.frame.max(seg.frame);
        let key = (seg.src, seg.sport, seg.dst, seg.dport);
        let mut entry = self.keys.get(&key).copied();
        let mut hollow = None;
        if let Some((slot, h)) = entry {
            if seg.flags & SYN != 0 && self.reopens(slot, h, seg.seq) {
                entry = None;
                hollow = self.take_hollow(slot);
            }
        }
        let (slot, h) = match entry {
            Some(e) => e,
            None if self.graves.absorbs(
                &key,
                seg.flags & SYN != 0,
                seg.seq,
                seg.payload.len() as u32,
            ) =>
            {
                return; // a late copy of a packet of a connection finished when it closed
            }
            None => self.open(seg, events),
        };
        if let (Some(old), Some(conn)) = (hollow, self.conns[slot].as_mut()) {
            // the stream keeps the id its first packet gave it
            let id = conn.info.stream;
            self.live.remove(&id);
            self.live.insert(old.stream, slot);
            if matches!(self.cfg.ids, StreamIds::Counter) && id + 1 == self.next_id {
                self.next_id = id;
            }
            conn.info.stream = old.stream;
            conn.adopt(old);
        }
        let cfg = &self.cfg;
        let mut out = Out { cfg, events };
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        let p = 1 - h;
        conn.info.last_ts = seg.ts;
        conn.info.last_frame = seg.frame;
        if h == C2S {
            conn.info.packets_c2s += 1;
        } else {
            conn.info.packets_s2c += 1;
        }
        let mut seq_no = seg.seq;
        if seg.flags & SYN != 0 {
            let half = &mut conn.halves[h];
            let isn_next = seg.seq.wrapping_add(1);
            if !half.syn_seen {
                half.syn_seen = true;
                if half.provisional.is_some() {
                    conn.begin(h, Some(isn_next), &mut out);
                } else if half.base.is_none() || half.next_off == 0 {
                    half.rebase(isn_next); // nothing delivered yet: what waits keeps its bytes
                }
                if seg.flags & ACK != 0 {
                    conn.info.handshake = true;
                }
            }
            seq_no = isn_next;
            // a connection whose SYN is in the capture started in it, whatever came first in the file
            conn.info.midstream = false;
        } else if conn.halves[h].base.is_none() {
            conn.halves[h].base = Some(seg.seq);
            conn.halves[h].provisional = Some((seg.frame, seg.ts));
            conn.info.midstream = !conn.halves[p].syn_seen;
        }
        if seg.flags & ACK != 0 {
            let peer = &mut conn.halves[p];
            if peer.ack_raw.is_none_or(|last| at_or_after(seg.ack, last)) {
                if peer.ack_raw.is_none() {
                    peer.ack_first = Some(seg.ack);
                }
                peer.ack_raw = Some(seg.ack);
                conn.acked(p, seg.frame, seg.ts, &mut out);
            }
        }
        let ack = (seg.flags & ACK != 0).then_some(seg.ack);
        // A hole whose window has passed becomes a gap before this packet's bytes are placed.
        for half in [C2S, S2C] {
            conn.check_window(half, seg.frame, seg.ts, &mut out);
        }
        if !seg.payload.is_empty() {
            let half = &conn.halves[h];
            let off = half.offset(seq_no);
            let in_order = off == half.next_off && half.pending.is_empty();
            if in_order && half.provisional.is_none() && !cfg.last_wins {
                conn.deliver(h, off, seg.payload, seg.frame, seg.ts, ack, &mut out);
                if seg.missing > 0 {
                    let next = conn.halves[h].next_off;
                    conn.gap(
                        h,
                        next,
                        i64::from(seg.missing),
                        seg.frame,
                        seg.ts,
                        "",
                        &mut out,
                    );
                }
            } else {
                conn.insert(h, off, seg.payload, seg.frame, seg.ts, ack, &mut out);
            }
        }
        if seg.flags & (FIN | RST) != 0 {
            let length = seg.payload.len() as i64 + i64::from(seg.missing);
            if seg.flags & FIN != 0 && conn.halves[h].fin_off.is_none() {
                conn.halves[h].fin_off = Some(conn.halves[h].offset(seq_no) + length);
                if h == C2S {
                    conn.info.fin_c2s = true;
                } else {
                    conn.info.fin_s2c = true;
                }
                if conn.halves[p].fin_off.is_some() {
                    conn.closed = true;
                }
            }
            if seg.flags & RST != 0 {
                conn.info.reset = true;
                conn.closed = true;
            }
        }
        for half in [C2S, S2C] {
            conn.check_window(half, seg.frame, seg.ts, &mut out);
        }
        if conn.closed_cleanly() {
            let (key, spaces) = (conn.client_key, conn.seq_spaces());
            self.finish_slot(slot, events);
            let (c_ip, c_port, s_ip, s_port) = key;
            let (until, most) = (
                seg.ts.saturating_add(self.cfg.close_grace_ns),
                2 * self.cfg.max_connections,
            );
            self.graves.bury(key, spaces[C2S], until, most);
            self.graves
                .bury((s_ip, s_port, c_ip, c_port), spaces[S2C], until, most);
        }
        self.until_sweep -= 1;
        if self.until_sweep == 0 {
            self.sweep(events);
        }
    }

    /// A connection of nothing but flags (no SYN, no byte: an RST or ACKs written before the SYN
    /// that opened them), which that SYN takes over instead of opening a second one: removed
    /// without being finished.
    fn take_hollow(&mut self, slot: usize) -> Option<StreamInfo> {
        let conn = self.conns[slot].as_ref()?;
        let hollow = conn
            .halves
            .iter()
            .all(|h| !h.syn_seen && h.pending.is_empty() && h.next_off == 0)
            && conn.info.bytes_c2s + conn.info.bytes_s2c + conn.info.gap_bytes == 0
            && conn.merge.is_empty();
        if !hollow {
            return None;
        }
        let conn = self.conns[slot].take()?;
        self.forget(slot, &conn);
        Some(conn.info)
    }

    /// A SYN on a known 4-tuple: a new connection unless it repeats the one we have.
    fn reopens(&self, slot: usize, h: usize, seq_no: u32) -> bool {
        let Some(conn) = self.conns[slot].as_ref() else {
            return true;
        };
        let half = &conn.halves[h];
        if !half.syn_seen && half.base == Some(seq_no.wrapping_add(1)) {
            return false; // its own SYN, written after the packets that followed it (even its RST)
        }
        if conn.closed {
            return true;
        }
        half.syn_seen && half.base != Some(seq_no.wrapping_add(1)) && half.next_off > 0
    }

    /// Create a connection, deciding which side is the client: the SYN sender; else the side
    /// talking to a well-known server port (the protocols', then any port below 1024 against one
    /// above); else the first sender.
    fn open(&mut self, seg: &Segment, events: &mut Vec<Event>) -> (usize, usize) {
        let (src_is_client, by) = if seg.flags & SYN != 0 {
            (seg.flags & ACK == 0, "syn")
        } else if let Some(port) = server_port(seg.sport, seg.dport, &self.cfg.server_ports) {
            (port == seg.dport, "port")
        } else {
            (true, "first")
        };
        let key = (seg.src, seg.sport, seg.dst, seg.dport);
        let old = self.keys.get(&key).map(|&(slot, _)| slot);
        let previous = old.and_then(|slot| {
            self.conns[slot]
                .as_ref()
                .map(|c| (c.info.stream, c.info.reset))
        });
        if let Some(slot) = old {
            self.finish_slot(slot, events);
        }
        let (c_ip, c_port, s_ip, s_port) = if src_is_client {
            (seg.src, seg.sport, seg.dst, seg.dport)
        } else {
            (seg.dst, seg.dport, seg.src, seg.sport)
        };
        let stream = self.cfg.ids.of_frame(seg.frame).unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id - 1
        });
        let info = StreamInfo {
            stream,
            client: endpoint(c_ip, c_port),
            server: endpoint(s_ip, s_port),
            client_port: c_port,
            server_port: s_port,
            client_by: by,
            first_ts: seg.ts,
            last_ts: seg.ts,
            first_frame: seg.frame,
            last_frame: seg.frame,
            port_reuse: previous.is_some(),
            ..StreamInfo::default()
        };
        let client_key = (c_ip, c_port, s_ip, s_port);
        let conn = Conn {
            info,
            halves: [Half::new(Direction::C2S), Half::new(Direction::S2C)],
            closed: false,
            client_key,
            emit: self.cfg.emit_data,
            merge: Merge::default(),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.conns[slot] = Some(conn);
                slot
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        self.keys.insert(client_key, (slot, C2S));
        self.keys.insert((s_ip, s_port, c_ip, c_port), (slot, S2C));
        self.graves.forget(&client_key);
        self.graves.forget(&(s_ip, s_port, c_ip, c_port));
        self.live.insert(stream, slot);
        if let Some((prev, reset)) = previous {
            let how = if reset {
                "after a reset"
            } else {
                "after it closed"
            };
            let mut finding = Finding::new(
                "tcp.port-reuse",
                Severity::Info,
                format!("new connection on the ports of stream {prev} ({how})"),
            )
            .at(Some(seg.frame), Some(seg.ts))
            .field("previous_stream", prev);
            finding.stream = Some(stream);
            events.push(Event::Finding(finding));
        }
        if self.live.len() > self.cfg.max_connections {
            if let Some((_, &oldest)) = self.live.iter().next() {
                self.finish_slot(oldest, events);
            }
        }
        (slot, if src_is_client { C2S } else { S2C })
    }

    /// Flush a connection, report what never arrived, and emit its StreamInfo.
    fn finish_slot(&mut self, slot: usize, events: &mut Vec<Event>) {
        let Some(mut conn) = self.conns[slot].take() else {
            return;
        };
        conn.finish(&mut Out {
            cfg: &self.cfg,
            events,
        });
        self.forget(slot, &conn);
        events.push(Event::End(Box::new(conn.info)));
    }

    /// Free a connection's slot, its 4-tuples and its place among the live streams.
    fn forget(&mut self, slot: usize, conn: &Conn) {
        let (c_ip, c_port, s_ip, s_port) = conn.client_key;
        for (key, h) in [
            ((c_ip, c_port, s_ip, s_port), C2S),
            ((s_ip, s_port, c_ip, c_port), S2C),
        ] {
            if self.keys.get(&key) == Some(&(slot, h)) {
                self.keys.remove(&key);
            }
        }
        self.live.remove(&conn.info.stream);
        self.free.push(slot);
    }

    /// Evict idle connections and closed ones past their grace period (capture time); let holes
    /// whose reorder window passed become gaps.
    fn sweep(&mut self, events: &mut Vec<Event>) {
        self.until_sweep = self.cfg.sweep_every.max(1);
        let now = self.now;
        self.graves.expire(now);
        let mut done = Vec::new();
        for &slot in self.live.values() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            let idle = now.saturating_sub(conn.info.last_ts);
            if idle > self.cfg.idle_timeout_ns || (conn.closed && idle > self.cfg.close_grace_ns) {
                done.push(slot);
            } else if conn.halves.iter().any(Half::waiting) {
                let mut out = Out {
                    cfg: &self.cfg,
                    events,
                };
                for h in [C2S, S2C] {
                    conn.check_window(h, self.frame, self.now, &mut out);
                }
            }
        }
        for slot in done {
            self.finish_slot(slot, events);
        }
    }

    /// End of capture: finish every live connection in stream order.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        while let Some((_, &slot)) = self.live.iter().next() {
            self.finish_slot(slot, events);
        }
    }
}
