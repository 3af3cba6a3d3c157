//! JSON as records carry it: the writer of values (orjson's output form: compact, keys in their
//! order, only `"`, `\` and control characters escaped), the canonicaliser that turns an event's
//! text into that form in one pass (`canon`), the event document as that text (`document`), the
//! parsers the protocols' reference implementations stand for (`orjson`: Logstash's reader of
//! Lumberjack events; serde_json for Log Courier, whose errors `pyjson` words as Python did) and a
//! step-by-step reader of canonical text (`text`, for the Hercules export).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory string plus constants, after checks that the bytes are there"
)]

pub mod canon;
mod document;
pub mod orjson;
pub mod pyjson;
pub mod text;

pub use document::{Binary, DocText, Document, MemberPaths};

use std::fmt::Write;

use crate::model::{Field, Value};

/// One JSON value (serde_json's compact form is orjson's: no spaces, the same escapes, shortest
/// round-trip floats).
pub fn value(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => string(out, s),
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => number(out, n),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, k);
                out.push(':');
                value(out, item);
            }
            out.push('}');
        }
    }
}

/// What a record field's value is written from: its values, or its text made beforehand.
pub trait Json {
    fn write_json(&self, out: &mut String);
}

impl Json for Value {
    fn write_json(&self, out: &mut String) {
        value(out, self);
    }
}

impl Json for Field {
    fn write_json(&self, out: &mut String) {
        match self {
            Field::Value(v) => value(out, v),
            Field::Shared(s) => out.push_str(s.text()),
            Field::Written(w) => w.write_json(out),
        }
    }
}

/// A number: integers as their digits, floats in their shortest round-trip form.
pub fn number(out: &mut String, n: &serde_json::Number) {
    if let Some(u) = n.as_u64() {
        integer(out, u);
    } else if let Some(i) = n.as_i64() {
        integer(out, i);
    } else if let Some(f) = n.as_f64() {
        // serde_json's Display of a float (a Number's floats are finite), without `write!`
        out.push_str(zmij::Buffer::new().format_finite(f));
    }
}

/// An integer's digits (itoa: without the formatting machinery `write!` goes through).
pub fn integer(out: &mut String, v: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// Python's `type(v).__name__` of a parsed JSON value (findings quote it, as the Python decoders
/// did).
pub fn python_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// What a byte of a string becomes: 0 copied as is, else the second byte of its short escape,
/// or `u` for `\u00XX`.
pub(crate) const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = b'u';
        c += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// A JSON string literal (orjson's escaping: `"`, `\` and control characters only). Runs of bytes
/// that need no escape are found a word at a time and copied at once: this runs for every key and
/// string of every record.
pub fn string(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push('"');
    let mut start = 0;
    let mut i = plain_run(bytes);
    while let Some(&b) = bytes.get(i) {
        let escape = ESCAPE[b as usize];
        // Escaped bytes are ASCII, so `start..i` always falls on character boundaries.
        out.push_str(&s[start..i]);
        if escape == b'u' {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push('\\');
            out.push(escape as char);
        }
        start = i + 1;
        i = start + plain_run(&bytes[start..]);
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// A name the core itself gives (a record kind, a field, a version, a delivery class: none has a
/// character to escape) as a JSON string, without looking for one: a record's line writes a dozen.
pub fn name(out: &mut String, name: &'static str) {
    debug_assert_eq!(
        plain_run(name.as_bytes()),
        name.len(),
        "{name:?} needs escaping"
    );
    out.reserve(name.len() + 2);
    out.push('"');
    out.push_str(name);
    out.push('"');
}

/// The character a one-letter escape (`\n`, `\/`, ...) stands for; None for a letter JSON has
/// not.
pub(crate) fn escaped_letter(letter: u8) -> Option<char> {
    Some(match letter {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// The escape at `b[at]` (a backslash): its length and character; None for one JSON has not (an
/// unknown letter, short or bad hex digits, a lone surrogate: every parser here refuses those).
#[inline(always)]
pub(crate) fn escape_at(b: &[u8], at: usize) -> Option<(usize, char)> {
    let letter = *b.get(at + 1)?;
    if letter != b'u' {
        return Some((2, escaped_letter(letter)?));
    }
    let high = hex4(b, at + 2)?;
    let (len, code) = match high {
        0xD800..=0xDBFF => {
            if b.get(at + 6..at + 8) != Some(b"\\u") {
                return None;
            }
            let low = hex4(b, at + 8)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return None;
            }
            (12, 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        }
        _ => (6, high), // a lone low surrogate is no character
    };
    Some((len, char::from_u32(code)?))
}

/// A hex digit's value, 0xFF for a byte that is none.
const HEX_VALUE: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        t[b'A' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};

/// The four hex digits at `b[at]` as a number: four table reads and one check (a Python sender
/// writes every non-ASCII character as `\u00e9`, and reading the digits one `to_digit` at a time
/// was a sixth of rewriting such an escape).
#[inline(always)]
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let &[a, b, c, d] = b.get(at..at + 4)? else {
        return None;
    };
    let [a, b, c, d] = [a, b, c, d].map(|x| HEX_VALUE[usize::from(x)]);
    ((a | b | c | d) & 0xF0 == 0)
        .then(|| u32::from(a) << 12 | u32::from(b) << 8 | u32::from(c) << 4 | u32::from(d))
}

/// `raw`'s characters into `out`, its first escape at `first`; None at an escape JSON has not.
pub(crate) fn unescape_from(raw: &str, first: usize, out: &mut String) -> Option<()> {
    let b = raw.as_bytes();
    let (mut run, mut at) = (0, first);
    loop {
        out.push_str(raw.get(run..at)?);
        let (len, ch) = escape_at(b, at)?;
        out.push(ch);
        run = at + len;
        match memchr::memchr(b'\\', b.get(run..)?) {
            Some(n) => at = run + n,
            None => {
                out.push_str(raw.get(run..)?);
                return Some(());
            }
        }
    }
}

/// How many leading bytes need no escape, eight at a time (SWAR: strings are most of an event's
/// bytes, and a byte-by-byte table lookup was the check's main cost). The last bytes are checked
/// as the string's last word, which overlaps bytes already known to be plain.
#[inline]
pub(crate) fn plain_run(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A high bit for each byte that is '"', '\\' or below 0x20 (exact up to the first one).
    let special = |w: &[u8]| {
        let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        zero(w ^ (ONES * 0x22))
            | zero(w ^ (ONES * 0x5c))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
    };
    let at = |found: u64| (found.trailing_zeros() / 8) as usize;
    let mut n = 0;
    let mut chunks = b.chunks_exact(8);
    for chunk in &mut chunks {
        let found = special(chunk);
        if found != 0 {
            return n + at(found);
        }
        n += 8;
    }
    let tail = chunks.remainder();
    if tail.is_empty() {
        n
    } else if b.len() >= 8 {
        let last = b.len() - 8;
        let found = special(&b[last..]);
        if found != 0 {
            last + at(found)
        } else {
            b.len()
        }
    } else {
        // shorter than a word
        tail.iter()
            .position(|&c| ESCAPE[c as usize] != 0)
            .unwrap_or(tail.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_hex_digits_are_read_as_to_digit_reads_them() {
        for c in 0..=255u8 {
            for at in 0..4 {
                let mut digits = *b"0aF9";
                digits[at] = c;
                let want = digits
                    .iter()
                    .try_fold(0, |v, &d| Some(v * 16 + char::from(d).to_digit(16)?));
                assert_eq!(hex4(&digits, 0), want, "{:?}", digits);
            }
        }
        assert_eq!(hex4(b"\\u00e", 2), None); // cut short
    }

    #[test]
    fn plain_runs_stop_at_the_first_byte_that_needs_escaping() {
        let mut text = b"abcdefghijklmnopqrstuvwxyz0123456789".to_vec();
        for len in 0..=text.len() {
            assert_eq!(plain_run(&text[..len]), len);
        }
        for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
            for at in 0..text.len() {
                let keep = text[at];
                text[at] = special;
                for len in at + 1..=text.len() {
                    assert_eq!(plain_run(&text[..len]), at, "{special:#x} at {at} of {len}");
                }
                assert_eq!(plain_run(&text[..at]), at);
                text[at] = keep;
            }
        }
        let wide = "ünïcödé ☃ \u{7f}ÿ!!!!!!!!!!".as_bytes();
        assert_eq!(plain_run(wide), wide.len());
    }

    #[test]
    fn numbers_are_written_as_serde_json_displays_them() {
        let mut bits = 0x9E37_79B9_7F4A_7C15_u64;
        let mut floats = vec![
            0.0,
            -0.0,
            0.1,
            1.5,
            -2.25e-300,
            1e21,
            1e-7,
            123_456_789.0,
            f64::MAX,
        ];
        for _ in 0..10_000 {
            bits = bits.rotate_left(17).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5851_F42D;
            floats.push(f64::from_bits(bits));
        }
        let numbers = floats.into_iter().filter_map(serde_json::Number::from_f64);
        let ints = [0u64, 7, u64::MAX].map(serde_json::Number::from);
        let negative = [-1i64, i64::MIN].map(serde_json::Number::from);
        for n in numbers.chain(ints).chain(negative) {
            let mut out = String::new();
            number(&mut out, &n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn strings_escape_quotes_backslashes_and_control_characters_only() {
        let mut out = String::new();
        string(&mut out, "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{7f}é");
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\u{7f}é\"");
    }
}
