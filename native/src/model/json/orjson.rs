//! J payloads parsed as the Python decoder's `orjson.loads` parses them, so that the event
//! documents and the `json-invalid` sentences are the same.
//!
//! serde_json alone differs from orjson where records show it: `-0` (orjson: the integer 0),
//! nesting (orjson allows 1024 levels, serde_json 128) and every error text. This recursive
//! descent parser follows orjson 3.13 (observed: tests/test_native_lumberjack.py compares both)
//! and builds serde_json values: integers that fit u64/i64 stay integers, others become floats,
//! floats are parsed with Rust's correctly rounded `str::parse`, an object keeps its first key
//! position with the last value (as Python's dict).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory document plus constants, after checks that the bytes are there; nesting depth is bounded by max_depth; \\u escapes are four hex digits"
)]

use super::escaped_letter;
use crate::model::Value;
use serde_json::{Map, Number};

const MAX_DEPTH: u32 = 1024;

/// An orjson error: its message and the byte position it names.
#[derive(Debug, PartialEq)]
struct Fail(&'static str, usize);

type Res<T> = Result<T, Fail>;

/// The document, or the text of Python's `JSONDecodeError` for it
/// (`<message>: line L column C (char P)`).
pub fn loads(data: &[u8]) -> Result<Value, String> {
    if data.is_empty() {
        return Err(text(
            data,
            Fail("Input is a zero-length, empty document", 0),
        ));
    }
    let Ok(s) = std::str::from_utf8(data) else {
        return Err(text(
            b"",
            Fail("str is not valid UTF-8: surrogates not allowed", 0),
        ));
    };
    let mut p = Parser {
        buf: s.as_bytes(),
        pos: 0,
        depth: 0,
        scratch: String::new(),
    };
    p.document().map_err(|f| text(data, f))
}

/// `JSONDecodeError.__str__`: the position in characters, line and column counted as Python does.
fn text(data: &[u8], fail: Fail) -> String {
    let before = &data[..fail.1.min(data.len())];
    let chars = |b: &[u8]| b.iter().filter(|&&c| c & 0xC0 != 0x80).count();
    let pos = chars(before);
    let (line, col) = match before.iter().rposition(|&c| c == b'\n') {
        Some(nl) => (
            before.iter().filter(|&&c| c == b'\n').count() + 1,
            pos - chars(&before[..nl]),
        ),
        None => (1, pos + 1),
    };
    format!("{}: line {line} column {col} (char {pos})", fail.0)
}

struct Parser<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: u32,
    scratch: String,
}

/// Four hex digits; `Err(true)` when the data ends first, `Err(false)` at a non-hex byte.
fn hex4(b: &[u8]) -> Result<u32, bool> {
    let mut v = 0;
    for i in 0..4 {
        let c = b.get(i).ok_or(true)?;
        v = v * 16 + (*c as char).to_digit(16).ok_or(false)?;
    }
    Ok(v)
}

/// Whether cut-short digits could still begin a low surrogate (DC00..DFFF).
fn low_prefix(b: &[u8]) -> bool {
    let ok = |i: usize, set: &[u8]| {
        b.get(i)
            .is_none_or(|c| set.contains(&c.to_ascii_lowercase()))
    };
    ok(0, b"d") && ok(1, b"cdef")
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn end(&self) -> Fail {
        Fail("unexpected end of data", self.buf.len())
    }

    /// `msg` at the read position, or the end of data when there is none.
    fn unexpected(&self, msg: &'static str) -> Fail {
        if self.pos >= self.buf.len() {
            self.end()
        } else {
            Fail(msg, self.pos)
        }
    }

    fn document(&mut self) -> Res<Value> {
        if self.buf.starts_with(b"\xef\xbb\xbf") {
            return Err(Fail("UTF-8 byte order mark (BOM) is not supported", 0));
        }
        self.skip_ws();
        if self.pos >= self.buf.len() {
            return Err(Fail("input data is empty", 0));
        }
        let v = self.value()?;
        self.skip_ws();
        if self.pos < self.buf.len() {
            return Err(Fail("unexpected content after document", self.pos));
        }
        Ok(v)
    }

    fn value(&mut self) -> Res<Value> {
        match self.peek() {
            Some(b'"') => self.string().map(Value::String),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'+') => Err(Fail("no digit after sign", self.pos)),
            Some(b't') => self.literal(
                b"true",
                "invalid literal, expected 'true'",
                Value::Bool(true),
            ),
            Some(b'f') => self.literal(
                b"false",
                "invalid literal, expected 'false'",
                Value::Bool(false),
            ),
            Some(b'n') => self.literal(b"null", "invalid literal, expected 'null'", Value::Null),
            _ => Err(self.unexpected("unexpected character, expected a JSON value")),
        }
    }

    fn literal(&mut self, lit: &[u8], msg: &'static str, v: Value) -> Res<Value> {
        let rest = &self.buf[self.pos..];
        if rest.starts_with(lit) {
            self.pos += lit.len();
            return Ok(v);
        }
        if rest.len() < lit.len() && lit.starts_with(rest) {
            return Err(self.end());
        }
        Err(Fail(msg, self.pos))
    }

    /// Past an opening bracket: one level deeper, within the limit.
    fn enter(&mut self) -> Res<()> {
        self.depth += 1;
        self.pos += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.unexpected("depth limit exceeded"));
        }
        self.skip_ws();
        Ok(())
    }

    fn array(&mut self) -> Res<Value> {
        self.enter()?;
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                items.push(self.value()?);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        let comma = self.pos;
                        self.pos += 1;
                        self.skip_ws();
                        if self.peek() == Some(b']') {
                            return Err(Fail("trailing comma is not allowed", comma));
                        }
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.unexpected("unexpected character, expected ',' or ']'")),
                }
            }
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn object(&mut self) -> Res<Value> {
        self.enter()?;
        let mut map = Map::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                if self.peek() != Some(b'"') {
                    return Err(self.unexpected("unexpected character, expected a string key"));
                }
                let key = self.string()?;
                self.skip_ws();
                if self.peek() != Some(b':') {
                    return Err(self.unexpected("unexpected character, expected ':' after key"));
                }
                self.pos += 1;
                self.skip_ws();
                let v = self.value()?;
                map.insert(key, v);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        let comma = self.pos;
                        self.pos += 1;
                        self.skip_ws();
                        if self.peek() == Some(b'}') {
                            return Err(Fail("trailing comma is not allowed", comma));
                        }
                    }
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.unexpected("unexpected character, expected ',' or '}'")),
                }
            }
        }
        self.depth -= 1;
        Ok(Value::Object(map))
    }

    fn string(&mut self) -> Res<String> {
        self.pos += 1; // the opening quote
        let buf = self.buf;
        let start = self.pos;
        // The common case: no escape, borrowed straight from the (valid UTF-8) input.
        let mut i = start;
        while i < buf.len() {
            match buf[i] {
                b'"' => {
                    self.pos = i + 1;
                    return Ok(utf8(&buf[start..i]).to_owned());
                }
                b'\\' => break,
                c if c < 0x20 => return Err(Fail("unexpected control character in string", i)),
                _ => i += 1,
            }
        }
        if i >= buf.len() {
            return Err(self.end());
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        out.push_str(utf8(&buf[start..i]));
        self.pos = i;
        let res = self.escaped(&mut out);
        let s = out.as_str().to_owned();
        self.scratch = out;
        res.map(|()| s)
    }

    /// The rest of a string from its first backslash on.
    fn escaped(&mut self, out: &mut String) -> Res<()> {
        let buf = self.buf;
        loop {
            let run = self.pos;
            while self.pos < buf.len() && !matches!(buf[self.pos], b'"' | b'\\' | 0..=0x1f) {
                self.pos += 1;
            }
            out.push_str(utf8(&buf[run..self.pos]));
            let Some(c) = self.peek() else {
                return Err(self.end());
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => self.escape(out)?,
                _ => return Err(Fail("unexpected control character in string", self.pos)),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Res<()> {
        let at = self.pos;
        let Some(&c) = self.buf.get(at + 1) else {
            return Err(self.end());
        };
        if c == b'u' {
            return self.unicode(out);
        }
        let Some(simple) = escaped_letter(c) else {
            return Err(Fail("invalid escaped sequence in string", at));
        };
        out.push(simple);
        self.pos += 2;
        Ok(())
    }

    /// `\uXXXX`, a surrogate pair taking two of them.
    fn unicode(&mut self, out: &mut String) -> Res<()> {
        let at = self.pos;
        let cp = match hex4(&self.buf[at + 2..]) {
            Ok(cp) => cp,
            Err(true) => return Err(self.end()),
            Err(false) => return Err(Fail("invalid escaped sequence in string", at)),
        };
        self.pos = at + 6;
        let ch = match cp {
            0xD800..=0xDBFF => {
                let rest = &self.buf[self.pos..];
                match rest.first() {
                    None => return Err(self.end()),
                    Some(b'\\') => {}
                    Some(_) => return Err(Fail("no low surrogate in string", at)),
                }
                match rest.get(1) {
                    None => return Err(self.end()),
                    Some(b'u') => {}
                    Some(_) => return Err(Fail("no low surrogate in string", at)),
                }
                let low = match hex4(&rest[2..]) {
                    Ok(low) => low,
                    Err(true) if low_prefix(&rest[2..]) => return Err(self.end()),
                    Err(_) => return Err(Fail("invalid escape in string", at)),
                };
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(Fail("invalid low surrogate in string", at));
                }
                self.pos += 6;
                0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(Fail("invalid high surrogate in string", at)),
            cp => cp,
        };
        out.push(char::from_u32(ch).unwrap_or('\u{fffd}'));
        Ok(())
    }

    fn number(&mut self) -> Res<Value> {
        let buf = self.buf;
        let start = self.pos;
        let digits = |p: &mut usize| {
            let from = *p;
            while *p < buf.len() && buf[*p].is_ascii_digit() {
                *p += 1;
            }
            *p - from
        };
        let mut p = start;
        if buf[p] == b'-' {
            p += 1;
            match buf.get(p) {
                None => return Err(self.end()),
                Some(c) if !c.is_ascii_digit() => return Err(Fail("no digit after sign", p)),
                _ => {}
            }
        }
        let int_start = p;
        digits(&mut p);
        if buf[int_start] == b'0' && p - int_start > 1 {
            return Err(Fail("number with leading zero is not allowed", int_start));
        }
        let mut float = false;
        if buf.get(p) == Some(&b'.') {
            p += 1;
            float = true;
            match buf.get(p) {
                None => return Err(self.end()),
                Some(c) if !c.is_ascii_digit() => {
                    return Err(Fail("no digit after decimal point", p))
                }
                _ => {}
            }
            digits(&mut p);
        }
        if let Some(b'e' | b'E') = buf.get(p) {
            p += 1;
            float = true;
            if let Some(b'+' | b'-') = buf.get(p) {
                p += 1;
            }
            match buf.get(p) {
                None => return Err(self.end()),
                Some(c) if !c.is_ascii_digit() => {
                    return Err(Fail("no digit after exponent sign", p))
                }
                _ => {}
            }
            digits(&mut p);
        }
        self.pos = p;
        let lit = utf8(&buf[start..p]);
        if !float {
            if let Ok(v) = lit.parse::<u64>() {
                return Ok(Value::Number(v.into()));
            }
            if let Ok(v) = lit.parse::<i64>() {
                return Ok(Value::Number(v.into()));
            }
        }
        match lit.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Ok(Value::Number(n)),
            None => Err(Fail("number is infinity when parsed as double", start)),
        }
    }
}

/// Bytes of the input between ASCII delimiters: valid UTF-8 (the input was checked as a whole).
fn utf8(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &[u8]) -> String {
        loads(s).unwrap_err()
    }

    #[test]
    fn values_as_orjson_loads_them() {
        let v = loads(br#"{"a":1,"a":-0,"b":[1.5e3,18446744073709551616,-9223372036854775808,"\u00e9\ud83d\ude00"]}"#)
            .unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"a":0,"b":[1500.0,1.8446744073709552e+19,-9223372036854775808,"é😀"]}"#
        );
        assert_eq!(loads(b" true ").unwrap(), Value::Bool(true));
        let deep = format!("{}1{}", "[".repeat(1024), "]".repeat(1024));
        assert!(loads(deep.as_bytes()).is_ok());
    }

    #[test]
    fn errors_as_orjson_words_them() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"{bad",
                "unexpected character, expected a string key: line 1 column 2 (char 1)",
            ),
            (
                b"",
                "Input is a zero-length, empty document: line 1 column 1 (char 0)",
            ),
            (b"  ", "input data is empty: line 1 column 1 (char 0)"),
            (
                b"{\"a\":1",
                "unexpected end of data: line 1 column 7 (char 6)",
            ),
            (
                b"[1,2,]",
                "trailing comma is not allowed: line 1 column 5 (char 4)",
            ),
            (
                b"{\"a\"\n:1,\n}",
                "trailing comma is not allowed: line 2 column 3 (char 7)",
            ),
            (
                b"\"\xff\"",
                "str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)",
            ),
            (
                b"1 2",
                "unexpected content after document: line 1 column 3 (char 2)",
            ),
            (b"-a", "no digit after sign: line 1 column 2 (char 1)"),
            (b"[+1]", "no digit after sign: line 1 column 2 (char 1)"),
            (
                b"-01",
                "number with leading zero is not allowed: line 1 column 2 (char 1)",
            ),
            (
                b"1e400",
                "number is infinity when parsed as double: line 1 column 1 (char 0)",
            ),
            (
                b"trux",
                "invalid literal, expected 'true': line 1 column 1 (char 0)",
            ),
            (b"tr", "unexpected end of data: line 1 column 3 (char 2)"),
            (
                b"\"\\ud800x\"",
                "no low surrogate in string: line 1 column 2 (char 1)",
            ),
            (
                b"\"\\ud800\\u12\"",
                "invalid escape in string: line 1 column 2 (char 1)",
            ),
            (
                b"\"\\udc00\"",
                "invalid high surrogate in string: line 1 column 2 (char 1)",
            ),
            (
                b"\"a\\x\"",
                "invalid escaped sequence in string: line 1 column 3 (char 2)",
            ),
            (
                b"\"\\u1\"",
                "invalid escaped sequence in string: line 1 column 2 (char 1)",
            ),
            (
                b"\"\\u1",
                "unexpected end of data: line 1 column 5 (char 4)",
            ),
            (
                b"\"\\ud800\"",
                "no low surrogate in string: line 1 column 2 (char 1)",
            ),
            (
                b"\"\\ud800\\u1",
                "invalid escape in string: line 1 column 2 (char 1)",
            ),
            (
                b"\"\\ud800\\ud",
                "unexpected end of data: line 1 column 11 (char 10)",
            ),
            (
                b"[\"\xc3\xa9\", x]",
                "unexpected character, expected a JSON value: line 1 column 7 (char 6)",
            ),
            (
                b"\xef\xbb\xbf{}",
                "UTF-8 byte order mark (BOM) is not supported: line 1 column 1 (char 0)",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(err(input), *want, "{}", String::from_utf8_lossy(input));
        }
        let deep = "[".repeat(1025) + &"]".repeat(1025);
        assert_eq!(
            err(deep.as_bytes()),
            "depth limit exceeded: line 1 column 1026 (char 1025)"
        );
    }
}
