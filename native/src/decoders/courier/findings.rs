//! The Log Courier finding catalogue (every code this decoder emits with its default severity),
//! one constructor, and the bits of Python text formatting the sentences quote (`bytes` repr).
//! One table, so the code, docs/ and the tests agree on the stable codes.

use crate::model::{Direction, Finding, Severity};

pub const PROTOCOL: &str = "courier";

/// Where a record sits: stream offset, frame and capture time of the byte it starts at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct At {
    pub offset: Option<u64>,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
}

impl At {
    pub fn new(offset: u64, frame: Option<u64>, ts: Option<i64>) -> Self {
        At {
            offset: Some(offset),
            frame,
            ts,
        }
    }
}

/// The default severity of a code; an unknown code is a bug caught by the tests.
pub fn severity(code: &str) -> Severity {
    use Severity::*;
    match code {
        "courier.handshake-layout"
        | "courier.unknown-nonce"
        | "courier.ack-repeated"
        | "courier.resend"
        | "courier.fingerprint-mismatch"
        | "courier.ack-after-gap" => Info,
        "courier.helo-not-first"
        | "courier.ping-first"
        | "courier.vers-not-first"
        | "courier.vers-without-helo"
        | "courier.evnt-flag-bug"
        | "courier.nonzero-length"
        | "courier.ping-while-pending"
        | "courier.pong-without-ping"
        | "courier.ack-regressed"
        | "courier.ack-over-count"
        | "courier.ack-out-of-order"
        | "courier.trailing-data"
        | "courier.invalid-json"
        | "courier.nonce-reused"
        | "courier.unknown-type"
        | "courier.resync-after-gap"
        | "courier.truncated"
        | "courier.unacked-at-close"
        | "courier.pending-overflow" => Warning,
        "courier.evnt-not-negotiated"
        | "courier.wrong-direction"
        | "courier.bad-length"
        | "courier.length-over-limit"
        | "courier.decompress-failed"
        | "courier.inflate-limit"
        | "courier.bad-event-framing"
        | "courier.event-over-limit"
        | "courier.tls-mismatch"
        | "courier.desync" => Error,
        _ => {
            debug_assert!(false, "unknown courier finding code {code}");
            Error
        }
    }
}

/// A courier finding at `at` with the code's default severity; add fields with `.field()`.
pub fn finding(code: &'static str, message: String, d: Option<Direction>, at: At) -> Finding {
    let mut f = Finding::new(code, severity(code), message).at(at.frame, at.ts);
    f.direction = d;
    f.offset = at.offset;
    f
}

/// Python's `repr(bytes)`: `b'...'`, double quotes when the bytes hold `'` but no `"`.
pub fn bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut s = String::with_capacity(b.len().saturating_add(3));
    s.push('b');
    s.push(quote);
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            c if char::from(c) == quote => {
                s.push('\\');
                s.push(quote);
            }
            0x20..=0x7e => s.push(char::from(c)),
            c => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push(quote);
    s
}

pub use crate::model::text::hex;

/// `bytes.decode("latin-1")`: one char per byte.
pub fn latin1(b: &[u8]) -> String {
    b.iter().map(|&c| char::from(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_bytes_repr() {
        assert_eq!(bytes_repr(b"JDAT"), "b'JDAT'");
        assert_eq!(bytes_repr(b"a'b"), "b\"a'b\"");
        assert_eq!(bytes_repr(b"a'\""), "b'a\\'\"'");
        assert_eq!(bytes_repr(b"\x00\xff\\\n"), "b'\\x00\\xff\\\\\\n'");
        assert_eq!(hex(b"\x01\xab"), "01ab");
    }
}
