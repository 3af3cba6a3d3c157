//! The record contract's Hercules form (docs/hercules.md): every message record becomes one
//! Hercules event that Java's EventReader and .NET's EventsBinaryReader read, written straight
//! from the record (no tree of values in between).
//!
//! Two steps, because part of the mapping belongs to a whole output, which can span several
//! captures: an `Encoder` (one per capture's decoding session, or per writer for records that
//! come from elsewhere) maps each message into an event body as it is decoded, and the output's
//! `Writer` gives the bodies their headers in output order: the uuid5 id, with a counter for
//! consecutive messages of one position, and for records without a time the previous event's.
//! A renamed key is reported once per output (`Note`).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "ISO times have 4-digit years (seconds below 2^38, ticks below 2^62); counts and positions are of records and buffers in memory; tag counts are below u16::MAX by construction"
)]

mod binary;
mod text;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use serde_json::Map;
use sha1::{Digest, Sha1};
use sha2::Sha256;

use crate::formats::hercules::types::{
    is_tag_name, BIGINT_TAG, CONTAINER, DOUBLE, EMPTY_NAME, FLAG, ITEM_TAG, LONG, MAX_KEY_BYTES,
    MAX_TAGS, NULL, STRING, TICKS_PER_SECOND, VECTOR, VERSION,
};
use crate::model::json::integer;
use crate::model::json::Binary;
use crate::model::pyrepr::str_repr;
use crate::model::text::py_strip;
use crate::model::text::{days, hex};
use crate::model::{
    Delivery, Direction, Document, Field, Finding, Message, Severity, Stamp, Value,
};

/// wirelog's uuid5 namespace, 6f1d0e2a-4c57-5e6b-9a51-77697265c06f.
const NAMESPACE: [u8; 16] = [
    0x6f, 0x1d, 0x0e, 0x2a, 0x4c, 0x57, 0x5e, 0x6b, 0x9a, 0x51, 0x77, 0x69, 0x72, 0x65, 0xc0, 0x6f,
];
/// Bytes of an over-long escaped name kept before its hash.
const SHORTENED: usize = 200;
/// Escaped names remembered per encoder (escaping again is cheap; the bound keeps memory flat).
const NAME_CACHE_MAX: usize = 10_000;
/// Version, timestamp and UUID: written by the `Writer`.
const HEADER: usize = 25;

/// A message's protocol fields: the core's own list, or an object read back from JSON.
#[derive(Clone, Copy)]
pub enum Fields<'a> {
    Pairs(&'a [(&'static str, Field)]),
    Object(&'a Map<String, Value>),
}

impl Fields<'_> {
    fn is_empty(&self) -> bool {
        match self {
            Fields::Pairs(p) => p.is_empty(),
            Fields::Object(m) => m.is_empty(),
        }
    }

    fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Fields::Pairs(p) => p.iter().find(|(n, _)| *n == name).map(|(_, v)| &**v),
            Fields::Object(m) => m.get(name),
        }
    }
}

/// One message as the mapping reads it: the common columns (None: null), the protocol fields
/// and the document.
pub struct View<'a> {
    pub capture: &'a str,
    pub stream: Option<u64>,
    pub client: Option<&'a str>,
    pub server: Option<&'a str>,
    pub protocol: &'a str,
    pub kind: &'a str,
    pub direction: Option<&'a str>,
    pub offset: Option<i128>,
    pub length: Option<i128>,
    pub frame: Option<i128>,
    pub ts: Option<i64>,
    pub version: Option<&'a str>,
    pub acked: Option<bool>,
    pub event_id: Option<Cow<'a, str>>,
    pub delivery: Option<&'a str>,
    pub fields: Fields<'a>,
    pub event: Option<&'a Document>,
}

impl<'a> View<'a> {
    /// A core message of `capture` (stamped with its stream when it has one).
    pub fn message(capture: &'a str, stamp: Option<&'a Stamp>, m: &'a Message) -> Self {
        View {
            capture,
            stream: stamp.map(|s| s.stream),
            client: stamp.map(|s| s.client.as_str()),
            server: stamp.map(|s| s.server.as_str()),
            protocol: m.protocol,
            kind: m.kind,
            direction: m.direction.map(Direction::as_str),
            offset: m.offset.map(i128::from),
            length: Some(i128::from(m.length)),
            frame: m.frame.map(i128::from),
            ts: m.ts,
            version: m.version,
            acked: m.acked,
            event_id: m.event_id.map(|id| Cow::Owned(id.text())),
            delivery: m.delivery.map(Delivery::as_str),
            fields: Fields::Pairs(&m.fields),
            event: m.event.as_ref(),
        }
    }
}

/// A mapping note (a renamed or shortened key, a cut object), at the record where it was first
/// seen.
pub struct Note {
    key: String,
    finding: Finding,
    capture: String,
    stamp: Option<Stamp>,
}

impl Note {
    /// The sentence `wirelog convert` prints on stderr.
    pub fn message(&self) -> &str {
        &self.finding.message
    }

    /// The note as an NDJSON finding line (docs/records.md).
    pub fn line(&self) -> String {
        let mut out = String::new();
        super::json::finding_line(
            &mut out,
            &self.capture,
            self.stamp.as_ref(),
            &self.finding,
            None,
        );
        out
    }
}

/// Event bodies waiting for their headers, and what the headers are made of.
#[derive(Default)]
pub struct Events {
    /// Per event: HEADER bytes the writer fills, then the tags.
    data: Vec<u8>,
    /// Per event: the position its UUID is derived from.
    keys: String,
    marks: Vec<Mark>,
    notes: Vec<Note>,
}

impl Events {
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }
}

struct Mark {
    end: usize,
    key_end: usize,
    ticks: Option<i64>,
}

/// A text column of any Arrow string layout (Spark and pyarrow choose theirs).
enum Texts<'a> {
    Small(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
    Missing,
}

impl<'a> Texts<'a> {
    fn of(a: Option<&'a ArrayRef>) -> Self {
        match a.map(|a| (a, a.data_type())) {
            Some((a, DataType::Utf8)) => Texts::Small(a.as_string::<i32>()),
            Some((a, DataType::LargeUtf8)) => Texts::Large(a.as_string::<i64>()),
            Some((a, DataType::Utf8View)) => Texts::View(a.as_string_view()),
            _ => Texts::Missing,
        }
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Texts::Small(a) => a.is_valid(i).then(|| a.value(i)),
            Texts::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Texts::View(a) => a.is_valid(i).then(|| a.value(i)),
            Texts::Missing => None,
        }
    }
}

/// An integer column (Int64 or Int32), or a timestamp column as nanoseconds.
fn int_at(a: Option<&ArrayRef>, i: usize) -> Option<i64> {
    let a = a.filter(|a| a.is_valid(i))?;
    Some(match a.data_type() {
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i),
        DataType::Int32 => i64::from(a.as_primitive::<Int32Type>().value(i)),
        // a time past the i64 nanosecond range (years beyond 2262) is no time
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => a
                .as_primitive::<TimestampSecondType>()
                .value(i)
                .checked_mul(1_000_000_000)?,
            TimeUnit::Millisecond => a
                .as_primitive::<TimestampMillisecondType>()
                .value(i)
                .checked_mul(1_000_000)?,
            TimeUnit::Microsecond => a
                .as_primitive::<TimestampMicrosecondType>()
                .value(i)
                .checked_mul(1000)?,
            TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(i),
        },
        _ => return None,
    })
}

/// JSON text of a row's `fields` or `event` (null when absent or not JSON).
fn json_at(t: &Texts<'_>, i: usize) -> Value {
    t.get(i)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null)
}

/// Maps messages to event bodies (see the module docstring).
#[derive(Default)]
pub struct Encoder {
    mapper: Mapper,
    events: Events,
}

impl Encoder {
    /// Map one message into the next event body.
    pub fn push(&mut self, v: &View<'_>) {
        let out = &mut self.events.data;
        out.extend_from_slice(&[0; HEADER]);
        let with_fields = !v.fields.is_empty();
        let event = v.event.filter(|e| !e.is_null());
        let top = 1 + u16::from(with_fields) + u16::from(event.is_some());
        out.extend_from_slice(&top.to_be_bytes());
        name(out, b"wirelog");
        out.push(CONTAINER);
        common(out, v);
        if with_fields {
            name(out, b"fields");
            out.push(CONTAINER);
            match v.fields {
                Fields::Pairs(pairs) => self.mapper.pairs(out, pairs),
                Fields::Object(map) => self.mapper.object(out, map),
            }
        }
        if let Some(e) = event {
            name(out, b"event");
            self.mapper.document(out, e);
        }
        let keys = &mut self.events.keys;
        keys.push_str(v.capture);
        keys.push('\0');
        match v.stream {
            Some(s) => integer(keys, s),
            None => keys.push_str("None"),
        }
        keys.push('\0');
        keys.push_str(v.direction.unwrap_or("None"));
        keys.push('\0');
        match v.offset {
            Some(o) => integer(keys, o),
            None => keys.push_str("None"),
        }
        keys.push('\0');
        keys.push_str(v.protocol);
        keys.push('\0');
        keys.push_str(v.kind);
        self.events.marks.push(Mark {
            end: self.events.data.len(),
            key_end: keys.len(),
            ticks: event_ticks(v),
        });
        for (key, mut f) in self.mapper.found.drain(..) {
            f.direction = match v.direction {
                Some("c2s") => Some(Direction::C2S),
                Some("s2c") => Some(Direction::S2C),
                _ => None,
            };
            f.offset = v.offset.and_then(|o| u64::try_from(o).ok());
            f.frame = v.frame.and_then(|o| u64::try_from(o).ok());
            f.ts = v.ts;
            f.stream = v.stream;
            let stamp = match (v.stream, v.client, v.server) {
                (Some(stream), Some(client), Some(server)) => Some(Stamp {
                    stream,
                    client: client.to_owned(),
                    server: server.to_owned(),
                }),
                _ => None,
            };
            self.events.notes.push(Note {
                key,
                finding: f,
                capture: v.capture.to_owned(),
                stamp,
            });
        }
    }

    /// The `record = 'message'` rows of a batch in the record schema (docs/schema.md: the rows
    /// of Parquet files and of the Spark source), fields and event read back from their JSON; a
    /// `ts_ns` column, when there is one, gives the exact capture time.
    pub fn push_rows(&mut self, batch: &RecordBatch) {
        let col = |name: &str| batch.column_by_name(name);
        let text = |name: &str| Texts::of(col(name));
        let (record, capture, client, server) = (
            text("record"),
            text("capture"),
            text("client"),
            text("server"),
        );
        let (direction, protocol, kind, version) = (
            text("direction"),
            text("protocol"),
            text("kind"),
            text("version"),
        );
        let (fields, event) = (text("fields"), text("event"));
        let (event_id, delivery) = (text("event_id"), text("delivery"));
        let ts = col("ts_ns").or(col("ts"));
        let acked = col("acked").filter(|a| a.data_type() == &DataType::Boolean);
        for i in 0..batch.num_rows() {
            if record.get(i) != Some("message") {
                continue;
            }
            let fields = match json_at(&fields, i) {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            let event = Document::from(json_at(&event, i));
            let number = |name: &str| int_at(col(name), i).map(i128::from);
            self.push(&View {
                capture: capture.get(i).unwrap_or(""),
                stream: int_at(col("stream"), i).and_then(|s| u64::try_from(s).ok()),
                client: client.get(i),
                server: server.get(i),
                protocol: protocol.get(i).unwrap_or(""),
                kind: kind.get(i).unwrap_or(""),
                direction: direction.get(i),
                offset: number("offset"),
                length: number("length"),
                frame: number("frame"),
                ts: int_at(ts, i),
                version: version.get(i),
                acked: acked
                    .filter(|a| a.is_valid(i))
                    .map(|a| a.as_boolean().value(i)),
                event_id: event_id.get(i).map(Cow::Borrowed),
                delivery: delivery.get(i),
                fields: Fields::Object(&fields),
                event: Some(&event),
            });
        }
    }

    /// The bodies mapped since the last take.
    pub fn take(&mut self) -> Events {
        // The next take is likely as big: growing the buffers by doubling copies them each time.
        let next = Events {
            data: Vec::with_capacity(self.events.data.len() + self.events.data.len() / 4),
            keys: String::with_capacity(self.events.keys.len() + self.events.keys.len() / 4),
            marks: Vec::with_capacity(self.events.marks.len()),
            notes: Vec::new(),
        };
        std::mem::replace(&mut self.events, next)
    }
}

/// The state of one output (see the module docstring).
#[derive(Default)]
pub struct Writer {
    last: String,
    repeat: u64,
    /// The time of the latest event, for records without one.
    ticks: i64,
    reported: HashSet<String>,
}

impl Writer {
    /// The bytes of `events`, headers filled, and their notes not reported before in this output.
    pub fn finish(&mut self, events: Events) -> (Vec<u8>, Vec<Note>) {
        let Events {
            mut data,
            keys,
            marks,
            notes,
        } = events;
        let (mut start, mut key_start) = (0, 0);
        for m in &marks {
            let key = &keys[key_start..m.key_end];
            if key == self.last {
                self.repeat += 1;
            } else {
                self.repeat = 0;
                self.last.clear();
                self.last.push_str(key);
            }
            self.ticks = m.ticks.unwrap_or(self.ticks);
            let head = &mut data[start..start + HEADER];
            head[0] = VERSION;
            head[1..9].copy_from_slice(&self.ticks.to_be_bytes());
            head[9..].copy_from_slice(&uuid5(key, self.repeat));
            (start, key_start) = (m.end, m.key_end);
        }
        let notes = notes
            .into_iter()
            .filter(|n| self.reported.insert(n.key.clone()))
            .collect();
        (data, notes)
    }
}

/// `uuid5(NAMESPACE, key ␀ repeat)` (RFC 4122 §4.3, as Python's uuid.uuid5).
fn uuid5(key: &str, repeat: u64) -> [u8; 16] {
    let mut h = Sha1::new();
    h.update(NAMESPACE);
    h.update(key.as_bytes());
    h.update(b"\0");
    h.update(itoa::Buffer::new().format(repeat).as_bytes());
    let digest = h.finalize();
    let mut u = [0u8; 16];
    u.copy_from_slice(&digest[..16]);
    u[6] = (u[6] & 0x0f) | 0x50;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

/// The event time: a Hercules event's own, the document's ISO 8601 `@timestamp`, else the capture
/// time; None when the record has none.
fn event_ticks(v: &View<'_>) -> Option<i64> {
    if v.protocol == "hercules" {
        match v.fields.get("timestamp") {
            Some(Value::Number(n)) if n.as_i64().is_some() => return n.as_i64(),
            Some(Value::Bool(b)) => return Some(i64::from(*b)), // Python's bool is an int
            _ => {}
        }
    }
    if let Some(text) = v.event.and_then(|doc| doc.str_member("@timestamp")) {
        if let Some(ticks) = iso_ticks(&text) {
            return Some(ticks);
        }
    }
    v.ts.map(|ts| ts.div_euclid(100))
}

/// An ISO 8601 time (`YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH[:]MM]`, as Beats write @timestamp) in
/// 100-ns Unix ticks (7 fractional digits kept); None when it is not one or not a valid time
/// (Python's `datetime.fromisoformat` rules: years 1..9999, offsets under 24 hours).
pub fn iso_ticks(text: &str) -> Option<i64> {
    let s = py_strip(text).as_bytes();
    let digit = |i: usize| {
        s.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let num = |at: usize, n: usize| (at..at + n).try_fold(0, |acc, i| Some(acc * 10 + digit(i)?));
    let sep = |i: usize, c: u8| s.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let mut i = 19;
    let mut frac = 0;
    if matches!(s.get(i), Some(b'.' | b',')) {
        i += 1;
        let start = i;
        while digit(i).is_some() {
            i += 1;
        }
        if i == start {
            return None;
        }
        for k in 0..7 {
            frac = frac * 10 + if start + k < i { digit(start + k)? } else { 0 };
        }
    }
    let offset = match s.get(i) {
        None => 0,
        Some(b'Z') if i + 1 == s.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let hh = num(i + 1, 2)?;
            let at = if sep(i + 3, b':') { i + 4 } else { i + 3 };
            let mm = num(at, 2)?;
            if at + 2 != s.len() {
                return None;
            }
            let secs = hh * 3600 + mm * 60;
            if secs >= 86_400 {
                return None;
            }
            if sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        Some(_) => return None,
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let valid = (1..=9999).contains(&year)
        && (1..=12).contains(&month)
        && (1..=month_days).contains(&day)
        && hour < 24
        && minute < 60
        && second < 60;
    if !valid {
        return None;
    }
    let date = days(year, month as u32, day as u32);
    let seconds = date * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(seconds * TICKS_PER_SECOND + frac)
}

/// A tag name: u8 length and bytes (names are at most 255 bytes by construction).
fn name(out: &mut Vec<u8>, raw: &[u8]) {
    out.push(raw.len() as u8);
    out.extend_from_slice(raw);
}

/// A String value's bytes: i32 length and the UTF-8 bytes.
fn string(out: &mut Vec<u8>, raw: &[u8]) {
    length(out, raw.len());
    out.extend_from_slice(raw);
}

fn length(out: &mut Vec<u8>, n: usize) {
    // Lengths come from bodies the decoders capped far below 2^31.
    out.extend_from_slice(&(n.min(i32::MAX as usize) as i32).to_be_bytes());
}

/// An integer outside the signed 64-bit range: Container{_xn: String(decimal)}.
fn bigint(out: &mut Vec<u8>, digits: &str) {
    out.extend_from_slice(&1u16.to_be_bytes());
    name(out, BIGINT_TAG);
    out.push(STRING);
    string(out, digits.as_bytes());
}

/// A typed integer value (Long, or the big-integer container).
fn int(out: &mut Vec<u8>, v: i128) {
    match i64::try_from(v) {
        Ok(i) => {
            out.push(LONG);
            out.extend_from_slice(&i.to_be_bytes());
        }
        Err(_) => {
            out.push(CONTAINER);
            bigint(out, &v.to_string());
        }
    }
}

/// A String tag when `s` is not null; how many tags it wrote.
fn text_tag(out: &mut Vec<u8>, key: &[u8], s: Option<&str>) -> u16 {
    let Some(s) = s else { return 0 };
    name(out, key);
    out.push(STRING);
    string(out, s.as_bytes());
    1
}

/// An integer tag when `x` is not null; how many tags it wrote.
fn int_tag(out: &mut Vec<u8>, key: &[u8], x: Option<i128>) -> u16 {
    let Some(x) = x else { return 0 };
    name(out, key);
    int(out, x);
    1
}

/// The `wirelog` container: the common columns that are not null, in the contract's order.
fn common(out: &mut Vec<u8>, v: &View<'_>) {
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    let mut n = text_tag(out, b"protocol", Some(v.protocol))
        + text_tag(out, b"kind", Some(v.kind))
        + text_tag(out, b"capture", Some(v.capture))
        + int_tag(out, b"stream", v.stream.map(i128::from))
        + text_tag(out, b"client", v.client)
        + text_tag(out, b"server", v.server)
        + text_tag(out, b"direction", v.direction)
        + int_tag(out, b"offset", v.offset)
        + int_tag(out, b"length", v.length)
        + int_tag(out, b"frame", v.frame)
        + int_tag(out, b"ts", v.ts.map(i128::from))
        + text_tag(out, b"version", v.version);
    if let Some(acked) = v.acked {
        name(out, b"acked");
        out.extend_from_slice(&[FLAG, u8::from(acked)]);
        n += 1;
    }
    n += text_tag(out, b"event_id", v.event_id.as_deref()) + text_tag(out, b"delivery", v.delivery);
    out[at..at + 2].copy_from_slice(&n.to_be_bytes());
}

/// The Hercules type a JSON value maps to.
fn type_of(v: &Value) -> u8 {
    match v {
        Value::String(_) => STRING,
        Value::Object(_) => CONTAINER,
        Value::Bool(_) => FLAG,
        Value::Number(n) if n.is_i64() => LONG,
        Value::Number(n) if n.is_u64() => CONTAINER, // beyond i64: the big-integer container
        Value::Number(_) => DOUBLE,
        Value::Null => NULL,
        Value::Array(_) => VECTOR,
    }
}

/// JSON values to Hercules values, with the names of keys escaped; what it reports waits in
/// `found` for the record's position.
#[derive(Default)]
struct Mapper {
    names: HashMap<String, String>,
    reported: HashSet<String>,
    found: Vec<(String, Finding)>,
}

impl Mapper {
    /// A document: from the binary form it is kept in, else from its text, else from its values.
    fn document(&mut self, out: &mut Vec<u8>, doc: &Document) {
        if let Some((Binary::HerculesTags, tags)) = doc.kept_binary() {
            if self.hercules_tags(out, tags).is_some() {
                return;
            }
        }
        if self.text(out, doc.text()).is_none() {
            self.value(out, &doc.value());
        }
    }

    /// Type byte and value.
    fn value(&mut self, out: &mut Vec<u8>, v: &Value) {
        out.push(type_of(v));
        self.bare(out, v);
    }

    /// The value without its type byte (as vector elements are written).
    fn bare(&mut self, out: &mut Vec<u8>, v: &Value) {
        match v {
            Value::String(s) => string(out, s.as_bytes()),
            Value::Object(map) => self.object(out, map),
            Value::Bool(b) => out.push(u8::from(*b)),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => out.extend_from_slice(&i.to_be_bytes()),
                (None, Some(u)) => bigint(out, itoa::Buffer::new().format(u)),
                _ => out.extend_from_slice(&n.as_f64().unwrap_or(f64::NAN).to_be_bytes()),
            },
            Value::Null => {}
            Value::Array(items) => self.vector(out, items),
        }
    }

    fn object(&mut self, out: &mut Vec<u8>, map: &Map<String, Value>) {
        let n = self.count(out, map.len());
        for (k, v) in map.iter().take(n) {
            self.key(out, k);
            self.value(out, v);
        }
    }

    fn pairs(&mut self, out: &mut Vec<u8>, pairs: &[(&'static str, Field)]) {
        let n = self.count(out, pairs.len());
        for (k, v) in &pairs[..n] {
            self.key(out, k);
            self.value(out, v);
        }
    }

    /// A container's count: at most MAX_TAGS (the first ones are kept, and the cut reported).
    fn count(&mut self, out: &mut Vec<u8>, n: usize) -> usize {
        if n > MAX_TAGS {
            let text = format!("an object of {n} keys was cut to {MAX_TAGS} tags");
            let key = format!("#{n}");
            self.report(
                "hercules.export-too-many-tags",
                Severity::Error,
                text,
                &key,
                None,
            );
        }
        let n = n.min(MAX_TAGS);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        n
    }

    /// Items of one type other than Vector and Null: a vector of that type; any other array
    /// (empty, mixed, of arrays or nulls, which .NET cannot read) wraps each item as `{_xv: item}`.
    fn vector(&mut self, out: &mut Vec<u8>, items: &[Value]) {
        let first = items.first().map(type_of);
        match first {
            Some(t) if t != VECTOR && t != NULL && items.iter().all(|x| type_of(x) == t) => {
                out.push(t);
                length(out, items.len());
                for x in items {
                    self.bare(out, x);
                }
            }
            _ => {
                out.push(CONTAINER);
                length(out, items.len());
                for x in items {
                    out.extend_from_slice(&1u16.to_be_bytes());
                    name(out, ITEM_TAG);
                    self.value(out, x);
                }
            }
        }
    }

    /// A key's bytes as `key` writes its text: a conventional name (ASCII) is written without
    /// reading it as text; None for a key that is not UTF-8.
    fn key_bytes(&mut self, out: &mut Vec<u8>, raw: &[u8]) -> Option<()> {
        if conventional(raw) {
            name(out, raw);
        } else {
            self.key(out, std::str::from_utf8(raw).ok()?);
        }
        Some(())
    }

    /// A key as a tag name: conventional names as they are, others escaped (and reported).
    fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        if conventional(key.as_bytes()) {
            name(out, key.as_bytes());
        } else if let Some(escaped) = self.names.get(key) {
            name(out, escaped.as_bytes());
        } else {
            let escaped = self.rename(key);
            name(out, escaped.as_bytes());
            if self.names.len() < NAME_CACHE_MAX {
                self.names.insert(key.to_owned(), escaped);
            }
        }
    }

    fn rename(&mut self, key: &str) -> String {
        let escaped = escape_name(key);
        if escaped.len() > MAX_KEY_BYTES {
            let digest = hex(&Sha256::digest(key.as_bytes())[..8]);
            let short = format!("{}_xh{digest}", &escaped[..SHORTENED]);
            let text = format!(
                "key of {} characters is too long for a tag name; written as {} (not reversible)",
                key.chars().count(),
                str_repr(&short)
            );
            self.report(
                "hercules.export-key-truncated",
                Severity::Warning,
                text,
                key,
                None,
            );
            short
        } else {
            if escaped != key {
                let text = format!(
                    "key {} is outside the tag-name rules; written as {} (reversible)",
                    str_repr(key),
                    str_repr(&escaped)
                );
                self.report(
                    "hercules.export-key-renamed",
                    Severity::Info,
                    text,
                    key,
                    Some(&escaped),
                );
            }
            escaped
        }
    }

    fn report(
        &mut self,
        code: &'static str,
        severity: Severity,
        text: String,
        key: &str,
        renamed: Option<&str>,
    ) {
        if !self.reported.insert(key.to_owned()) {
            return;
        }
        let mut f = Finding::new(code, severity, text).field("key", key);
        if let Some(n) = renamed {
            f = f.field("name", n);
        }
        self.found.push((key.to_owned(), f));
    }
}

/// (Fuzzing) A document kept in a binary form maps to the same Hercules bytes as its text.
#[cfg(any(test, fuzzing))]
pub fn maps_as_its_text(doc: &Document) {
    let Some((Binary::HerculesTags, tags)) = doc.kept_binary() else {
        return;
    };
    let (mut direct, mut text) = (Vec::new(), Vec::new());
    if Mapper::default().hercules_tags(&mut direct, tags).is_none() {
        return;
    }
    let mut mapper = Mapper::default();
    if mapper.text(&mut text, doc.text()).is_none() {
        mapper.value(&mut text, &doc.value());
    }
    assert_eq!(direct, text, "{}", doc.text());
}

/// A name the escaping keeps as it is (`is_tag_name` and no `_x`): this runs for every key of
/// every record, so only a name with a `_` is looked at again.
fn conventional(b: &[u8]) -> bool {
    is_tag_name(b) && !(b.contains(&b'_') && b.windows(2).any(|w| w == b"_x"))
}

/// `name` made into a conventional tag name, reversibly (the core's decoder undoes it:
/// `types::unescape_name`): every character outside [A-Za-z0-9.-] and every `_` followed by `x`
/// becomes `_x` + two lowercase hex digits per UTF-8 byte; the empty name is `_x`.
pub fn escape_name(name: &str) -> String {
    if name.is_empty() {
        return EMPTY_NAME.to_owned();
    }
    if conventional(name.as_bytes()) {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len() * 2);
    let mut chars = name.chars().peekable();
    while let Some(ch) = chars.next() {
        let keep = ch.is_ascii_alphanumeric()
            || ch == '.'
            || ch == '-'
            || (ch == '_' && chars.peek() != Some(&'x'));
        if keep {
            out.push(ch);
        } else {
            let mut buf = [0u8; 4];
            for b in ch.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "_x{b:02x}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::hercules::types::unescape_name;
    use serde_json::json;

    fn view<'a>(fields: Fields<'a>, event: Option<&'a Document>) -> View<'a> {
        View {
            capture: "c.pcap",
            stream: Some(3),
            client: Some("10.0.0.1:5"),
            server: Some("10.0.0.2:6306"),
            protocol: "lumberjack",
            kind: "event",
            direction: Some("c2s"),
            offset: Some(40),
            length: Some(12),
            frame: Some(7),
            ts: Some(1_500),
            version: Some("2"),
            acked: Some(true),
            event_id: Some(Cow::Borrowed("0123456789abcdef")),
            delivery: Some("delivered"),
            fields,
            event,
        }
    }

    fn encode(views: &[View<'_>]) -> (Vec<u8>, Vec<Note>) {
        let mut enc = Encoder::default();
        for v in views {
            enc.push(v);
        }
        Writer::default().finish(enc.take())
    }

    #[test]
    fn iso_times_follow_python() {
        assert_eq!(iso_ticks("2019-01-23T00:00:00Z"), Some(0x003700CFC0164000));
        assert_eq!(iso_ticks("1970-01-01T00:00:00.123456789Z"), Some(1_234_567));
        assert_eq!(iso_ticks(" 1970-01-01T01:00:00+01:00\x1c"), Some(0));
        assert_eq!(
            iso_ticks("1970-01-01T00:00:00,5-0001"),
            Some(60 * 10_000_000 + 5_000_000)
        );
        assert_eq!(
            iso_ticks("1970-01-01T00:00:00+05:75"),
            Some(-(5 * 3600 + 75 * 60) * 10_000_000)
        );
        for bad in [
            "1970-01-01T00:00:00+24:00",
            "2023-02-29T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "0000-01-01T00:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+05:3",
            "2024-01-01t00:00:00Z",
            "2024-01-01T00:00:00ZZ",
        ] {
            assert_eq!(iso_ticks(bad), None, "{bad}");
        }
        assert!(iso_ticks("2024-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn names_escape_reversibly() {
        assert_eq!(escape_name("@timestamp"), "_x40timestamp");
        assert_eq!(escape_name("_xv"), "_x5fxv");
        assert_eq!(escape_name(""), "_x");
        assert_eq!(escape_name("log.file.path"), "log.file.path");
        assert!(conventional(b"a_b") && !conventional(b"a_xb") && !conventional(b"a b"));
        assert!(conventional(b"x_") && conventional(b"A-9.z") && conventional(&[b'k'; 255]));
        assert!(!conventional(b"") && !conventional(b"_x") && !conventional(&[b'k'; 256]));
        assert!(!conventional("é".as_bytes()) && !conventional(b"a\0"));
        for n in ["a b", "é_x", "_", "x_", "ключ", "_x40"] {
            assert_eq!(unescape_name(&escape_name(n)), n);
        }
    }

    #[test]
    fn uuid5_is_pythons() {
        // uuid.uuid5(uuid.UUID("6f1d0e2a-4c57-5e6b-9a51-77697265c06f"), "a\0" + "0")
        let u = uuid5("a", 0);
        assert_eq!(u[6] >> 4, 5);
        assert_eq!(u[8] >> 6, 2);
        assert_ne!(uuid5("a", 0), uuid5("a", 1));
    }

    #[test]
    fn an_event_is_read_back_by_the_decoder() {
        let doc = Document::from(
            json!({"@timestamp": "2019-01-23T00:00:00Z", "a b": [1, "x", null], "n": 18446744073709551615u64, "v": [[1]], "e": []}),
        );
        // (a shared value is mapped as its value)
        let fields = [("seq", Field::Shared(crate::model::Shared::new(json!(1))))];
        let (bytes, notes) = encode(&[view(Fields::Pairs(&fields), Some(&doc))]);
        let docs = crate::decoders::hercules::documents(&bytes, 1 << 20);
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0]["timestamp"], json!(0x003700CFC0164000i64));
        assert_eq!(docs[0]["tags"]["wirelog"]["offset"], json!(40));
        assert_eq!(docs[0]["tags"]["fields"]["seq"], json!(1));
        assert_eq!(
            docs[0]["tags"]["event"]["n"]["_xn"],
            json!("18446744073709551615")
        );
        let codes: Vec<_> = notes.iter().map(|n| n.finding.code).collect();
        assert_eq!(codes, ["hercules.export-key-renamed"; 2]);
        assert!(notes[0].message().contains("'@timestamp'"));
        assert!(notes[0].line().contains("\"stream\":3"));
    }

    /// A random document: every JSON type, keys that break the tag-name rules, arrays typed and
    /// mixed, integers around the 64-bit limits, strings with escapes.
    fn random_doc(seed: &mut u64, depth: u32) -> Value {
        fn next(seed: &mut u64) -> u64 {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        }
        match next(seed) % if depth == 0 { 7 } else { 9 } {
            0 => Value::Null,
            1 => json!(next(seed) % 2 == 0),
            2 => json!(next(seed) as i64),
            3 => json!(u64::MAX - next(seed) % 3),
            4 => json!(f64::from_bits(next(seed) % (0x7ff0 << 48))),
            5 => json!(["plain", "tab\tquote\"", "é\u{1}", "@timestamp"][next(seed) as usize % 4]),
            6 => json!(next(seed) % 1000),
            7 => {
                let n = next(seed) % 4;
                let same = next(seed) % 2 == 0;
                let item = |i: u64, seed: &mut u64| {
                    if same {
                        json!(i)
                    } else {
                        random_doc(seed, depth - 1)
                    }
                };
                Value::Array((0..n).map(|i| item(i, seed)).collect())
            }
            _ => {
                let keys = ["a", "b c", "_x", "ok.key", ""];
                let mut map = Map::new();
                for _ in 0..next(seed) % 4 {
                    let k = keys[next(seed) as usize % keys.len()].to_owned();
                    let v = random_doc(seed, depth - 1);
                    map.insert(k, v);
                }
                Value::Object(map)
            }
        }
    }

    #[test]
    fn a_document_mapped_from_its_text_as_from_its_values() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            let mut doc = random_doc(&mut seed, 4);
            if !doc.is_object() {
                doc = json!({ "v": doc });
            }
            let text = Document::from(doc.clone());
            let (mut by_text, mut by_value) = (Mapper::default(), Mapper::default());
            let (mut got, mut want) = (Vec::new(), Vec::new());
            // (the text is mapped, not left to the values)
            assert!(by_text.text(&mut got, text.text()).is_some());
            by_value.value(&mut want, &doc);
            assert_eq!(got, want, "{text}");
            let found = |m: &Mapper| -> Vec<String> {
                m.found.iter().map(|(k, f)| format!("{k} {f:?}")).collect()
            };
            assert_eq!(found(&by_text), found(&by_value));
        }
    }

    #[test]
    fn repeats_count_and_times_carry_over() {
        let mut untimed = view(Fields::Pairs(&[]), None);
        untimed.ts = None;
        let timed = view(Fields::Pairs(&[]), None);
        let (bytes, _) = encode(&[timed, untimed]);
        let docs = crate::decoders::hercules::documents(&bytes, 1 << 20);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["timestamp"], json!(15));
        assert_ne!(docs[0]["uuid"], docs[1]["uuid"]);
    }

    #[test]
    fn long_keys_are_shortened_and_wide_objects_cut() {
        let mut map = Map::new();
        for i in 0..=MAX_TAGS {
            map.insert(format!("k{i}"), json!(i));
        }
        map.insert("k".repeat(300), json!(1));
        let doc = Value::Object(map);
        let text = Document::from(doc.clone());
        let (bytes, notes) = encode(&[view(Fields::Pairs(&[]), Some(&text))]);
        let codes: Vec<_> = notes.iter().map(|n| n.finding.code).collect();
        assert_eq!(codes, ["hercules.export-too-many-tags"]);
        // the text mapping leaves objects that are cut to the values
        assert!(Mapper::default()
            .text(&mut Vec::new(), text.text())
            .is_none());
        let mut from_values = Vec::new();
        Mapper::default().value(&mut from_values, &doc);
        assert!(bytes.windows(from_values.len()).any(|w| w == from_values));
        assert_eq!(
            crate::decoders::hercules::documents(&bytes, 1 << 30).len(),
            1
        );
        let mut m = Mapper::default();
        let short = m.rename(&"k".repeat(300));
        assert_eq!(short.len(), SHORTENED + 3 + 16);
        assert_eq!(m.found[0].1.code, "hercules.export-key-truncated");
    }
}
