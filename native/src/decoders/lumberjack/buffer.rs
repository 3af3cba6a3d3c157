//! One receive buffer per direction (wirelog/decoders/buffer.py).
//!
//! Guarantee: consuming many short frames from a long buffer costs O(bytes consumed), never
//! O(n²): bytes are appended to one Vec, reads advance a start index, and the consumed prefix is
//! dropped only when it is at least half the buffer. The buffer remembers which packet (frame and
//! timestamp) carried each stream offset, so a record is stamped with the packet of its first byte.

use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct StreamBuffer {
    buf: Vec<u8>,
    start: usize,
    base: u64,
    /// (stream offset where a chunk began, its frame, its ts), ascending offsets.
    marks: VecDeque<(u64, Option<u64>, Option<i64>)>,
}

impl StreamBuffer {
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stream offset of the first unconsumed byte.
    pub fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// The unconsumed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Add a chunk; its offset continues the buffer (after `reset` at a gap, it may jump).
    pub fn append(&mut self, offset: u64, data: &[u8], frame: Option<u64>, ts: Option<i64>) {
        if self.is_empty() {
            self.buf.clear();
            self.start = 0;
            self.base = offset;
        }
        self.buf.extend_from_slice(data);
        self.marks.push_back((offset, frame, ts));
    }

    /// Drop everything (after a gap): the next byte will be at `offset`.
    pub fn reset(&mut self, offset: u64) {
        self.buf.clear();
        self.start = 0;
        self.base = offset;
        self.marks.clear();
    }

    /// Drop the next `n` bytes.
    pub fn skip(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
        if self.start == self.buf.len() {
            self.base += self.start as u64;
            self.buf.clear();
            self.start = 0;
        } else if self.start > 65536 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.base += self.start as u64;
            self.start = 0;
        }
        self.trim_marks();
    }

    /// (frame, ts) of the chunk that carried the read position.
    pub fn origin(&self) -> (Option<u64>, Option<i64>) {
        let off = self.offset();
        // Marks before the read position were trimmed: the covering one is the last <= off.
        let i = self.marks.partition_point(|m| m.0 <= off);
        match i.checked_sub(1).and_then(|i| self.marks.get(i)) {
            Some(&(_, frame, ts)) => (frame, ts),
            None => (None, None),
        }
    }

    /// Keep the mark covering the read position; drop the ones before it.
    fn trim_marks(&mut self) {
        let off = self.offset();
        let i = self.marks.partition_point(|m| m.0 <= off);
        if i > 1 {
            self.marks.drain(..i - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_follows_the_read_position() {
        let mut b = StreamBuffer::default();
        b.append(0, b"abc", Some(1), Some(10));
        b.append(3, b"def", Some(2), Some(20));
        assert_eq!(b.origin(), (Some(1), Some(10)));
        b.skip(3);
        assert_eq!((b.offset(), b.origin()), (3, (Some(2), Some(20))));
        b.skip(3);
        assert!(b.is_empty());
        b.reset(100);
        b.append(100, b"x", None, None);
        assert_eq!((b.offset(), b.bytes()), (100, &b"x"[..]));
    }
}
