//! The JSON text of a value as records carry it (orjson's output form: compact, keys in their
//! order, only `"`, `\` and control characters escaped), and log event documents, which keep the
//! text they were sent as whenever writing their parsed form would give back the same bytes.
//!
//! Why: Beats and Log Courier send events in exactly that form (compact JSON from Go). Checking
//! the form in one pass and copying the text costs a fraction of building a tree of values and
//! writing it out again, which was most of the conversion's CPU time.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory document plus constants, after checks that the bytes are there; nesting depth is bounded by MAX_DEPTH (fuzzed by the `document` target)"
)]

use std::borrow::Cow;
use std::fmt::Write;

use super::Value;

/// One JSON value (serde_json's compact form is orjson's: no spaces, the same escapes, shortest
/// round-trip floats).
pub fn value(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => string(out, s),
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => integer(out, u),
            (None, Some(i)) => integer(out, i),
            _ => {
                let _ = write!(out, "{n}");
            }
        },
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

impl Json for super::Field {
    fn write_json(&self, out: &mut String) {
        match self {
            super::Field::Value(v) => value(out, v),
            super::Field::Shared(s) => out.push_str(s.text()),
            super::Field::Written(w) => w.write_json(out),
        }
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
const ESCAPE: [u8; 256] = {
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

/// A log event's document: parsed, or the JSON text it arrived as (see `Document::verbatim`).
#[derive(Clone, Debug)]
pub enum Document {
    Parsed(Value),
    Text(Box<str>),
}

/// Deepest nesting a verbatim text may have: serde_json's own limit, so `value()` can read back
/// any text `verbatim` took.
const MAX_DEPTH: usize = 128;
/// Members of one object checked for duplicates pairwise; bigger objects are parsed instead.
const MAX_MEMBERS: usize = 64;

impl Document {
    /// The document of `raw` without parsing it into values, when `raw` is a JSON object that
    /// any JSON parser reads to the values whose text (`value()`) is `raw` again: compact, no
    /// duplicate keys, no escape `string()` would not write, integers within 64 bits (and not
    /// `-0`), floats in their shortest form. None otherwise: the caller parses it as its protocol's
    /// reference parser would (and reports what is wrong with it).
    pub fn verbatim(raw: &[u8]) -> Option<Document> {
        let text = std::str::from_utf8(raw).ok()?;
        if !text.starts_with('{') {
            return None;
        }
        let mut scan = Scan {
            b: raw,
            pos: 0,
            keys: Vec::with_capacity(32), // one allocation for most events (it grew 1, 2, 4, ...)
            float: String::new(),
        };
        (scan.value(0) && scan.pos == raw.len()).then(|| Document::Text(text.into()))
    }

    /// Its JSON text, appended to `out`.
    pub fn write(&self, out: &mut String) {
        match self {
            Document::Parsed(v) => value(out, v),
            Document::Text(t) => out.push_str(t),
        }
    }

    /// Its values.
    pub fn value(&self) -> Cow<'_, Value> {
        match self {
            Document::Parsed(v) => Cow::Borrowed(v),
            // `verbatim` admitted only texts serde_json reads; the fallback cannot happen.
            Document::Text(t) => {
                Cow::Owned(serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string())))
            }
        }
    }

    /// A string at a path of members (`["host", "name"]`: the member `name` of the object
    /// `host`), or else the member named by the path joined with dots (`"host.name"`): ECS
    /// documents write either form. None when there is no string there.
    pub fn str_path(&self, path: &[&str]) -> Option<Cow<'_, str>> {
        if let [key] = path {
            return self.str_member(key);
        }
        let nested = match self {
            Document::Parsed(v) => path
                .iter()
                .try_fold(v, |v, key| v.as_object()?.get(*key))
                .and_then(Value::as_str)
                .map(Cow::Borrowed),
            Document::Text(t) => {
                let (last, objects) = path.split_last()?;
                let mut raw = t.as_bytes();
                for key in objects {
                    raw = member_raw(raw, key.as_bytes()).filter(|r| r.starts_with(b"{"))?;
                }
                member(raw, last.as_bytes())
            }
        };
        nested.or_else(|| self.str_member(&path.join(".")))
    }

    /// A string member of the top-level object (e.g. the `message` of a log event).
    pub fn str_member(&self, key: &str) -> Option<Cow<'_, str>> {
        match self {
            Document::Parsed(Value::Object(map)) => map.get(key)?.as_str().map(Cow::Borrowed),
            Document::Parsed(_) => None,
            Document::Text(t) => member(t.as_bytes(), key.as_bytes()),
        }
    }
}

impl PartialEq for Document {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl PartialEq<Value> for Document {
    fn eq(&self, other: &Value) -> bool {
        self.value().as_ref() == other
    }
}

/// Its JSON text.
impl std::fmt::Display for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        self.write(&mut out);
        f.write_str(&out)
    }
}

impl From<Value> for Document {
    fn from(v: Value) -> Self {
        Document::Parsed(v)
    }
}

/// Paths of members to read from many documents (`Document::str_path` of each), the top-level
/// members they start at found in one pass over a verbatim text (a path's first key, and the
/// path's dotted name: ECS documents write either), then each nested path within its member.
pub struct MemberPaths {
    paths: Vec<&'static [&'static str]>,
    /// The top-level members wanted, and per path: its first key's and its dotted name's index.
    names: Vec<String>,
    slots: Vec<(usize, usize)>,
}

/// At most this many top-level names are looked for in one pass.
const MAX_NAMES: usize = 32;

impl MemberPaths {
    pub fn new(paths: &[&'static [&'static str]]) -> Self {
        let mut names: Vec<String> = Vec::new();
        let mut slot = |name: String| match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                names.push(name);
                names.len() - 1
            }
        };
        let slots = paths
            .iter()
            .map(|p| (slot(p[..1].join(".")), slot(p.join("."))))
            .collect();
        assert!(
            names.len() <= MAX_NAMES,
            "too many member names for one pass"
        );
        MemberPaths {
            paths: paths.to_vec(),
            names,
            slots,
        }
    }

    /// Each path's string (None where there is none), into `out` (one slot a path, in order).
    pub fn read<'d>(&self, doc: &'d Document, out: &mut [Option<Cow<'d, str>>]) {
        let Document::Text(t) = doc else {
            for (slot, path) in out.iter_mut().zip(&self.paths) {
                *slot = doc.str_path(path);
            }
            return;
        };
        let mut raw = [None; MAX_NAMES];
        members_raw(t.as_bytes(), &self.names, &mut raw[..self.names.len()]);
        for ((slot, path), &(first, dotted)) in out.iter_mut().zip(&self.paths).zip(&self.slots) {
            let nested = raw[first].and_then(|mut text| {
                for key in &path[1..] {
                    if !text.starts_with(b"{") {
                        return None;
                    }
                    text = member_raw(text, key.as_bytes())?;
                }
                string_of(text)
            });
            *slot = nested.or_else(|| raw[dotted].filter(|_| path.len() > 1).and_then(string_of));
        }
    }
}

/// The check behind `Document::verbatim`: one pass, no allocation but the key stack.
struct Scan<'a> {
    b: &'a [u8],
    pos: usize,
    /// Keys of the objects being read, innermost last (verbatim keys compare as their values:
    /// every character has one verbatim spelling).
    keys: Vec<&'a [u8]>,
    float: String,
}

impl<'a> Scan<'a> {
    fn at(&self, c: u8) -> bool {
        self.b.get(self.pos) == Some(&c)
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.b.get(self.pos) {
            Some(b'{') => depth < MAX_DEPTH && self.object(depth + 1),
            Some(b'[') => depth < MAX_DEPTH && self.array(depth + 1),
            Some(b'"') => self.string().is_some(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            _ => false,
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let ok = self.b[self.pos..].starts_with(word);
        self.pos += word.len();
        ok
    }

    fn object(&mut self, depth: usize) -> bool {
        self.pos += 1;
        if self.at(b'}') {
            self.pos += 1;
            return true;
        }
        let first = self.keys.len();
        loop {
            if !self.at(b'"') {
                return false;
            }
            let Some(key) = self.string() else {
                return false;
            };
            if self.keys.len() - first >= MAX_MEMBERS || self.keys[first..].contains(&key) {
                return false;
            }
            self.keys.push(key);
            if !self.at(b':') {
                return false;
            }
            self.pos += 1;
            if !self.value(depth) {
                return false;
            }
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.keys.truncate(first);
                    return true;
                }
                _ => return false,
            }
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        self.pos += 1;
        if self.at(b']') {
            self.pos += 1;
            return true;
        }
        loop {
            if !self.value(depth) {
                return false;
            }
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// Past a string whose every escape is the one `string()` writes; its text between quotes.
    fn string(&mut self) -> Option<&'a [u8]> {
        let b = self.b;
        let start = self.pos + 1;
        let mut i = start;
        loop {
            i += plain_run(&b[i.min(b.len())..]);
            let c = *b.get(i)?;
            match ESCAPE[c as usize] {
                0 => i += 1,
                b'"' => {
                    self.pos = i + 1;
                    return Some(&b[start..i]);
                }
                b'\\' => match *b.get(i + 1)? {
                    b'"' | b'\\' | b'n' | b'r' | b't' | b'b' | b'f' => i += 2,
                    // `\u00XX`, lowercase, for a control character without a short escape
                    b'u' => {
                        let hex = b.get(i + 2..i + 6)?;
                        let lower = |c: &u8| c.is_ascii_digit() || (b'a'..=b'f').contains(c);
                        let code = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                        if !hex.iter().all(lower) || ESCAPE[code as usize] != b'u' {
                            return None;
                        }
                        i += 6;
                    }
                    _ => return None,
                },
                _ => return None, // a raw control character
            }
        }
    }

    fn number(&mut self) -> bool {
        let b = self.b;
        let start = self.pos;
        let mut i = start + usize::from(b[start] == b'-');
        let digits = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int_end = i;
        if int_end == digits || (b[digits] == b'0' && int_end - digits > 1) {
            return false;
        }
        while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
            i += 1;
        }
        self.pos = i;
        // ASCII only from here on.
        let text = std::str::from_utf8(&b[start..i]).unwrap_or("");
        if i == int_end {
            return text != "-0"
                && if start == digits {
                    text.parse::<u64>().is_ok()
                } else {
                    text.parse::<i64>().is_ok()
                };
        }
        let Ok(f) = text.parse::<f64>() else {
            return false;
        };
        let Some(n) = serde_json::Number::from_f64(f) else {
            return false;
        };
        self.float.clear();
        let _ = write!(self.float, "{n}");
        self.float == text
    }
}

/// How many leading bytes need no escape, eight at a time (SWAR: strings are most of an event's
/// bytes, and a byte-by-byte table lookup was the check's main cost). The last bytes are checked
/// as the string's last word, which overlaps bytes already known to be plain.
fn plain_run(b: &[u8]) -> usize {
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

/// The string member `key` of a verbatim object (`key` has no character that needs escaping).
fn member<'a>(text: &'a [u8], key: &[u8]) -> Option<Cow<'a, str>> {
    string_of(member_raw(text, key)?)
}

/// The characters of a verbatim value's text when it is a string.
fn string_of(raw: &[u8]) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    Some(unescape(inner))
}

/// The text of the member `key` of the verbatim object `text` (its value, as written).
fn member_raw<'a>(text: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut out = [None];
    members(text, |name| (name == key).then_some(0), &mut out);
    out[0]
}

/// The texts of the members `keys` of the verbatim object `text` (into `out`, by key), in one
/// pass over it.
fn members_raw<'a>(text: &'a [u8], keys: &[String], out: &mut [Option<&'a [u8]>]) {
    members(
        text,
        |name| keys.iter().position(|k| k.as_bytes() == name),
        out,
    );
}

/// One pass over the members of the verbatim object `text`: the value of each member whose name
/// `wanted` gives a slot goes into that slot (the first one only), until every slot is filled.
/// The text was checked when it became a document, so values are skipped, not checked again:
/// strings to their closing quote, objects and arrays to their closing bracket.
fn members<'a>(
    text: &'a [u8],
    wanted: impl Fn(&[u8]) -> Option<usize>,
    out: &mut [Option<&'a [u8]>],
) {
    let mut pos = 1;
    let mut left = out.len();
    while left > 0 && text.get(pos) == Some(&b'"') {
        let Some(end) = skip(text, pos) else { return };
        let name = &text[pos + 1..end - 1];
        let start = end + 1; // ':'
        let Some(stop) = skip(text, start) else {
            return;
        };
        if let Some(slot) = wanted(name).and_then(|i| out.get_mut(i)) {
            if slot.is_none() {
                *slot = text.get(start..stop);
                left -= 1;
            }
        }
        pos = stop + 1; // ',' or '}'
    }
}

/// The end (exclusive) of the verbatim value starting at `at`.
fn skip(b: &[u8], at: usize) -> Option<usize> {
    match *b.get(at)? {
        b'"' => {
            let mut i = at + 1;
            loop {
                i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
                if b[i] == b'"' {
                    return Some(i + 1);
                }
                i += 2; // an escape: `\u00XX` has no quote or backslash in its digits
            }
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&c) = b.get(i) {
                match c {
                    b'"' => {
                        i = skip(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = b[at..]
                .iter()
                .position(|&c| matches!(c, b',' | b'}' | b']'))
                .unwrap_or(b.len() - at);
            Some(at + len)
        }
    }
}

/// The characters of a verbatim string's text (`raw`, between its quotes).
fn unescape(raw: &[u8]) -> Cow<'_, str> {
    let text = std::str::from_utf8(raw).unwrap_or("");
    if !raw.contains(&b'\\') {
        return Cow::Borrowed(text);
    }
    match serde_json::from_str::<String>(&format!("\"{text}\"")) {
        Ok(s) => Cow::Owned(s),
        Err(_) => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn member_paths_read_nested_and_dotted_strings_in_one_pass() {
        let paths: &[&'static [&'static str]] = &[
            &["message"],
            &["host", "name"],
            &["log", "file", "path"],
            &["agent", "type"],
            &["service", "name"],
            &["event", "dataset"],
        ];
        let reader = MemberPaths::new(paths);
        let text = r#"{"@t":[1,{"a":"}"}],"message":"a \"q\" \\ b","host":{"os":{"name":"x"},"name":"h1"},"log":{"file":{"path":"/v/l"}},"agent":{"type":7},"service.name":"svc","event":"flat"}"#;
        let verbatim = Document::verbatim(text.as_bytes()).expect("verbatim");
        let parsed = Document::Parsed(serde_json::from_str(text).expect("json"));
        for doc in [&verbatim, &parsed] {
            let mut out = [const { None }; 6];
            reader.read(doc, &mut out);
            let got: Vec<Option<&str>> = out.iter().map(|v| v.as_deref()).collect();
            assert_eq!(
                got,
                [
                    Some("a \"q\" \\ b"),
                    Some("h1"),
                    Some("/v/l"),
                    None,
                    Some("svc"),
                    None
                ],
            );
            assert_eq!(doc.str_path(&["host", "name"]).as_deref(), Some("h1"));
        }
    }

    fn written(v: &Value) -> String {
        let mut out = String::new();
        value(&mut out, v);
        out
    }

    #[test]
    fn texts_in_the_written_form_are_kept_verbatim() {
        for text in [
            r#"{}"#,
            r#"{"a":1,"b":[true,false,null],"c":{"d":"x\"y\\z\n\u001f"},"e":-5}"#,
            r#"{"f":1.5,"g":0.1,"h":1e+300,"h2":1e-7,"i":18446744073709551615,"j":-9223372036854775808}"#,
            r#"{"é":"ünïcödé ☃","k":[],"l":[{}]}"#,
        ] {
            let doc = Document::verbatim(text.as_bytes()).expect(text);
            let parsed: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                written(&parsed),
                text,
                "the premise: writing the values gives the text"
            );
            assert_eq!(doc.value().as_ref(), &parsed);
            let mut out = String::new();
            doc.write(&mut out);
            assert_eq!(out, text);
        }
    }

    #[test]
    fn texts_that_would_be_written_otherwise_are_left_to_the_parser() {
        for text in [
            r#" {}"#,
            r#"{"a": 1}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":"\u001F"}"#,
            r#"{"a":"\u000a"}"#,
            "{\"a\":\"\x01\"}",
            r#"{"a":-0}"#,
            r#"{"a":18446744073709551616}"#,
            r#"{"a":-9223372036854775809}"#,
            r#"{"a":1E5}"#,
            r#"{"a":1e300}"#,
            r#"{"a":1.50}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":tru}"#,
            r#"[1]"#,
            r#""s""#,
            r#"{"a":1}x"#,
            r#"{"a":1,}"#,
            r#"{"a""#,
        ] {
            assert!(Document::verbatim(text.as_bytes()).is_none(), "{text}");
        }
        assert!(Document::verbatim(b"{\"a\":\"\xff\"}").is_none());
        let deep = format!(
            "{}{}",
            r#"{"a":"#.repeat(128),
            "1".to_string() + &"}".repeat(128)
        );
        assert!(Document::verbatim(deep.as_bytes()).is_some());
        let deeper = format!(
            "{}{}",
            r#"{"a":"#.repeat(129),
            "1".to_string() + &"}".repeat(129)
        );
        assert!(Document::verbatim(deeper.as_bytes()).is_none());
        let wide: Vec<String> = (0..65).map(|i| format!("\"k{i}\":{i}")).collect();
        assert!(Document::verbatim(format!("{{{}}}", wide.join(",")).as_bytes()).is_none());
    }

    #[test]
    fn a_top_level_string_member_is_found_without_parsing() {
        let text =
            r#"{"n":{"message":"inner"},"list":["message"],"message":"a \"quoted\"\nline","x":1}"#;
        let doc = Document::verbatim(text.as_bytes()).unwrap();
        assert_eq!(
            doc.str_member("message").as_deref(),
            Some("a \"quoted\"\nline")
        );
        assert_eq!(doc.str_member("x"), None);
        assert_eq!(doc.str_member("list"), None);
        assert_eq!(doc.str_member("absent"), None);
        let parsed = Document::from(json!({"message": "m"}));
        assert_eq!(parsed.str_member("message").as_deref(), Some("m"));
        assert_eq!(
            doc,
            Document::from(serde_json::from_str::<Value>(text).unwrap())
        );
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
    fn strings_escape_quotes_backslashes_and_control_characters_only() {
        let mut out = String::new();
        string(&mut out, "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{7f}é");
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\u{7f}é\"");
    }
}
