//! A document kept as a Hercules event's tags (`Binary::HerculesTags`) mapped straight to the
//! export's Hercules values: what `Mapper::text` writes of the tags' plain rendering, without
//! rendering the text and reading it back (which was most of a Gate capture's export).
//!
//! It maps what one pass can know the text of and gives up (None, nothing written) on the rest,
//! where the caller maps the rendered text: a key repeated in a container (the rendering keeps
//! its first position and last value), a container of more than `PAIRWISE` keys, a key or string
//! that is not UTF-8 (rendered with replacement characters), a float that is not finite (rendered
//! as a string). Fuzzing holds the two to the same bytes (`fuzzing::writes_as_ndjson`).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "tag counts of one event (below u16::MAX by construction) and positions in its bytes"
)]

use super::{length, name, string, Mapper};
use crate::formats::hercules::render::{Cursor, PAIRWISE};
use crate::formats::hercules::types::{
    BYTE, CONTAINER, DOUBLE, FLAG, FLOAT, INTEGER, ITEM_TAG, LONG, MAX_NULLS, NULL, SHORT, STRING,
    UUID, VECTOR,
};
use crate::model::text::push_uuid;

/// Where the tags of the containers being mapped are, innermost last (the repeat check).
type Keys<'a> = Vec<&'a [u8]>;

impl Mapper {
    /// A container's count and tags (`tags`) as `text` maps their plain rendering; None, with
    /// nothing written, where the caller must map the text (see the module docstring).
    pub(super) fn hercules_tags(&mut self, out: &mut Vec<u8>, tags: &[u8]) -> Option<()> {
        let start = out.len();
        out.push(CONTAINER);
        let mut c = Cursor::new(tags, 0);
        let mut keys = Keys::new();
        let mapped = self
            .tags_container(out, &mut c, &mut keys)
            .filter(|_| c.pos == tags.len());
        if mapped.is_none() {
            out.truncate(start);
        }
        mapped
    }

    /// A container's count and tags (the cursor at its count), without the type byte.
    fn tags_container<'a>(
        &mut self,
        out: &mut Vec<u8>,
        c: &mut Cursor<'a>,
        keys: &mut Keys<'a>,
    ) -> Option<()> {
        let count = c.u16()?;
        if usize::from(count) > PAIRWISE {
            return None;
        }
        out.extend_from_slice(&count.to_be_bytes());
        let start = keys.len();
        for _ in 0..count {
            let key = c.key()?;
            if keys[start..].contains(&key) {
                return None;
            }
            keys.push(key);
            self.key_bytes(out, key)?;
            let t = c.u8()?;
            self.tags_value(out, c, t, keys)?;
        }
        keys.truncate(start);
        Some(())
    }

    /// A value of Hercules type `t` as the type byte and value its JSON rendering maps to.
    fn tags_value<'a>(
        &mut self,
        out: &mut Vec<u8>,
        c: &mut Cursor<'a>,
        t: u8,
        keys: &mut Keys<'a>,
    ) -> Option<()> {
        match t {
            CONTAINER => {
                out.push(CONTAINER);
                self.tags_container(out, c, keys)
            }
            VECTOR => self.tags_vector(out, c, keys),
            NULL => {
                out.push(NULL);
                Some(())
            }
            _ => {
                out.push(scalar_type(t)?);
                scalar(out, c, t)
            }
        }
    }

    /// A vector (the cursor at its element type) as its rendered array maps: items of one type
    /// other than Vector and Null make a vector of that type; nulls, vectors and the empty array
    /// are wrapped (`Mapper::vector`).
    fn tags_vector<'a>(
        &mut self,
        out: &mut Vec<u8>,
        c: &mut Cursor<'a>,
        keys: &mut Keys<'a>,
    ) -> Option<()> {
        let elem = c.u8()?;
        let n = c.len()?;
        // nulls take no bytes: their count is bounded by the reader's rule, not by the input
        if elem == NULL && u64::try_from(n).map_or(true, |n| n > MAX_NULLS) {
            return None;
        }
        out.push(VECTOR);
        if n == 0 {
            out.push(CONTAINER);
            length(out, 0);
            return Some(());
        }
        match elem {
            NULL | VECTOR => {
                out.push(CONTAINER);
                length(out, n);
                for _ in 0..n {
                    out.extend_from_slice(&1u16.to_be_bytes());
                    name(out, ITEM_TAG);
                    self.tags_value(out, c, elem, keys)?;
                }
            }
            CONTAINER => {
                out.push(CONTAINER);
                length(out, n);
                for _ in 0..n {
                    self.tags_container(out, c, keys)?;
                }
            }
            _ => {
                out.push(scalar_type(elem)?);
                length(out, n);
                for _ in 0..n {
                    scalar(out, c, elem)?;
                }
            }
        }
        Some(())
    }
}

/// The export type of a scalar of Hercules type `t`, as rendered: integers are Longs, UUIDs
/// strings, floats Doubles (None: not a scalar type).
fn scalar_type(t: u8) -> Option<u8> {
    Some(match t {
        BYTE | SHORT | INTEGER | LONG => LONG,
        FLAG => FLAG,
        FLOAT | DOUBLE => DOUBLE,
        STRING | UUID => STRING,
        _ => return None,
    })
}

/// A scalar of Hercules type `t` as the export value of its rendering, without the type byte.
fn scalar(out: &mut Vec<u8>, c: &mut Cursor<'_>, t: u8) -> Option<()> {
    let long = |out: &mut Vec<u8>, v: i64| out.extend_from_slice(&v.to_be_bytes());
    match t {
        BYTE => long(out, i64::from(c.u8()?)),
        SHORT => long(
            out,
            i64::from(i16::from_be_bytes(c.take(2)?.try_into().ok()?)),
        ),
        INTEGER => long(
            out,
            i64::from(i32::from_be_bytes(c.take(4)?.try_into().ok()?)),
        ),
        LONG => long(out, i64::from_be_bytes(c.take(8)?.try_into().ok()?)),
        FLAG => out.push(u8::from(c.u8()? != 0)),
        FLOAT => double(
            out,
            f64::from(f32::from_be_bytes(c.take(4)?.try_into().ok()?)),
        )?,
        DOUBLE => double(out, f64::from_be_bytes(c.take(8)?.try_into().ok()?))?,
        STRING => {
            let n = c.len()?;
            let raw = c.take(n)?;
            std::str::from_utf8(raw).ok()?;
            string(out, raw);
        }
        UUID => {
            let mut text = String::with_capacity(36);
            push_uuid(&mut text, c.take(16)?);
            string(out, text.as_bytes());
        }
        _ => return None,
    }
    Some(())
}

/// A float as the text mapping reads its rendering back: the shortest text that rounds to it,
/// parsed (the same value, but the path is the text's, so nothing can differ); None for a float
/// that is not finite (rendered as a string) or whose text would read as an integer.
fn double(out: &mut Vec<u8>, x: f64) -> Option<()> {
    if !x.is_finite() {
        return None;
    }
    let mut buffer = zmij::Buffer::new();
    let text = buffer.format_finite(x);
    if !text.contains(['.', 'e', 'E']) {
        return None;
    }
    let back: f64 = text.parse().ok()?;
    out.extend_from_slice(&back.to_be_bytes());
    Some(())
}

#[cfg(test)]
mod tests {
    use super::super::{maps_as_its_text, Mapper};
    use crate::formats::hercules::render::plain_text;
    use crate::formats::hercules::tree::{encode, Event, Tags, Var, Vector};
    use crate::model::json::Binary;
    use crate::model::Document;

    /// The count and tags of an event of `tags`, as a decoder keeps them.
    fn kept(tags: Tags) -> Document {
        let ev = Event {
            version: 1,
            timestamp: 0,
            uuid: [7; 16],
            tags,
        };
        let bytes = encode(&ev).unwrap();
        Document::binary(Binary::HerculesTags, bytes[25..].into(), plain_text)
    }

    fn s(text: &str) -> Var {
        Var::String(text.as_bytes().to_vec())
    }

    fn tag(name: &str, v: Var) -> (Vec<u8>, Var) {
        (name.as_bytes().to_vec(), v)
    }

    /// Whether the bytes were mapped directly (else the caller maps the text).
    fn direct(doc: &Document) -> bool {
        let (_, tags) = doc.kept_binary().unwrap();
        Mapper::default()
            .hercules_tags(&mut Vec::new(), tags)
            .is_some()
    }

    #[test]
    fn every_type_maps_as_its_rendered_text() {
        let frame = vec![tag("function", s("Step")), tag("line", Var::Integer(-3))];
        let doc = kept(vec![
            tag("message", s("order 1 \"processed\"\n")),
            tag("level", Var::Byte(200)),
            tag("short", Var::Short(-2)),
            tag("long", Var::Long(i64::MIN)),
            tag("flag", Var::Flag(7)),
            tag("float", Var::Float(0.1f32.to_bits())),
            tag("whole", Var::Double(3.0f64.to_bits())),
            tag("tiny", Var::Double(1e-300f64.to_bits())),
            tag("id", Var::Uuid([0xab; 16])),
            tag("none", Var::Null),
            tag("renamed key", s("x")),
            tag("_xv", Var::Long(1)),
            tag(
                "frames",
                Var::Vector(Vector::Container(vec![frame.clone(), frame])),
            ),
            tag("bytes", Var::Vector(Vector::Byte(vec![1, 255]))),
            tag("flags", Var::Vector(Vector::Flag(vec![0, 2]))),
            tag("floats", Var::Vector(Vector::Float(vec![1.5f32.to_bits()]))),
            tag(
                "texts",
                Var::Vector(Vector::String(vec![b"a".to_vec(), Vec::new()])),
            ),
            tag("ids", Var::Vector(Vector::Uuid(vec![[1; 16]]))),
            tag("nulls", Var::Vector(Vector::Null(2))),
            tag("empty", Var::Vector(Vector::Long(Vec::new()))),
            tag(
                "nested",
                Var::Vector(Vector::Vector(vec![
                    Vector::Short(vec![1]),
                    Vector::Null(0),
                ])),
            ),
            tag(
                "inner",
                Var::Container(vec![tag("deep", Var::Container(Vec::new()))]),
            ),
        ]);
        assert!(direct(&doc));
        maps_as_its_text(&doc);
    }

    #[test]
    fn what_one_pass_cannot_know_is_left_to_the_text() {
        let repeated = kept(vec![tag("a", Var::Long(1)), tag("a", Var::Long(2))]);
        let not_utf8 = kept(vec![tag("a", Var::String(vec![0xff]))]);
        let nan = kept(vec![tag("a", Var::Double(f64::NAN.to_bits()))]);
        let wide = kept((0..65).map(|i| tag(&format!("k{i}"), Var::Null)).collect());
        let nulls = kept(vec![tag("a", Var::Vector(Vector::Null(1 << 21)))]);
        for doc in [repeated, not_utf8, nan, wide, nulls] {
            assert!(!direct(&doc), "{doc:?}");
        }
        let fine = kept(vec![tag("a", Var::Long(1))]);
        assert!(direct(&fine));
    }
}
