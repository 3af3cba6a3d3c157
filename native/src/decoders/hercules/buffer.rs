//! One receive buffer per direction (wirelog/decoders/buffer.py).
//!
//! Guarantee: consuming many short messages from a long buffer costs O(bytes consumed), never
//! O(n²): bytes are appended to one Vec, reads advance a start index, and the consumed prefix is
//! dropped only when it is at least half the buffer. The buffer remembers which packet (frame and
//! timestamp) carried each stream offset, so a record is stamped with the packet of its first byte.

use std::collections::VecDeque;

use super::records::Origin;

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

    /// Stream offset of the first unconsumed byte.
    pub fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// Stream offset one past the last buffered byte.
    pub fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// The unconsumed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Add a chunk; its offset continues the buffer (after `reset` at a gap, it may jump).
    pub fn append(&mut self, offset: u64, data: &[u8], frame: Option<u64>, ts: Option<i64>) {
        if self.len() == 0 {
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
        let off = self.offset();
        let i = self.marks.partition_point(|m| m.0 <= off);
        if i > 1 {
            self.marks.drain(..i - 1);
        }
    }

    /// (frame, ts) of the chunk that carried stream `offset` (at or after the read position).
    pub fn origin(&self, offset: u64) -> Origin {
        let i = self.marks.partition_point(|m| m.0 <= offset);
        match i.checked_sub(1).and_then(|i| self.marks.get(i)) {
            Some(&(_, frame, ts)) => (frame, ts),
            None => (None, None),
        }
    }

    /// Position of `needle` at or after `from` (both relative to the read position).
    pub fn find(&self, needle: &[u8], from: usize) -> Option<usize> {
        let hay = self.bytes().get(from..)?;
        find(hay, needle).map(|i| i + from)
    }
}

/// First position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        let j = hay[i..hay.len() + 1 - needle.len()]
            .iter()
            .position(|&b| b == first)?;
        i += j;
        if &hay[i..i + needle.len()] == needle {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_and_find() {
        let mut b = StreamBuffer::default();
        b.append(0, b"ab\r\n", Some(1), Some(10));
        b.append(4, b"\r\ncd", Some(2), Some(20));
        assert_eq!(b.origin(5), (Some(2), Some(20)));
        assert_eq!(b.find(b"\r\n\r\n", 0), Some(2));
        assert_eq!(b.find(b"cd", 7), None);
        b.skip(6);
        assert_eq!((b.offset(), b.end(), b.bytes()), (6, 8, &b"cd"[..]));
        assert_eq!(b.origin(6), (Some(2), Some(20)));
        assert_eq!(find(b"aaab", b"ab"), Some(2));
    }
}
