//! Reading a document's canonical text step by step, for writers that map a log event's document into
//! another form without parsing it into values first (the Hercules export: parsing the text back
//! into a tree was most of its cost).
//!
//! The text is in the form a `Document` promises (`canon::canonical`'s, or a tree written by
//! `json::value`): compact, no key repeated in an object, only the escapes `json::string` writes,
//! integers within 64 bits. Every step still checks the bytes it reads and gives None on anything
//! else, so a caller can fall back to the parsed values and never reads garbage.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory document; nesting depth counts brackets seen; surrogate arithmetic follows the range checks"
)]

use std::borrow::Cow;

use super::unescape_from;

/// What the value at the cursor is (numbers as serde_json reads them: an integer that fits an
/// i64, else one that fits a u64, else a float).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Object,
    Array,
    String,
    Bool(bool),
    Null,
    Int(i64),
    Big(u64),
    Float(f64),
}

/// A cursor over the text; cloning it saves a position to read again from.
#[derive(Clone)]
pub struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Self {
        Reader { text, pos: 0 }
    }

    /// Whether the whole text was read.
    pub fn done(&self) -> bool {
        self.pos == self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// The number at the cursor: its text's length and value.
    fn number_at(&self) -> Option<(usize, Kind)> {
        let rest = &self.text[self.pos..];
        let len = rest
            .bytes()
            .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(rest.len());
        let digits = &rest[..len];
        let kind = if digits.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
            None
        } else if let Ok(i) = digits.parse::<i64>() {
            Some(Kind::Int(i))
        } else {
            digits.parse::<u64>().ok().map(Kind::Big)
        };
        // Rust's float parsing rounds correctly, as serde_json's float_roundtrip does.
        let kind = match kind {
            Some(k) => k,
            None => Kind::Float(digits.parse::<f64>().ok().filter(|f| f.is_finite())?),
        };
        (len > 0).then_some((len, kind))
    }

    /// The kind of the value at the cursor (the cursor stays).
    pub fn kind(&self) -> Option<Kind> {
        Some(match self.peek()? {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b't' => Kind::Bool(true),
            b'f' => Kind::Bool(false),
            b'n' => Kind::Null,
            _ => self.number_at()?.1,
        })
    }

    /// Step over a scalar (not an object or an array), checking its text.
    pub fn scalar(&mut self) -> Option<()> {
        let len = match self.peek()? {
            b'"' => return self.string().map(drop),
            b't' => self.text[self.pos..].starts_with("true").then_some(4)?,
            b'f' => self.text[self.pos..].starts_with("false").then_some(5)?,
            b'n' => self.text[self.pos..].starts_with("null").then_some(4)?,
            _ => self.number_at()?.0,
        };
        self.pos += len;
        Some(())
    }

    /// Enter the object or array at the cursor.
    pub fn open(&mut self) -> Option<()> {
        matches!(self.peek()?, b'{' | b'[').then(|| self.pos += 1)
    }

    /// Whether another member or item follows in the object or array entered (`first`: none
    /// was read yet); past its end when not.
    pub fn more(&mut self, first: bool) -> Option<bool> {
        match self.peek()? {
            b'}' | b']' => {
                self.pos += 1;
                Some(false)
            }
            b',' if !first => {
                self.pos += 1;
                Some(true)
            }
            _ => first.then_some(true),
        }
    }

    /// A member's key and its colon.
    pub fn key(&mut self) -> Option<Cow<'a, str>> {
        let key = self.string()?;
        (self.peek()? == b':').then(|| self.pos += 1)?;
        Some(key)
    }

    /// The string at the cursor, unescaped.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        let (raw, escaped) = self.string_text()?;
        if !escaped {
            return Some(Cow::Borrowed(raw));
        }
        unescape(raw).map(Cow::Owned)
    }

    /// The text between the quotes of the string at the cursor (the cursor past it), and
    /// whether it has escapes.
    fn string_text(&mut self) -> Option<(&'a str, bool)> {
        let b = self.text.as_bytes();
        (self.peek()? == b'"').then_some(())?;
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            match *b.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                _ => i += 1,
            }
        }
        self.pos = i + 1;
        Some((&self.text[start..i], escaped))
    }

    /// Step over the value at the cursor.
    pub fn skip(&mut self) -> Option<()> {
        if !matches!(self.peek()?, b'{' | b'[') {
            return self.scalar();
        }
        // Nesting counted, strings stepped over whole: no recursion on hostile depths.
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                }
                b'}' | b']' => {
                    depth -= 1;
                    self.pos += 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
                b'"' => {
                    self.string_text()?;
                }
                _ => self.pos += 1,
            }
        }
    }
}

/// The characters of a string's text between its quotes (None for an escape JSON has not).
fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    match memchr::memchr(b'\\', raw.as_bytes()) {
        Some(first) => unescape_from(raw, first, &mut out)?,
        None => out.push_str(raw),
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_read_step_by_step() {
        let mut r = Reader::new(
            r#"{"a":[1,-2,18446744073709551615,1.5e3],"b\"\u00e9":{"c":null,"d":true},"e":"x\ny"}"#,
        );
        r.open().unwrap();
        assert_eq!(r.more(true), Some(true));
        assert_eq!(r.key().unwrap(), "a");
        assert_eq!(r.kind(), Some(Kind::Array));
        let saved = r.clone();
        r.open().unwrap();
        let mut kinds = Vec::new();
        let mut first = true;
        while r.more(first).unwrap() {
            first = false;
            kinds.push(r.kind().unwrap());
            r.scalar().unwrap();
        }
        assert_eq!(
            kinds,
            [
                Kind::Int(1),
                Kind::Int(-2),
                Kind::Big(u64::MAX),
                Kind::Float(1500.0)
            ]
        );
        r = saved;
        r.skip().unwrap();
        assert_eq!(r.more(false), Some(true));
        assert_eq!(r.key().unwrap(), "b\"\u{e9}");
        r.skip().unwrap();
        assert_eq!(r.more(false), Some(true));
        assert_eq!(r.key().unwrap(), "e");
        assert_eq!(r.string().unwrap(), "x\ny");
        assert_eq!(r.more(false), Some(false));
        assert!(r.done());
    }

    #[test]
    fn what_is_not_json_gives_none() {
        assert_eq!(Reader::new("tru").scalar(), None);
        assert_eq!(Reader::new("1e999").kind(), None);
        assert_eq!(Reader::new(r#""\q""#).string(), None);
        assert_eq!(Reader::new(r#""\ud800x""#).string(), None);
        assert_eq!(Reader::new(r#""open"#).string(), None);
        assert_eq!(Reader::new("[1,2").skip(), None);
        assert_eq!(
            Reader::new(r#""\ud83d\ude00""#).string().as_deref(),
            Some("\u{1f600}")
        );
    }
}
