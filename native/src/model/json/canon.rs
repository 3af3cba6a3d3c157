//! An event's JSON text to its canonical text (what `json::value` writes for the values a full
//! parser reads from it) in one pass, with no tree of values: the spans already in that form are
//! copied, and only what differs is rewritten — whitespace between tokens dropped, escapes
//! written as `json::string` writes them (`\/` and `\u00e9` as their characters, surrogate pairs
//! as one 4-byte character, `\u001F` as `\u001f`, `\u000a` as `\n`), numbers written as the
//! parser's value (`-0`, integers past 64 bits, floats not in their shortest form).
//!
//! Why: Python senders (`json.dumps` defaults: `", "` separators, `\u` escapes) and anything not
//! Go-compact used to be parsed into a `serde_json::Value` tree of maps, held as a tree and
//! written back out, which cost several times what reading the text does. A duplicate key (the
//! last value in the first key's place) is the one shape a single pass cannot write: it is left
//! to the full parser, as is every text the parser refuses (the parser words the error).
//!
//! Each `Dialect` is one protocol's reference parser: the canonical text is what that parser's
//! values are written as, and a text is refused exactly when that parser refuses it (the `document`
//! fuzz target holds both to it).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory document plus constants, after checks that the bytes are there; nesting depth is bounded by the dialect's limit; surrogate arithmetic follows the range checks"
)]

use std::cell::RefCell;

use super::{escape_at, number, plain_run, ESCAPE};

/// Whose values the canonical text is written from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `json::orjson::loads` (Lumberjack; orjson in the Python reference): `-0` is the integer 0,
    /// 1024 levels of nesting.
    Orjson,
    /// serde_json (Log Courier): `-0` is the float -0.0, 127 levels of nesting — and 128 for a text
    /// that is canonical as sent, which the decoder kept verbatim before there was a canonicaliser
    /// (the output must not change).
    Serde,
}

impl Dialect {
    /// The deepest nesting of a text the dialect accepts (`Serde`: only when nothing is rewritten).
    fn max_depth(self) -> usize {
        match self {
            Dialect::Orjson => 1024,
            Dialect::Serde => 128,
        }
    }

    /// `-0` as the dialect's parser reads it, written.
    fn minus_zero(self) -> &'static str {
        match self {
            Dialect::Orjson => "0",
            Dialect::Serde => "-0.0",
        }
    }
}

/// Why a text has no canonical form from this pass: the full parser reads it instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// A key repeated in one object (the parser keeps its first place with the last value).
    Duplicate,
    /// Not JSON the dialect's parser accepts.
    Refused,
}

/// A canonical text, and where in it the characters of its top-level `message` string are (between
/// its quotes, still escaped), when it has one.
#[derive(Debug, PartialEq, Eq)]
pub struct Canonical {
    /// Allocated at its length (a `Document` keeps a `Box<str>`).
    pub text: Box<str>,
    pub message: Option<(usize, usize)>,
}

/// The canonical text of `raw` as `dialect`'s parser reads it.
pub fn canonical(raw: &[u8], dialect: Dialect) -> Result<Canonical, Fallback> {
    // borrowed where it lies: taking the buffers out and putting them back was two moves of them
    // and a check of the thread-local's state a text (0.7 % of converting a stalled capture)
    SCRATCH.with_borrow_mut(|buf| {
        // emptied first too: a text whose reading panicked (the session catches a decoder's
        // panic and goes on) left its half-written text behind, which the next one would extend
        buf.clear();
        let mut c = Canon {
            src: raw,
            pos: 0,
            buf,
            mark: 0,
            depth: 0,
            deepest: 0,
            duplicate: false,
            dialect,
            message: None,
        };
        let result = c.run();
        c.buf.clear();
        result
    })
}

/// The buffers a text is canonicalised in, kept for the thread's next text. Made for each text,
/// they were an allocation of the keys' list, one of the input's length for the text and a
/// reallocation shrinking it to the text's length (`Document` keeps a `Box<str>`), and one for a
/// float: converting 2.5M acknowledged python-sender events called the allocator 12.8M times, now
/// 5.3M (heaptrack).
struct Scratch {
    /// The canonical text's bytes, checked as UTF-8 once, when whole (`Canon::run`).
    out: Vec<u8>,
    /// Keys of the objects being read, innermost last.
    keys: Vec<Key>,
    /// The characters of keys that have escapes (`Key::Decoded`).
    decoded: Vec<u8>,
    float: String,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::EMPTY) };
}

/// Buffers past this many bytes are not kept: one huge document leaves none behind.
const SCRATCH_KEPT: usize = 1 << 16;

impl Scratch {
    /// No buffers yet (a constant: the thread-local needs no lazy start).
    const EMPTY: Scratch = Scratch {
        out: Vec::new(),
        keys: Vec::new(),
        decoded: Vec::new(),
        float: String::new(),
    };

    /// Emptied for the next text; none kept when one grew past `SCRATCH_KEPT`.
    fn clear(&mut self) {
        self.out.clear();
        self.keys.clear();
        self.decoded.clear();
        let largest = self
            .out
            .capacity()
            .max(self.decoded.capacity())
            .max(self.keys.capacity() * std::mem::size_of::<Key>());
        if largest > SCRATCH_KEPT {
            *self = Scratch::EMPTY;
        }
    }
}

/// Not JSON (to the dialect).
struct Refused;

type Step = Result<(), Refused>;

/// Where a key's characters are: in the input (no escape in it), or decoded into `decoded`.
#[derive(Clone, Copy)]
enum Key {
    Raw(usize, usize),
    Decoded(usize, usize),
}

impl Key {
    /// How many bytes its characters take.
    fn len(self) -> usize {
        match self {
            Key::Raw(a, b) | Key::Decoded(a, b) => b - a,
        }
    }
}

/// Members of one object compared pairwise as they come; past this many, once sorted at its end.
const PAIRWISE: usize = 64;

/// The input is read as bytes and checked as UTF-8 once, as the canonical text (`run`): the edits
/// only drop ASCII between tokens and write whole characters for ASCII escapes, so the text is
/// UTF-8 exactly when the input is (the `document` fuzz target holds the two to the parsers, which
/// refuse what is not).
struct Canon<'a> {
    src: &'a [u8],
    pos: usize,
    /// `buf.out` is the canonical text of `src[..mark]`: the input past `mark` is still to be
    /// copied or rewritten. While nothing was rewritten (`mark` 0) it stays empty and the input is
    /// the text.
    buf: &'a mut Scratch,
    mark: usize,
    depth: usize,
    deepest: usize,
    duplicate: bool,
    dialect: Dialect,
    /// `Canonical::message`, noted as the text is read: the Arrow rows' `message` column looked
    /// it up again in every event, ~9 % of converting a Filebeat-shaped capture to Parquet.
    message: Option<(usize, usize)>,
}

impl Canon<'_> {
    /// The whole text: its canonical form, allocated at its length.
    fn run(&mut self) -> Result<Canonical, Fallback> {
        let (src, dialect) = (self.src, self.dialect);
        self.ws();
        self.value().map_err(|Refused| Fallback::Refused)?;
        self.ws();
        let edited = self.mark > 0;
        let too_deep =
            dialect == Dialect::Serde && self.deepest >= Dialect::Serde.max_depth() && edited;
        if self.pos != src.len() || too_deep {
            return Err(Fallback::Refused);
        }
        let written = if edited {
            self.buf.out.extend_from_slice(&src[self.mark..]);
            &self.buf.out
        } else {
            src
        };
        let text = crate::model::text::utf8(written).ok_or(Fallback::Refused)?;
        if self.duplicate {
            return Err(Fallback::Duplicate);
        }
        let message = self.message;
        Ok(Canonical {
            text: text.into(),
            message,
        })
    }

    /// Where the input's position `at` (not before `mark`) is in the canonical text.
    fn written_at(&self, at: usize) -> usize {
        if self.mark == 0 {
            at
        } else {
            self.buf.out.len() + (at - self.mark)
        }
    }

    /// `src[from..to]` is written as `with`.
    fn edit(&mut self, from: usize, to: usize, with: &str) {
        self.leave_out(from, to);
        self.buf.out.extend_from_slice(with.as_bytes());
    }

    /// `src[from..to]` is left out (whitespace: a Python sender's text has one after every `,` and
    /// `:`, and the empty text written in its place was a copy call of its own).
    #[inline(always)]
    fn leave_out(&mut self, from: usize, to: usize) {
        if self.mark == 0 {
            // the canonical text is seldom longer than the input: one allocation for most
            self.buf.out.reserve(self.src.len());
        }
        copy(&mut self.buf.out, self.src, self.mark, from);
        self.mark = to;
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Whitespace between tokens, dropped (most places between tokens have none, and a Python
    /// sender's one space after `,` and `:` is left out with the span before it copied).
    #[inline(always)]
    fn ws(&mut self) {
        if let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.ws_run();
        }
    }

    #[inline(always)]
    fn ws_run(&mut self) {
        let start = self.pos;
        self.pos += 1;
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
        self.leave_out(start, self.pos);
    }

    fn value(&mut self) -> Step {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(drop),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            _ => Err(Refused),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Step {
        if !self.src[self.pos..].starts_with(word) {
            return Err(Refused);
        }
        self.pos += word.len();
        Ok(())
    }

    /// Past an opening bracket: one level deeper, within the dialect's limit.
    fn enter(&mut self) -> Step {
        self.depth += 1;
        if self.depth > self.dialect.max_depth() {
            return Err(Refused);
        }
        self.deepest = self.deepest.max(self.depth);
        self.pos += 1;
        self.ws();
        Ok(())
    }

    /// After an item: `,` and the next item (true), or the closing bracket (false).
    #[inline(always)]
    fn next(&mut self, close: u8) -> Result<bool, Refused> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.ws();
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ => Err(Refused),
        }
    }

    fn array(&mut self) -> Step {
        self.enter()?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.value()?;
            if !self.next(b']')? {
                return Ok(());
            }
        }
    }

    fn object(&mut self) -> Step {
        self.enter()?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        let first = self.buf.keys.len();
        // the signatures (`signature`) of the object's keys so far: a key whose signature is new
        // repeats none of them, and nearly every key's is, so its name is compared with none
        let mut signatures = 0u64;
        loop {
            if self.peek() != Some(b'"') {
                return Err(Refused);
            }
            let start = self.pos + 1;
            let key = match self.string()? {
                (end, false) => Key::Raw(start, end),
                (end, true) => self.decoded(start, end),
            };
            let seen = &self.buf.keys[first..];
            if seen.len() < PAIRWISE {
                let name = self.key(key);
                let bit = signature(name);
                if signatures & bit != 0
                    && seen
                        .iter()
                        .any(|&k| k.len() == name.len() && self.key(k) == name)
                {
                    self.duplicate = true;
                }
                signatures |= bit;
            }
            // the top-level `message` (the length first: most keys are not it); a second one is a
            // repeated key, and the text falls back to the parser
            let message = self.depth == 1 && key.len() == 7 && self.key(key) == b"message";
            self.buf.keys.push(key);
            self.ws();
            if self.peek() != Some(b':') {
                return Err(Refused);
            }
            self.pos += 1;
            self.ws();
            let string = (message && self.peek() == Some(b'"')).then(|| self.written_at(self.pos));
            self.value()?;
            if let Some(start) = string {
                // its characters: after the quote written at `start`, before the one written last
                self.message = Some((start + 1, self.written_at(self.pos) - 1));
            }
            if !self.next(b'}')? {
                break;
            }
        }
        if self.buf.keys.len() - first > PAIRWISE {
            let mut names: Vec<&[u8]> = self.buf.keys[first..]
                .iter()
                .map(|&k| self.key(k))
                .collect();
            names.sort_unstable();
            let repeated = names.windows(2).any(|w| w[0] == w[1]);
            self.duplicate |= repeated;
        }
        self.buf.keys.truncate(first);
        if self.buf.keys.is_empty() {
            self.buf.decoded.clear();
        }
        Ok(())
    }

    /// A key's characters.
    fn key(&self, k: Key) -> &[u8] {
        match k {
            Key::Raw(a, b) => &self.src[a..b],
            Key::Decoded(a, b) => &self.buf.decoded[a..b],
        }
    }

    /// Past a string, its escapes rewritten where `json::string` writes them otherwise: where its
    /// closing quote is, and whether it has an escape.
    #[inline(always)]
    fn string(&mut self) -> Result<(usize, bool), Refused> {
        let mut i = self.pos + 1;
        let mut escapes = false;
        loop {
            i += plain_run(&self.src[i..]);
            match self.src.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok((i, escapes));
                }
                Some(b'\\') => {
                    // the escapes written as they are, read here: a stack trace has one a line
                    i += match self.src.get(i + 1) {
                        Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => 2,
                        _ => self.escape(i)?,
                    };
                    escapes = true;
                }
                _ => return Err(Refused), // the end, or a raw control character
            }
        }
    }

    /// The characters of a key with escapes (`src[start..end]`, already read), decoded into
    /// `decoded`: keys are compared by their characters. Few keys have an escape, so the string's
    /// read does not decode as it goes.
    fn decoded(&mut self, start: usize, end: usize) -> Key {
        let src = self.src;
        let decoded = &mut self.buf.decoded;
        let from = decoded.len();
        let (mut i, mut run) = (start, start);
        while i < end {
            if src[i] != b'\\' {
                i += 1;
                continue;
            }
            let Some((len, ch)) = escape_at(src, i) else {
                break; // not reached: `string` read every escape
            };
            decoded.extend_from_slice(&src[run..i]);
            decoded.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
            i += len;
            run = i;
        }
        decoded.extend_from_slice(&src[run..end]);
        Key::Decoded(from, decoded.len())
    }

    /// The escape at `at`, rewritten where `json::string` spells its character otherwise; its
    /// length.
    fn escape(&mut self, at: usize) -> Result<usize, Refused> {
        let (len, ch) = escape_at(self.src, at).ok_or(Refused)?;
        match self.src[at + 1] {
            b'/' => self.edit(at, at + 2, "/"),
            b'u' if !escaped(ch) => {
                // written as the character itself (`é` for `\u00e9`): never the escape's text;
                // its 1-4 bytes as one 4-byte block cut back (a copy call each was a tenth of it)
                self.leave_out(at, at + len);
                let mut utf8 = [0; 4];
                let n = ch.encode_utf8(&mut utf8).len();
                let out = &mut self.buf.out;
                let end = out.len() + n;
                out.extend_from_slice(&utf8);
                out.truncate(end);
            }
            b'u' => {
                let mut buf = [0u8; 6];
                let spelled = spelling(ch, &mut buf);
                if spelled.as_bytes() != &self.src[at..at + len] {
                    self.edit(at, at + len, spelled);
                }
            }
            // the other escapes are written as they are: `json::string` writes them so
            _ => {}
        }
        Ok(len)
    }

    fn number(&mut self) -> Step {
        let b = self.src;
        let start = self.pos;
        let int_start = start + usize::from(b[start] == b'-');
        let int_len = digits(&b[int_start..]);
        if int_len == 0 || (b[int_start] == b'0' && int_len > 1) {
            return Err(Refused);
        }
        let mut p = int_start + int_len;
        let mut float = false;
        if b.get(p) == Some(&b'.') {
            let n = digits(&b[p + 1..]);
            if n == 0 {
                return Err(Refused);
            }
            p += 1 + n;
            float = true;
        }
        if let Some(b'e' | b'E') = b.get(p) {
            p += 1;
            if let Some(b'+' | b'-') = b.get(p) {
                p += 1;
            }
            let n = digits(&b[p..]);
            if n == 0 {
                return Err(Refused);
            }
            p += n;
            float = true;
        }
        self.pos = p;
        let lit = &b[start..p];
        if !float {
            if lit == b"-0" {
                self.edit(start, p, self.dialect.minus_zero());
                return Ok(());
            }
            // Both parsers keep an integer that fits 64 bits (18 digits always do) as one.
            let fits = int_len < 19
                || (start == int_start && parse::<u64>(lit).is_some())
                || parse::<i64>(lit).is_some();
            if fits {
                return Ok(());
            }
        }
        if float && written_as_is(&b[int_start..p], int_len) {
            return Ok(());
        }
        // Both parsers round correctly (serde_json with `float_roundtrip`), as `str::parse` does;
        // neither takes an infinite value.
        let f: f64 = parse(lit).ok_or(Refused)?;
        let n = serde_json::Number::from_f64(f).ok_or(Refused)?;
        let mut written = std::mem::take(&mut self.buf.float);
        written.clear();
        number(&mut written, &n);
        if written.as_bytes() != lit {
            self.edit(start, p, &written);
        }
        self.buf.float = written;
        Ok(())
    }
}

/// Whether a float written `digits` (`I.F`, no sign, `I` of `int_len` digits without a leading
/// zero but `0` itself) is written back as it is, without parsing and writing it: when `F` ends in
/// a digit other than 0, there are at most 15 significant digits (any such decimal is the one
/// shortest text of the double it parses to, DBL_DIG), and the first is at 10^-5 or above (the
/// writer's fixed notation covers 10^-5 to 10^16). Two parses and a write were a python-sender
/// event's `"duration": 0.276` cost.
fn written_as_is(digits: &[u8], int_len: usize) -> bool {
    let Some((b'.', fraction)) = digits.get(int_len..).and_then(<[u8]>::split_first) else {
        return false; // an exponent, or no fraction
    };
    if !fraction.iter().all(u8::is_ascii_digit) || fraction.last().is_none_or(|&d| d == b'0') {
        return false;
    }
    let significant = if digits[0] == b'0' {
        let zeros = fraction.iter().take_while(|&&d| d == b'0').count();
        if zeros > 4 {
            return false;
        }
        fraction.len() - zeros
    } else {
        int_len + fraction.len()
    };
    significant <= 15
}

/// A number's text (ASCII: a sign, digits, a point, an exponent) parsed.
fn parse<T: std::str::FromStr>(lit: &[u8]) -> Option<T> {
    std::str::from_utf8(lit).ok()?.parse().ok()
}

/// `src[from..to]` appended to `out`. Most spans between edits (a Python sender's `"key":` and
/// `"value",`) are short: copied as one fixed 16- or 32-byte block and cut back, they are two
/// moves instead of a call to `memcpy` each (~40 % of a python-sender text's rewriting).
#[inline(always)]
fn copy(out: &mut Vec<u8>, src: &[u8], from: usize, to: usize) {
    let len = out.len();
    let n = to - from;
    let room = out.capacity() - len;
    if n <= 16 && room >= 16 {
        if let Some(block) = src.get(from..from + 16) {
            let block: &[u8; 16] = block.try_into().unwrap_or(&[0; 16]);
            out.extend_from_slice(block);
            out.truncate(len + n);
            return;
        }
    } else if n <= 32 && room >= 32 {
        if let Some(block) = src.get(from..from + 32) {
            let block: &[u8; 32] = block.try_into().unwrap_or(&[0; 32]);
            out.extend_from_slice(block);
            out.truncate(len + n);
            return;
        }
    }
    out.extend_from_slice(&src[from..to]);
}

/// One bit of 64 for a key, from its length and its first and last bytes (equal keys have the
/// same bit): an object's keys so far as the bits of theirs, a new key whose bit is not among
/// them repeats none, and is compared with none (the Hercules renderer checks its keys so too).
pub(crate) fn signature(name: &[u8]) -> u64 {
    let ends = name.first().zip(name.last()).map_or(0, |(&a, &z)| {
        usize::from(a).wrapping_mul(7).wrapping_add(usize::from(z))
    });
    1 << (name.len().wrapping_mul(31).wrapping_add(ends) % 64)
}

/// How many ASCII digits `b` starts with.
fn digits(b: &[u8]) -> usize {
    b.iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(b.len())
}

/// Whether `json::string` writes `ch` as an escape.
fn escaped(ch: char) -> bool {
    u8::try_from(ch).is_ok_and(|c| ESCAPE[usize::from(c)] != 0)
}

/// `ch` as `json::string` writes it inside a string literal.
fn spelling(ch: char, buf: &mut [u8; 6]) -> &str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = u8::try_from(ch).map_or(0, |c| ESCAPE[usize::from(c)]);
    match short {
        0 => ch.encode_utf8(buf),
        b'u' => {
            let c = ch as usize;
            *buf = *b"\\u00__";
            buf[4] = HEX[c >> 4];
            buf[5] = HEX[c & 15];
            std::str::from_utf8(&buf[..]).unwrap_or_default()
        }
        letter => {
            buf[0] = b'\\';
            buf[1] = letter;
            std::str::from_utf8(&buf[..2]).unwrap_or_default()
        }
    }
}

/// Fuzz target `document`, differential: for every text a dialect's parser accepts, the canonical
/// text is what the parser's values are written as (and canonical again unchanged), or the text
/// repeats a key; what the parser refuses is refused. The one exception is serde_json's: a text
/// 128 levels deep that is canonical as sent is kept as it is (as before the canonicaliser).
#[cfg(any(test, fuzzing))]
pub fn fuzz(data: &[u8]) {
    use crate::model::Value;
    for dialect in [Dialect::Orjson, Dialect::Serde] {
        let got = canonical(data, dialect);
        // where the canonicaliser noted the message, and the text alone (looked up)
        let noted = got.as_ref().ok().map(|c| {
            super::Document::from(Canonical {
                text: c.text.clone(),
                message: c.message,
            })
        });
        let got = got.map(|c| c.text);
        let parsed = match dialect {
            Dialect::Orjson => super::orjson::loads(data).ok(),
            Dialect::Serde => serde_json::from_slice::<Value>(data).ok(),
        };
        match (&got, parsed) {
            (Ok(text), Some(v)) => {
                let mut written = String::new();
                super::value(&mut written, &v);
                assert_eq!(**text, *written, "{dialect:?}");
                assert_eq!(
                    canonical(text.as_bytes(), dialect).map(|c| c.text).as_ref(),
                    Ok(text)
                );
                let doc = super::Document::canonical(&**text);
                assert_eq!(doc.value(), v);
                let message = v.get("message").and_then(Value::as_str);
                assert_eq!(doc.str_member("message").as_deref(), message);
                let mut scratch = String::new();
                assert_eq!(doc.message_in(&mut scratch), message);
                let noted = noted.expect("canonical");
                let mut scratch = String::new();
                assert_eq!(noted.message_in(&mut scratch), message);
                let nested = v.pointer("/log/file/path").and_then(Value::as_str);
                let dotted = v.get("log.file.path").and_then(Value::as_str);
                assert_eq!(
                    doc.str_path(&["log", "file", "path"]).as_deref(),
                    nested.or(dotted)
                );
            }
            (Ok(text), None) => assert!(
                dialect == Dialect::Serde && text.as_bytes() == data,
                "{dialect:?} kept a text its parser refuses"
            ),
            (Err(Fallback::Duplicate), Some(_)) | (Err(Fallback::Refused), None) => {}
            (got, parsed) => panic!("{dialect:?}: {got:?} but the parser gave {parsed:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn orjson(text: &str) -> Result<String, Fallback> {
        canonical(text.as_bytes(), Dialect::Orjson).map(|c| c.text.into())
    }

    fn serde(text: &str) -> Result<String, Fallback> {
        canonical(text.as_bytes(), Dialect::Serde).map(|c| c.text.into())
    }

    #[test]
    fn document_regressions() {
        crate::fuzzing::replay("document", fuzz);
    }

    #[test]
    fn canonical_texts_are_kept_as_sent() {
        for text in [
            r#"{}"#,
            r#"{"a":1,"b":[true,false,null],"c":{"d":"x\"y\\z\n\u001f"},"e":-5}"#,
            r#"{"f":1.5,"g":0.1,"h":1e+300,"h2":1e-7,"i":18446744073709551615,"j":-9223372036854775808}"#,
            r#"{"é":"ünïcödé ☃ \u0000","k":[],"l":[{}]}"#,
            r#"[1,"s"]"#,
        ] {
            assert_eq!(orjson(text).as_deref(), Ok(text));
            assert_eq!(serde(text).as_deref(), Ok(text));
            fuzz(text.as_bytes());
        }
    }

    #[test]
    fn a_python_senders_text_is_written_as_its_values_are() {
        let sent = r#" {"message": "caf\u00e9 \ud83d\ude00 \/x \u001F\u000a\u0022\u005c", "n": [1, 2.50, 1E5, -0, 12345678901234567890123],
            "t": true} "#;
        let want = r#"{"message":"café 😀 /x \u001f\n\"\\","n":[1,2.5,100000.0,0,1.2345678901234568e+22],"t":true}"#;
        assert_eq!(orjson(sent).as_deref(), Ok(want));
        assert_eq!(
            serde(sent).as_deref(),
            Ok(want.replace(",0,", ",-0.0,").as_str())
        );
        fuzz(sent.as_bytes());
        assert_eq!(orjson(r#"["\u007f"]"#).as_deref(), Ok("[\"\u{7f}\"]"));
    }

    #[test]
    fn a_text_left_half_written_does_not_reach_the_next() {
        // what a reading that panicked mid-text leaves in the thread's buffers
        SCRATCH.with_borrow_mut(|s| {
            s.out.extend_from_slice(b"{\"stale\":");
            s.keys.push(Key::Raw(0, 5));
            s.decoded.extend_from_slice(b"stale");
        });
        let sent = r#"{"a": 1, "stale": "caf\u00e9"}"#;
        assert_eq!(orjson(sent).as_deref(), Ok(r#"{"a":1,"stale":"café"}"#));
    }

    #[test]
    fn a_float_kept_as_sent_is_one_the_writer_writes_so() {
        // around each bound of `written_as_is`: significant digits 14-17, 0-6 zeros after the
        // point, trailing zeros, integer parts up to 17 digits, signs
        let mut lits = Vec::new();
        for int in [
            "0",
            "1",
            "7",
            "42",
            "99999",
            "123456789012",
            "99999999999999",
            "1234567890123456",
            "12345678901234567",
        ] {
            for zeros in 0..7 {
                for tail in [
                    "1",
                    "5",
                    "25",
                    "276",
                    "1000",
                    "0",
                    "00",
                    "123456789",
                    "12345678901234",
                    "999999999999999",
                    "3333333333333333",
                ] {
                    for sign in ["", "-"] {
                        lits.push(format!("{sign}{int}.{}{tail}", "0".repeat(zeros)));
                    }
                }
            }
        }
        // the shape it is for: a Python sender's durations
        for lit in ["0.276", "1.736", "0.001", "12.5", "123456789.012345"] {
            assert!(
                written_as_is(lit.as_bytes(), lit.find('.').unwrap()),
                "{lit}"
            );
        }
        for lit in lits {
            let mut want = String::new();
            let n = serde_json::Number::from_f64(lit.parse().unwrap()).unwrap();
            crate::model::json::number(&mut want, &n);
            let doc = format!("[{lit}]");
            assert_eq!(orjson(&doc), Ok(format!("[{want}]")), "{lit}");
            let digits = lit.trim_start_matches('-');
            if written_as_is(digits.as_bytes(), digits.find('.').unwrap()) {
                assert_eq!(lit, want);
            }
        }
    }

    #[test]
    fn a_repeated_key_is_left_to_the_parser_even_spelled_otherwise_or_past_64_members() {
        assert_eq!(orjson(r#"{"a":1,"a":2}"#), Err(Fallback::Duplicate));
        assert_eq!(serde(r#"{"a":1, "\u0061":2}"#), Err(Fallback::Duplicate));
        assert_eq!(
            orjson(r#"{"x":{"é":1,"\u00e9":2}}"#),
            Err(Fallback::Duplicate)
        );
        let nested = r#"{"a":{"b":1},"b":{"a":1}}"#;
        assert_eq!(orjson(nested).as_deref(), Ok(nested));
        // keys of one signature (length, first and last byte) that differ are compared, not taken
        // for one another; a repeat among them is found
        let alike = r#"{"axb":1,"ayb":2,"azb":3}"#;
        assert_eq!(signature(b"axb"), signature(b"ayb"));
        assert_eq!(orjson(alike).as_deref(), Ok(alike));
        assert_eq!(
            orjson(r#"{"axb":1,"ayb":2,"axb":3}"#),
            Err(Fallback::Duplicate)
        );
        let wide: Vec<String> = (0..200).map(|i| format!("\"k{i}\": {i}")).collect();
        let text = format!("{{{}}}", wide.join(","));
        let want = text.replace(": ", ":");
        assert_eq!(orjson(&text).as_deref(), Ok(want.as_str()));
        let repeated = format!("{{{},\"k7\":0}}", wide.join(","));
        assert_eq!(orjson(&repeated), Err(Fallback::Duplicate));
        // a key repeated before an error: the parser refuses the text, so it is refused
        assert_eq!(orjson(r#"{"a":1,"a":2,}"#), Err(Fallback::Refused));
        for text in [&text, &repeated] {
            fuzz(text.as_bytes());
        }
    }

    #[test]
    fn what_the_parsers_refuse_is_refused() {
        for text in [
            "",
            " ",
            "\u{feff}{}",
            r#"{"a":1,}"#,
            "[1,]",
            r#"{"a" 1}"#,
            "{1:2}",
            "[01]",
            "[-]",
            "[1.]",
            "[1e]",
            "[1e+]",
            "[.5]",
            "[+1]",
            "[1e400]",
            "[-1e400]",
            "[tru]",
            "[nul]",
            r#"["\ud800"]"#,
            r#"["\ud800\u0041"]"#,
            r#"["\udc00"]"#,
            r#"["\u12"]"#,
            r#"["\x"]"#,
            "[\"\u{1}\"]",
            "[\"a",
            "[1 2]",
            "{} {}",
            "[NaN]",
            "[Infinity]",
        ] {
            assert_eq!(orjson(text), Err(Fallback::Refused), "{text}");
            assert_eq!(serde(text), Err(Fallback::Refused), "{text}");
            fuzz(text.as_bytes());
        }
        // not UTF-8, however it is rewritten around it: the input is checked as the text it writes
        for bytes in [
            &b"{\"a\":\"\xff\"}"[..],
            b"{\"a\": \"\xc3\\u00a9\"}",
            b"[\"\\u00e9\xa9\"]",
            b"[\"\xe2\x98\", \"\x83\"]",
            b"{\"\xff\\u0061\": 1}",
            b"{\"a\": 1, \"a\": \"\xff\"}", // a repeated key too: the parser refuses it
        ] {
            for dialect in [Dialect::Orjson, Dialect::Serde] {
                assert_eq!(
                    canonical(bytes, dialect),
                    Err(Fallback::Refused),
                    "{bytes:?}"
                );
            }
            fuzz(bytes);
        }
    }

    /// Where the top-level `message` string's characters are in the canonical text, through the
    /// edits before and inside it; none for a nested one or one that is not a string.
    #[test]
    fn the_top_level_message_is_noted_where_it_is_written() {
        for (text, message) in [
            (r#"{"message":"plain"}"#, Some("plain")),
            (
                r#"{"a": [1, 2], "message": "h\u00e9 \/ \n", "b": {"message": "x"}}"#,
                Some("hé / \\n"),
            ),
            (r#"{ "m\u0065ssage" : "key escaped" }"#, Some("key escaped")),
            (r#"{"b": {"message": "nested"}}"#, None),
            (r#"{"message": 5}"#, None),
            (r#"[{"message": "in an array"}]"#, None),
        ] {
            let c = canonical(text.as_bytes(), Dialect::Orjson).expect(text);
            let at = c.message.map(|(start, end)| &c.text[start..end]);
            assert_eq!(at, message, "{text}");
            fuzz(text.as_bytes());
        }
    }

    #[test]
    fn nesting_is_bounded_as_each_parser_bounds_it() {
        let nested = |n: usize, inner: &str| format!("{}{inner}{}", "[".repeat(n), "]".repeat(n));
        assert!(orjson(&nested(1024, "1")).is_ok());
        assert_eq!(orjson(&nested(1025, "1")), Err(Fallback::Refused));
        assert!(serde(&nested(127, " 1")).is_ok());
        // serde_json refuses 128 levels; a text that deep that is canonical as sent is kept
        assert!(serde_json::from_str::<Value>(&nested(128, "1")).is_err());
        assert!(serde(&nested(128, "1")).is_ok());
        assert_eq!(serde(&nested(128, " 1")), Err(Fallback::Refused));
        assert_eq!(serde(&nested(129, "1")), Err(Fallback::Refused));
        for n in [127, 128, 129, 1024, 1025] {
            fuzz(nested(n, "1").as_bytes());
            fuzz(nested(n, " 1").as_bytes());
        }
    }
}
