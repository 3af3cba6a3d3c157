//! One direction of a connection: where delivery stands, what waits out of order, and the recent
//! history of delivered bytes that retransmissions are compared with.

use std::collections::{BTreeMap, VecDeque};

use super::seq;
use crate::records::Direction;

/// Delivered segments kept at most, whatever their size: a storm of tiny retransmissions stays linear.
pub const HISTORY_SEGMENTS: usize = 512;

/// Bytes waiting out of order (or, under `last`, for their acknowledgement).
#[derive(Clone, Debug)]
pub struct Piece {
    pub data: Vec<u8>,
    pub frame: u64,
    pub ts: i64,
}

/// The most recently delivered segments of a direction: their bytes in one buffer (appended with a
/// memcpy, compacted once the dropped prefix outweighs the rest), so a connection that only ever
/// delivers small segments holds little and a large transfer costs O(bytes).
#[derive(Debug, Default)]
pub struct History {
    segments: VecDeque<(i64, usize, u64)>, // (offset, length, frame)
    bytes: Vec<u8>,
    start: usize, // bytes before this belong to dropped segments
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
        self.segments.push_back((off, data.len(), frame));
        self.bytes.extend_from_slice(data);
        while (self.bytes.len() - self.start > limit && self.segments.len() > 1)
            || self.segments.len() > HISTORY_SEGMENTS
        {
            if let Some((_, n, _)) = self.segments.pop_front() {
                self.start += n;
            }
        }
        if self.start > 4096 && self.start * 2 > self.bytes.len() {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
    }

    /// The first delivered segment that `data` at `off` overlaps with different bytes.
    pub fn first_difference(&self, off: i64, data: &[u8]) -> Option<Difference> {
        let end = off + data.len() as i64;
        let mut at = self.start;
        for &(h_off, len, frame) in &self.segments {
            let h_end = h_off + len as i64;
            let (lo, hi) = (off.max(h_off), end.min(h_end));
            if lo < hi {
                let old = &self.bytes[at + (lo - h_off) as usize..at + (hi - h_off) as usize];
                let new = &data[(lo - off) as usize..(hi - off) as usize];
                if old != new {
                    return Some(Difference {
                        start: lo,
                        old: old.to_vec(),
                        new: new.to_vec(),
                        old_frame: frame,
                    });
                }
            }
            at += len;
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
    pub syn_seen: bool,
    /// The packet (frame, ts) whose ACK first covered the hole before the first pending piece: the
    /// hole waits the reorder window from there.
    pub hole_proven: Option<(u64, i64)>,
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
            syn_seen: false,
            hole_proven: None,
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

    /// Offset of the first pending piece when there is a hole before it.
    pub fn hole_end(&self) -> Option<i64> {
        self.pending
            .keys()
            .next()
            .copied()
            .filter(|&first| first > self.next_off)
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
}
