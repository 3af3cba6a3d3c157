//! Content-based detection: Log Courier has no well-known port, only four-letter types and
//! strict lengths.

use super::framing::{self, CLIENT_TYPES, HEADER, NONCE, SERVER_TYPES};
use crate::decoders::detect::Sample;

/// The frame cap detection judges lengths against (`Limits::default().max_frame`).
const MAX_FRAME: usize = 64 << 20;

/// Does `data` open with a plausible message of `types`? None: too few bytes to tell.
fn opens(data: &[u8], types: &[&[u8; 4]; 4]) -> Option<bool> {
    let head = &data[..data.len().min(4)];
    if data.len() < HEADER {
        let prefix = types.iter().any(|t| t.starts_with(head));
        return if prefix { None } else { Some(false) };
    }
    if !types.iter().any(|t| &t[..] == head) || !framing::plausible(&data[..HEADER], MAX_FRAME) {
        return Some(false);
    }
    if head == b"JDAT" || head == b"EVNT" {
        let at = HEADER + NONCE;
        return data.get(at).map(|&b| b == 0x78);
    }
    Some(true)
}

/// The first client message in bytes from the middle of a stream: `framing::find_header`'s
/// strict check (a JDAT/EVNT also needs its nonce and zlib byte), client types only.
pub fn find_start(data: &[u8]) -> Option<usize> {
    let mut pos = 0usize;
    loop {
        // find_header answers positions inside the slice it is given: the sums stay in `data`
        let start = pos.checked_add(framing::find_header(&data[pos..], MAX_FRAME).0?)?;
        if data[start..].get(..4).is_some_and(framing::is_client_type) {
            return Some(start);
        }
        pos = start.checked_add(1)?;
    }
}

/// A confidence in [0, 1] that the first bytes of each direction are Log Courier, None when
/// more bytes are needed.
pub fn detect(s: &Sample<'_>) -> Option<f64> {
    let (c2s, s2c, closed) = (s.c2s, s.s2c, s.closed);
    let client = opens(c2s, &CLIENT_TYPES);
    let server = opens(s2c, &SERVER_TYPES);
    match (client, server) {
        (Some(true), Some(true)) => return Some(0.99),
        (Some(true), _) => return Some(0.95),
        (_, Some(true)) => return Some(0.9),
        _ => {}
    }
    let waiting = (client.is_none() && !c2s.is_empty())
        || (server.is_none() && !s2c.is_empty())
        || (c2s.is_empty() && s2c.is_empty());
    if waiting && !closed {
        return None;
    }
    Some(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(c2s: &[u8], s2c: &[u8], closed: bool) -> Option<f64> {
        super::detect(&Sample {
            c2s,
            s2c,
            client_port: 40000,
            server_port: 1234,
            closed,
        })
    }

    #[test]
    fn detects_handshakes_and_data() {
        let helo = b"HELO\0\0\0\x20";
        assert_eq!(detect(helo, b"VERS\0\0\0\x14", false), Some(0.99));
        assert_eq!(detect(helo, b"", false), Some(0.95));
        assert_eq!(detect(b"HE", b"", false), None);
        assert_eq!(detect(b"HE", b"", true), Some(0.0));
        assert_eq!(detect(b"", b"", false), None);
        assert_eq!(detect(b"GET / HTTP/1.1\r\n", b"", false), Some(0.0));
        let jdat = b"JDAT\0\0\0\x20aaaaaaaaaaaaaaaa";
        assert_eq!(detect(jdat, b"", false), None);
        assert_eq!(
            detect(&[&jdat[..], b"\x78"].concat(), b"", false),
            Some(0.95)
        );
        assert_eq!(detect(b"", b"PONG\0\0\0\0", false), Some(0.9));
    }

    #[test]
    fn finds_the_first_client_message() {
        let data = [&b"xxVERS\0\0\0\x14yy"[..], b"PING\0\0\0\0"].concat();
        assert_eq!(find_start(&data), Some(12));
        assert_eq!(find_start(b"nothing here at all"), None);
    }
}
