//! Recognising Hercules traffic: an HTTP request to a Gate (or Stream/Timeline API) endpoint, or
//! bare events.
//!
//! Gate traffic is identified by path, not port (6306 by default, 8080 per the Gate's README). Bare
//! events have no magic number: a version byte 1 followed by a plausible timestamp is a hint, and
//! an event that parses completely (or up to the end of the sample) makes it near-certain.

use super::decoder::looks_like_http;
use crate::decoders::detect::Sample;
use crate::formats::hercules::reader::{EventParser, Stop};
use crate::formats::hercules::types::MIN_EVENT;

pub const PORTS: [u16; 1] = [6306];

const GATE_PATHS: [&[u8]; 2] = [b"/stream/send", b"/stream/sendAsync"];
const READ_PATHS: [&[u8]; 2] = [b"/stream/read", b"/timeline/read"];
const OTHER_GATE_PATHS: [&[u8]; 4] = [b"/ping", b"/about", b"/status", b"/stream/seekToEnd"];

/// Confidence that a stream is Hercules, from its client bytes (None: undecided yet).
pub fn detect(s: &Sample<'_>) -> Option<f64> {
    let (c2s, closed) = (s.c2s, s.closed);
    if c2s.is_empty() {
        return if closed { Some(0.0) } else { None };
    }
    if looks_like_http(&c2s[..c2s.len().min(11)]) {
        return http(c2s, closed);
    }
    events(c2s, closed)
}

/// `([A-Z]{3,10}) (/[^ \r\n]*) HTTP/1\.[01]\r\n` at the start: (method, target).
fn request_line(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let m = data
        .iter()
        .take(11)
        .take_while(|b| b.is_ascii_uppercase())
        .count();
    if !(3..=10).contains(&m) {
        return None;
    }
    let (method, rest) = data.split_at(m);
    let rest = rest
        .strip_prefix(b" ")
        .filter(|r| r.first() == Some(&b'/'))?;
    let n = rest
        .iter()
        .take_while(|b| !matches!(b, b' ' | b'\r' | b'\n'))
        .count();
    let (target, rest) = rest.split_at(n);
    let rest = rest.get(..11)?;
    if &rest[..8] != b" HTTP/1." || !matches!(rest[8], b'0' | b'1') || &rest[9..] != b"\r\n" {
        return None;
    }
    Some((method, target))
}

fn http(data: &[u8], closed: bool) -> Option<f64> {
    let Some((method, target)) = request_line(data) else {
        let has_crlf = data.windows(2).any(|w| w == b"\r\n");
        return if !has_crlf && !closed && data.len() < 512 {
            None
        } else {
            Some(0.0)
        };
    };
    let path = target.split(|&b| b == b'?').next().unwrap_or(target);
    let post = method == b"POST";
    Some(if GATE_PATHS.contains(&path) {
        if post {
            0.95
        } else {
            0.6
        }
    } else if READ_PATHS.contains(&path) {
        if post {
            0.7
        } else {
            0.4
        }
    } else if OTHER_GATE_PATHS.contains(&path) {
        0.4
    } else {
        0.0
    })
}

fn events(data: &[u8], closed: bool) -> Option<f64> {
    let mut pos = 0;
    if data[0] == 0 {
        if data.len() < 4 {
            return if closed { Some(0.0) } else { None };
        }
        if i32::from_be_bytes([data[0], data[1], data[2], data[3]]) <= 0 {
            return Some(0.0);
        }
        pos = 4;
    }
    let events = &data[pos..];
    if events.len() < MIN_EVENT {
        let waiting = matches!(data.get(pos), None | Some(1));
        return if !closed && waiting { None } else { Some(0.0) };
    }
    if !EventParser::plausible_start(data, pos) {
        return Some(0.0);
    }
    match EventParser::new(64 << 20).parse(data, pos, &mut Vec::new()) {
        Err(Stop::Truncated { .. }) => Some(if closed { 0.3 } else { 0.7 }),
        Err(Stop::Corrupt { .. }) => Some(0.1),
        Ok(ev) if ev.length >= 40 || ev.length == events.len() => Some(0.95),
        Ok(_) => Some(0.8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(c2s: &[u8], closed: bool) -> Option<f64> {
        super::detect(&Sample {
            c2s,
            s2c: b"",
            client_port: 40000,
            server_port: 1234,
            closed,
        })
    }

    #[test]
    fn gate_requests_and_bare_events() {
        assert_eq!(
            detect(b"POST /stream/send?stream=x HTTP/1.1\r\n", false),
            Some(0.95)
        );
        assert_eq!(detect(b"GET /ping HTTP/1.1\r\n", false), Some(0.4));
        assert_eq!(detect(b"GET /index.html HTTP/1.1\r\n", false), Some(0.0));
        assert_eq!(detect(b"POST /stre", false), None);
        assert_eq!(detect(b"\x01\x00", false), None);
        assert_eq!(detect(b"\x00\x00\x00\x00", false), Some(0.0));
    }
}
