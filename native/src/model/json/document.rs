//! A log event's document: its canonical JSON text (what `json::value` writes for its values),
//! made once by the decoder (`canon::canonical`, or the values a full parser read, written once)
//! and copied from there into every output. No tree of values is kept per event: building one,
//! holding it and writing it out again was most of a conversion's CPU.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory document plus constants, after checks that the bytes are there"
)]

use std::borrow::Cow;

use super::canon::Canonical;
use super::{orjson, unescape_from, value};
use crate::model::Value;

/// The canonical text of one JSON document (an object, for the events the protocols carry; a
/// Lumberjack J frame may carry any other value, which it reports).
///
/// A document decoded from a binary form (a Hercules event's tags) may keep those bytes instead,
/// its text rendered when a consumer first asks for it: a conversion to that binary form maps the
/// bytes directly (`kept_binary`), and never renders or reads back a text it does not need.
#[derive(Clone)]
pub struct Document(Repr, MessageAt);

/// Where the characters of the top-level `message` string lie in the text, when the canonicaliser
/// noted it (`Canonical::message`); (0, 0) when unknown (a text parsed, rendered or read back
/// from the held store), and `message_in` looks.
#[derive(Clone, Copy)]
struct MessageAt(u32, u32);

const UNKNOWN: MessageAt = MessageAt(0, 0);

#[derive(Clone)]
enum Repr {
    Text(Box<str>),
    Binary(Box<Kept>),
}

/// A binary form a document can be kept in until its text is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// A Hercules container's count and tags, as an event carried them (always an object); the
    /// text is their plain rendering (`formats::hercules::render`).
    HerculesTags,
}

#[derive(Clone)]
struct Kept {
    form: Binary,
    bytes: Box<[u8]>,
    /// The text of `bytes`, appended to the string: the decoder's renderer, which `model` (the
    /// leaf) cannot name.
    render: fn(&[u8], &mut String),
    text: std::sync::OnceLock<Box<str>>,
}

impl Document {
    /// A document whose text is already canonical: the canonicaliser's output, a text rendered in
    /// that form (Hercules events) or read back from the held store.
    pub fn canonical(text: impl Into<Box<str>>) -> Self {
        Document(Repr::Text(text.into()), UNKNOWN)
    }

    /// A canonical text whose top-level `message` characters the canonicaliser noted at `at`
    /// (`message_at`, as the held store gives it back); a note off the text's characters is
    /// dropped, and `message_in` looks instead.
    pub fn canonical_noted(text: impl Into<Box<str>>, at: (u32, u32)) -> Self {
        let text = text.into();
        let at = DocText::new(&text, Some(at)).at;
        Document(Repr::Text(text), at)
    }

    /// Where the characters of its top-level `message` string lie in its text, when the
    /// canonicaliser noted it: the held store keeps the note with the text.
    pub fn message_at(&self) -> Option<(u32, u32)> {
        DocText::noted("", self.1).message_at()
    }

    /// A document kept as `bytes` of a binary `form`, whose canonical text `render` gives (and
    /// must give for any bytes its decoder accepted).
    pub fn binary(form: Binary, bytes: Box<[u8]>, render: fn(&[u8], &mut String)) -> Self {
        Document(
            Repr::Binary(Box::new(Kept {
                form,
                bytes,
                render,
                text: std::sync::OnceLock::new(),
            })),
            UNKNOWN,
        )
    }

    /// The binary form it is kept in, and its bytes.
    pub fn kept_binary(&self) -> Option<(Binary, &[u8])> {
        match &self.0 {
            Repr::Text(_) => None,
            Repr::Binary(k) => Some((k.form, &k.bytes)),
        }
    }

    /// Its canonical JSON text.
    pub fn text(&self) -> &str {
        match &self.0 {
            Repr::Text(t) => t,
            Repr::Binary(k) => k.text.get_or_init(|| {
                let mut text = String::new();
                (k.render)(&k.bytes, &mut text);
                text.into()
            }),
        }
    }

    /// Its canonical JSON text appended to `out`: a binary form not yet rendered is rendered
    /// there and not kept. Why: an NDJSON line reads an event's text once, and rendering it into
    /// a string of its own, shrinking that to the text and copying it into the line cost ~7 % of
    /// converting Gate traffic to JSON.
    pub fn write_text(&self, out: &mut String) {
        match &self.0 {
            Repr::Text(t) => out.push_str(t),
            Repr::Binary(k) => match k.text.get() {
                Some(t) => out.push_str(t),
                None => (k.render)(&k.bytes, out),
            },
        }
    }

    /// The bytes keeping it costs (its binary form and, once rendered, its text).
    pub fn kept_len(&self) -> usize {
        match &self.0 {
            Repr::Text(t) => t.len(),
            Repr::Binary(k) => {
                std::mem::size_of::<Kept>() + k.bytes.len() + k.text.get().map_or(0, |t| t.len())
            }
        }
    }

    /// Its values, parsed back (for the rare writers that need them: Python objects, the Hercules
    /// export of an object too wide for its text mapper). Canonical text is JSON that the
    /// Lumberjack parser (deepest nesting 1024) reads to the values it was written from.
    pub fn value(&self) -> Value {
        let text = self.text();
        orjson::loads(text.as_bytes()).unwrap_or_else(|_| Value::String(text.to_owned()))
    }

    /// Whether it is an object (what the protocols' events are).
    pub fn is_object(&self) -> bool {
        match &self.0 {
            Repr::Text(t) => t.starts_with('{'),
            Repr::Binary(k) => k.form == Binary::HerculesTags,
        }
    }

    /// Whether it is JSON's `null`.
    pub fn is_null(&self) -> bool {
        match &self.0 {
            Repr::Text(t) => &**t == "null",
            Repr::Binary(_) => false,
        }
    }

    /// Python's `type(v).__name__` of its value (findings quote it): a canonical number has a `.`
    /// or an exponent exactly when it is a float.
    pub fn python_type(&self) -> &'static str {
        let text = self.text();
        match text.as_bytes().first() {
            Some(b'{') => "dict",
            Some(b'[') => "list",
            Some(b'"') => "str",
            Some(b't' | b'f') => "bool",
            Some(b'n') => "NoneType",
            _ if text.contains(['.', 'e']) => "float",
            _ => "int",
        }
    }

    /// A string at a path of members (`["host", "name"]`: the member `name` of the object
    /// `host`), or else the member named by the path joined with dots (`"host.name"`): ECS
    /// documents write either form. None when there is no string there.
    pub fn str_path(&self, path: &[&str]) -> Option<Cow<'_, str>> {
        if !self.is_object() {
            return None;
        }
        if let [key] = path {
            return self.str_member(key);
        }
        let nested = path.split_last().and_then(|(last, objects)| {
            let mut raw = self.text();
            for key in objects {
                raw = member_raw(raw, key.as_bytes()).filter(|r| r.starts_with('{'))?;
            }
            member(raw, last.as_bytes())
        });
        nested.or_else(|| self.str_member(&path.join(".")))
    }

    /// A string member of the top-level object (e.g. the `message` of a log event).
    pub fn str_member(&self, key: &str) -> Option<Cow<'_, str>> {
        member(self.text(), key.as_bytes()).filter(|_| self.is_object())
    }

    /// `str_member("message")`, its characters unescaped into `scratch` (cleared first) when they
    /// have an escape: a writer that copies them on (the Arrow rows) allocates nothing per
    /// document, and finds them where the canonicaliser noted them.
    pub fn message_in<'s>(&'s self, scratch: &'s mut String) -> Option<&'s str> {
        // (a binary form's rendered text is an object: its first character says so)
        self.as_text().message_in(scratch)
    }

    /// Its canonical text with the note of its `message`, borrowed: what a writer reads of it
    /// (`DocText`).
    pub fn as_text(&self) -> DocText<'_> {
        DocText::noted(self.text(), self.1)
    }
}

/// A document's canonical text and where its `message` lies, borrowed: from a `Document`, or from
/// the held store's bytes, which a released record is written from without a document made of
/// them (`held::pack::Parts`).
#[derive(Clone, Copy)]
pub struct DocText<'a> {
    text: &'a str,
    at: MessageAt,
}

impl<'a> DocText<'a> {
    fn noted(text: &'a str, at: MessageAt) -> Self {
        DocText { text, at }
    }

    /// `text`, canonical, its `message` characters at `at` when noted (a note off the text's
    /// characters is dropped, as `Document::canonical_noted` drops it).
    pub fn new(text: &'a str, at: Option<(u32, u32)>) -> Self {
        let at = at
            .filter(|&(start, end)| start > 0 && text.get(start as usize..end as usize).is_some())
            .map_or(UNKNOWN, |(start, end)| MessageAt(start, end));
        DocText { text, at }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    /// `Document::message_at` of the document it is.
    pub fn message_at(&self) -> Option<(u32, u32)> {
        match self.at {
            MessageAt(0, _) => None,
            MessageAt(start, end) => Some((start, end)),
        }
    }

    /// The document it is (the text copied).
    pub fn to_document(&self) -> Document {
        Document(Repr::Text(self.text.into()), self.at)
    }

    /// `Document::message_in` of the document it is.
    pub fn message_in<'s>(&self, scratch: &'s mut String) -> Option<&'s str>
    where
        'a: 's,
    {
        let inner = match self.at {
            MessageAt(0, _) => {
                if !self.text.starts_with('{') {
                    return None;
                }
                quoted(member_raw(self.text, b"message")?)?
            }
            MessageAt(start, end) => self.text.get(start as usize..end as usize)?,
        };
        Some(if decoded_into(inner, scratch) {
            scratch
        } else {
            inner
        })
    }
}

/// Documents are equal when their texts are, whatever form they are kept in.
impl PartialEq for Document {
    fn eq(&self, other: &Document) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Document {}

impl std::fmt::Debug for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Document").field(&self.text()).finish()
    }
}

impl PartialEq<Value> for Document {
    fn eq(&self, other: &Value) -> bool {
        self.value() == *other
    }
}

/// Its JSON text.
impl std::fmt::Display for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// The canonicaliser's text, with where its `message` is.
impl From<Canonical> for Document {
    fn from(c: Canonical) -> Self {
        let at = c.message.and_then(|(start, end)| {
            Some(MessageAt(
                u32::try_from(start).ok()?,
                u32::try_from(end).ok()?,
            ))
        });
        Document(Repr::Text(c.text), at.unwrap_or(UNKNOWN))
    }
}

/// The document of values a full parser read (or a renderer built): written once.
impl From<Value> for Document {
    fn from(v: Value) -> Self {
        let mut text = String::new();
        value(&mut text, &v);
        Document::canonical(text)
    }
}

/// Paths of members to read from many documents (`Document::str_path` of each), the top-level
/// members they start at found in one pass over its text (a path's first key, and the
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
        let mut raw = [None; MAX_NAMES];
        if !doc.is_object() {
            out.fill(None);
            return;
        }
        members_raw(doc.text(), &self.names, &mut raw[..self.names.len()]);
        for ((slot, path), &(first, dotted)) in out.iter_mut().zip(&self.paths).zip(&self.slots) {
            let nested = raw[first].and_then(|mut text| {
                for key in &path[1..] {
                    if !text.starts_with('{') {
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

/// The string member `key` of a canonical object (`key` has no character that needs escaping).
fn member<'a>(text: &'a str, key: &[u8]) -> Option<Cow<'a, str>> {
    string_of(member_raw(text, key)?)
}

/// The characters of a canonical value's text when it is a string.
fn string_of(raw: &str) -> Option<Cow<'_, str>> {
    Some(unescape(quoted(raw)?))
}

/// A canonical string value's text between its quotes (None: the value is not a string).
fn quoted(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')?.strip_suffix('"')
}

/// The text of the member `key` of the canonical object `text` (its value, as written). Text,
/// not bytes, in and out: the slices fall on ASCII delimiters, so a member's characters need no
/// second UTF-8 check.
fn member_raw<'a>(text: &'a str, key: &[u8]) -> Option<&'a str> {
    let mut out = [None];
    members(text, |name| (name == key).then_some(0), &mut out);
    out[0]
}

/// The texts of the members `keys` of the canonical object `text` (into `out`, by key), in one
/// pass over it.
fn members_raw<'a>(text: &'a str, keys: &[String], out: &mut [Option<&'a str>]) {
    members(
        text,
        |name| keys.iter().position(|k| k.as_bytes() == name),
        out,
    );
}

/// One pass over the members of the canonical object `text`: the value of each member whose name
/// `wanted` gives a slot goes into that slot (the first one only), until every slot is filled.
/// The text is canonical (checked or written when it became a document), so values are skipped, not checked again:
/// strings to their closing quote, objects and arrays to their closing bracket.
fn members<'a>(
    text: &'a str,
    wanted: impl Fn(&[u8]) -> Option<usize>,
    out: &mut [Option<&'a str>],
) {
    let bytes = text.as_bytes();
    let mut pos = 1;
    let mut left = out.len();
    while left > 0 && bytes.get(pos) == Some(&b'"') {
        let Some(end) = skip(bytes, pos) else { return };
        let name = &bytes[pos + 1..end - 1];
        let start = end + 1; // ':'
        let Some(stop) = skip(bytes, start) else {
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

/// The end (exclusive) of the canonical value starting at `at`.
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
        open @ (b'{' | b'[') => {
            // Canonical brackets nest properly, so this bracket's kind alone finds its end: a
            // jump from one quote or bracket of that kind to the next (walking every byte was
            // most of finding a Filebeat event's `message`, past its `@metadata`).
            let close = if open == b'{' { b'}' } else { b']' };
            let mut depth = 0usize;
            let mut i = at;
            loop {
                i += memchr::memchr3(b'"', open, close, b.get(i..)?)?;
                match b[i] {
                    b'"' => {
                        i = skip(b, i)?;
                        continue;
                    }
                    c if c == open => depth += 1,
                    _ => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                }
                i += 1;
            }
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

/// The characters of a canonical string's text (`raw`, between its quotes). Its escapes are
/// the ones `json::string` writes (and any other JSON escape, should a text hold one); a text
/// with an escape no JSON parser reads is kept as written.
fn unescape(raw: &str) -> Cow<'_, str> {
    let mut out = String::new();
    if decoded_into(raw, &mut out) {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(raw)
    }
}

/// Whether `raw`'s characters differ from its text (it has an escape JSON reads), and then they
/// are in `out` (cleared first); else `raw` is its own characters and `out` is left as it was.
fn decoded_into(raw: &str, out: &mut String) -> bool {
    let Some(first) = memchr::memchr(b'\\', raw.as_bytes()) else {
        return false;
    };
    out.clear();
    out.reserve(raw.len());
    unescape_from(raw, first, out).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RENDERED: AtomicUsize = AtomicUsize::new(0);

    fn render(bytes: &[u8], out: &mut String) {
        RENDERED.fetch_add(1, Ordering::Relaxed);
        out.push_str(&format!(r#"{{"n":{}}}"#, bytes.len()));
    }

    #[test]
    fn a_document_kept_as_bytes_renders_its_text_once_when_first_asked() {
        let doc = Document::binary(Binary::HerculesTags, vec![0, 1, 2].into(), render);
        // what the export and the held store ask does not render it
        assert_eq!(
            doc.kept_binary(),
            Some((Binary::HerculesTags, &[0u8, 1, 2][..]))
        );
        assert!(doc.is_object() && !doc.is_null());
        let unrendered = doc.kept_len();
        assert_eq!(RENDERED.load(Ordering::Relaxed), 0);
        // written into a line: rendered there, not kept
        let mut line = "x".to_owned();
        doc.write_text(&mut line);
        assert_eq!(line, r#"x{"n":3}"#);
        assert_eq!(RENDERED.load(Ordering::Relaxed), 1);
        assert_eq!(doc.kept_len(), unrendered);
        assert_eq!(doc.text(), r#"{"n":3}"#);
        assert_eq!(doc.str_member("n"), None);
        assert_eq!(doc, Document::canonical(r#"{"n":3}"#));
        assert_eq!(RENDERED.load(Ordering::Relaxed), 2);
        assert_eq!(doc.kept_len(), unrendered + 7);
        // once kept, written from what is kept
        doc.write_text(&mut line);
        assert_eq!(line, r#"x{"n":3}{"n":3}"#);
        assert_eq!(RENDERED.load(Ordering::Relaxed), 2);
        assert_eq!(Document::canonical("[1]").kept_binary(), None);
    }

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
        let doc = &Document::canonical(text);
        {
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

    #[test]
    fn a_top_level_string_member_is_found_without_parsing() {
        let text =
            r#"{"n":{"message":"inner"},"list":["message"],"message":"a \"quoted\"\nline","x":1}"#;
        let doc = Document::canonical(text);
        assert_eq!(
            doc.str_member("message").as_deref(),
            Some("a \"quoted\"\nline")
        );
        assert_eq!(doc.str_member("x"), None);
        assert_eq!(doc.str_member("list"), None);
        assert_eq!(doc.str_member("absent"), None);
        let written = Document::from(json!({"message": "m"}));
        assert_eq!(written.text(), r#"{"message":"m"}"#);
        assert_eq!(written.str_member("message").as_deref(), Some("m"));
        assert_eq!(
            Document::canonical("[\"message\"]").str_member("message"),
            None
        );
        assert_eq!(doc, serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn strings_are_unescaped_as_serde_json_reads_them_and_kept_as_written_when_it_refuses() {
        let mut texts: Vec<String> = [
            r#"plain"#,
            r#"a\nb\tc\r\\d\"e\/f\b\f"#,
            r#"\u00e9t\u00C9 \u001f\u0000"#,
            r#"\ud83d\ude00 and \uD83D\uDE00"#,
            r#"lone \ud800 high"#,
            r#"lone \udc00 low"#,
            r#"high then high \ud800\ud800"#,
            r#"high then not low \ud800\u0041"#,
            r#"high then past low \ud800\ue000"#,
            r#"\x not an escape"#,
            r#"short \u12"#,
            r#"bad hex \u12g4"#,
            "ünïcödé \\n ☃",
            r#"ends with \"#,
        ]
        .map(String::from)
        .to_vec();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0xfeff, 0x1f600]) {
            let ch = char::from_u32(c).unwrap();
            let mut written = String::new();
            super::super::string(&mut written, &ch.to_string());
            texts.push(format!("x{}y", &written[1..written.len() - 1]));
        }
        for raw in &texts {
            let want = serde_json::from_str::<String>(&format!("\"{raw}\""));
            let got = unescape(raw);
            let doc = Document::canonical(format!("{{\"message\":\"{raw}\"}}"));
            let mut scratch = String::from("left over");
            let written = doc.message_in(&mut scratch);
            match want {
                Ok(s) => {
                    assert_eq!(got, s, "{raw}");
                    assert_eq!(written, Some(s.as_str()), "{raw}");
                }
                Err(_) => {
                    assert_eq!(got, Cow::Borrowed(raw.as_str()), "{raw}");
                    // a text ending in a lone backslash escapes its closing quote: no member
                    let whole = !raw.ends_with('\\');
                    assert_eq!(written, whole.then_some(raw.as_str()), "{raw}");
                }
            }
        }
    }

    #[test]
    fn python_types_are_read_from_the_first_byte_and_the_number_form() {
        for (v, want) in [
            (json!({"a": 1}), "dict"),
            (json!([1]), "list"),
            (json!("s"), "str"),
            (json!(true), "bool"),
            (json!(null), "NoneType"),
            (json!(-3), "int"),
            (json!(1.5), "float"),
            (json!(1e300), "float"),
            (json!(-0.0), "float"),
        ] {
            assert_eq!(Document::from(v.clone()).python_type(), want, "{v}");
            assert_eq!(super::super::python_type(&v), want, "{v}");
        }
    }
}
