//! The 9-byte envelope header shared by v3, v4 and v5 (reference/cql.md §8):
//! `version flags stream opcode length`, big-endian; bit 7 of the version byte is the direction.
//! `problem` is the plausibility test used by the decoder, its resynchronisation and detection.

pub const HEADER: usize = 9;
/// The spec's envelope body limit.
pub const MAX_LENGTH: usize = 256 << 20;

pub const FLAG_COMPRESSION: u8 = 0x01;
pub const FLAG_TRACING: u8 = 0x02;
pub const FLAG_CUSTOM_PAYLOAD: u8 = 0x04;
pub const FLAG_WARNING: u8 = 0x08;
pub const FLAG_BETA: u8 = 0x10;
const FLAG_NAMES: [(u8, &str); 5] = [
    (FLAG_COMPRESSION, "compression"),
    (FLAG_TRACING, "tracing"),
    (FLAG_CUSTOM_PAYLOAD, "custom_payload"),
    (FLAG_WARNING, "warning"),
    (FLAG_BETA, "use_beta"),
];

pub const STARTUP: u8 = 0x01;
pub const ERROR: u8 = 0x00;
pub const PREPARE: u8 = 0x09;
pub const EXECUTE: u8 = 0x0A;
pub const EVENT: u8 = 0x0C;

/// A parsed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Protocol version without the direction bit.
    pub version: u8,
    pub response: bool,
    pub flags: u8,
    /// Signed: server events use -1.
    pub stream: i16,
    pub opcode: u8,
    /// Body length.
    pub length: u32,
}

/// Decode the first 9 bytes of `data` (None when fewer are there).
pub fn parse(data: &[u8]) -> Option<Header> {
    let h: &[u8; HEADER] = data.get(..HEADER)?.try_into().ok()?;
    Some(Header {
        version: h[0] & 0x7F,
        response: h[0] >= 0x80,
        flags: h[1],
        stream: i16::from_be_bytes([h[2], h[3]]),
        opcode: h[4],
        length: u32::from_be_bytes([h[5], h[6], h[7], h[8]]),
    })
}

/// The name of a known protocol version.
pub fn known_version(v: u8) -> Option<&'static str> {
    Some(match v {
        3 => "v3",
        4 => "v4",
        5 => "v5",
        6 => "v6-beta",
        0x41 => "dse-v1",
        0x42 => "dse-v2",
        _ => return None,
    })
}

/// The version's name, `0xNN` when unknown (static: one name per byte value, made once).
pub fn version_name(v: u8) -> &'static str {
    known_version(v).unwrap_or_else(|| {
        static HEX: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        &HEX.get_or_init(|| (0..128).map(|i| format!("0x{i:02x}")).collect())[usize::from(v & 0x7F)]
    })
}

/// STARTUP at these versions switches the connection to v5 frames.
pub fn framed(version: u8) -> bool {
    matches!(version, 5 | 6)
}

/// Every message kind: the opcode names, and `unknown` for an opcode no version defines.
pub const KINDS: [&str; 17] = [
    "error",
    "startup",
    "ready",
    "authenticate",
    "options",
    "supported",
    "query",
    "result",
    "prepare",
    "execute",
    "register",
    "event",
    "batch",
    "auth_challenge",
    "auth_response",
    "auth_success",
    "unknown",
];

pub fn opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        0x00 => "error",
        0x01 => "startup",
        0x02 => "ready",
        0x03 => "authenticate",
        0x05 => "options",
        0x06 => "supported",
        0x07 => "query",
        0x08 => "result",
        0x09 => "prepare",
        0x0A => "execute",
        0x0B => "register",
        0x0C => "event",
        0x0D => "batch",
        0x0E => "auth_challenge",
        0x0F => "auth_response",
        0x10 => "auth_success",
        _ => return None,
    })
}

pub fn is_request(op: u8) -> bool {
    matches!(op, 0x01 | 0x05 | 0x07 | 0x09 | 0x0A | 0x0B | 0x0D | 0x0F)
}

pub fn is_response(op: u8) -> bool {
    matches!(op, 0x00 | 0x02 | 0x03 | 0x06 | 0x08 | 0x0C | 0x0E | 0x10)
}

impl Header {
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "a u32 length plus 9, in u64"
    )]
    pub fn total(&self) -> u64 {
        HEADER as u64 + u64::from(self.length)
    }

    pub fn opcode_name(&self) -> &'static str {
        opcode_name(self.opcode).unwrap_or("unknown")
    }

    pub fn flag_names(&self) -> Vec<&'static str> {
        FLAG_NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|&(_, name)| name)
            .collect()
    }

    /// Why this cannot be a real envelope header sent in the given direction (None: either way):
    /// (finding code, sentence), or None when it is plausible.
    pub fn problem(
        &self,
        response: Option<bool>,
        max_length: usize,
    ) -> Option<(&'static str, String)> {
        let side = if self.response { "response" } else { "request" };
        if known_version(self.version).is_none() {
            return Some((
                "cql.unknown-version",
                format!("unknown protocol version 0x{:02x}", self.version),
            ));
        }
        if response.is_some_and(|r| r != self.response) {
            return Some((
                "cql.wrong-direction",
                format!("{side} version byte in the wrong direction"),
            ));
        }
        let valid = if self.response {
            is_response(self.opcode)
        } else {
            is_request(self.opcode)
        };
        if !valid {
            return Some((
                "cql.unknown-opcode",
                format!("opcode 0x{:02x} is not a {side}", self.opcode),
            ));
        }
        if self.flags & !0x1F != 0 {
            return Some((
                "cql.bad-flags",
                format!("reserved envelope flag bits set (0x{:02x})", self.flags),
            ));
        }
        if self.length as usize > max_length {
            return Some((
                "cql.envelope-too-large",
                format!(
                    "envelope body length {} exceeds the limit of {max_length}",
                    self.length
                ),
            ));
        }
        None
    }

    pub fn plausible(&self, response: Option<bool>, max_length: usize) -> bool {
        self.problem(response, max_length).is_none()
    }
}

/// Header + body, as a peer writes it (tests and the fuzz target build streams with it).
#[cfg(any(test, fuzzing))]
pub fn encode(version: u8, flags: u8, stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![version, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(opcode);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}
