//! The codec as values: an event's tags as a tree (`Var`), decoded from bytes the reader
//! validated, and `encode`, which writes a tree back exactly as Java's EventBuilder does, so decode
//! then encode gives the same bytes. Values keep what a re-encoding needs: raw float bits (NaN
//! payloads), the raw flag byte (Java reads any non-zero byte as true), raw string and key bytes
//! (invalid UTF-8 is kept).

use super::reader::{EventParser, Stop};
use super::render::Cursor;
use super::types::*;

pub type Tags = Vec<(Vec<u8>, Var)>;

/// One typed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Var {
    Container(Tags),
    Byte(u8),
    Short(i16),
    Integer(i32),
    Long(i64),
    Flag(u8),
    Float(u32),
    Double(u64),
    String(Vec<u8>),
    Uuid([u8; 16]),
    Null,
    Vector(Vector),
}

/// A vector: bare elements of one type (no type byte per element, as on the wire).
#[derive(Clone, Debug, PartialEq)]
pub enum Vector {
    Container(Vec<Tags>),
    Byte(Vec<u8>),
    Short(Vec<i16>),
    Integer(Vec<i32>),
    Long(Vec<i64>),
    Flag(Vec<u8>),
    Float(Vec<u32>),
    Double(Vec<u64>),
    String(Vec<Vec<u8>>),
    Uuid(Vec<[u8; 16]>),
    Null(usize),
    Vector(Vec<Vector>),
}

/// One Hercules event: version byte, 100-ns Unix ticks, 16 UUID bytes, payload tags.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub version: u8,
    pub timestamp: i64,
    pub uuid: [u8; 16],
    pub tags: Tags,
}

/// Why a tree cannot be written.
#[derive(Clone, Debug, PartialEq)]
pub enum EncodeError {
    /// A key over 255 bytes (its u8 length would wrap, as Java's silently does).
    KeyTooLong(usize),
    /// A container over 65535 tags.
    TooManyTags(usize),
    /// A string or vector of 2^31 or more bytes/elements.
    TooLong(usize),
}

/// The event at the start of `data` and its length (problems are not reported here: see
/// `EventParser::parse`).
pub fn decode(data: &[u8], max_event: usize) -> Result<(Event, usize), Stop> {
    let ev = EventParser::new(max_event).parse(data, 0, &mut Vec::new())?;
    let mut c = Cursor::new(data, 25);
    let tags = tags(&mut c).unwrap_or_default();
    let event = Event {
        version: ev.version,
        timestamp: ev.timestamp,
        uuid: ev.uuid,
        tags,
    };
    Ok((event, ev.length))
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

fn tags(c: &mut Cursor<'_>) -> Option<Tags> {
    let n = c.u16()?;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let key = c.key()?.to_vec();
        let t = c.u8()?;
        out.push((key, value(c, t)?));
    }
    Some(out)
}

fn value(c: &mut Cursor<'_>, t: u8) -> Option<Var> {
    Some(match t {
        CONTAINER => Var::Container(tags(c)?),
        BYTE => Var::Byte(c.u8()?),
        SHORT => Var::Short(i16::from_be_bytes(arr(c.take(2)?))),
        INTEGER => Var::Integer(i32::from_be_bytes(arr(c.take(4)?))),
        LONG => Var::Long(i64::from_be_bytes(arr(c.take(8)?))),
        FLAG => Var::Flag(c.u8()?),
        FLOAT => Var::Float(u32::from_be_bytes(arr(c.take(4)?))),
        DOUBLE => Var::Double(u64::from_be_bytes(arr(c.take(8)?))),
        STRING => {
            let n = c.len()?;
            Var::String(c.take(n)?.to_vec())
        }
        UUID => Var::Uuid(arr(c.take(16)?)),
        NULL => Var::Null,
        VECTOR => Var::Vector(vector(c)?),
        _ => return None,
    })
}

fn many<T>(n: usize, mut f: impl FnMut() -> Option<T>) -> Option<Vec<T>> {
    (0..n).map(|_| f()).collect()
}

fn vector(c: &mut Cursor<'_>) -> Option<Vector> {
    let elem = c.u8()?;
    let n = c.len()?;
    Some(match elem {
        CONTAINER => Vector::Container(many(n, || tags(c))?),
        BYTE => Vector::Byte(c.take(n)?.to_vec()),
        SHORT => Vector::Short(many(n, || Some(i16::from_be_bytes(arr(c.take(2)?))))?),
        INTEGER => Vector::Integer(many(n, || Some(i32::from_be_bytes(arr(c.take(4)?))))?),
        LONG => Vector::Long(many(n, || Some(i64::from_be_bytes(arr(c.take(8)?))))?),
        FLAG => Vector::Flag(c.take(n)?.to_vec()),
        FLOAT => Vector::Float(many(n, || Some(u32::from_be_bytes(arr(c.take(4)?))))?),
        DOUBLE => Vector::Double(many(n, || Some(u64::from_be_bytes(arr(c.take(8)?))))?),
        STRING => Vector::String(many(n, || {
            let k = c.len()?;
            Some(c.take(k)?.to_vec())
        })?),
        UUID => Vector::Uuid(many(n, || Some(arr(c.take(16)?)))?),
        NULL => Vector::Null(n),
        VECTOR => Vector::Vector(many(n, || vector(c))?),
        _ => return None,
    })
}

/// The bytes of `ev`, as Java's EventBuilder writes them.
pub fn encode(ev: &Event) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(64);
    out.push(ev.version);
    out.extend_from_slice(&ev.timestamp.to_be_bytes());
    out.extend_from_slice(&ev.uuid);
    write_tags(&mut out, &ev.tags)?;
    Ok(out)
}

fn length(out: &mut Vec<u8>, n: usize) -> Result<(), EncodeError> {
    if n > MAX_LENGTH {
        return Err(EncodeError::TooLong(n));
    }
    out.extend_from_slice(&(n as i32).to_be_bytes());
    Ok(())
}

fn write_tags(out: &mut Vec<u8>, tags: &Tags) -> Result<(), EncodeError> {
    if tags.len() > MAX_TAGS {
        return Err(EncodeError::TooManyTags(tags.len()));
    }
    out.extend_from_slice(&(tags.len() as u16).to_be_bytes());
    for (key, v) in tags {
        if key.len() > MAX_KEY_BYTES {
            return Err(EncodeError::KeyTooLong(key.len()));
        }
        out.push(key.len() as u8);
        out.extend_from_slice(key);
        write_value(out, v)?;
    }
    Ok(())
}

fn write_value(out: &mut Vec<u8>, v: &Var) -> Result<(), EncodeError> {
    match v {
        Var::Container(t) => {
            out.push(CONTAINER);
            write_tags(out, t)?;
        }
        Var::Byte(b) => out.extend_from_slice(&[BYTE, *b]),
        Var::Short(x) => {
            out.push(SHORT);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Var::Integer(x) => {
            out.push(INTEGER);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Var::Long(x) => {
            out.push(LONG);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Var::Flag(b) => out.extend_from_slice(&[FLAG, *b]),
        Var::Float(x) => {
            out.push(FLOAT);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Var::Double(x) => {
            out.push(DOUBLE);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Var::String(s) => {
            out.push(STRING);
            length(out, s.len())?;
            out.extend_from_slice(s);
        }
        Var::Uuid(u) => {
            out.push(UUID);
            out.extend_from_slice(u);
        }
        Var::Null => out.push(NULL),
        Var::Vector(vec) => {
            out.push(VECTOR);
            write_vector(out, vec)?;
        }
    }
    Ok(())
}

fn put(out: &mut Vec<u8>, b: &[u8]) -> Result<(), EncodeError> {
    out.extend_from_slice(b);
    Ok(())
}

/// A vector of single bytes (Byte, Flag): a raw run.
fn bytes(out: &mut Vec<u8>, elem: u8, b: &[u8]) -> Result<(), EncodeError> {
    out.push(elem);
    length(out, b.len())?;
    put(out, b)
}

fn write_vector(out: &mut Vec<u8>, v: &Vector) -> Result<(), EncodeError> {
    fn each<T>(
        out: &mut Vec<u8>,
        elem: u8,
        items: &[T],
        mut f: impl FnMut(&mut Vec<u8>, &T) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        out.push(elem);
        length(out, items.len())?;
        items.iter().try_for_each(|x| f(out, x))
    }
    match v {
        Vector::Container(items) => each(out, CONTAINER, items, write_tags),
        Vector::Byte(b) => bytes(out, BYTE, b),
        Vector::Short(xs) => each(out, SHORT, xs, |o, x| put(o, &x.to_be_bytes())),
        Vector::Integer(xs) => each(out, INTEGER, xs, |o, x| put(o, &x.to_be_bytes())),
        Vector::Long(xs) => each(out, LONG, xs, |o, x| put(o, &x.to_be_bytes())),
        Vector::Flag(b) => bytes(out, FLAG, b),
        Vector::Float(xs) => each(out, FLOAT, xs, |o, x| put(o, &x.to_be_bytes())),
        Vector::Double(xs) => each(out, DOUBLE, xs, |o, x| put(o, &x.to_be_bytes())),
        Vector::String(xs) => each(out, STRING, xs, |o, s| {
            length(o, s.len())?;
            o.extend_from_slice(s);
            Ok(())
        }),
        Vector::Uuid(xs) => each(out, UUID, xs, |o, u| put(o, u)),
        Vector::Null(n) => {
            out.push(NULL);
            length(out, *n)
        }
        Vector::Vector(xs) => each(out, VECTOR, xs, write_vector),
    }
}
