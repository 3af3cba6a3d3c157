//! A document's JSON text mapped straight to Hercules values: what `Mapper::value` writes of the
//! parsed values, read step by step (`json::text::Reader`) instead of parsed into a tree first,
//! which was most of the export's cost for log events.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "tag counts of one event (below u16::MAX by construction) and positions in its text"
)]

use super::{bigint, length, name, string, Mapper};
use crate::formats::hercules::types::{
    CONTAINER, DOUBLE, FLAG, ITEM_TAG, LONG, MAX_TAGS, NULL, STRING, VECTOR,
};
use crate::model::json::text::{Kind, Reader};

/// `super::type_of` of a value of this kind.
fn type_of(k: Kind) -> u8 {
    match k {
        Kind::String => STRING,
        Kind::Object => CONTAINER,
        Kind::Bool(_) => FLAG,
        Kind::Int(_) => LONG,
        Kind::Big(_) => CONTAINER, // beyond i64: the big-integer container
        Kind::Float(_) => DOUBLE,
        Kind::Null => NULL,
        Kind::Array => VECTOR,
    }
}

impl Mapper {
    /// A document's canonical `text` as `value` maps its values. None, with nothing
    /// written, when the text is not in the form `json::text` reads, or has an object of more than
    /// `MAX_TAGS` keys (which the mapping of values cuts and reports): the caller maps the values.
    pub(super) fn text(&mut self, out: &mut Vec<u8>, text: &str) -> Option<()> {
        let start = out.len();
        let mut r = Reader::new(text);
        let mapped = self.text_value(out, &mut r).filter(|_| r.done());
        if mapped.is_none() {
            out.truncate(start);
        }
        mapped
    }

    fn text_value(&mut self, out: &mut Vec<u8>, r: &mut Reader<'_>) -> Option<()> {
        let k = r.kind()?;
        out.push(type_of(k));
        self.text_bare(out, r, k)
    }

    fn text_bare(&mut self, out: &mut Vec<u8>, r: &mut Reader<'_>, k: Kind) -> Option<()> {
        match k {
            Kind::String => string(out, r.string()?.as_bytes()),
            Kind::Object => self.text_object(out, r)?,
            Kind::Array => self.text_vector(out, r)?,
            Kind::Null => r.scalar()?,
            Kind::Bool(b) => {
                r.scalar()?;
                out.push(u8::from(b));
            }
            Kind::Int(i) => {
                r.scalar()?;
                out.extend_from_slice(&i.to_be_bytes());
            }
            Kind::Big(u) => {
                r.scalar()?;
                bigint(out, itoa::Buffer::new().format(u));
            }
            Kind::Float(f) => {
                r.scalar()?;
                out.extend_from_slice(&f.to_be_bytes());
            }
        }
        Some(())
    }

    fn text_object(&mut self, out: &mut Vec<u8>, r: &mut Reader<'_>) -> Option<()> {
        r.open()?;
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        let mut n = 0usize;
        while r.more(n == 0)? {
            n += 1;
            if n > MAX_TAGS {
                return None;
            }
            let key = r.key()?;
            self.key(out, &key);
            self.text_value(out, r)?;
        }
        out[at..at + 2].copy_from_slice(&(n as u16).to_be_bytes());
        Some(())
    }

    /// As `vector`: items of one type other than Vector and Null make a vector of that type, any
    /// other array is wrapped item by item. The items' types are read ahead.
    fn text_vector(&mut self, out: &mut Vec<u8>, r: &mut Reader<'_>) -> Option<()> {
        let mut ahead = r.clone();
        ahead.open()?;
        let (mut n, mut first, mut same) = (0usize, None, true);
        while ahead.more(n == 0)? {
            let t = type_of(ahead.kind()?);
            same &= *first.get_or_insert(t) == t;
            n += 1;
            ahead.skip()?;
        }
        let typed = first.filter(|&t| same && t != VECTOR && t != NULL);
        out.push(typed.unwrap_or(CONTAINER));
        length(out, n);
        r.open()?;
        let mut i = 0;
        while r.more(i == 0)? {
            i += 1;
            if typed.is_some() {
                let k = r.kind()?;
                self.text_bare(out, r, k)?;
            } else {
                out.extend_from_slice(&1u16.to_be_bytes());
                name(out, ITEM_TAG);
                self.text_value(out, r)?;
            }
        }
        Some(())
    }
}
