//! One direction of bare Hercules events: a file of concatenated events (a Kafka dump), or of
//! count-prefixed batches (Gate bodies back to back).
//!
//! Events have no length prefix, so an incomplete event is re-parsed when more bytes arrive; to
//! keep that linear, a retry waits until the buffer holds the bytes the last attempt proved missing
//! and has grown by half. After a corrupt event nothing can be located, so the parser scans for the
//! next plausible event start (version 1, timestamp in 2000..2100, and the event parses) and says
//! how many bytes it skipped.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within the buffered bytes; stream offsets (below 2^63, see tcp/); batch counts are i32 in i64; event indexes count parsed events"
)]

use super::records::{event_message, Origin, PROTOCOL};
use super::Codec;
use crate::decoders::buffer::StreamBuffer;
use crate::formats::hercules::reader::{EventParser, Stop};
use crate::formats::hercules::types::MIN_EVENT;
use crate::model::{Direction, Field, Finding, Message, Record, Severity};

#[derive(Debug)]
pub struct RawEvents {
    direction: Direction,
    /// Decided from the first byte: 0x00 starts a count.
    batches: Option<bool>,
    /// Events still due in the current batch, and the index of the next one.
    left: i64,
    index: i64,
    batch_at: Option<u64>,
    batch_origin: Origin,
    /// Do not re-parse before the buffer reaches this stream offset.
    wait_end: u64,
    /// Set while resynchronising: where the bad bytes began.
    lost_at: Option<u64>,
    lost_origin: Origin,
    /// Where the data ended inside an event (already reported).
    cut_at: Option<u64>,
}

impl RawEvents {
    pub fn new(direction: Direction) -> Self {
        RawEvents {
            direction,
            batches: None,
            left: 0,
            index: 0,
            batch_at: None,
            batch_origin: (None, None),
            wait_end: 0,
            lost_at: None,
            lost_origin: (None, None),
            cut_at: None,
        }
    }

    /// Bytes are missing before `resume`: event boundaries are lost until resync.
    pub fn gap(&mut self, buf: &mut StreamBuffer, resume: u64) {
        if self.lost_at.is_none() {
            self.lose(buf.offset(), buf);
        }
        buf.reset(resume);
        self.left = 0;
        self.wait_end = 0;
    }

    fn lose(&mut self, offset: u64, buf: &StreamBuffer) {
        self.lost_at = Some(offset);
        self.lost_origin = buf.origin_at(offset);
    }

    fn finding(
        &self,
        code: &'static str,
        severity: Severity,
        text: String,
        offset: u64,
        origin: Origin,
    ) -> Finding {
        let mut f = Finding::new(code, severity, text).at(origin.0, origin.1);
        f.direction = Some(self.direction);
        f.offset = Some(offset);
        f
    }

    pub fn feed(
        &mut self,
        buf: &mut StreamBuffer,
        codec: &mut Codec<'_>,
        fin: bool,
        out: &mut Vec<Record>,
    ) {
        if !fin && (buf.is_empty() || buf.end() < self.wait_end) {
            return;
        }
        let base = buf.offset();
        let mut pos = 0;
        let n = buf.len();
        let mut problems = Vec::new();
        while pos < n {
            let data = buf.view();
            if self.batches.is_none() {
                self.batches = Some(data[0] == 0);
            }
            if self.lost_at.is_some() {
                pos = self.resync(buf, codec.parser, base, pos, fin, out);
                if self.lost_at.is_some() {
                    break;
                }
            }
            if self.batches == Some(true) && self.left == 0 && self.lost_at.is_none() {
                if n - pos < 4 {
                    break;
                }
                pos = self.count(buf, base, pos, out);
                continue;
            }
            let data = buf.view();
            match codec.parser.parse(data, pos, &mut problems) {
                Err(Stop::Truncated { needed, path, .. }) => {
                    if !fin {
                        let grown = (pos + (n - pos) * 3 / 2 + 1) as u64;
                        self.wait_end = base + needed.max(grown);
                        break;
                    }
                    let at = base + pos as u64;
                    let size = n - pos;
                    let text = format!(
                        "the data ends inside an event ({size} bytes from offset {at}, in {})",
                        if path.is_empty() { "the header" } else { &path }
                    );
                    let f = self
                        .finding(
                            "hercules.truncated",
                            Severity::Error,
                            text,
                            at,
                            buf.origin_at(at),
                        )
                        .field("path", path)
                        .field("bytes", size);
                    out.push(f.into());
                    self.lose(at, buf);
                    self.cut_at = Some(at);
                    pos += 1;
                }
                Err(Stop::Corrupt {
                    code,
                    message,
                    offset,
                    path,
                }) => {
                    let at = base + pos as u64;
                    let mut text = format!("event at offset {at}: {message}");
                    if self.batches == Some(true) && self.left > 1 {
                        text.push_str(&format!(
                            "; the remaining {} event(s) of the batch cannot be located",
                            self.left - 1
                        ));
                    }
                    let where_ = base + offset as u64;
                    let f = self
                        .finding(code, Severity::Error, text, where_, buf.origin_at(where_))
                        .field("path", path)
                        .field("event_offset", at);
                    out.push(f.into());
                    self.lose(at, buf);
                    self.left = 0;
                    pos += 1;
                }
                Ok(ev) => {
                    let at = base + pos as u64;
                    let extra = if self.batches == Some(true) {
                        vec![
                            ("batch_index", Field::Value(self.index.into())),
                            ("batch_offset", Field::Value(self.batch_at.into())),
                        ]
                    } else {
                        vec![]
                    };
                    out.push(
                        event_message(
                            data,
                            &ev,
                            (self.direction, at, buf.origin_at(at)),
                            extra,
                            codec.event_bytes,
                        )
                        .into(),
                    );
                    for p in problems.drain(..) {
                        let off = base + p.offset as u64;
                        let origin = buf.origin_at(off);
                        if let Some(f) = codec.reporter.finding(
                            codec.names,
                            p,
                            Some(self.direction),
                            Some(off),
                            origin,
                            vec![],
                        ) {
                            out.push(f.into());
                        }
                    }
                    pos += ev.length;
                    if self.batches == Some(true) {
                        self.left -= 1;
                        self.index += 1;
                    }
                }
            }
        }
        if fin {
            self.end(base + pos as u64, out);
        }
        buf.skip(pos);
    }

    fn count(&mut self, buf: &StreamBuffer, base: u64, pos: usize, out: &mut Vec<Record>) -> usize {
        let d = &buf.view()[pos..pos + 4];
        let count = i32::from_be_bytes([d[0], d[1], d[2], d[3]]);
        let at = base + pos as u64;
        let origin = buf.origin_at(at);
        let mut m = Message::new(PROTOCOL, "batch");
        m.direction = Some(self.direction);
        m.offset = Some(at);
        m.length = 4;
        (m.frame, m.ts) = origin;
        m.fields.push(("count", count.into()));
        out.push(m.into());
        if count < 0 {
            let text = format!("negative event count {count}");
            let f = self
                .finding("hercules.count-mismatch", Severity::Error, text, at, origin)
                .field("count", count);
            out.push(f.into());
            self.lose(at, buf);
            return pos + 1;
        }
        self.left = count.into();
        self.index = 0;
        self.batch_at = Some(at);
        self.batch_origin = origin;
        pos + 4
    }

    /// Position of the next event that parses (clearing `lost_at`), or where to wait.
    fn resync(
        &mut self,
        buf: &StreamBuffer,
        parser: &mut EventParser,
        base: u64,
        pos: usize,
        fin: bool,
        out: &mut Vec<Record>,
    ) -> usize {
        let data = buf.view();
        let mut scratch = Vec::new();
        let mut q = pos;
        loop {
            let next = data
                .get(q..)
                .and_then(|rest| rest.iter().position(|&b| b == 1));
            let Some(at) = next.map(|i| q + i) else {
                return data.len();
            };
            q = at;
            if data.len() - q < MIN_EVENT {
                return if fin { data.len() } else { q };
            }
            if EventParser::plausible_start(data, q) {
                scratch.clear();
                match parser.parse(data, q, &mut scratch) {
                    Ok(_) => break,
                    Err(Stop::Truncated { .. }) if !fin => return q,
                    Err(_) => {}
                }
            }
            q += 1;
        }
        let lost = self.lost_at.take().unwrap_or(base);
        self.batches = Some(false);
        let resumed = base + q as u64;
        if resumed > lost {
            let text = format!(
                "skipped {} bytes after offset {lost} to the next event that parses",
                resumed - lost
            );
            let f = self
                .finding(
                    "hercules.resync",
                    Severity::Warning,
                    text,
                    lost,
                    self.lost_origin,
                )
                .field("skipped", resumed - lost)
                .field("resumed_at", resumed);
            out.push(f.into());
        }
        q
    }

    fn end(&mut self, offset: u64, out: &mut Vec<Record>) {
        if let Some(lost) = self.lost_at {
            if offset > lost && Some(lost) != self.cut_at {
                let text = format!(
                    "skipped {} bytes after offset {lost}: no further event found",
                    offset - lost
                );
                let f = self
                    .finding(
                        "hercules.resync",
                        Severity::Warning,
                        text,
                        lost,
                        self.lost_origin,
                    )
                    .field("skipped", offset - lost);
                out.push(f.into());
                self.lost_at = None;
            }
        }
        if self.batches == Some(true) && self.left > 0 {
            let text = format!(
                "batch count says {} events but the data holds {}",
                self.index + self.left,
                self.index
            );
            let f = self
                .finding(
                    "hercules.count-mismatch",
                    Severity::Error,
                    text,
                    self.batch_at.unwrap_or(0),
                    self.batch_origin,
                )
                .field("count", self.index + self.left)
                .field("decoded", self.index);
            out.push(f.into());
            self.left = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoders::hercules::records::{Reporter, TagNames};

    /// An event of one String tag of `len` bytes.
    fn string_event(len: usize) -> Vec<u8> {
        let mut ev = vec![1];
        ev.extend(17_000_000_000_000_000i64.to_be_bytes());
        ev.extend([7; 16]);
        ev.extend([0, 1, 1, b's', 9]);
        ev.extend((len as i32).to_be_bytes());
        ev.extend(std::iter::repeat_n(b'a', len));
        ev
    }

    /// Feeds `data` in 1460-byte pieces; the stream offsets the decoder waited for after each.
    fn waits(data: &[u8]) -> (Vec<u64>, Vec<Record>) {
        let mut parser = EventParser::new(64 << 20);
        let (mut reporter, mut names) = (Reporter::default(), TagNames::default());
        let mut held = crate::held::spill::SpillStore::default();
        let mut codec = Codec {
            parser: &mut parser,
            reporter: &mut reporter,
            names: &mut names,
            held: &mut held,
            event_bytes: false,
        };
        let (mut raw, mut buf) = (RawEvents::new(Direction::C2S), StreamBuffer::default());
        let (mut waits, mut out) = (Vec::new(), Vec::new());
        for (i, piece) in data.chunks(1460).enumerate() {
            buf.append((i * 1460) as u64, piece, None, None);
            raw.feed(&mut buf, &mut codec, false, &mut out);
            waits.push(raw.wait_end);
        }
        raw.feed(&mut buf, &mut codec, true, &mut out);
        (waits, out)
    }

    #[test]
    fn an_incomplete_event_is_retried_once_its_missing_bytes_are_there() {
        let big = string_event(400_000);
        let (waits, out) = waits(&big);
        // The String's length proves the event's end: no retry before all of it has arrived.
        assert!(waits[..waits.len() - 1]
            .iter()
            .all(|&w| w == big.len() as u64));
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn retries_wait_for_the_buffer_to_grow_by_half() {
        // 3000 small tags: each attempt proves only the next tag missing.
        let mut ev = string_event(0);
        ev.truncate(25);
        ev.extend(3000u16.to_be_bytes());
        for k in 0..3000u16 {
            ev.push(4);
            ev.extend(format!("{k:04}").bytes());
            ev.push(0x0b);
        }
        let (waits, out) = waits(&ev);
        assert_eq!(waits[0], 1460 + 730 + 1);
        // Geometric growth: a logarithmic number of distinct retry points for linear cost.
        let mut distinct = waits.clone();
        distinct.dedup();
        assert!(distinct.len() <= 8, "{distinct:?}");
        assert_eq!(out.len(), 1);
    }
}
