//! One direction of a connection: where delivery stands, what waits out of order, and the recent
//! history of delivered bytes that retransmissions are compared with.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "ring and history positions are below the ring's length (at most the 32 KiB history); stream offsets (i64) advance at most 2^31 a segment from 0, so they stay far from i64's ends for any capture under 2^32 segments"
)]

use std::collections::{BTreeMap, VecDeque};

use super::seq;
use crate::model::Direction;

/// Delivered segments kept at most, whatever their size: a storm of tiny retransmissions stays linear.
pub const HISTORY_SEGMENTS: usize = 512;

/// Bytes waiting out of order (or, under `last`, for their acknowledgement).
#[derive(Clone, Debug)]
pub struct Piece {
    pub data: Vec<u8>,
    pub frame: u64,
    pub ts: i64,
    /// The ACK (raw, of the other direction) its segment carried: what it must follow.
    pub ack: Option<u32>,
}

/// The last `limit` bytes a direction delivered, with the segments they came in: a byte ring
/// that grows with what the connection sent (a short connection holds little) up to the limit, so
/// memory is bounded per connection and O(1) per byte.
#[derive(Debug, Default)]
pub struct History {
    segments: VecDeque<(i64, usize, u64)>, // (offset, length, frame), oldest first
    front_skip: usize,                     // bytes of the oldest segment no longer held
    ring: Vec<u8>,
    head: usize, // ring index of the oldest held byte
    len: usize,  // bytes held
}

/// Where a new copy of bytes differs from an older one.
pub struct Difference {
    pub start: i64,
    pub old: Vec<u8>,
    pub new: Vec<u8>,
    pub old_frame: u64,
}

impl History {
    pub fn push(&mut self, off: i64, data: &[u8], frame: u64, limit: usize) {
        if limit == 0 || data.is_empty() {
            return;
        }
        let keep = &data[data.len().saturating_sub(limit)..];
        if keep.len() < data.len() {
            // the segment alone fills the history: it is all there is, its head not held
            self.segments.clear();
            self.len = 0;
            self.head = 0;
            self.front_skip = data.len() - keep.len();
        }
        self.make_room(keep.len(), limit);
        self.segments.push_back((off, data.len(), frame));
        let cap = self.ring.len();
        let tail = (self.head + self.len) % cap;
        let first = keep.len().min(cap - tail);
        self.ring[tail..tail + first].copy_from_slice(&keep[..first]);
        self.ring[..keep.len() - first].copy_from_slice(&keep[first..]);
        self.len += keep.len();
        while self.segments.len() > HISTORY_SEGMENTS {
            let held = self.segments.front().map_or(0, |s| s.1 - self.front_skip);
            self.drop_front(held, limit);
        }
    }

    /// Grow the ring (up to `limit`) so that `n` more bytes fit, dropping the oldest if it is full.
    fn make_room(&mut self, n: usize, limit: usize) {
        let cap = self.ring.len();
        if self.len + n <= cap {
            return;
        }
        if cap < limit {
            let size = (self.len + n).max(cap * 2).max(256).min(limit);
            let mut ring = Vec::with_capacity(size);
            ring.extend_from_slice(&self.ring[self.head..(self.head + self.len).min(cap)]);
            if self.head + self.len > cap {
                ring.extend_from_slice(&self.ring[..self.head + self.len - cap]);
            }
            ring.resize(size, 0);
            self.ring = ring;
            self.head = 0;
        }
        let cap = self.ring.len();
        if self.len + n > cap {
            self.drop_front(self.len + n - cap, limit);
        }
    }

    /// Forget the `n` oldest held bytes (whole segments leave once none of their bytes is held).
    fn drop_front(&mut self, mut n: usize, limit: usize) {
        let cap = self.ring.len().max(1);
        while n > 0 {
            let Some(&(_, seg_len, _)) = self.segments.front() else {
                break;
            };
            let held = seg_len - self.front_skip;
            let take = held.min(n).min(self.len);
            self.head = (self.head + take) % cap;
            self.len -= take;
            n -= take;
            if take == held {
                self.segments.pop_front();
                self.front_skip = 0;
            } else {
                self.front_skip += take;
                if take == 0 {
                    break;
                }
            }
        }
        debug_assert!(self.len <= limit.max(self.ring.len()));
    }

    fn held(&self, from: usize, to: usize) -> Vec<u8> {
        let cap = self.ring.len();
        (from..to)
            .map(|i| self.ring[(self.head + i) % cap])
            .collect()
    }

    /// The first held segment that `data` at `off` overlaps with different bytes.
    pub fn first_difference(&self, off: i64, data: &[u8]) -> Option<Difference> {
        let end = off + data.len() as i64;
        let mut at = 0usize; // position of the segment's first held byte among the held bytes
        for (i, &(s_off, len, frame)) in self.segments.iter().enumerate() {
            let skip = if i == 0 { self.front_skip } else { 0 };
            let h_off = s_off + skip as i64;
            let h_end = s_off + len as i64;
            let (lo, hi) = (off.max(h_off), end.min(h_end));
            if lo < hi {
                let old = self.held(at + (lo - h_off) as usize, at + (hi - h_off) as usize);
                let new = &data[(lo - off) as usize..(hi - off) as usize];
                if old != new {
                    return Some(Difference {
                        start: lo,
                        old,
                        new: new.to_vec(),
                        old_frame: frame,
                    });
                }
            }
            at += len - skip;
        }
        None
    }
}

#[derive(Debug)]
pub struct Half {
    pub direction: Direction,
    /// Raw sequence number of stream offset 0.
    pub base: Option<u32>,
    pub next_off: i64,
    /// Keyed by stream offset, never overlapping.
    pub pending: BTreeMap<i64, Piece>,
    pub pending_bytes: usize,
    pub history: History,
    /// Highest ACK the peer sent for this direction (raw), and the first one (for data never captured).
    pub ack_raw: Option<u32>,
    pub ack_first: Option<u32>,
    pub fin_off: Option<i64>,
    /// Where a FIN the capture lacks is taken to be: the peer acknowledged one byte past the data
    /// and nothing came for a reorder window (until data passes it).
    pub fin_assumed: Option<i64>,
    pub syn_seen: bool,
    /// The packet (frame, ts) whose ACK first covered the hole before the first pending piece: the
    /// hole waits the reorder window from there.
    pub hole_proven: Option<(u64, i64)>,
    /// Pending bytes when the hole was proven: the window bounds what arrives while it waits.
    pub pending_at_proof: usize,
    /// A direction first seen without its SYN: (frame, ts) of its first segment. Until the reorder
    /// window passes (or the SYN comes) its offset 0 is not final: an earlier segment written later
    /// in the file, or the SYN itself, may still move it back. Its bytes wait meanwhile.
    pub provisional: Option<(u64, i64)>,
}

impl Half {
    pub fn new(direction: Direction) -> Self {
        Half {
            direction,
            base: None,
            next_off: 0,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            history: History::default(),
            ack_raw: None,
            ack_first: None,
            fin_off: None,
            fin_assumed: None,
            syn_seen: false,
            hole_proven: None,
            pending_at_proof: 0,
            provisional: None,
        }
    }

    /// Whether this direction holds its bytes back (a hole in its window, or its start not final);
    /// the other direction's later bytes then wait too, to keep the order between them.
    pub fn waiting(&self) -> bool {
        self.hole_proven.is_some() || self.provisional.is_some()
    }

    /// Move offset 0 to raw sequence number `base`: pending pieces and the FIN keep their bytes.
    /// Only while nothing was delivered.
    pub fn rebase(&mut self, base: u32) {
        let Some(old) = self.base else {
            self.base = Some(base);
            return;
        };
        let delta = i64::from(old.wrapping_sub(base) as i32);
        if delta != 0 {
            let pending = std::mem::take(&mut self.pending);
            self.pending = pending.into_iter().map(|(k, v)| (k + delta, v)).collect();
            self.fin_off = self.fin_off.map(|f| f + delta);
        }
        self.base = Some(base);
    }

    /// A hole the peer acknowledged past starts its reorder window at this packet.
    pub fn start_window(&mut self, frame: u64, ts: i64) {
        if self.hole_proven.is_none() && self.provisional.is_none() && self.hole_acknowledged() {
            self.hole_proven = Some((frame, ts));
            self.pending_at_proof = self.pending_bytes;
        }
    }

    pub fn is_c2s(&self) -> bool {
        self.direction == Direction::C2S
    }

    /// The stream offset of a raw sequence number (nearest to the delivery point).
    pub fn offset(&self, seq_no: u32) -> i64 {
        seq::unwrap(seq_no, self.base.unwrap_or(seq_no), self.next_off)
    }

    pub fn acked_offset(&self) -> Option<i64> {
        match (self.ack_raw, self.base) {
            (Some(ack), Some(_)) => Some(self.offset(ack)),
            _ => None,
        }
    }

    /// Where the FIN is (captured, or taken to be lost from the capture).
    pub fn fin(&self) -> Option<i64> {
        self.fin_off.or(self.fin_assumed)
    }

    /// Where the hole at the delivery point ends: at the first pending piece, or, with nothing
    /// pending, at what the peer acknowledged beyond the delivered bytes (bytes a reordered capture
    /// writes later, or never; up to the FIN).
    pub fn hole_end(&self) -> Option<i64> {
        match self.pending.keys().next() {
            Some(&first) => Some(first).filter(|&first| first > self.next_off),
            None => {
                let acked = self.acked_offset()?;
                let end = self.fin().map_or(acked, |fin| acked.min(fin));
                Some(end).filter(|&end| end > self.next_off && end - self.next_off < seq::HALF)
            }
        }
    }

    /// A hole of one byte past everything, no FIN captured: the FIN is what the peer acknowledged.
    pub fn lost_fin(&self, hole_end: i64) -> bool {
        self.fin_off.is_none() && self.pending.is_empty() && hole_end == self.next_off + 1
    }

    /// Whether the peer acknowledged bytes beyond the hole before the first pending piece.
    pub fn hole_acknowledged(&self) -> bool {
        match (self.hole_end(), self.acked_offset()) {
            (Some(first), Some(acked)) => acked >= first,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_finds_the_first_differing_segment_and_stays_bounded() {
        let mut h = History::default();
        h.push(0, b"GOOD", 1, 8);
        h.push(4, b"DATA", 2, 8);
        assert!(h.first_difference(0, b"GOODDATA").is_none());
        let d = h.first_difference(2, b"OXDA").unwrap();
        assert_eq!(
            (d.start, d.old_frame, d.old.as_slice(), d.new.as_slice()),
            (2, 1, &b"OD"[..], &b"OX"[..])
        );
        h.push(8, b"MORE", 3, 8);
        assert!(
            h.first_difference(0, b"XXXX").is_none(),
            "the oldest segment was dropped"
        );
        assert_eq!(h.first_difference(8, b"MORX").unwrap().old_frame, 3);
    }

    #[test]
    fn a_copy_after_a_segment_longer_than_the_history_is_no_difference() {
        let mut h = History::default();
        h.push(0, &[b'a'; 32_769], 1, 32_768);
        h.push(32_769, b"b", 2, 32_768);
        assert!(h.first_difference(32_769, b"b").is_none());
        assert!(h.first_difference(32_760, &[b'a'; 9]).is_none());
        assert_eq!(h.first_difference(32_769, b"c").unwrap().old, b"b");
    }

    #[test]
    fn history_is_the_last_bytes_whatever_the_segment_sizes() {
        let mut h = History::default();
        let mut all = Vec::new();
        let mut off = 0i64;
        let sizes = [1usize, 300, 7, 4000, 2, 999, 64, 5000, 3, 1000, 1001];
        for (i, n) in sizes.iter().cycle().take(300).enumerate() {
            let data: Vec<u8> = (0..*n).map(|j| (i * 31 + j) as u8).collect();
            h.push(off, &data, i as u64, 1000);
            all.extend_from_slice(&data);
            off += *n as i64;
            assert!(h.len <= 1000 && h.ring.len() <= 1000);
            let start = off - h.len as i64;
            let tail = &all[all.len() - h.len..];
            assert!(h.first_difference(start, tail).is_none(), "step {i}");
            let mut changed = tail.to_vec();
            changed[0] ^= 1;
            assert_eq!(h.first_difference(start, &changed).unwrap().start, start);
        }
    }
}
