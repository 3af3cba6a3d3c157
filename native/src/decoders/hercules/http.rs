//! Sans-IO HTTP/1.1 message framing for one direction of a Hercules Gate connection.
//!
//! Only what Gate traffic needs: request and status lines, headers, bodies framed by
//! Content-Length, chunked transfer coding, or (responses only) the end of the connection;
//! keep-alive connections carry several messages back to back (pipelining included). A message is
//! returned once all of it is buffered, so its offset and frame are those of its first byte. Bodies
//! over the size cap are skipped without being buffered.
//!
//! Heads are parsed by `httparse`. Where it refuses a head wirelog has always read (control bytes,
//! non-ASCII, header names outside the token set, ...), the head is read by line rules instead
//! (`head_by_lines`, those of wirelog's first, Python, decoder), so such heads still give records.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within the buffered bytes (in memory) and header lengths capped at MAX_HEAD; wire numbers are checked where they are read: a Content-Length over 2^63 - 1 is hercules.bad-length, one over the body cap hercules.body-too-large (saturating), chunk sizes are at most 16 hex digits and checked against the cap (saturating) before they are added"
)]

use super::records::Origin;
use crate::decoders::buffer::StreamBuffer;
use crate::model::pyrepr::{bytes_repr, str_repr};
use crate::model::text::py_strip;
use crate::model::Value;

pub const MAX_HEAD: usize = 64 * 1024;

/// A message body: bytes still in the receive buffer (position relative to its read position),
/// bytes joined from chunks, or none (over the cap and skipped).
#[derive(Debug)]
pub enum Body {
    At(usize, usize),
    Owned(Vec<u8>),
    Skipped,
}

/// One request or response.
#[derive(Debug)]
pub struct HttpMessage {
    pub offset: u64,
    pub length: u64,
    pub origin: Origin,
    /// (method, target, version) or (version, status, reason).
    pub start: [String; 3],
    pub headers: Vec<(String, String)>,
    pub body: Body,
    pub chunked: bool,
    /// Stream offset of the body when it is contiguous on the wire.
    pub body_offset: Option<u64>,
    /// Content-Length, or the chunk sizes' sum.
    pub declared: Option<u64>,
}

impl HttpMessage {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body bytes (None when skipped).
    pub fn body<'a>(&'a self, buf: &'a StreamBuffer) -> Option<&'a [u8]> {
        match &self.body {
            Body::At(at, n) => buf.view().get(*at..at + n),
            Body::Owned(v) => Some(v),
            Body::Skipped => None,
        }
    }

    /// HTTP version as a static string.
    pub fn version(&self, response: bool) -> &'static str {
        let v = if response {
            &self.start[0]
        } else {
            &self.start[2]
        };
        if v == "1.0" {
            "1.0"
        } else {
            "1.1"
        }
    }
}

/// Framing trouble: `fatal` means the direction lost message boundaries until resync.
#[derive(Debug)]
pub struct HttpProblem {
    pub code: &'static str,
    pub message: String,
    pub offset: u64,
    pub origin: Origin,
    pub fatal: bool,
    pub fields: Vec<(&'static str, Value)>,
}

/// Message boundaries are lost in this direction (the reason).
struct Broken(String);

#[derive(Debug)]
struct Head {
    start: [String; 3],
    headers: Vec<(String, String)>,
    len: usize,
}

enum Framing {
    None,
    Chunked,
    Length(u64),
    /// A Content-Length beyond i64 (its first 40 characters).
    Absurd(String),
}

/// Splits one direction into HTTP messages; `response` picks status lines over request lines.
///
/// `feed` only reads: the bytes of the messages it returns stay in the buffer (their bodies are
/// positions in it, and `origin` still answers for them) until the caller calls `commit`.
#[derive(Debug)]
pub struct HttpReader {
    response: bool,
    max_body: u64,
    synced: bool,
    /// Read position relative to the buffer's: bytes taken but not committed.
    pos: usize,
    /// Body bytes still to drop (oversized body).
    skip: u64,
    /// How far a chunked body has been scanned, relative to its message.
    chunk_pos: usize,
    chunks: Vec<u8>,
    /// The head of the message at `pos` and its body length, while the body is still arriving:
    /// a body comes in many segments, and its head is parsed once, not once a segment.
    waiting: Option<(Head, usize)>,
}

impl HttpReader {
    pub fn new(response: bool, max_body: usize) -> Self {
        HttpReader {
            response,
            max_body: max_body as u64,
            synced: true,
            pos: 0,
            skip: 0,
            chunk_pos: 0,
            chunks: Vec::new(),
            waiting: None,
        }
    }

    /// Every complete message in `buf`, and framing problems.
    pub fn feed(
        &mut self,
        buf: &StreamBuffer,
        msgs: &mut Vec<HttpMessage>,
        probs: &mut Vec<HttpProblem>,
    ) {
        loop {
            if self.skip > 0 {
                let n = self.skip.min((buf.len() - self.pos) as u64);
                self.pos += n as usize;
                self.skip -= n;
                if self.skip > 0 {
                    break;
                }
            }
            if !self.synced && !self.resync(buf) {
                break;
            }
            match self.one(buf, probs) {
                Err(Broken(message)) => {
                    let offset = buf.offset() + self.pos as u64;
                    probs.push(HttpProblem {
                        code: "hercules.http-malformed",
                        message,
                        offset,
                        origin: buf.origin_at(offset),
                        fatal: true,
                        fields: vec![],
                    });
                    self.chunk_pos = 0;
                    self.chunks.clear();
                    self.synced = false;
                    self.pos += 1;
                }
                Ok(None) => break,
                Ok(Some(msg)) => msgs.push(msg),
            }
        }
    }

    /// Drop the bytes of the messages returned so far.
    pub fn commit(&mut self, buf: &mut StreamBuffer) {
        buf.skip(self.pos);
        self.pos = 0;
    }

    /// At the end of the stream: a response whose body runs to the close.
    pub fn close(&mut self, buf: &StreamBuffer) -> Option<HttpMessage> {
        if !(self.response && self.synced && buf.len() > self.pos) {
            return None;
        }
        let head = self.head(buf).ok()??;
        if !matches!(framing(&head.headers), Ok(Framing::None)) {
            return None;
        }
        let offset = buf.offset() + self.pos as u64;
        let size = ((buf.len() - self.pos - head.len) as u64).min(self.max_body) as usize;
        let at = self.pos + head.len;
        self.pos += head.len + size;
        Some(HttpMessage {
            offset,
            length: (head.len + size) as u64,
            origin: buf.origin_at(offset),
            start: head.start,
            headers: head.headers,
            body: Body::At(at, size),
            chunked: false,
            body_offset: Some(offset + head.len as u64),
            declared: Some(size as u64),
        })
    }

    /// Bytes are missing: drop what is buffered and look for the next message start. Returns
    /// (offset, origin) of the message the gap cut short, if one was in progress.
    pub fn lost(&mut self, buf: &mut StreamBuffer, resume: u64) -> Option<(u64, Origin)> {
        let mut cut = None;
        if (self.synced && buf.len() > self.pos) || self.skip > 0 {
            let at = buf.offset() + self.pos as u64;
            cut = Some((at, buf.origin_at(at)));
        }
        buf.reset(resume);
        self.pos = 0;
        self.skip = 0;
        self.chunk_pos = 0;
        self.chunks.clear();
        self.waiting = None;
        self.synced = false;
        cut
    }

    fn resync(&mut self, buf: &StreamBuffer) -> bool {
        let data = &buf.view()[self.pos..];
        let found = (0..data.len()).find(|&i| start_line(data, i, self.response).is_some());
        match found {
            None => {
                self.pos += data.len().saturating_sub(64);
                false
            }
            Some(i) => {
                self.pos += i;
                self.synced = true;
                true
            }
        }
    }

    fn head(&self, buf: &StreamBuffer) -> Result<Option<Head>, Broken> {
        let at = self.pos;
        let Some(end) = buf.find(b"\r\n\r\n", at) else {
            if buf.len() - at > MAX_HEAD {
                return Err(Broken(format!(
                    "no end of HTTP headers within {MAX_HEAD} bytes"
                )));
            }
            return Ok(None);
        };
        let raw = &buf.view()[at..end + 4];
        parse_head(raw, self.response).map(Some)
    }

    fn one(
        &mut self,
        buf: &StreamBuffer,
        probs: &mut Vec<HttpProblem>,
    ) -> Result<Option<HttpMessage>, Broken> {
        if let Some((head, length)) = self.waiting.take() {
            if buf.len() - self.pos < head.len + length {
                self.waiting = Some((head, length));
                return Ok(None);
            }
            return Ok(Some(self.complete(buf, head, length)));
        }
        let Some(head) = self.head(buf)? else {
            return Ok(None);
        };
        let length = match framing(&head.headers)? {
            Framing::Chunked => return self.chunked(buf, head),
            Framing::None => {
                if self.response && !bodiless(&head.start[1]) {
                    return Ok(None); // the body runs to the end of the connection: see close()
                }
                0
            }
            Framing::Length(n) => n,
            Framing::Absurd(shown) => return Ok(Some(self.absurd(buf, head, shown, probs))),
        };
        let offset = buf.offset() + self.pos as u64;
        let origin = buf.origin_at(offset);
        let hlen = head.len;
        if length > self.max_body {
            self.pos += hlen;
            self.skip = length;
            probs.push(HttpProblem {
                code: "hercules.body-too-large",
                message: format!(
                    "body of {length} bytes is over the {}-byte limit; skipped",
                    self.max_body
                ),
                offset,
                origin,
                fatal: false,
                fields: vec![("content_length", length.into())],
            });
            let total = (hlen as u64).saturating_add(length);
            return Ok(Some(unread(head, offset, origin, total, Some(length))));
        }
        let length = length as usize;
        if buf.len() - self.pos < hlen + length {
            self.waiting = Some((head, length));
            return Ok(None);
        }
        Ok(Some(self.complete(buf, head, length)))
    }

    /// A message whose Content-Length no peer can mean (over 2^63 - 1: Java's `long`, where the
    /// Gate answers 400 and closes): its head is the message, its body is not read, and the
    /// next message is looked for right after the head (the bytes there, if not a message,
    /// make the reader resynchronise). Skipping the declared length would lose the rest of the
    /// connection to one number.
    fn absurd(
        &mut self,
        buf: &StreamBuffer,
        head: Head,
        shown: String,
        probs: &mut Vec<HttpProblem>,
    ) -> HttpMessage {
        let offset = buf.offset() + self.pos as u64;
        let origin = buf.origin_at(offset);
        let hlen = head.len;
        self.pos += hlen;
        probs.push(HttpProblem {
            code: "hercules.bad-length",
            message: format!(
                "Content-Length {} is over 2^63 - 1 (the Gate's Java long: it answers 400 and \
                 closes the connection); the body is not read, the next message is looked for \
                 after the head",
                str_repr(&shown)
            ),
            offset,
            origin,
            fatal: false,
            fields: vec![("content_length", shown.into())],
        });
        unread(head, offset, origin, hlen as u64, None)
    }

    /// The message at `pos` whose head and `length`-byte body are all in `buf`.
    fn complete(&mut self, buf: &StreamBuffer, head: Head, length: usize) -> HttpMessage {
        let offset = buf.offset() + self.pos as u64;
        let hlen = head.len;
        let at = self.pos + hlen;
        self.pos += hlen + length;
        HttpMessage {
            offset,
            length: (hlen + length) as u64,
            origin: buf.origin_at(offset),
            start: head.start,
            headers: head.headers,
            body: Body::At(at, length),
            chunked: false,
            body_offset: Some(offset + hlen as u64),
            declared: Some(length as u64),
        }
    }

    fn chunked(&mut self, buf: &StreamBuffer, head: Head) -> Result<Option<HttpMessage>, Broken> {
        let data = buf.view();
        let base = self.pos;
        let mut pos = base
            + if self.chunk_pos > 0 {
                self.chunk_pos
            } else {
                head.len
            };
        let eol = loop {
            let Some(eol) = buf.find(b"\r\n", pos) else {
                if data.len() - pos > 1024 {
                    return Err(Broken("chunk size line longer than 1024 bytes".into()));
                }
                self.chunk_pos = pos - base;
                return Ok(None);
            };
            let line = &data[pos..eol];
            let digits = line
                .iter()
                .take(16)
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            if digits == 0 {
                let shown = &data[pos..pos + (eol - pos).min(40)];
                return Err(Broken(format!("bad chunk size line {}", bytes_repr(shown))));
            }
            let size = line[..digits].iter().fold(0u64, |n, &b| {
                n << 4 | (b as char).to_digit(16).unwrap_or(0) as u64
            });
            if size == 0 {
                break eol;
            }
            if (self.chunks.len() as u64).saturating_add(size) > self.max_body {
                return Err(Broken(format!(
                    "chunked body over the {}-byte limit",
                    self.max_body
                )));
            }
            // size <= max_body, a limit from the API: checked all the same (16 hex digits)
            let start = eol + 2;
            let Some(end) = usize::try_from(size)
                .ok()
                .and_then(|n| start.checked_add(n))
            else {
                return Err(Broken("chunk size beyond memory".into()));
            };
            let Some(after) = data.get(end..).and_then(|rest| rest.get(..2)) else {
                self.chunk_pos = pos - base;
                return Ok(None);
            };
            if after != b"\r\n" {
                return Err(Broken("chunk data not followed by CRLF".into()));
            }
            self.chunks.extend_from_slice(&data[start..end]);
            pos = end + 2;
        };
        let Some(trailer_end) = buf.find(b"\r\n\r\n", eol) else {
            self.chunk_pos = pos - base;
            return Ok(None);
        };
        let total = trailer_end + 4 - base;
        let offset = buf.offset() + base as u64;
        self.pos = base + total;
        self.chunk_pos = 0;
        let body = std::mem::take(&mut self.chunks);
        let declared = body.len() as u64;
        Ok(Some(HttpMessage {
            offset,
            length: total as u64,
            origin: buf.origin_at(offset),
            start: head.start,
            headers: head.headers,
            body: Body::Owned(body),
            chunked: true,
            body_offset: None,
            declared: Some(declared),
        }))
    }
}

/// A message whose body is not read (skipped, or of no believable length).
fn unread(
    head: Head,
    offset: u64,
    origin: Origin,
    length: u64,
    declared: Option<u64>,
) -> HttpMessage {
    HttpMessage {
        offset,
        length,
        origin,
        start: head.start,
        headers: head.headers,
        body: Body::Skipped,
        chunked: false,
        body_offset: None,
        declared,
    }
}

/// Latin-1 text of header bytes (every byte one character, as Python decodes them).
pub fn latin1(b: &[u8]) -> String {
    b.iter().map(|&c| c as char).collect()
}

/// Python's `str.lower()` for Latin-1 text.
pub fn latin1_lower(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'A'..='Z' | '\u{c0}'..='\u{d6}' | '\u{d8}'..='\u{de}' => {
                char::from_u32(c as u32 + 0x20).unwrap_or(c)
            }
            c => c,
        })
        .collect()
}

/// Python's `s.isascii() and s.isdigit()`.
pub fn ascii_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn framing(headers: &[(String, String)]) -> Result<Framing, Broken> {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if let Some(te) = find("transfer-encoding") {
        let last = te.rsplit(',').next().unwrap_or(te);
        if py_strip(&latin1_lower(last)) == "chunked" {
            return Ok(Framing::Chunked);
        }
    }
    match find("content-length") {
        None => Ok(Framing::None),
        Some(cl) if ascii_digits(cl) => Ok(match cl.parse::<i64>() {
            Ok(n) => Framing::Length(n.unsigned_abs()),
            Err(_) => Framing::Absurd(cl.chars().take(40).collect()),
        }),
        Some(cl) => {
            let shown: String = cl.chars().take(40).collect();
            Err(Broken(format!("bad Content-Length {}", str_repr(&shown))))
        }
    }
}

fn bodiless(status: &str) -> bool {
    let status: u16 = status.parse().unwrap_or(0);
    status < 200 || status == 204 || status == 304
}

/// Python's bytes `\s` (what `\S` excludes) and `bytes.strip()`'s whitespace.
fn py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The start line at `i` by the Python decoder's patterns: the end of its groups and of the
/// line. Requests `[A-Z]{3,10} \S+ HTTP/1\.[01]\r\n`; responses
/// `HTTP/1\.[01] [0-9]{3}( [^\r\n]*)?\r\n`.
fn start_line(d: &[u8], i: usize, response: bool) -> Option<([(usize, usize); 3], usize)> {
    if response {
        let v = d.get(i..i + 13)?;
        if &v[..7] != b"HTTP/1." || !matches!(v[7], b'0' | b'1') || v[8] != b' ' {
            return None;
        }
        if !v[9..12].iter().all(u8::is_ascii_digit) {
            return None;
        }
        let after = i + 12;
        if d.get(after..after + 2) == Some(b"\r\n") {
            return Some(([(i + 5, i + 8), (i + 9, after), (after, after)], after + 2));
        }
        if d[after] != b' ' {
            return None;
        }
        let r = after + 1;
        let n = d[r..].iter().position(|&b| b == b'\r' || b == b'\n')?;
        if d.get(r + n..r + n + 2) != Some(b"\r\n") {
            return None;
        }
        return Some(([(i + 5, i + 8), (i + 9, after), (r, r + n)], r + n + 2));
    }
    let m = d[i..]
        .iter()
        .take(11)
        .take_while(|b| b.is_ascii_uppercase())
        .count();
    if !(3..=10).contains(&m) || d.get(i + m) != Some(&b' ') {
        return None;
    }
    let t = i + m + 1;
    let n = d[t..].iter().take_while(|&&b| !py_space(b)).count();
    if n == 0 {
        return None;
    }
    let rest = d.get(t + n..t + n + 11)?;
    if &rest[..8] != b" HTTP/1." || !matches!(rest[8], b'0' | b'1') || &rest[9..] != b"\r\n" {
        return None;
    }
    Some(([(i, i + m), (t, t + n), (t + n + 6, t + n + 9)], t + n + 11))
}

/// A complete head (through its blank line): httparse, or the Python rules where it refuses.
fn parse_head(raw: &[u8], response: bool) -> Result<Head, Broken> {
    if let Some(head) = head_by_httparse(raw, response) {
        return Ok(head);
    }
    head_by_lines(raw, response)
}

/// Only heads of printable ASCII with CRLF line ends, which httparse and the Python rules read
/// alike.
fn head_by_httparse(raw: &[u8], response: bool) -> Option<Head> {
    let mut lines = 0;
    for (i, &b) in raw.iter().enumerate() {
        match b {
            0x20..=0x7e | b'\t' => {}
            b'\r' if raw.get(i + 1) == Some(&b'\n') => lines += 1,
            b'\n' if i > 0 && raw[i - 1] == b'\r' => {}
            _ => return None,
        }
    }
    let mut headers = vec![httparse::EMPTY_HEADER; lines];
    let (start, n, parsed) = if response {
        let mut r = httparse::Response::new(&mut headers);
        let n = match r.parse(raw) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return None,
        };
        let (version, code) = (r.version?, r.code?);
        let reason = r.reason.unwrap_or("");
        let start = [
            format!("1.{version}"),
            format!("{code:03}"),
            reason.to_owned(),
        ];
        (start, n, r.headers.len())
    } else {
        let mut r = httparse::Request::new(&mut headers);
        let n = match r.parse(raw) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return None,
        };
        let method = r.method?;
        if !(3..=10).contains(&method.len()) || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let start = [
            method.to_owned(),
            r.path?.to_owned(),
            format!("1.{}", r.version?),
        ];
        (start, n, r.headers.len())
    };
    if n != raw.len() {
        return None;
    }
    let headers = headers[..parsed]
        .iter()
        .map(|h| (h.name.to_owned(), latin1(trim_bytes(h.value))))
        .collect();
    Some(Head {
        start,
        headers,
        len: n,
    })
}

fn trim_bytes(b: &[u8]) -> &[u8] {
    let a = b.iter().position(|&c| !py_space(c)).unwrap_or(b.len());
    let z = b.iter().rposition(|&c| !py_space(c)).map_or(a, |z| z + 1);
    &b[a..z]
}

/// The Python decoder's own reading of a head: the start-line pattern, then `name: value` lines
/// split at the first colon (a name must be non-empty with no surrounding whitespace).
fn head_by_lines(raw: &[u8], response: bool) -> Result<Head, Broken> {
    let Some((groups, line_end)) = start_line(raw, 0, response) else {
        let first = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(raw.len());
        let line = &raw[..first.min(80)];
        let what = if response { "status" } else { "request" };
        return Err(Broken(format!(
            "not an HTTP/1.x {what} line: {}",
            bytes_repr(line)
        )));
    };
    let start = groups.map(|(a, b)| latin1(&raw[a..b]));
    let mut headers = Vec::new();
    let block_end = raw.len() - 4;
    if line_end < block_end {
        let block = &raw[line_end..block_end];
        let mut rest = block;
        loop {
            let (line, next) = match rest.windows(2).position(|w| w == b"\r\n") {
                Some(i) => (&rest[..i], Some(&rest[i + 2..])),
                None => (rest, None),
            };
            let colon = line.iter().position(|&b| b == b':');
            let ok = colon.filter(|&c| c > 0 && trim_bytes(&line[..c]).len() == c);
            let Some(c) = ok else {
                let shown = &line[..line.len().min(80)];
                return Err(Broken(format!(
                    "malformed header line {}",
                    bytes_repr(shown)
                )));
            };
            headers.push((latin1(&line[..c]), latin1(trim_bytes(&line[c + 1..]))));
            match next {
                Some(n) => rest = n,
                None => break,
            }
        }
    }
    Ok(Head {
        start,
        headers,
        len: raw.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &[u8], response: bool) -> Result<Head, String> {
        parse_head(raw, response).map_err(|Broken(m)| m)
    }

    #[test]
    fn heads_read_alike_by_both_paths() {
        for (raw, response) in [
            (
                &b"POST /stream/send?stream=x HTTP/1.1\r\nHost: a\r\nX:  v \r\n\r\n"[..],
                false,
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
            (b"HTTP/1.0 404\r\n\r\n", true),
        ] {
            let a = head_by_httparse(raw, response).expect("httparse reads it");
            let b = head_by_lines(raw, response).unwrap_or_else(|Broken(m)| panic!("{m}"));
            assert_eq!((a.start, a.headers, a.len), (b.start, b.headers, b.len));
        }
    }

    #[test]
    fn python_rules_where_httparse_refuses() {
        let h = head(b"POST /\x01 HTTP/1.1\r\nA B: \xe9\r\n\r\n", false)
            .unwrap_or_else(|m| panic!("{m}"));
        assert_eq!(h.start[1], "/\u{1}");
        assert_eq!(h.headers, vec![("A B".to_owned(), "\u{e9}".to_owned())]);
        assert_eq!(
            head(b"POST /x HTTP/1.1\r\nbad header line\r\n\r\n", false)
                .err()
                .as_deref(),
            Some("malformed header line b'bad header line'")
        );
        assert_eq!(
            head(b"get / HTTP/1.1\r\n\r\n", false).err().as_deref(),
            Some("not an HTTP/1.x request line: b'get / HTTP/1.1'")
        );
    }

    /// (offset, length, body) of the messages `data` gives when fed `step` bytes at a time.
    fn read(data: &[u8], step: usize) -> Vec<(u64, u64, Vec<u8>)> {
        let mut buf = StreamBuffer::default();
        let mut reader = HttpReader::new(false, 1 << 20);
        let (mut out, mut probs) = (Vec::new(), Vec::new());
        for (i, piece) in data.chunks(step).enumerate() {
            buf.append((i * step) as u64, piece, None, None);
            let mut msgs = Vec::new();
            reader.feed(&buf, &mut msgs, &mut probs);
            for m in msgs {
                let body = m.body(&buf).unwrap_or_default().to_vec();
                out.push((m.offset, m.length, body));
            }
            reader.commit(&mut buf);
        }
        assert!(probs.is_empty());
        out
    }

    #[test]
    fn a_body_arriving_in_pieces_gives_the_message_it_gives_whole() {
        let one = b"POST /stream/send HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        let two = b"POST /stream/send HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        let data = [&one[..], &two[..]].concat();
        let whole = read(&data, data.len());
        assert_eq!(whole.len(), 2);
        assert_eq!(
            whole[1],
            (one.len() as u64, two.len() as u64, b"abc".to_vec())
        );
        for step in [1, 2, 7, 50] {
            assert_eq!(read(&data, step), whole, "{step} bytes at a time");
        }
    }
}
