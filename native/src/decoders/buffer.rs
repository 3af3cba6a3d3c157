//! One receive buffer per direction (the guarantee of h11's receive buffer): bytes are
//! appended to one Vec, reads advance a start index, and the consumed prefix is dropped only when
//! it is at least half the buffer, so consuming many short frames costs O(bytes), never O(n²).
//! It also remembers which frame (and time) carried each stream offset, so a message is stamped
//! with the frame of its first byte.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within the buffer; its base is a stream offset (below 2^63, see tcp/)"
)]

use std::collections::VecDeque;

/// Room an emptied buffer keeps (captures can hold thousands of idle connections).
const KEEP_CAPACITY: usize = 64 << 10;

/// (stream offset where a chunk began, its frame, its time).
type Mark = (u64, Option<u64>, Option<i64>);

#[derive(Debug, Default)]
pub struct StreamBuffer {
    buf: Vec<u8>,
    /// Index in `buf` of the first unconsumed byte.
    start: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    marks: VecDeque<Mark>,
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

    /// The unconsumed bytes.
    pub fn view(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Up to `n` bytes starting `at` bytes after the read position.
    pub fn peek(&self, at: usize, n: usize) -> &[u8] {
        let v = self.view();
        let from = at.min(v.len());
        &v[from..from.saturating_add(n).min(v.len())]
    }

    /// Drop the next `n` bytes (fewer if the buffer is shorter).
    pub fn skip(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.buf.len());
        if self.start == self.buf.len() {
            self.base += self.start as u64;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new(); // an idle connection does not keep its largest message's room
            } else {
                self.buf.clear();
            }
            self.start = 0;
        } else if self.start > 65536 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.base += self.start as u64;
            self.start = 0;
        }
        // Keep the mark covering the read position; drop the ones before it.
        let i = self.marks.partition_point(|m| m.0 <= self.offset());
        if i > 1 {
            self.marks.drain(..i - 1);
        }
    }

    /// (frame, time) of the chunk that carried the read position.
    pub fn origin(&self) -> (Option<u64>, Option<i64>) {
        self.origin_at(self.offset())
    }

    /// (frame, ts) of the chunk that carried stream `offset` (at or after the read position).
    pub fn origin_at(&self, offset: u64) -> (Option<u64>, Option<i64>) {
        match self.marks.partition_point(|m| m.0 <= offset) {
            0 => (None, None),
            i => (self.marks[i - 1].1, self.marks[i - 1].2),
        }
    }

    /// Stream offset one past the last buffered byte.
    pub fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Position of `needle` at or after `from` (both relative to the read position).
    pub fn find(&self, needle: &[u8], from: usize) -> Option<usize> {
        let hay = self.view().get(from..)?;
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
    fn consumes_by_offset_and_knows_each_bytes_frame() {
        let mut b = StreamBuffer::default();
        b.append(10, b"abc", Some(1), Some(100));
        b.append(13, b"defg", Some(2), Some(200));
        assert_eq!(
            (b.len(), b.offset(), b.origin()),
            (7, 10, (Some(1), Some(100)))
        );
        b.skip(3);
        assert_eq!(
            (b.offset(), b.origin(), b.peek(1, 2)),
            (13, (Some(2), Some(200)), &b"ef"[..])
        );
        assert_eq!(b.peek(3, 10), b"g");
        assert_eq!(b.peek(9, 10), b"");
        b.skip(100);
        assert_eq!((b.len(), b.offset()), (0, 17));
        b.reset(30);
        b.append(30, b"x", None, None);
        assert_eq!((b.offset(), b.origin()), (30, (None, None)));
    }

    #[test]
    fn compaction_keeps_offsets() {
        let mut b = StreamBuffer::default();
        let data = vec![7u8; 200_000];
        b.append(0, &data, Some(1), None);
        for _ in 0..150 {
            b.skip(1000);
        }
        assert_eq!((b.offset(), b.len()), (150_000, 50_000));
        assert!(b.buf.len() < 200_000);
    }

    #[test]
    fn origin_at_an_offset_and_find() {
        let mut b = StreamBuffer::default();
        b.append(0, b"ab\r\n", Some(1), Some(10));
        b.append(4, b"\r\ncd", Some(2), Some(20));
        assert_eq!(b.origin_at(5), (Some(2), Some(20)));
        assert_eq!(b.find(b"\r\n\r\n", 0), Some(2));
        assert_eq!(b.find(b"cd", 7), None);
        b.skip(6);
        assert_eq!((b.offset(), b.end(), b.view()), (6, 8, &b"cd"[..]));
        assert_eq!(b.origin_at(6), (Some(2), Some(20)));
        assert_eq!(find(b"aaab", b"ab"), Some(2));
    }
}
