//! Hercules values as JSON documents, rendered straight
//! from bytes the reader validated: containers become objects in tag order (a duplicate key keeps
//! its first position and last value, as a Python dict), UUIDs canonical strings, vectors arrays,
//! invalid UTF-8 replacement characters, non-finite floats "NaN"/"Infinity"/"-Infinity".
//!
//! Events that wirelog itself exported carry a `wirelog` container; for them the export mapping is
//! undone (`mapped`): escaped tag names, wrapped arrays and big integers come back as the original
//! document.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one event (in memory), after checked takes"
)]

use serde_json::{Map, Number};

use super::types::*;
use crate::model::json;
use crate::model::json::canon::signature;
use crate::model::text::{push_uuid, uuid as uuid_text};
use crate::model::Value;

/// A read position over validated event bytes; every read is still bounds-checked (None past the
/// end) so a bug can never panic on wire data.
pub struct Cursor<'a> {
    data: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], pos: usize) -> Self {
        Cursor { data, pos }
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.data.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn len(&mut self) -> Option<usize> {
        let b = self.take(4)?;
        usize::try_from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok()
    }

    pub fn key(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }

    /// Step over a value of type `t`.
    pub fn skip(&mut self, t: u8) -> Option<()> {
        match t {
            CONTAINER => {
                for _ in 0..self.u16()? {
                    self.key()?;
                    let t = self.u8()?;
                    self.skip(t)?;
                }
            }
            STRING => {
                let n = self.len()?;
                self.take(n)?;
            }
            BYTE | FLAG => {
                self.take(1)?;
            }
            UUID => {
                self.take(16)?;
            }
            NULL => {}
            VECTOR => self.skip_vector()?,
            _ => {
                self.take(fixed(t)?.0)?;
            }
        }
        Some(())
    }

    fn skip_vector(&mut self) -> Option<()> {
        let elem = self.u8()?;
        let n = self.len()?;
        match elem {
            NULL => {}
            BYTE | FLAG | UUID | SHORT | INTEGER | LONG | FLOAT | DOUBLE => {
                let size = if elem == UUID {
                    16
                } else {
                    fixed(elem).map_or(1, |f| f.0)
                };
                self.take(n.checked_mul(size)?)?;
            }
            _ => {
                for _ in 0..n {
                    self.skip(if elem == VECTOR { VECTOR } else { elem })?;
                }
            }
        }
        Some(())
    }
}

fn text(raw: &[u8]) -> String {
    // Valid UTF-8 is the rule: std's validation is much faster than the lossy decoder's walk.
    match std::str::from_utf8(raw) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(raw).into_owned(),
    }
}

fn float(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("NaN"),
        None if x > 0.0 => Value::from("Infinity"),
        None => Value::from("-Infinity"),
    }
}

fn be<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// One scalar of type `t` (not a container or vector).
fn scalar(c: &mut Cursor<'_>, t: u8) -> Option<Value> {
    Some(match t {
        BYTE => Value::from(c.u8()?),
        FLAG => Value::Bool(c.u8()? != 0),
        SHORT => Value::from(i16::from_be_bytes(be(c.take(2)?))),
        INTEGER => Value::from(i32::from_be_bytes(be(c.take(4)?))),
        LONG => Value::from(i64::from_be_bytes(be(c.take(8)?))),
        FLOAT => float(f32::from_be_bytes(be(c.take(4)?)) as f64),
        DOUBLE => float(f64::from_be_bytes(be(c.take(8)?))),
        STRING => {
            let n = c.len()?;
            Value::String(text(c.take(n)?))
        }
        UUID => Value::String(uuid_text(c.take(16)?)),
        _ => Value::Null,
    })
}

/// One rendering policy: plain, or undoing wirelog's export mapping.
#[derive(Clone, Copy)]
pub struct Renderer {
    pub mapped: bool,
}

impl Renderer {
    /// A container's tags (the cursor at its count).
    pub fn tags(self, c: &mut Cursor<'_>) -> Option<Value> {
        let start = c.pos;
        let count = c.u16()?;
        if self.mapped && count == 1 {
            if let Some(n) = self.bigint(c) {
                return Some(n);
            }
            c.pos = start + 2;
        }
        let mut map = Map::with_capacity(count as usize);
        for _ in 0..count {
            let key = text(c.key()?);
            let key = if self.mapped {
                unescape_name(&key)
            } else {
                key
            };
            let t = c.u8()?;
            let v = self.value(c, t)?;
            map.insert(key, v);
        }
        Some(Value::Object(map))
    }

    /// `Container{_xn: String}` holding an integer: the integer (consumed), else None.
    fn bigint(self, c: &mut Cursor<'_>) -> Option<Value> {
        if c.key()? != BIGINT_TAG || c.u8()? != STRING {
            return None;
        }
        let n = c.len()?;
        let s = std::str::from_utf8(c.take(n)?).ok()?;
        let digits = s.strip_prefix('-').unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if let Ok(v) = s.parse::<i64>() {
            return Some(Value::from(v));
        }
        s.parse::<u64>().ok().map(Value::from)
    }

    pub fn value(self, c: &mut Cursor<'_>, t: u8) -> Option<Value> {
        match t {
            CONTAINER => self.tags(c),
            VECTOR => self.vector(c),
            NULL => Some(Value::Null),
            _ => scalar(c, t),
        }
    }

    fn vector(self, c: &mut Cursor<'_>) -> Option<Value> {
        let elem = c.u8()?;
        let n = c.len()?;
        let mut items = Vec::with_capacity(n.min(c.data.len()));
        match elem {
            NULL => items.resize(n, Value::Null),
            CONTAINER if self.mapped && n > 0 && self.all_items(c, n) => {
                for _ in 0..n {
                    c.u16()?;
                    c.key()?;
                    let t = c.u8()?;
                    items.push(self.value(c, t)?);
                }
            }
            CONTAINER => {
                for _ in 0..n {
                    items.push(self.tags(c)?);
                }
            }
            VECTOR => {
                for _ in 0..n {
                    items.push(self.vector(c)?);
                }
            }
            _ => {
                for _ in 0..n {
                    items.push(scalar(c, elem)?);
                }
            }
        }
        Some(Value::Array(items))
    }

    /// Whether each of the `n` containers at the cursor is `{_xv: value}` (an array the export
    /// wrapped because it was not a homogeneous vector).
    fn all_items(self, c: &Cursor<'_>, n: usize) -> bool {
        let mut probe = Cursor::new(c.data, c.pos);
        for _ in 0..n {
            let ok = (|| {
                if probe.u16()? != 1 || probe.key()? != ITEM_TAG {
                    return Some(false);
                }
                let t = probe.u8()?;
                probe.skip(t)?;
                Some(true)
            })();
            if ok != Some(true) {
                return false;
            }
        }
        true
    }
}

/// Keys of one container compared pairwise for repeats; a container with more is left to the tree.
pub const PAIRWISE: usize = 64;

/// The plain rendering written straight as JSON text, without building values: what
/// `json::value` writes of `Renderer { mapped: false }.tags`. Events are rendered once and written
/// once, so the tree (an allocation per key, string and container, and a hash per key) was most
/// of their cost. `tags` gives up (None) wherever one pass cannot know the tree's text: a key
/// repeated in a container (the tree keeps its first position and last value), a key that is not
/// UTF-8 (replacement characters can make two keys equal), a container of more than `PAIRWISE`
/// keys; the caller renders the tree then.
#[derive(Default)]
pub struct TextRenderer<'a> {
    /// Keys of the containers being written, innermost last.
    keys: Vec<&'a [u8]>,
}

impl<'a> TextRenderer<'a> {
    /// A container's tags (the cursor at its count) appended to `out`.
    pub fn tags(&mut self, c: &mut Cursor<'a>, out: &mut String) -> Option<()> {
        let count = usize::from(c.u16()?);
        if count > PAIRWISE {
            return None;
        }
        let start = self.keys.len();
        let mut signatures = 0u64;
        out.push('{');
        for i in 0..count {
            let key = c.key()?;
            // compared only with keys that could be it: nearly every key's bit is new
            let bit = signature(key);
            if signatures & bit != 0 && self.keys[start..].contains(&key) {
                return None;
            }
            signatures |= bit;
            self.keys.push(key);
            if i > 0 {
                out.push(',');
            }
            json::string(out, std::str::from_utf8(key).ok()?);
            out.push(':');
            let t = c.u8()?;
            self.value(c, t, out)?;
        }
        self.keys.truncate(start);
        out.push('}');
        Some(())
    }

    fn value(&mut self, c: &mut Cursor<'a>, t: u8, out: &mut String) -> Option<()> {
        match t {
            CONTAINER => self.tags(c, out)?,
            VECTOR => self.vector(c, out)?,
            STRING => {
                let n = c.len()?;
                let raw = c.take(n)?;
                match std::str::from_utf8(raw) {
                    Ok(s) => json::string(out, s),
                    Err(_) => json::string(out, &String::from_utf8_lossy(raw)),
                }
            }
            UUID => {
                // Hex digits and dashes: nothing to escape.
                let b = c.take(16)?;
                out.push('"');
                push_uuid(out, b);
                out.push('"');
            }
            _ => json::value(out, &scalar(c, t)?),
        }
        Some(())
    }

    fn vector(&mut self, c: &mut Cursor<'a>, out: &mut String) -> Option<()> {
        let elem = c.u8()?;
        let n = c.len()?;
        out.push('[');
        for i in 0..n {
            if i > 0 {
                out.push(',');
            }
            match elem {
                NULL => out.push_str("null"),
                CONTAINER => self.tags(c, out)?,
                VECTOR => self.vector(c, out)?,
                _ => self.value(c, elem, out)?,
            }
        }
        out.push(']');
        Some(())
    }
}

/// The plain rendering's JSON text of a container's count and tags (`tags`), appended to `out`:
/// written straight by `TextRenderer`, or from the tree where it gives up (what it wrote taken
/// back first). Bytes the reader accepted always render; anything else is `{}` (never nothing: a
/// kept document's text is asked for lazily).
pub fn plain_text(tags: &[u8], out: &mut String) {
    let start = out.len();
    out.reserve(2 * tags.len());
    if TextRenderer::default()
        .tags(&mut Cursor::new(tags, 0), out)
        .is_some()
    {
        return;
    }
    out.truncate(start);
    let tree = Renderer { mapped: false }.tags(&mut Cursor::new(tags, 0));
    json::value(out, tree.as_ref().unwrap_or(&Value::Object(Map::new())));
}

/// Where the tags wirelog's export mapping uses sit in an event's payload (value positions).
#[derive(Default)]
pub struct Exported {
    /// The first `wirelog` container with String `protocol` and `kind` tags.
    pub wirelog: Option<usize>,
    /// The last `fields` and `event` tags (a dict of the tags keeps the last).
    pub fields: Option<(u8, usize)>,
    pub event: Option<(u8, usize)>,
}

/// The export mapping's tags of the payload at `pos` (the container count), when the event was
/// exported by wirelog.
pub fn exported(data: &[u8], pos: usize) -> Option<Exported> {
    let mut c = Cursor::new(data, pos);
    let mut found = Exported::default();
    for _ in 0..c.u16()? {
        let key = c.key()?;
        let t = c.u8()?;
        let at = c.pos;
        match key {
            b"wirelog" if t == CONTAINER && found.wirelog.is_none() && marks(data, at) => {
                found.wirelog = Some(at)
            }
            b"fields" => found.fields = Some((t, at)),
            b"event" => found.event = Some((t, at)),
            _ => {}
        }
        c.skip(t)?;
    }
    found.wirelog.map(|_| found)
}

/// Whether the container at `pos` has String `protocol` and `kind` tags (the last of each).
fn marks(data: &[u8], pos: usize) -> bool {
    let mut c = Cursor::new(data, pos);
    let (mut protocol, mut kind) = (None, None);
    let Some(count) = c.u16() else { return false };
    for _ in 0..count {
        let (Some(key), Some(t)) = (c.key(), c.u8()) else {
            return false;
        };
        match key {
            b"protocol" => protocol = Some(t),
            b"kind" => kind = Some(t),
            _ => {}
        }
        if c.skip(t).is_none() {
            return false;
        }
    }
    protocol == Some(STRING) && kind == Some(STRING)
}
