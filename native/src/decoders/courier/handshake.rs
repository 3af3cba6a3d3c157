//! HELO/VERS bodies: four historic layouts, and what each says about the software that sent it.
//!
//! Layouts (reference/courier.md §2): 0 bytes (Go 2.5.0–2.6.3 HELO), 1 byte = flags (Go
//! 2.5.0–2.6.3 VERS), 8 bytes = flags, major, minor, patch as u8 + client[4] (Ruby 2.7.0–2.7.1),
//! 20 bytes = flags, major, minor, patch as u32 + client[4] (Ruby >= 2.7.2), 32 bytes = the
//! 20-byte layout + 12 reserved zero bytes (Go >= 2.6.4). Receivers zero-pad shorter bodies to 32
//! and read flag byte 0, so any other length is parsed the same way and reported.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within a padded 16-byte handshake body"
)]

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use crate::model::Value;

use super::findings::hex;

pub const EVNT_FLAG: u8 = 0x01;
pub const KNOWN_LENGTHS: [usize; 5] = [0, 1, 8, 20, 32];

pub fn client_name(id: &str) -> Option<&'static str> {
    match id {
        "LCOR" => Some("Log Courier"),
        "LCVR" => Some("Log Carver"),
        "RYLC" => Some("Ruby Log Courier"),
        "00000000" => Some("unspecified"),
        _ => None,
    }
}

pub fn helo_class(length: usize) -> Option<(&'static str, &'static str)> {
    match length {
        0 => Some(("go", "Go log-courier 2.5.0-2.6.3")),
        8 => Some(("ruby", "Ruby gem 2.7.0-2.7.1")),
        20 => Some(("ruby", "Ruby gem >= 2.7.2")),
        32 => Some(("go", "Go log-courier >= 2.6.4")),
        _ => None,
    }
}

pub fn vers_class(length: usize) -> Option<(&'static str, &'static str)> {
    match length {
        1 => Some(("go", "Go receiver 2.5.0-2.6.3")),
        8 => Some(("ruby", "Ruby gem 2.7.0-2.7.1")),
        20 => Some(("ruby", "Ruby gem >= 2.7.2")),
        32 => Some(("go", "Go receiver (Log Carver) >= 2.6.4")),
        _ => None,
    }
}

/// Distinct version texts kept for the process (`Message::version` is `&'static str`).
const MAX_VERSIONS: usize = 4096;

/// A version text as `&'static str`: each distinct text is leaked once, at most `MAX_VERSIONS`
/// of them (hostile handshakes could otherwise leak without bound); past that, None.
pub fn intern(v: &str) -> Option<&'static str> {
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&s) = seen.get(v) {
        return Some(s);
    }
    if seen.len() >= MAX_VERSIONS {
        return None;
    }
    let s: &'static str = Box::leak(v.to_owned().into_boxed_str());
    seen.insert(s);
    Some(s)
}

/// One HELO or VERS body, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    pub length: usize,
    /// Byte 0, the only byte anyone reads.
    pub flags: u8,
    pub version: Option<String>,
    pub client_id: Option<String>,
}

impl Handshake {
    pub fn evnt(&self) -> bool {
        self.flags & EVNT_FLAG != 0
    }

    /// The message fields it adds, in order.
    pub fn fields(&self) -> [(&'static str, Value); 6] {
        let opt = |v: &Option<String>| v.clone().map_or(Value::Null, Value::from);
        [
            ("flags", self.flags.into()),
            ("evnt", self.evnt().into()),
            ("software_version", opt(&self.version)),
            ("client_id", opt(&self.client_id)),
            (
                "client_name",
                self.client_id
                    .as_deref()
                    .and_then(client_name)
                    .map_or(Value::Null, Value::from),
            ),
            (
                "layout",
                if KNOWN_LENGTHS.contains(&self.length) {
                    self.length.into()
                } else {
                    Value::Null
                },
            ),
        ]
    }
}

/// Parse any body length the receivers accept (they zero-pad to 32 bytes).
pub fn parse(body: &[u8]) -> Handshake {
    let n = body.len();
    if n == 8 {
        return Handshake {
            length: 8,
            flags: body[0],
            version: Some(format!("{}.{}.{}", body[1], body[2], body[3])),
            client_id: Some(client(&body[4..8])),
        };
    }
    let mut padded = [0u8; 32];
    let used = n.min(32);
    padded[..used].copy_from_slice(&body[..used]);
    let word =
        |i: usize| u32::from_be_bytes([padded[i], padded[i + 1], padded[i + 2], padded[i + 3]]);
    Handshake {
        length: n,
        flags: padded[0],
        version: (n >= 16).then(|| format!("{}.{}.{}", word(4), word(8), word(12))),
        client_id: (n >= 20).then(|| client(&padded[16..20])),
    }
}

/// ASCII IDs as text; anything else (e.g. the all-zero "unspecified") as hex.
fn client(raw: &[u8]) -> String {
    if raw.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        raw.iter().map(|&b| char::from(b)).collect()
    } else {
        hex(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::text::unhex;

    #[test]
    fn go_helo_32_and_ruby_vers_20() {
        // reference/courier.md §4, Go 2.12.0 HELO and Ruby 2.12.0 VERS bodies.
        let go = parse(&unhex(
            "00000000000000020000000c000000004c434f52000000000000000000000000",
        ));
        assert_eq!(
            (
                go.length,
                go.flags,
                go.version.as_deref(),
                go.client_id.as_deref()
            ),
            (32, 0, Some("2.12.0"), Some("LCOR"))
        );
        let ruby = parse(&unhex("00000000000000020000000c0000000052594c43"));
        assert_eq!((ruby.length, ruby.client_id.as_deref()), (20, Some("RYLC")));
        let stub = parse(&unhex(
            "01000000000000020000000c000000004c435652000000000000000000000000",
        ));
        assert!(stub.evnt());
    }

    #[test]
    fn older_and_odd_layouts() {
        let h = parse(&[1, 2, 7, 0, b'R', b'Y', b'L', b'C']);
        assert_eq!((h.version.as_deref(), h.evnt()), (Some("2.7.0"), true));
        let h = parse(&[]);
        assert_eq!((h.version, h.client_id, h.flags), (None, None, 0));
        let h = parse(&[0; 20]);
        assert_eq!(h.client_id.as_deref(), Some("00000000"));
        assert_eq!(h.fields()[4].1, Value::from("unspecified"));
        let h = parse(&[0; 12]);
        assert_eq!(
            (h.version.clone(), h.fields()[5].1.clone()),
            (None, Value::Null)
        );
    }
}
