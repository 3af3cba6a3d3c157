//! JDAT/EVNT payload bodies: a capped streaming inflate, then `[u32 length][JSON]` events.
//!
//! One inflater serves both message types: JDAT hands it the whole body, EVNT feeds it as bytes
//! arrive and learns from it where the message ends (zlib's end of stream, after the Adler-32).
//! Nobody on the wire limits the inflated size, so the cap comes from `Limits::max_inflated`: the
//! output never grows past cap + 1 bytes, whatever the input claims.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "output lengths are bounded by the inflate cap; zlib's totals only grow; event lengths are u32 compared with the bytes left before they are added"
)]

use flate2::{Decompress, FlushDecompress, Status};

use serde_json::Map;

use crate::model::json::canon::{canonical, Dialect};
use crate::model::json::{pyjson, python_type};
use crate::model::{Document, Value};

/// Go receiver's ErrEventTooLarge.
pub const MAX_EVENT: u64 = 10 * 1024 * 1024;
/// Go's deflate ends with an empty stored block before the Adler-32.
const GO_TAIL: &[u8] = b"\x00\x00\xff\xff";

/// Streaming zlib with an output cap; tells how many input bytes belonged to the stream.
/// The most output buffer a reused inflater keeps (a payload of Log Courier's default spool of
/// 1024 events inflates to a few hundred KiB).
const KEEP_OUTPUT: usize = 4 << 20;

#[derive(Debug)]
pub struct Inflater {
    d: Decompress,
    out: Vec<u8>,
    cap: usize,
    /// Compressed bytes that belong to the zlib stream.
    pub consumed: u64,
    /// The zlib error, worded as Python's zlib words it.
    pub error: Option<String>,
    pub over_cap: bool,
    eof: bool,
    /// First 2 bytes: the zlib header (level fingerprint).
    pub head: Vec<u8>,
    /// Last 8 bytes of the stream: Go's 0000ffff + Adler-32.
    tail: Vec<u8>,
}

impl Inflater {
    pub fn new(cap: usize) -> Self {
        Inflater {
            d: Decompress::new(true),
            out: Vec::new(),
            cap,
            consumed: 0,
            error: None,
            over_cap: false,
            eof: false,
            head: Vec::with_capacity(2),
            tail: Vec::with_capacity(8),
        }
    }

    /// Ready for a new stream, keeping the zlib state's memory and the output buffer's (up to
    /// KEEP_OUTPUT): a capture of many payloads allocates them once, not once a payload.
    pub fn restart(&mut self, cap: usize) {
        self.d.reset(true);
        self.out.clear();
        if self.out.capacity() > KEEP_OUTPUT {
            self.out = Vec::new();
        }
        self.cap = cap;
        self.consumed = 0;
        self.error = None;
        self.over_cap = false;
        self.eof = false;
        self.head.clear();
        self.tail.clear();
    }

    /// The stream ended (eof) or cannot go on (error, cap).
    pub fn done(&self) -> bool {
        self.eof || self.error.is_some() || self.over_cap
    }

    pub fn eof(&self) -> bool {
        self.eof
    }

    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Inflate more compressed bytes; stops at the end of the stream, an error or the cap. Like
    /// Python's `decompressobj().decompress(data, room + 1)`: an error discards this call's
    /// output, and the input is fed whole so zlib consumes what it consumes there. `before` is
    /// the stream's compressed bytes fed earlier (only read to word an error, see `reword`).
    pub fn feed(&mut self, before: &[u8], data: &[u8]) {
        if self.done() || data.is_empty() {
            return;
        }
        if self.head.len() < 2 {
            let take = (2 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
        }
        // the output is at most `cap` bytes here (`done` once it went over); the cap is
        // Limits.max_inflated, any usize an API caller chose
        let limit = self.cap.saturating_add(1);
        let start_out = self.out.len();
        let in0 = self.d.total_in();
        let mut pos = 0usize;
        let mut step = (data.len().saturating_mul(4)).clamp(32 << 10, 4 << 20);
        loop {
            let have = self.out.len();
            let grow = step.min(limit - have);
            self.out.resize(have + grow, 0);
            let out0 = self.d.total_out();
            let r = self
                .d
                .decompress(&data[pos..], &mut self.out[have..], FlushDecompress::Sync);
            let wrote = (self.d.total_out() - out0) as usize;
            self.out.truncate(have + wrote);
            pos = (self.d.total_in() - in0) as usize;
            match r {
                Err(e) => {
                    self.error = Some(reword(zlib_error(&e), before, data));
                    self.out.truncate(start_out);
                    return;
                }
                Ok(Status::StreamEnd) => {
                    self.eof = true;
                    break;
                }
                // Output space left over: the input is exhausted; or the cap is reached.
                Ok(_) if wrote < grow || self.out.len() >= limit => break,
                Ok(_) => step = step.saturating_mul(2).min(64 << 20),
            }
        }
        let used = (self.d.total_in() - in0) as usize;
        let mut tail = std::mem::take(&mut self.tail);
        tail.extend_from_slice(&data[used.saturating_sub(8)..used]);
        let cut = tail.len().saturating_sub(8);
        tail.drain(..cut);
        self.tail = tail;
        self.consumed += used as u64;
        if self.out.len() > self.cap {
            self.over_cap = true;
            self.out.truncate(self.cap);
        }
    }

    /// Level class from the zlib header: 78 5e = fast (Go level 3), 78 9c = default (Ruby).
    pub fn level(&self) -> Option<&'static str> {
        if self.head.len() < 2 || self.head[0] & 0x0f != 8 {
            return None;
        }
        Some(["fastest", "fast", "default", "maximum"][usize::from(self.head[1] >> 6)])
    }

    pub fn go_tail(&self) -> bool {
        self.eof && self.tail.starts_with(GO_TAIL)
    }
}

/// zlib-rs's fast path marks a damaged stream bad and reports it on its next turn as "repeated
/// call with bad state", where zlib names the damage ("invalid distance too far back", ...). The
/// same bytes inflated again through output windows under 258 bytes take the slow path, which
/// names it as zlib does; only a damaged stream pays for this.
fn reword(msg: String, before: &[u8], data: &[u8]) -> String {
    if !msg.ends_with("repeated call with bad state") {
        return msg;
    }
    let mut d = Decompress::new(true);
    let mut window = [0u8; 257];
    for part in [before, data] {
        let mut pos = 0;
        loop {
            let (in0, out0) = (d.total_in(), d.total_out());
            match d.decompress(&part[pos..], &mut window, FlushDecompress::Sync) {
                Err(e) => return zlib_error(&e),
                Ok(Status::StreamEnd) => return msg,
                Ok(_) => {}
            }
            pos += (d.total_in() - in0) as usize;
            let wrote = d.total_out() - out0;
            if pos >= part.len() && wrote < window.len() as u64 {
                break; // this part is inflated and no output is pending
            }
            if d.total_in() == in0 && wrote == 0 {
                return msg; // stuck: keep zlib-rs's words
            }
        }
    }
    msg
}

/// Python's `str(zlib.error)` for a failed decompressobj().decompress().
fn zlib_error(e: &flate2::DecompressError) -> String {
    if e.needs_dictionary().is_some() {
        return "Error 2 while decompressing data".to_owned();
    }
    let msg = e.message().unwrap_or("invalid input data");
    format!("Error -3 while decompressing data: {msg}")
}

/// Events cut from inflated bytes (as ranges into them), and the first framing problem.
pub struct Framing {
    pub events: Vec<std::ops::Range<usize>>,
    pub problem: Option<(&'static str, String)>,
    /// Where the cut stopped because `max` events were taken and bytes were left.
    pub stopped: Option<usize>,
}

/// Cut `[u32 length][JSON]` records, at most `max` (what the frame's budget pays for);
/// `complete == false` means a cut tail is expected (not a finding).
pub fn split_events(data: &[u8], complete: bool, max: usize) -> Framing {
    let mut events = Vec::new();
    let (mut pos, end) = (0usize, data.len());
    let cut = |msg: String| complete.then_some(("courier.bad-event-framing", msg));
    while pos < end {
        if events.len() == max {
            return Framing {
                events,
                problem: None,
                stopped: Some(pos),
            };
        }
        if end - pos < 4 {
            let problem = cut(format!(
                "{} stray bytes where an event length was expected",
                end - pos
            ));
            return Framing {
                events,
                problem,
                stopped: None,
            };
        }
        let n = u32::from_be_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
        if u64::from(n) > MAX_EVENT {
            let msg = format!(
                "event {} declares {n} bytes, over the 10 MiB event limit",
                events.len()
            );
            return Framing {
                events,
                problem: Some(("courier.event-over-limit", msg)),
                stopped: None,
            };
        }
        let n = n as usize;
        if end - pos - 4 < n {
            let left = end - pos - 4;
            let problem = cut(format!(
                "event {} declares {n} bytes, only {left} left",
                events.len()
            ));
            return Framing {
                events,
                problem,
                stopped: None,
            };
        }
        events.push(pos + 4..pos + 4 + n);
        pos += 4 + n;
    }
    Framing {
        events,
        problem: None,
        stopped: None,
    }
}

/// (document, error). Its canonical text as serde_json reads it: made in one pass, or, for a
/// text that repeats a key or that serde_json refuses, by serde_json. A failure keeps the text as
/// `{"message": text}`, as the Ruby server does; the error is worded as Python's json module
/// words it (the Python decoder quoted it).
pub fn parse_json(raw: &[u8]) -> (Document, Option<String>) {
    let err = match canonical(raw, Dialect::Serde) {
        Ok(c) => {
            let doc = Document::from(c);
            if doc.is_object() {
                return (doc, None);
            }
            format!("a JSON {}, not an object", doc.python_type())
        }
        Err(_) => match serde_json::from_slice::<Value>(raw) {
            Ok(Value::Object(doc)) => return (Value::Object(doc).into(), None),
            Ok(other) => format!("a JSON {}, not an object", python_type(&other)),
            Err(_) => pyjson::error(raw),
        },
    };
    let mut doc = Map::new();
    doc.insert(
        "message".to_owned(),
        Value::String(String::from_utf8_lossy(raw).into_owned()),
    );
    (Value::Object(doc).into(), Some(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::text::unhex;

    #[test]
    fn zlib_errors_in_pythons_words() {
        let mut inf = Inflater::new(1 << 20);
        inf.feed(&[], b"xx");
        assert_eq!(
            inf.error.as_deref(),
            Some("Error -3 while decompressing data: incorrect header check")
        );
        // A damaged Go-style stream whose damage zlib-rs meets on its fast path.
        let z = unhex("785e62fc6010ab56ca4d2d2e4e4c4f55b252ca3550d251ca53b232a86540973184c818d602000000ffff010000ffff539a0d37");
        for split in [5, 20, z.len()] {
            let mut inf = Inflater::new(1 << 20);
            inf.feed(&[], &z[..split]);
            if inf.error.is_none() {
                inf.feed(&z[..split], &z[split..]);
            }
            assert_eq!(
                inf.error.as_deref(),
                Some("Error -3 while decompressing data: invalid distance too far back"),
                "split {split}"
            );
        }
    }

    #[test]
    fn the_cap_bounds_the_output_and_the_end_is_found() {
        let block: Vec<u8> = [&[0, 0, 0, 2][..], b"{}"].concat().repeat(1000);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &block).unwrap();
        let mut z = z.finish().unwrap();
        let stream_len = z.len() as u64;
        z.extend_from_slice(b"tail");
        let mut inf = Inflater::new(100);
        inf.feed(&[], &z);
        assert!(inf.over_cap && inf.output().len() == 100 && !inf.eof());
        let mut inf = Inflater::new(1 << 20);
        inf.feed(&[], &z);
        assert!(inf.eof() && inf.consumed == stream_len && inf.output() == &block[..]);
        assert_eq!(
            split_events(inf.output(), true, usize::MAX).events.len(),
            1000
        );
        assert_eq!(inf.level(), Some("default"));
    }

    #[test]
    fn event_framing_problems() {
        let f = split_events(b"\0\0\0\x02{}\0\0", true, 9);
        assert_eq!(f.events.len(), 1);
        assert_eq!(
            f.problem.unwrap().1,
            "2 stray bytes where an event length was expected"
        );
        assert!(split_events(b"\0\0\0\x09{}", false, 9).problem.is_none());
        let f = split_events(b"\x01\0\0\x01", true, 9);
        assert_eq!(f.problem.unwrap().0, "courier.event-over-limit");
        let (doc, err) = parse_json(b"[1]");
        assert_eq!(err.as_deref(), Some("a JSON list, not an object"));
        assert_eq!(doc, serde_json::json!({"message": "[1]"}));
    }
}
