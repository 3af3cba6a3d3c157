//! Where a record sits in the stream, and findings stamped with that place.

use crate::model::{Direction, Fields, Finding, Message, Severity, Value};

pub const PROTOCOL: &str = "lumberjack";

/// Stream position of a frame: its direction, first byte's offset, and that byte's packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pos {
    pub direction: Direction,
    pub offset: u64,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
}

/// A `lumberjack.<code>` finding at `pos` (`code` is the full code: the model keeps it `'static`).
pub fn finding(
    code: &'static str,
    severity: Severity,
    text: String,
    pos: &Pos,
    fields: Vec<(&'static str, Value)>,
) -> Finding {
    let mut f = Finding::new(code, severity, text).at(pos.frame, pos.ts);
    f.direction = Some(pos.direction);
    f.offset = Some(pos.offset);
    f.fields = fields;
    f
}

/// A message of this protocol at `pos`.
pub fn message(
    kind: &'static str,
    pos: &Pos,
    length: u64,
    version: u8,
    fields: impl Into<Fields>,
) -> Message {
    let mut m = Message::new(PROTOCOL, kind);
    m.direction = Some(pos.direction);
    m.offset = Some(pos.offset);
    m.length = length;
    m.frame = pos.frame;
    m.ts = pos.ts;
    m.version = Some(version_str(version));
    m.fields = fields.into();
    m
}

/// "1"/"2" for a version byte (the only ones a parsed frame carries).
pub fn version_str(version: u8) -> &'static str {
    if version == b'1' {
        "1"
    } else {
        "2"
    }
}

/// Python's `repr()` of `bytes.decode("latin-1")`: quotes chosen as Python chooses them,
/// non-printable characters escaped as `\xNN` (`\t`, `\n`, `\r` by name).
pub fn py_repr_latin1(bytes: &[u8]) -> String {
    let has_single = bytes.contains(&b'\'');
    let quote = if has_single && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(bytes.len().saturating_add(2));
    out.push(quote);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b if b as char == quote => {
                out.push('\\');
                out.push(quote);
            }
            // Printable in Python's sense: not Cc (0x00-0x1f, 0x7f-0x9f), not NBSP, not SHY.
            0x20..=0x7e | 0xa1..=0xac | 0xae..=0xff => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_as_python() {
        assert_eq!(py_repr_latin1(b"2J"), "'2J'");
        assert_eq!(py_repr_latin1(b"\x00"), "'\\x00'");
        assert_eq!(py_repr_latin1(b"'"), "\"'\"");
        assert_eq!(py_repr_latin1(b"\xa0\xe9\xad\n"), "'\\xa0é\\xad\\n'");
    }
}
