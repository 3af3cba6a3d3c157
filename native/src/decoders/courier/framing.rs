//! Log Courier framing: `type[4]` + `length` (u32 BE) + body, and the per-type length rules.
//! EVNT alone carries length 0xFFFFFFFF ("no length": the message ends where its zlib stream
//! ends). These functions only judge a header; the decoder acts on the verdict.

use crate::model::Direction;

pub const HEADER: usize = 8;
pub const NONCE: usize = 16;
pub const STREAMED: u32 = 0xFFFF_FFFF;
/// Ruby server max_packet_size and Go receiver JDAT limit.
pub const MAX_PACKET: u64 = 10 * 1024 * 1024;
/// A longer body for a fixed-size type means the header is not to be trusted.
pub const CONTROL_MAX: u64 = 1024;
/// Go rejects a longer HELO/VERS; receivers zero-pad shorter ones.
pub const HANDSHAKE_MAX: u64 = 32;

pub const CLIENT_TYPES: [&[u8; 4]; 4] = [b"HELO", b"PING", b"JDAT", b"EVNT"];
pub const SERVER_TYPES: [&[u8; 4]; 4] = [b"VERS", b"PONG", b"ACKN", b"????"];

/// The index of a known type (0..8: client types, then server types), None for any other.
pub fn type_index(t: &[u8]) -> Option<usize> {
    CLIENT_TYPES
        .iter()
        .chain(SERVER_TYPES.iter())
        .position(|k| &k[..] == t)
}

pub fn is_type(t: &[u8]) -> bool {
    type_index(t).is_some()
}

pub fn is_client_type(t: &[u8]) -> bool {
    matches!(type_index(t), Some(0..=3))
}

/// The side allowed to send `t` (a known type).
pub fn sender(t: &[u8]) -> Direction {
    if is_client_type(t) {
        Direction::C2S
    } else {
        Direction::S2C
    }
}

/// The record kind of a message type.
pub fn kind(t: &[u8]) -> &'static str {
    match t {
        b"HELO" => "helo",
        b"VERS" => "vers",
        b"PING" => "ping",
        b"PONG" => "pong",
        b"JDAT" => "jdat",
        b"EVNT" => "evnt",
        b"ACKN" => "ackn",
        b"????" => "unknown_reply",
        _ => "unknown_type",
    }
}

/// What to do with a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Read `length` bytes of body.
    Body,
    /// EVNT: nonce then a zlib stream of unknown length.
    Stream,
    /// An unknown four-letter type with a sane length: skip its body.
    Unknown,
    /// A TLS record where a Courier header was expected.
    Tls,
    /// Not a trustworthy header.
    Desync,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// Finding code about the header, if any.
    pub problem: Option<&'static str>,
    /// Why, for the finding's sentence.
    pub detail: String,
}

impl Verdict {
    fn new(action: Action, problem: Option<&'static str>, detail: String) -> Self {
        Verdict {
            action,
            problem,
            detail,
        }
    }

    fn ok(action: Action) -> Self {
        Verdict::new(action, None, String::new())
    }
}

/// (type, length) from 8 header bytes.
pub fn parse_header(head: &[u8]) -> ([u8; 4], u32) {
    let mut t = [0u8; 4];
    t.copy_from_slice(&head[..4]);
    (t, u32::from_be_bytes([head[4], head[5], head[6], head[7]]))
}

/// A TLS record header (content type 20–23, major version 3).
pub fn looks_like_tls(head: &[u8]) -> bool {
    head.len() >= 3 && (20..=23).contains(&head[0]) && head[1] == 3 && head[2] <= 4
}

/// An ACKN body: the nonce and a u32 sequence.
const ACKN_LENGTH: u64 = NONCE as u64 + 4;

/// How to treat a header with this type and length (`max_frame`: the decoder's frame cap).
pub fn judge(t: &[u8; 4], length: u32, max_frame: usize) -> Verdict {
    let len = u64::from(length);
    let max_frame = max_frame as u64;
    match t {
        b"EVNT" if length == STREAMED => Verdict::ok(Action::Stream),
        b"EVNT" => payload_length(
            len,
            max_frame,
            "EVNT must carry length 0xFFFFFFFF (streamed)",
        ),
        b"JDAT" if (NONCE as u64) < len && len <= MAX_PACKET => Verdict::ok(Action::Body),
        b"JDAT" => payload_length(len, max_frame, ""),
        _ if is_type(t) => {
            let (rule, ok) = match t {
                b"ACKN" => ("20".to_owned(), len == ACKN_LENGTH),
                b"HELO" | b"VERS" => (format!("at most {HANDSHAKE_MAX}"), len <= HANDSHAKE_MAX),
                _ => ("0".to_owned(), len == 0),
            };
            if ok {
                return Verdict::ok(Action::Body);
            }
            let code = if rule == "0" {
                "courier.nonzero-length"
            } else {
                "courier.bad-length"
            };
            let action = if len <= CONTROL_MAX {
                Action::Body
            } else {
                Action::Desync
            };
            let name = std::str::from_utf8(t).unwrap_or("????");
            Verdict::new(
                action,
                Some(code),
                format!("{name} length must be {rule}, got {length}"),
            )
        }
        _ if looks_like_tls(t) => {
            Verdict::new(Action::Tls, Some("courier.tls-mismatch"), String::new())
        }
        _ if t.iter().all(|&c| c.is_ascii_uppercase() || c == b'?')
            && len <= MAX_PACKET.min(max_frame) =>
        {
            Verdict::new(Action::Unknown, Some("courier.unknown-type"), String::new())
        }
        _ => Verdict::new(
            Action::Desync,
            Some("courier.desync"),
            format!(
                "{} is not a Log Courier message type",
                super::findings::hex(t)
            ),
        ),
    }
}

/// JDAT (or a framed EVNT): the body needs a nonce and zlib data, and must fit the limits.
fn payload_length(len: u64, max_frame: u64, why: &str) -> Verdict {
    if len <= NONCE as u64 {
        let action = if len <= CONTROL_MAX {
            Action::Body
        } else {
            Action::Desync
        };
        let detail = if why.is_empty() {
            format!("body of {len} bytes has no room for nonce + zlib")
        } else {
            why.to_owned()
        };
        return Verdict::new(action, Some("courier.bad-length"), detail);
    }
    if len > max_frame {
        return Verdict::new(
            Action::Desync,
            Some("courier.length-over-limit"),
            format!("length {len} exceeds the {max_frame}-byte frame cap"),
        );
    }
    if len > MAX_PACKET {
        return Verdict::new(
            Action::Body,
            Some("courier.length-over-limit"),
            format!("length {len} exceeds the 10 MiB packet limit of both servers"),
        );
    }
    let problem = (!why.is_empty()).then_some("courier.bad-length");
    Verdict::new(Action::Body, problem, why.to_owned())
}

/// A strict check for resynchronising: a known type with exactly the length its rule wants.
pub fn plausible(head: &[u8], max_frame: usize) -> bool {
    let (t, length) = parse_header(head);
    if !is_type(&t) {
        return false;
    }
    let v = judge(&t, length, max_frame);
    v.problem.is_none() && matches!(v.action, Action::Body | Action::Stream)
}

/// Next plausible header in `data`: (position or None, bytes that can be dropped for sure).
///
/// JDAT/EVNT candidates must also show a zlib header byte (0x78) after the nonce, because the
/// four letters alone occur inside event text. When a candidate is too short to judge, the
/// search stops there so the caller waits for more bytes. One forward scan: linear in `data`.
pub fn find_header(data: &[u8], max_frame: usize) -> (Option<usize>, usize) {
    let mut start = 0;
    for (i, t) in data.windows(4).enumerate() {
        if matches!(t[0], b'H' | b'P' | b'J' | b'E' | b'V' | b'A' | b'?') && is_type(t) {
            let streamed = t == b"JDAT" || t == b"EVNT";
            let need = if streamed { HEADER + NONCE + 1 } else { HEADER };
            let Some(candidate) = data[i..].get(..need) else {
                return (None, i);
            };
            if plausible(&candidate[..HEADER], max_frame)
                && (!streamed || candidate.last() == Some(&0x78))
            {
                return (Some(i), i);
            }
            start = i.saturating_add(1); // i < data.len()
        }
    }
    (None, start.max(data.len().saturating_sub(3)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 64 << 20;

    #[test]
    fn length_rules() {
        assert_eq!(judge(b"EVNT", STREAMED, MAX).action, Action::Stream);
        assert_eq!(judge(b"JDAT", 17, MAX), Verdict::ok(Action::Body));
        let v = judge(b"JDAT", 16, MAX);
        assert_eq!(v.problem, Some("courier.bad-length"));
        assert_eq!(v.detail, "body of 16 bytes has no room for nonce + zlib");
        let v = judge(b"PING", 3, MAX);
        assert_eq!(
            (v.action, v.problem),
            (Action::Body, Some("courier.nonzero-length"))
        );
        assert_eq!(v.detail, "PING length must be 0, got 3");
        let v = judge(b"ACKN", 2000, MAX);
        assert_eq!(
            (v.action, v.detail.as_str()),
            (Action::Desync, "ACKN length must be 20, got 2000")
        );
        let v = judge(b"HELO", 33, MAX);
        assert_eq!(v.detail, "HELO length must be at most 32, got 33");
        let v = judge(b"JDAT", 11 << 20, MAX);
        assert_eq!(
            (v.action, v.problem),
            (Action::Body, Some("courier.length-over-limit"))
        );
        assert_eq!(judge(b"JDAT", u32::MAX - 1, MAX).action, Action::Desync);
        assert_eq!(judge(b"\x16\x03\x01\x02", 0, MAX).action, Action::Tls);
        assert_eq!(judge(b"ABCD", 5, MAX).action, Action::Unknown);
        let v = judge(b"abcd", 5, MAX);
        assert_eq!(v.detail, "61626364 is not a Log Courier message type");
    }

    #[test]
    fn header_search() {
        let ping = b"PING\0\0\0\0";
        let mut data = b"xxPINGyyyy".to_vec();
        data.extend_from_slice(ping);
        assert_eq!(find_header(&data, MAX), (Some(10), 10));
        assert_eq!(find_header(b"abcdefgh", MAX), (None, 5));
        assert_eq!(find_header(b"ab", MAX), (None, 0));
        assert_eq!(find_header(b"zzJDAT\0\0\0\x20", MAX), (None, 2));
        assert_eq!(find_header(b"PINGxxxxzzzzzz", MAX), (None, 11));
    }
}
