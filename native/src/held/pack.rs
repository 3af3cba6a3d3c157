//! A `Message` as one byte string and back, exactly (`spill.rs` holds records this way).
//!
//! Hand-written because the message's names are `&'static str` (interned here per store, by
//! address) and its values serde_json's: a serde format would need owned names and would not say
//! whether a number was written as an integer or a float, which the record's text depends on.
//! Integers are LEB128 varints (but a time: its 8 bytes), floats their 8 bytes; a shared field
//! comes back as its own value (the same JSON text); the event document is its canonical text,
//! copied. Reading never panics: bytes that are not a packed message read as None.

use std::collections::HashMap;

use serde_json::{Map, Number};

use crate::model::json::{integer, Json};
use crate::model::{Direction, DocText, Document, Message, Value};

/// The `'static` names of packed messages (protocol, kind, version, field names).
#[derive(Debug)]
pub struct Names {
    list: Vec<&'static str>,
    index: HashMap<(usize, usize), u32, foldhash::fast::RandomState>,
    /// Recent names by address, in front of `index`: the same few dozen names come with every
    /// record, and hashing each was a fifth of what holding a record cost.
    recent: [(usize, usize, u32); RECENT],
}

const RECENT_BITS: u32 = 6;
const RECENT: usize = 1 << RECENT_BITS;

impl Default for Names {
    fn default() -> Self {
        Names {
            list: Vec::new(),
            index: HashMap::default(),
            recent: [(0, 0, 0); RECENT],
        }
    }
}

impl Names {
    /// A packed record names a dozen: the recent ones are found where this is called.
    #[inline(always)]
    fn id(&mut self, name: &'static str) -> u32 {
        let key = (name.as_ptr() as usize, name.len());
        // the address mixed (Fibonacci hashing): names lie side by side in the binary, several to
        // eight bytes, and slots by plain address bits made which of them shared a slot, and so
        // what holding a record cost, depend on where the linker put them
        let slot =
            key.0.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize) >> (usize::BITS - RECENT_BITS);
        let (ptr, len, id) = self.recent[slot];
        if (ptr, len) == key {
            return id;
        }
        self.id_of(name, key, slot)
    }

    /// `id` of a name not in `recent`'s slot.
    fn id_of(&mut self, name: &'static str, key: (usize, usize), slot: usize) -> u32 {
        let next = self.list.len() as u32;
        let id = *self.index.entry(key).or_insert_with(|| {
            self.list.push(name);
            next
        });
        self.recent[slot] = (key.0, key.1, id);
        id
    }

    fn name(&self, id: u64) -> Option<&'static str> {
        self.list.get(usize::try_from(id).ok()?).copied()
    }
}

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UNSIGNED: u8 = 3;
const NEGATIVE: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;

const NO_EVENT: u8 = 0;
const TEXT: u8 = 1;
/// The text and where its `message` lies (`Document::message_at`): the Arrow rows read it there
/// instead of looking for it in every event that waited.
const NOTED_TEXT: u8 = 2;

// header flags
const C2S: u8 = 1;
const S2C: u8 = 2;
const ACKED_FALSE: u8 = 4;
const ACKED_TRUE: u8 = 8;
const OFFSET: u8 = 16;
const FRAME: u8 = 32;
const TS: u8 = 64;
const VERSION: u8 = 128;

/// Append `m` packed to `out`; `notes`: with where its document's message lies, when noted.
pub fn pack(m: &Message, names: &mut Names, notes: bool, out: &mut Vec<u8>) {
    let mut p = Packer::new(names, notes, out);
    p.head(m, m.fields.len());
    for (name, field) in &m.fields {
        p.field(name, field);
    }
    p.event(m.event.as_ref());
}

/// A message packed piece by piece, as `pack` writes it: its head, then each of the fields the head
/// counts, then its event (`event` ends it). A decoder that keeps a record as the facts it is made
/// of (a Lumberjack event: `decoders/lumberjack/kept.rs`) packs them without building the message,
/// its field list and values: building, packing and dropping each held event's message was ~9 % of
/// converting a stalled capture.
pub struct Packer<'a> {
    names: &'a mut Names,
    notes: bool,
    out: &'a mut Vec<u8>,
}

/// A field value that is no tree (what a kept record's facts are), packed as `pack` packs the
/// `Value` it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Unsigned(u64),
}

impl From<Scalar> for Value {
    #[inline(always)]
    fn from(s: Scalar) -> Value {
        match s {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Unsigned(u) => u.into(),
        }
    }
}

impl Scalar {
    /// `Value::as_i64` of the value it stands for.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Scalar::Unsigned(u) => i64::try_from(u).ok(),
            Scalar::Null | Scalar::Bool(_) => None,
        }
    }
}

impl Json for Scalar {
    /// As the `Value` it stands for is written.
    fn write_json(&self, out: &mut String) {
        match *self {
            Scalar::Null => out.push_str("null"),
            Scalar::Bool(b) => out.push_str(if b { "true" } else { "false" }),
            Scalar::Unsigned(u) => integer(out, u),
        }
    }
}

impl From<Option<u64>> for Scalar {
    fn from(v: Option<u64>) -> Scalar {
        v.map_or(Scalar::Null, Scalar::Unsigned)
    }
}

impl<'a> Packer<'a> {
    pub fn new(names: &'a mut Names, notes: bool, out: &'a mut Vec<u8>) -> Self {
        Packer { names, notes, out }
    }

    /// `m`'s head (everything but its fields and event: those are packed after it, `fields` of
    /// them).
    pub fn head(&mut self, m: &Message, fields: usize) {
        let out = &mut *self.out;
        let mut flags = match m.direction {
            None => 0,
            Some(Direction::C2S) => C2S,
            Some(Direction::S2C) => S2C,
        };
        flags |= match m.acked {
            None => 0,
            Some(false) => ACKED_FALSE,
            Some(true) => ACKED_TRUE,
        };
        for (set, bit) in [
            (m.offset.is_some(), OFFSET),
            (m.frame.is_some(), FRAME),
            (m.ts.is_some(), TS),
            (m.version.is_some(), VERSION),
        ] {
            if set {
                flags |= bit;
            }
        }
        out.push(flags);
        varint(out, u64::from(self.names.id(m.protocol)));
        varint(out, u64::from(self.names.id(m.kind)));
        if let Some(v) = m.version {
            varint(out, u64::from(self.names.id(v)));
        }
        for v in [m.offset, m.frame].into_iter().flatten() {
            varint(out, v);
        }
        if let Some(ts) = m.ts {
            // fixed: a capture's nanoseconds since 1970 are a 9-byte varint, read a byte at a time
            out.extend_from_slice(&ts.to_le_bytes());
        }
        varint(out, m.length);
        varint(out, fields as u64);
    }

    pub fn field(&mut self, name: &'static str, v: &Value) {
        varint(self.out, u64::from(self.names.id(name)));
        value(self.out, v);
    }

    /// A field that is no tree, written with no `Value` made of it.
    pub fn scalar(&mut self, name: &'static str, v: Scalar) {
        varint(self.out, u64::from(self.names.id(name)));
        scalar(self.out, v);
    }

    /// The message's event, last.
    pub fn event(self, event: Option<&Document>) {
        let out = self.out;
        match event {
            None => out.push(NO_EVENT),
            Some(doc) => match doc.message_at().filter(|_| self.notes) {
                None => {
                    out.push(TEXT);
                    bytes(out, doc.text().as_bytes());
                }
                Some((start, end)) => {
                    out.push(NOTED_TEXT);
                    bytes(out, doc.text().as_bytes());
                    out.extend_from_slice(&start.to_le_bytes());
                    out.extend_from_slice(&end.to_le_bytes());
                }
            },
        }
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A value that is no tree, packed (`value` packs a `Value` of it so too).
#[inline(always)]
fn scalar(out: &mut Vec<u8>, v: Scalar) {
    match v {
        Scalar::Null => out.push(NULL),
        Scalar::Bool(false) => out.push(FALSE),
        Scalar::Bool(true) => out.push(TRUE),
        Scalar::Unsigned(u) => {
            out.push(UNSIGNED);
            varint(out, u);
        }
    }
}

fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => scalar(out, Scalar::Null),
        Value::Bool(b) => scalar(out, Scalar::Bool(*b)),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                scalar(out, Scalar::Unsigned(u));
            } else if let Some(i) = n.as_i64() {
                out.push(NEGATIVE);
                varint(out, zigzag(i));
            } else {
                out.push(FLOAT);
                out.extend_from_slice(&n.as_f64().unwrap_or(f64::NAN).to_le_bytes());
            }
        }
        Value::String(s) => {
            out.push(STRING);
            bytes(out, s.as_bytes());
        }
        Value::Array(items) => {
            out.push(ARRAY);
            varint(out, items.len() as u64);
            for item in items {
                value(out, item);
            }
        }
        Value::Object(map) => {
            out.push(OBJECT);
            varint(out, map.len() as u64);
            for (k, item) in map {
                bytes(out, k.as_bytes());
                value(out, item);
            }
        }
    }
}

/// The message `b` holds (as `pack` wrote it with the same `names`).
pub fn unpack(b: &[u8], names: &Names) -> Option<Message> {
    read::<false>(b, names, &[])
}

/// The message `b` holds with only the fields named in `facts` and no document, the rest's bytes
/// skipped, not read: what a lent record's message says (`SpillStore::lend`). Skipping checks only
/// the bytes' structure, so bytes `unpack` refuses may read here; bytes it reads give its message
/// cut down.
pub fn unpack_facts(b: &[u8], names: &Names, facts: &[&str]) -> Option<Message> {
    read::<true>(b, names, facts)
}

/// The record `b` holds given to `give`, read in place when it can be (`Parts`), else whole
/// (`unpack`); None when `b` is no packed record.
pub fn back<T>(b: &[u8], names: &Names, give: impl FnOnce(Back<'_, '_>) -> T) -> Option<T> {
    match parts(b, names) {
        // (lent, not moved: a `Parts` is half a kilobyte, and moving it from call to call was
        // five copies of it per record)
        Some(mut p) => Some(give(Back::Parts(&mut p))),
        None => unpack(b, names).map(|m| give(Back::Whole(m))),
    }
}

/// What a record taken back from the store is given as (`back`).
#[allow(
    clippy::large_enum_variant,
    reason = "made once and given on at once: a box would be an allocation more per whole record"
)]
pub enum Back<'p, 'a> {
    Parts(&'p mut Parts<'a>),
    Whole(Message),
}

impl Back<'_, '_> {
    /// The record, whole (a `Parts`' fields and document made).
    pub fn into_message(self) -> Message {
        match self {
            Back::Parts(p) => p.to_message(),
            Back::Whole(m) => m,
        }
    }
}

/// Fields a record read in place may have (a Lumberjack event has six).
const MAX_PARTS: usize = 8;

/// A packed record read in place, no field list, value or document made of it: its head as a
/// message without fields or event, its fields (each a `Scalar`: a Lumberjack event's are) and its
/// event's text, borrowed from the bytes. A stalled capture's events are held until the end and
/// written once from here (`SpillStore::take_back`): making each a message, its field list and
/// document only to write and drop them was a quarter of converting bench_shapes' stalled capture.
pub struct Parts<'a> {
    pub head: Message,
    fields: [(&'static str, Scalar); MAX_PARTS],
    len: usize,
    pub event: Option<DocText<'a>>,
}

impl Parts<'_> {
    pub fn fields(&self) -> &[(&'static str, Scalar)] {
        &self.fields[..self.len]
    }

    /// The field named `name`.
    pub fn get(&self, name: &str) -> Option<Scalar> {
        let found = self.fields().iter().find(|(n, _)| *n == name);
        found.map(|&(_, v)| v)
    }

    /// The record, whole: what `unpack` reads of the same bytes.
    pub fn to_message(&self) -> Message {
        let mut m = self.head.clone();
        m.fields = crate::model::Fields::with_capacity(self.len);
        for &(name, v) in &self.fields[..self.len] {
            m.fields.push((name, Value::from(v)));
        }
        m.event = self.event.as_ref().map(DocText::to_document);
        m
    }
}

/// `b`'s record as `Parts`; None when it has a field that is no `Scalar`, more than `MAX_PARTS`
/// fields, or is no packed record.
fn parts<'a>(b: &'a [u8], names: &Names) -> Option<Parts<'a>> {
    let mut r = Reader { b, pos: 0 };
    let head = r.head(names)?;
    let len = r.count().filter(|&n| n <= MAX_PARTS)?;
    let mut fields = [("", Scalar::Null); MAX_PARTS];
    for slot in &mut fields[..len] {
        let name = names.name(r.varint()?)?;
        let v = match r.byte()? {
            NULL => Scalar::Null,
            FALSE => Scalar::Bool(false),
            TRUE => Scalar::Bool(true),
            UNSIGNED => Scalar::Unsigned(r.varint()?),
            _ => return None,
        };
        *slot = (name, v);
    }
    let event = match r.byte()? {
        NO_EVENT => None,
        TEXT => Some(DocText::new(r.str()?, None)),
        NOTED_TEXT => {
            let text = r.str()?;
            Some(DocText::new(text, Some((r.u32()?, r.u32()?))))
        }
        _ => return None,
    };
    (r.pos == b.len()).then_some(Parts {
        head,
        fields,
        len,
        event,
    })
}

/// `FACTS`: read only the fields named in `facts` and not the document (`unpack_facts`), else all
/// of it (a constant: reading a whole record, as nearly every read does, tests nothing per field).
fn read<const FACTS: bool>(b: &[u8], names: &Names, facts: &[&str]) -> Option<Message> {
    let mut r = Reader { b, pos: 0 };
    let mut m = r.head(names)?;
    let n = r.count()?;
    m.fields = crate::model::Fields::with_capacity(if FACTS { facts.len().min(n) } else { n });
    for _ in 0..n {
        let name = names.name(r.varint()?)?;
        if FACTS && !lists(facts, name) {
            r.skip_field()?;
        } else {
            m.fields.push((name, r.value(0)?));
        }
    }
    m.event = match r.byte()? {
        NO_EVENT => None,
        TEXT if !FACTS => Some(Document::canonical(r.str()?)),
        NOTED_TEXT if !FACTS => {
            let text = r.str()?;
            Some(Document::canonical_noted(text, (r.u32()?, r.u32()?)))
        }
        TEXT => {
            r.skip()?;
            None
        }
        NOTED_TEXT => {
            r.skip()?;
            r.fixed::<8>()?;
            None
        }
        _ => return None,
    };
    (r.pos == b.len()).then_some(m)
}

/// Whether `facts` holds `name`, compared where it is called: `<[&str]>::contains` is a call of
/// its own wherever the crate's codegen units split it off (+1 % of lending a stalled capture's
/// events, callgrind, after an unrelated change moved it).
#[allow(clippy::manual_contains, reason = "`contains` is the call this avoids")]
#[inline(always)]
fn lists(facts: &[&str], name: &str) -> bool {
    facts.iter().any(|&f| f == name)
}

/// serde_json's own nesting limit: deeper values were never packed.
const MAX_DEPTH: usize = 256;

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A record's head (`Packer::head`): its message without fields or event.
    #[inline(always)]
    fn head(&mut self, names: &Names) -> Option<Message> {
        let flags = self.byte()?;
        let mut m = Message::new(names.name(self.varint()?)?, names.name(self.varint()?)?);
        m.direction = match flags & (C2S | S2C) {
            C2S => Some(Direction::C2S),
            S2C => Some(Direction::S2C),
            _ => None,
        };
        m.acked = match flags & (ACKED_FALSE | ACKED_TRUE) {
            ACKED_FALSE => Some(false),
            ACKED_TRUE => Some(true),
            _ => None,
        };
        if flags & VERSION != 0 {
            m.version = Some(names.name(self.varint()?)?);
        }
        if flags & OFFSET != 0 {
            m.offset = Some(self.varint()?);
        }
        if flags & FRAME != 0 {
            m.frame = Some(self.varint()?);
        }
        if flags & TS != 0 {
            m.ts = Some(i64::from_le_bytes(self.fixed()?));
        }
        m.length = self.varint()?;
        Some(m)
    }

    fn byte(&mut self) -> Option<u8> {
        let v = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(v)
    }

    /// Most are names, counts and small numbers: one byte, read where it is called.
    #[inline(always)]
    fn varint(&mut self) -> Option<u64> {
        let first = *self.b.get(self.pos)?;
        if first < 0x80 {
            self.pos += 1;
            return Some(u64::from(first));
        }
        self.long_varint()
    }

    fn long_varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            v |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// The next `N` bytes (a float's, a note's).
    fn fixed<const N: usize>(&mut self) -> Option<[u8; N]> {
        let raw = self.b.get(self.pos..self.pos.checked_add(N)?)?;
        self.pos += N;
        raw.try_into().ok()
    }

    fn u32(&mut self) -> Option<u32> {
        self.fixed().map(u32::from_le_bytes)
    }

    /// A count of items that each take at least one byte (so a bad count allocates nothing).
    fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.b.len() - self.pos).then_some(n)
    }

    fn skip(&mut self) -> Option<()> {
        self.pos += self.count()?;
        Some(())
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = self.count()?;
        let s = crate::model::text::utf8(&self.b[self.pos..self.pos + n])?;
        self.pos += n;
        Some(s)
    }

    /// `skip_value` of a field: a null, a boolean or an unsigned number (what a lent record's
    /// skipped fields nearly all are) past where this is called, the rest by `skip_value`.
    #[inline(always)]
    fn skip_field(&mut self) -> Option<()> {
        match *self.b.get(self.pos)? {
            NULL | FALSE | TRUE => {
                self.pos += 1;
                Some(())
            }
            UNSIGNED => {
                self.pos += 1;
                self.varint().map(drop)
            }
            _ => self.skip_value(0),
        }
    }

    /// Past a value, allocating nothing: its structure checked (tags, counts, lengths), not its
    /// text or numbers.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.byte()? {
            NULL | FALSE | TRUE => {}
            UNSIGNED | NEGATIVE => {
                self.varint()?;
            }
            FLOAT => {
                self.fixed::<8>()?;
            }
            STRING => self.skip()?,
            ARRAY => {
                for _ in 0..self.count()? {
                    self.skip_value(depth + 1)?;
                }
            }
            OBJECT => {
                for _ in 0..self.count()? {
                    self.skip()?;
                    self.skip_value(depth + 1)?;
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// A value: a null or an unsigned number (what most fields are) read where this is called,
    /// the others by `tree`; none deeper than `MAX_DEPTH` (as `skip_value`).
    #[inline(always)]
    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.byte()? {
            NULL => Some(Value::Null),
            UNSIGNED => Some(Value::Number(self.varint()?.into())),
            tag => self.tree(tag, depth),
        }
    }

    /// The value tagged `tag` (its tag read) that is not a null or an unsigned number.
    fn tree(&mut self, tag: u8, depth: usize) -> Option<Value> {
        Some(match tag {
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            NEGATIVE => {
                let z = self.varint()?;
                Value::Number((((z >> 1) as i64) ^ -((z & 1) as i64)).into())
            }
            FLOAT => Value::Number(Number::from_f64(f64::from_le_bytes(self.fixed()?))?),
            STRING => Value::String(self.str()?.to_owned()),
            ARRAY => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            OBJECT => {
                let n = self.count()?;
                let mut map = Map::with_capacity(n);
                for _ in 0..n {
                    let k = self.str()?.to_owned();
                    map.insert(k, self.value(depth + 1)?);
                }
                Value::Object(map)
            }
            _ => return None,
        })
    }
}

/// Fuzz target `held`: arbitrary bytes read as a packed record (as a damaged spill file would give
/// them back) never panic, what they read as packs to bytes that read as the same message, and
/// read for some facts only (a lent record) they are that message with only those fields and no
/// document.
#[cfg(any(test, fuzzing))]
pub fn fuzz(data: &[u8]) {
    const FACTS: [&str; 2] = ["seq", "resend_of"];
    let mut names = fuzz_names();
    let facts = unpack_facts(data, &names, &FACTS);
    let whole = unpack(data, &names);
    // read in place or whole, the same record
    assert_eq!(back(data, &names, |b| b.into_message()), whole);
    if let Some(p) = parts(data, &names) {
        assert_eq!(
            p.event.and_then(|d| d.message_at()),
            whole.as_ref().and_then(|m| m.event.as_ref()?.message_at())
        );
    }
    let Some(m) = whole else {
        return;
    };
    let mut cut = m.clone();
    cut.event = None;
    cut.fields.retain(|(name, _)| FACTS.contains(name));
    assert_eq!(facts, Some(cut));
    let mut again = Vec::new();
    pack(&m, &mut names, true, &mut again);
    let back = unpack(&again, &names);
    assert_eq!(back.as_ref(), Some(&m));
    // (a document's equality is its text's: where its message lies is checked apart)
    let note = |m: &Message| m.event.as_ref().and_then(Document::message_at);
    assert_eq!(back.as_ref().map(note), Some(note(&m)));
}

/// The names the fuzz target's bytes can refer to (ids 0 to 6).
#[cfg(any(test, fuzzing))]
fn fuzz_names() -> Names {
    let mut names = Names::default();
    for name in [
        "lumberjack",
        "event",
        "window",
        "2",
        "seq",
        "resend_of",
        "acked_events",
    ] {
        names.id(name);
    }
    names
}

#[cfg(test)]
mod fuzz_tests {
    use super::*;

    #[test]
    fn held_regressions() {
        crate::fuzzing::replay("held", fuzz);
    }

    #[test]
    fn where_the_message_lies_is_kept_with_the_text_when_it_fits_it() {
        let names = &mut fuzz_names();
        let text = r#"{"a":1,"message":"h\u00e9"}"#;
        let at = (18, 25); // the characters between the message's quotes
        let mut m = Message::new("lumberjack", "event");
        m.event = Some(Document::canonical_noted(text, at));
        let mut bytes = Vec::new();
        pack(&m, names, true, &mut bytes);
        let back = unpack(&bytes, names)
            .and_then(|m| m.event)
            .expect("its document");
        assert_eq!(back.message_at(), Some(at));
        let mut scratch = String::new();
        assert_eq!(back.message_in(&mut scratch), Some("h\u{e9}"));
        // a note off the text's characters (as damaged bytes would give) is dropped: looked up
        for bad in [(18, 99), (0, 25), (26, 25)] {
            let doc = Document::canonical_noted(text, bad);
            assert_eq!(doc.message_at(), None, "{bad:?}");
            assert_eq!(doc.message_in(&mut scratch), Some("h\u{e9}"));
        }
        // not noted, or the store's owner does not read notes: none comes back
        let noted = m.event.take();
        for (doc, notes) in [(Document::canonical(text), true), (noted.unwrap(), false)] {
            m.event = Some(doc);
            bytes.clear();
            pack(&m, names, notes, &mut bytes);
            let back = unpack(&bytes, names)
                .and_then(|m| m.event)
                .expect("its document");
            assert_eq!(back.message_at(), None);
            assert_eq!(back.message_in(&mut scratch), Some("h\u{e9}"));
        }
    }

    /// A value nested deeper than the reader's limit is refused whatever it is, a null or a
    /// number as much as an array (a lent record's skip refuses it too: the two reads agree).
    #[test]
    fn values_past_the_depth_limit_are_refused() {
        let mut names = fuzz_names();
        for (leaf, depth) in [
            (Value::Null, MAX_DEPTH),
            (Value::from(7u64), MAX_DEPTH),
            (Value::Bool(true), MAX_DEPTH),
            (Value::Null, MAX_DEPTH + 1),
            (Value::from(7u64), MAX_DEPTH + 1),
        ] {
            let mut nested = leaf.clone();
            for _ in 0..depth {
                nested = Value::Array(vec![nested]);
            }
            let mut m = Message::new("lumberjack", "event");
            m.set("seq", nested);
            let mut bytes = Vec::new();
            pack(&m, &mut names, true, &mut bytes);
            let read = unpack(&bytes, &names);
            assert_eq!(
                read.is_some(),
                depth <= MAX_DEPTH,
                "{leaf} at depth {depth}"
            );
            assert_eq!(
                unpack_facts(&bytes, &names, &["window"]).is_some(),
                depth <= MAX_DEPTH,
                "{leaf} at depth {depth}, skipped"
            );
            fuzz(&bytes);
        }
    }

    /// A record whose fields are all scalars (at most `MAX_PARTS`) is read in place, any other
    /// whole; either way it is the message `unpack` reads, and a scalar is written as the value
    /// it stands for.
    #[test]
    fn a_record_read_in_place_is_the_record_unpacked() {
        let mut names = fuzz_names();
        let scalars = [
            Scalar::Null,
            Scalar::Bool(false),
            Scalar::Bool(true),
            Scalar::Unsigned(0),
            Scalar::Unsigned(u64::MAX),
        ];
        for v in scalars {
            let (mut mine, mut its) = (String::new(), String::new());
            v.write_json(&mut mine);
            crate::model::json::value(&mut its, &Value::from(v));
            assert_eq!(mine, its);
            let as_i64 = Value::from(v).as_i64();
            assert_eq!(v.as_i64(), as_i64, "{v:?}");
        }
        let cases: [(usize, Option<Value>, bool); 6] = [
            (6, None, true),
            (MAX_PARTS, None, true),
            (MAX_PARTS + 1, None, false),
            (2, Some(Value::from("text")), false),
            (2, Some(Value::from(-3)), false),
            (2, Some(serde_json::json!({"stream": 1})), false),
        ];
        for (n, odd, in_place) in cases {
            for event in [
                None,
                Some(Document::canonical(r#"{"message":"hi"}"#)),
                Some(Document::canonical_noted(r#"{"message":"hi"}"#, (12, 14))),
            ] {
                let mut m = Message::new("lumberjack", "event");
                m.version = Some("2");
                m.ts = Some(-7);
                m.acked = Some(false);
                for i in 0..n {
                    let name = ["seq", "window", "resend_of", "acked_events"][i % 4];
                    m.fields
                        .push((name, Value::from(scalars[i % scalars.len()])));
                }
                if let Some(v) = &odd {
                    m.set("resend_of", v.clone());
                }
                m.event = event;
                let mut bytes = Vec::new();
                pack(&m, &mut names, true, &mut bytes);
                let note = m.event.as_ref().and_then(Document::message_at);
                let read = back(&bytes, &names, |read| {
                    assert_eq!(matches!(read, Back::Parts(_)), in_place, "{m:?}");
                    if let Back::Parts(p) = &read {
                        assert_eq!(p.event.and_then(|d| d.message_at()), note);
                    }
                    read.into_message()
                });
                assert_eq!(read, Some(m));
                fuzz(&bytes);
            }
        }
    }

    #[test]
    fn a_packed_message_reads_back_through_the_fuzz_body() {
        let mut names = fuzz_names();
        let mut m = Message::new("lumberjack", "event");
        m.version = Some("2");
        m.set("seq", 7u64);
        m.set(
            "resend_of",
            serde_json::json!({"stream": 1, "f": -2.5, "s": ["x", null, true]}),
        );
        m.event = Some(Document::canonical(r#"{"message":"hi"}"#));
        let mut bytes = Vec::new();
        pack(&m, &mut names, true, &mut bytes);
        assert_eq!(unpack(&bytes, &names), Some(m));
        fuzz(&bytes);
        for cut in 0..bytes.len() {
            fuzz(&bytes[..cut]); // every prefix: None, never a panic
            assert!(unpack(&bytes[..cut], &names).is_none());
        }
    }
}
