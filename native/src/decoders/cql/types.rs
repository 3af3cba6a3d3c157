//! CQL notation readers (`[int]`, `[string]`, `[bytes]`, `[option]` ...) and cell values as JSON.
//!
//! Blobs and unknown values become hex; UUIDs, inet, dates and decimals strings; integers beyond
//! 64 bits strings; non-finite floats "NaN"/"Infinity". Every text is what the Python decoder
//! wrote (its `str()` of UUIDs, addresses, dates and Decimals), so the NDJSON is the same. A short
//! read is a `Malformed`, which the message layer turns into a finding.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one body (in memory), checked before reading; nesting depth is bounded by max_depth; varint and decimal digits are bounded by the value's bytes (decimal exponents are an i32 widened to i64)"
)]

use std::fmt::Write;

use crate::model::text::{civil, datetime, uuid};
use crate::model::{json, Value};

/// A field runs past the end of the body, or a count is negative, or a value does not fit its
/// type; the text is the finding's (or the cell's `error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

pub type Res<T> = Result<T, Malformed>;

/// The marker of a `[value]` of length -2 (v4+: "leave this bound variable unchanged").
pub const UNSET: &str = "<unset>";

/// A `[value]` or `[bytes]` as read: bytes, null (negative length) or unset (-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell<'a> {
    Bytes(&'a [u8]),
    Null,
    Unset,
}

impl Cell<'_> {
    /// As JSON without a type: hex, null or the unset marker.
    pub fn hexed(self) -> Value {
        match self {
            Cell::Bytes(b) => Value::String(hex(b)),
            Cell::Null => Value::Null,
            Cell::Unset => Value::from(UNSET),
        }
    }

    /// The JSON text of `hexed()`, written straight into `out`.
    pub fn write_hexed(self, out: &mut String) {
        match self {
            Cell::Bytes(b) => quoted(out, |out| push_hex(out, b)),
            Cell::Null => out.push_str("null"),
            Cell::Unset => json::string(out, UNSET),
        }
    }
}

/// `"…"` around text that needs no escape (hex digits, UUIDs, RFC 3339 times).
fn quoted(out: &mut String, write: impl FnOnce(&mut String)) {
    out.push('"');
    write(out);
    out.push('"');
}

pub use crate::model::text::hex;
use crate::model::text::push_hex;

fn text(b: &[u8]) -> String {
    text_of(b).into_owned()
}

fn text_of(b: &[u8]) -> std::borrow::Cow<'_, str> {
    // valid UTF-8 is the rule: checked at once, where the lossy form walks it chunk by chunk
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

pub fn consistency_name(c: u16) -> String {
    const NAMES: [&str; 11] = [
        "ANY",
        "ONE",
        "TWO",
        "THREE",
        "QUORUM",
        "ALL",
        "LOCAL_QUORUM",
        "EACH_QUORUM",
        "SERIAL",
        "LOCAL_SERIAL",
        "LOCAL_ONE",
    ];
    match NAMES.get(usize::from(c)) {
        Some(n) => (*n).to_owned(),
        None => format!("0x{c:04x}"),
    }
}

/// Sequential reader over one message body (or one cell).
pub struct Reader<'a> {
    data: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        if n > self.remaining() {
            return Err(Malformed(format!(
                "need {n} bytes at body offset {}, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The bytes not read yet (the position stays).
    pub fn ahead(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.data[self.pos..];
        self.pos = self.data.len();
        out
    }

    fn array<const N: usize>(&mut self) -> Res<[u8; N]> {
        let b = self.take(N)?;
        Ok(b.try_into().unwrap_or([0; N]))
    }

    pub fn byte(&mut self) -> Res<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub fn short(&mut self) -> Res<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn int(&mut self) -> Res<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn long(&mut self) -> Res<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An `[int]` used as a count: negative counts are malformed.
    pub fn count(&mut self) -> Res<usize> {
        let n = self.int()?;
        usize::try_from(n).map_err(|_| Malformed(format!("negative count {n}")))
    }

    pub fn string(&mut self) -> Res<String> {
        let n = self.short()?;
        Ok(text(self.take(usize::from(n))?))
    }

    pub fn long_string(&mut self) -> Res<String> {
        let n = self.count()?;
        Ok(text(self.take(n)?))
    }

    pub fn string_list(&mut self) -> Res<Vec<Value>> {
        (0..self.short()?)
            .map(|_| Ok(Value::String(self.string()?)))
            .collect()
    }

    /// `[bytes]`: a negative length is null.
    pub fn bytes(&mut self) -> Res<Cell<'a>> {
        let n = self.int()?;
        match usize::try_from(n) {
            Ok(n) => Ok(Cell::Bytes(self.take(n)?)),
            Err(_) => Ok(Cell::Null),
        }
    }

    /// `[value]`: like `[bytes]`, but -2 means "not set".
    pub fn value(&mut self) -> Res<Cell<'a>> {
        match self.int()? {
            -2 => Ok(Cell::Unset),
            n if n < 0 => Ok(Cell::Null),
            n => Ok(Cell::Bytes(self.take(n as usize)?)),
        }
    }

    pub fn short_bytes(&mut self) -> Res<&'a [u8]> {
        let n = self.short()?;
        self.take(usize::from(n))
    }

    pub fn string_map(&mut self) -> Res<Value> {
        let mut out = serde_json::Map::new();
        for _ in 0..self.short()? {
            let k = self.string()?;
            out.insert(k, Value::String(self.string()?));
        }
        Ok(Value::Object(out))
    }

    pub fn string_multimap(&mut self) -> Res<Value> {
        let mut out = serde_json::Map::new();
        for _ in 0..self.short()? {
            let k = self.string()?;
            out.insert(k, Value::Array(self.string_list()?));
        }
        Ok(Value::Object(out))
    }

    pub fn bytes_map(&mut self) -> Res<Value> {
        let mut out = serde_json::Map::new();
        for _ in 0..self.short()? {
            let k = self.string()?;
            out.insert(k, self.bytes()?.hexed());
        }
        Ok(Value::Object(out))
    }

    pub fn uuid(&mut self) -> Res<String> {
        Ok(uuid(self.take(16)?))
    }

    pub fn inetaddr(&mut self) -> Res<String> {
        let n = self.byte()?;
        if n != 4 && n != 16 {
            return Err(Malformed(format!("inet address of {n} bytes")));
        }
        Ok(ip(self.take(usize::from(n))?))
    }

    pub fn inet(&mut self) -> Res<String> {
        let addr = self.inetaddr()?;
        let port = self.int()?;
        Ok(if addr.contains(':') {
            format!("[{addr}]:{port}")
        } else {
            format!("{addr}:{port}")
        })
    }

    pub fn consistency(&mut self) -> Res<String> {
        Ok(consistency_name(self.short()?))
    }

    /// A type `[option]`; nesting beyond `max_depth` is malformed.
    pub fn option(&mut self, depth: usize, max_depth: usize) -> Res<CqlType> {
        if depth > max_depth {
            return Err(Malformed(format!("type nesting deeper than {max_depth}")));
        }
        let code = self.short()?;
        let mut t = CqlType::native(code);
        match code {
            0x0000 => t.custom = self.string()?,
            0x0020 | 0x0022 => t.params = vec![self.option(depth + 1, max_depth)?],
            0x0021 => {
                let k = self.option(depth + 1, max_depth)?;
                t.params = vec![k, self.option(depth + 1, max_depth)?];
            }
            0x0030 => {
                let ks = self.string()?;
                let name = self.string()?;
                for _ in 0..self.short()? {
                    t.field_names.push(self.string()?);
                    t.params.push(self.option(depth + 1, max_depth)?);
                }
                t.custom = format!("{ks}.{name}");
            }
            0x0031 => {
                for _ in 0..self.short()? {
                    t.params.push(self.option(depth + 1, max_depth)?);
                }
            }
            _ => {}
        }
        Ok(t)
    }
}

/// A column or bound-variable type from an `[option]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqlType {
    pub code: u16,
    pub params: Vec<CqlType>,
    /// UDT field names.
    pub field_names: Vec<String>,
    /// The custom class name, or "ks.name" of a UDT.
    pub custom: String,
}

/// Protocol v4 has no duration code: Cassandra describes duration columns as this custom type.
const DURATION_CLASS: &str = "org.apache.cassandra.db.marshal.DurationType";

fn native_name(code: u16) -> Option<&'static str> {
    Some(match code {
        0x0001 => "ascii",
        0x0002 => "bigint",
        0x0003 => "blob",
        0x0004 => "boolean",
        0x0005 => "counter",
        0x0006 => "decimal",
        0x0007 => "double",
        0x0008 => "float",
        0x0009 => "int",
        0x000B => "timestamp",
        0x000C => "uuid",
        0x000D => "varchar",
        0x000E => "varint",
        0x000F => "timeuuid",
        0x0010 => "inet",
        0x0011 => "date",
        0x0012 => "time",
        0x0013 => "smallint",
        0x0014 => "tinyint",
        0x0015 => "duration",
        _ => return None,
    })
}

impl CqlType {
    pub fn native(code: u16) -> Self {
        CqlType {
            code,
            params: Vec::new(),
            field_names: Vec::new(),
            custom: String::new(),
        }
    }

    /// The type as written in records (`list<int>`, `'custom.Class'`, `ks.udt`).
    pub fn name(&self) -> String {
        if let Some(n) = native_name(self.code) {
            return n.to_owned();
        }
        let container = match self.code {
            0x0000 => return format!("'{}'", self.custom),
            0x0030 => return self.custom.clone(),
            0x0020 => "list",
            0x0021 => "map",
            0x0022 => "set",
            0x0031 => "tuple",
            c => return format!("0x{c:04x}"),
        };
        let params: Vec<String> = self.params.iter().map(CqlType::name).collect();
        format!("{container}<{}>", params.join(", "))
    }

    fn is_duration(&self) -> bool {
        self.code == 0x0015 || (self.code == 0x0000 && self.custom == DURATION_CLASS)
    }
}

const MAX_VALUE_DEPTH: usize = 32;

/// A cell or bound value as JSON; `Malformed` when the bytes do not fit the type.
pub fn decode_value(t: &CqlType, cell: Cell<'_>, depth: usize) -> Res<Value> {
    let data = match cell {
        Cell::Bytes(b) => b,
        other => return Ok(other.hexed()),
    };
    if depth > MAX_VALUE_DEPTH {
        return Err(Malformed("value nesting too deep".to_owned()));
    }
    let bad = || {
        Err(Malformed(format!(
            "{} bytes are not a valid {} value",
            data.len(),
            t.name()
        )))
    };
    if t.is_duration() {
        let mut r = Reader::new(data);
        let mut out = serde_json::Map::new();
        for key in ["months", "days", "nanoseconds"] {
            out.insert(key.to_owned(), Value::from(vint(&mut r)?));
        }
        return Ok(Value::Object(out));
    }
    Ok(match t.code {
        0x0001 | 0x000D => Value::String(text(data)),
        0x0002 | 0x0005 | 0x0012 => match <[u8; 8]>::try_from(data) {
            Ok(b) => Value::from(i64::from_be_bytes(b)),
            Err(_) => return bad(),
        },
        0x0009 => match <[u8; 4]>::try_from(data) {
            Ok(b) => Value::from(i32::from_be_bytes(b)),
            Err(_) => return bad(),
        },
        0x0013 => match <[u8; 2]>::try_from(data) {
            Ok(b) => Value::from(i16::from_be_bytes(b)),
            Err(_) => return bad(),
        },
        0x0014 => match data {
            [b] => Value::from(*b as i8),
            _ => return bad(),
        },
        0x0004 => match data {
            [b] => Value::Bool(*b != 0),
            _ => return bad(),
        },
        0x0007 => match <[u8; 8]>::try_from(data) {
            Ok(b) => float_json(f64::from_be_bytes(b)),
            Err(_) => return bad(),
        },
        0x0008 => match <[u8; 4]>::try_from(data) {
            Ok(b) => float_json(f64::from(f32::from_be_bytes(b))),
            Err(_) => return bad(),
        },
        0x000B => match <[u8; 8]>::try_from(data) {
            Ok(b) => timestamp(i64::from_be_bytes(b)),
            Err(_) => return bad(),
        },
        0x000C | 0x000F if data.len() == 16 => Value::String(uuid(data)),
        0x0010 if data.len() == 4 || data.len() == 16 => Value::String(ip(data)),
        0x0011 => match <[u8; 4]>::try_from(data) {
            Ok(b) => date(u32::from_be_bytes(b)),
            Err(_) => return bad(),
        },
        0x000C | 0x000F | 0x0010 => return bad(),
        0x000E if !data.is_empty() => varint(data)?,
        0x000E => return bad(),
        0x0006 if data.len() >= 5 => Value::String(decimal(data)?),
        0x0006 => return bad(),
        0x0020..=0x0022 => collection(t, data, depth)?,
        0x0030 => udt(t, data, depth)?,
        0x0031 => {
            let mut r = Reader::new(data);
            let mut out = Vec::with_capacity(t.params.len());
            for p in &t.params {
                let cell = r.bytes()?;
                out.push(decode_value(p, cell, depth + 1)?);
            }
            Value::Array(out)
        }
        _ => Value::String(hex(data)),
    })
}

/// The JSON text of `safe_value(t, cell)` appended to `out`: straight from the bytes for the types
/// rows carry most (text, integers, booleans, timestamps, UUIDs, blobs), through the value for the
/// others and for bytes that do not fit their type. The `cells` fuzz target holds the two to the
/// same bytes.
pub fn write_cell(out: &mut String, t: &CqlType, cell: Cell<'_>) {
    let Cell::Bytes(data) = cell else {
        return cell.write_hexed(out);
    };
    match (t.code, data.len()) {
        (0x0001 | 0x000D, _) => json::string(out, &text_of(data)),
        (0x0002 | 0x0005 | 0x0012, 8) => json::integer(out, be_i64(data)),
        (0x0009, 4) => json::integer(out, be_i64(data) as i32),
        (0x0013, 2) => json::integer(out, be_i64(data) as i16),
        (0x0014, 1) => json::integer(out, data[0] as i8),
        (0x0004, 1) => out.push_str(if data[0] != 0 { "true" } else { "false" }),
        (0x000B, 8) => {
            let (ms, start) = (be_i64(data), out.len());
            out.push('"');
            if timestamp_text(out, ms) {
                out.push('"');
            } else {
                out.truncate(start);
                json::integer(out, ms);
            }
        }
        (0x000C | 0x000F, 16) => quoted(out, |out| out.push_str(&uuid(data))),
        (0x0003, _) => quoted(out, |out| push_hex(out, data)),
        _ => json::value(out, &safe_value(t, cell)),
    }
}

/// Up to eight big-endian bytes as a sign-extended integer (the caller checked the length).
fn be_i64(data: &[u8]) -> i64 {
    let shift = 64 - 8 * data.len() as u32;
    let mut raw = [0u8; 8];
    raw[..data.len()].copy_from_slice(data);
    i64::from_be_bytes(raw) >> shift
}

/// A decoded value, or `{"hex", "error"}` when the bytes do not fit the type.
pub fn safe_value(t: &CqlType, cell: Cell<'_>) -> Value {
    decode_value(t, cell, 0).unwrap_or_else(|Malformed(e)| {
        let mut out = serde_json::Map::new();
        out.insert("hex".to_owned(), cell.hexed());
        out.insert("error".to_owned(), Value::String(e));
        Value::Object(out)
    })
}

fn collection(t: &CqlType, data: &[u8], depth: usize) -> Res<Value> {
    let mut r = Reader::new(data);
    let n = r.count()?;
    let param = |i: usize| {
        t.params
            .get(i)
            .ok_or_else(|| Malformed("collection type without parameters".to_owned()))
    };
    if t.code == 0x0021 {
        let (kt, vt) = (param(0)?, param(1)?);
        let mut pairs = Vec::new();
        for _ in 0..n {
            let k = r.bytes()?;
            let k = decode_value(kt, k, depth + 1)?;
            let v = r.bytes()?;
            pairs.push((k, decode_value(vt, v, depth + 1)?));
        }
        if pairs.iter().all(|(k, _)| k.is_string()) {
            let mut out = serde_json::Map::new();
            for (k, v) in pairs {
                if let Value::String(k) = k {
                    out.insert(k, v);
                }
            }
            return Ok(Value::Object(out));
        }
        return Ok(Value::Array(
            pairs
                .into_iter()
                .map(|(k, v)| Value::Array(vec![k, v]))
                .collect(),
        ));
    }
    let et = param(0)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let cell = r.bytes()?;
        out.push(decode_value(et, cell, depth + 1)?);
    }
    Ok(Value::Array(out))
}

fn udt(t: &CqlType, data: &[u8], depth: usize) -> Res<Value> {
    let mut r = Reader::new(data);
    let mut out = serde_json::Map::new();
    for (name, ft) in t.field_names.iter().zip(&t.params) {
        if r.remaining() == 0 {
            break; // trailing fields may be omitted (fields added after the value was written)
        }
        let cell = r.bytes()?;
        out.insert(name.clone(), decode_value(ft, cell, depth + 1)?);
    }
    Ok(Value::Object(out))
}

fn float_json(x: f64) -> Value {
    if x.is_nan() {
        Value::from("NaN")
    } else if x.is_infinite() {
        Value::from(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        Value::from(x)
    }
}

/// A zigzag `[vint]` (duration fields): the leading 1-bits of the first byte count extra bytes.
fn vint(r: &mut Reader<'_>) -> Res<i64> {
    let first = r.byte()?;
    let extra = first.leading_ones() as usize;
    let mut value: u64 = if extra < 8 {
        u64::from(first & (0xFF >> extra))
    } else {
        0
    };
    for &b in r.take(extra)? {
        value = value << 8 | u64::from(b);
    }
    Ok((value >> 1) as i64 ^ -((value & 1) as i64))
}

/// An IPv4 or IPv6 address as Python's `ipaddress` writes it (the longest run of two or more zero
/// groups compressed, the first on a tie; no dotted IPv4 tail).
pub fn ip(b: &[u8]) -> String {
    if let [a, b, c, d] = b {
        return format!("{a}.{b}.{c}.{d}");
    }
    let groups: Vec<u16> = b
        .chunks(2)
        .map(|p| u16::from(p[0]) << 8 | u16::from(p[1]))
        .collect();
    let (mut best, mut best_len, mut run) = (0, 0, 0);
    for (i, &g) in groups.iter().enumerate() {
        run = if g == 0 { run + 1 } else { 0 };
        if run > best_len {
            best_len = run;
            best = i + 1 - run;
        }
    }
    let part = |gs: &[u16]| {
        gs.iter()
            .map(|g| format!("{g:x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    if best_len < 2 {
        return part(&groups);
    }
    format!(
        "{}::{}",
        part(&groups[..best]),
        part(&groups[best + best_len..])
    )
}

/// Days from 1970-01-01 that Python's `datetime` can represent (years 1 to 9999).
const MIN_DAY: i64 = -719_162;
const MAX_DAY: i64 = 2_932_896;

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds; the number itself outside
/// years 1-9999.
fn timestamp(ms: i64) -> Value {
    let mut text = String::with_capacity(24);
    if timestamp_text(&mut text, ms) {
        Value::String(text)
    } else {
        Value::from(ms)
    }
}

/// `timestamp`'s text appended to `out`; false (nothing written) outside years 1-9999.
fn timestamp_text(out: &mut String, ms: i64) -> bool {
    let days = ms.div_euclid(86_400_000);
    if !(MIN_DAY..=MAX_DAY).contains(&days) {
        return false;
    }
    let rem = ms.rem_euclid(86_400_000);
    datetime(out, days, rem / 1000, rem % 1000, 3);
    true
}

/// A `date` (days with the epoch at 2^31) as YYYY-MM-DD; the raw number outside years 1-9999.
fn date(raw: u32) -> Value {
    let days = i64::from(raw) - (1 << 31);
    if !(MIN_DAY..=MAX_DAY).contains(&days) {
        return Value::from(raw);
    }
    let (y, m, d) = civil(days);
    Value::String(format!("{y:04}-{m:02}-{d:02}"))
}

/// Python refuses to write integers of more decimal digits than this (`sys.int_max_str_digits`).
const MAX_DIGITS: usize = 4300;
/// More bytes than this always exceed MAX_DIGITS: not even converted (the conversion is quadratic).
const MAX_DIGIT_BYTES: usize = 1800;

/// A two's complement big-endian integer as (negative, decimal digits of its magnitude).
fn big_decimal(data: &[u8]) -> Res<(bool, String)> {
    let negative = data.first().is_some_and(|&b| b & 0x80 != 0);
    // magnitude as big-endian bytes (two's complement negation for negatives)
    let mut mag: Vec<u8> = if negative {
        data.iter().map(|b| !b).collect()
    } else {
        data.to_vec()
    };
    if negative {
        for b in mag.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        }
    }
    let start = mag.iter().position(|&b| b != 0).unwrap_or(mag.len());
    let mag = &mag[start..];
    let too_long = || {
        Malformed(format!(
            "Exceeds the limit ({MAX_DIGITS} digits) for integer string conversion; \
             use sys.set_int_max_str_digits() to increase the limit"
        ))
    };
    if mag.len() > MAX_DIGIT_BYTES {
        return Err(too_long());
    }
    // base 10^9 limbs, least significant first
    let mut limbs: Vec<u32> = Vec::new();
    for &byte in mag {
        let mut carry = u64::from(byte);
        for l in limbs.iter_mut() {
            let v = u64::from(*l) * 256 + carry;
            *l = (v % 1_000_000_000) as u32;
            carry = v / 1_000_000_000;
        }
        while carry > 0 {
            limbs.push((carry % 1_000_000_000) as u32);
            carry /= 1_000_000_000;
        }
    }
    let mut digits = match limbs.last() {
        Some(top) => top.to_string(),
        None => "0".to_owned(),
    };
    for l in limbs.iter().rev().skip(1) {
        let _ = write!(digits, "{l:09}");
    }
    if digits.len() > MAX_DIGITS {
        return Err(too_long());
    }
    Ok((negative, digits))
}

/// A varint: a JSON integer within 64 bits, else a decimal string.
fn varint(data: &[u8]) -> Res<Value> {
    let (negative, digits) = big_decimal(data)?;
    let s = if negative {
        format!("-{digits}")
    } else {
        digits
    };
    Ok(s.parse::<i64>()
        .map(Value::from)
        .unwrap_or(Value::String(s)))
}

/// Python's decimal context: 28 significant digits, exponents within ±999999.
const PRECISION: usize = 28;
const EMAX: i64 = 999_999;
const ETINY: i64 = -EMAX - PRECISION as i64 + 1;

/// A decimal (`[int] scale` + varint unscaled value) as Python's `str(Decimal(unscaled).scaleb(-scale))`.
fn decimal(data: &[u8]) -> Res<String> {
    let scale = i64::from(i32::from_be_bytes([data[0], data[1], data[2], data[3]]));
    let (negative, mut digits) = big_decimal(&data[4..])?;
    let mut exp = -scale;
    if digits.len() > PRECISION {
        // round half to even to the context precision
        let cut = digits.len() - PRECISION;
        let (keep, dropped) = digits.split_at(PRECISION);
        let half =
            dropped.as_bytes()[0]
                .cmp(&b'5')
                .then(if dropped[1..].bytes().any(|b| b != b'0') {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                });
        let odd = keep.as_bytes()[PRECISION - 1] % 2 == 1;
        let mut kept: Vec<u8> = keep.bytes().collect();
        if half.is_gt() || (half.is_eq() && odd) {
            let mut i = PRECISION;
            loop {
                if i == 0 {
                    kept.insert(0, b'1');
                    kept.pop();
                    exp += 1;
                    break;
                }
                i -= 1;
                if kept[i] == b'9' {
                    kept[i] = b'0';
                } else {
                    kept[i] += 1;
                    break;
                }
            }
        }
        digits = String::from_utf8_lossy(&kept).into_owned();
        exp += cut as i64;
    }
    if digits == "0" {
        exp = exp.clamp(ETINY, EMAX); // a zero's exponent is clamped, not an error
    }
    let adjusted = exp + digits.len() as i64 - 1;
    if digits != "0" && !(-EMAX..=EMAX).contains(&adjusted) {
        return Err(Malformed(format!(
            "decimal exponent {adjusted} out of range"
        )));
    }
    let n = digits.len() as i64;
    let leftdigits = exp + n;
    let dotplace = if exp <= 0 && leftdigits > -6 {
        leftdigits
    } else {
        1
    };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if dotplace <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-dotplace) as usize));
        out.push_str(&digits);
    } else if dotplace >= n {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (dotplace - n) as usize));
    } else {
        out.push_str(&digits[..dotplace as usize]);
        out.push('.');
        out.push_str(&digits[dotplace as usize..]);
    }
    if leftdigits != dotplace {
        let _ = write!(out, "E{:+}", leftdigits - dotplace);
    }
    Ok(out)
}
