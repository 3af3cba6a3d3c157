//! Lumberjack frame layouts: where one frame ends, without interpreting it.
//!
//! Lumberjack has no length prefix, no magic and no checksum: a frame's end is known only by
//! walking its fields. The same parser serves the TCP stream (bytes arrive piecemeal, so an
//! incomplete frame says how many bytes it needs at least) and the inflated content of `C` frames.
//! `D` frames are walked pair by pair; the walk resumes where it stopped, so a huge `D` arriving in
//! many segments costs O(bytes), not O(segments × pairs).

use std::collections::HashSet;

use crate::model::json::{self, Document};
use crate::model::Value;

/// Header size of each frame type; the type byte → letter table of the parser.
fn header_size(typ: u8) -> Option<usize> {
    match typ {
        b'W' | b'A' | b'C' => Some(6),
        b'J' | b'D' => Some(10),
        _ => None,
    }
}

pub fn is_version(b: u8) -> bool {
    b == b'1' || b == b'2'
}

/// The frame types of a connection's version (`TYPES_BY_VERSION`).
pub fn belongs(version: u8, typ: u8) -> bool {
    match version {
        b'1' => matches!(typ, b'W' | b'D' | b'C' | b'A'),
        _ => matches!(typ, b'W' | b'J' | b'C' | b'A'),
    }
}

/// Resync only: no sender announces windows near this size.
const PLAUSIBLE_WINDOW: u32 = 1 << 24;
const PLAUSIBLE_PAIRS: u32 = 1 << 16;
const PLAUSIBLE_KEY: u32 = 1 << 16;

/// One complete frame in `data[..end]` of the slice it was parsed from.
///
/// `value` is the u32 after the header: the window count (W), the ack value (A), the sequence
/// number (J/D) or the compressed length (C). `count` is the J payload length or D pair count.
/// The body (JSON text, D pairs, zlib bytes) is `data[body..end]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    pub version: u8,
    pub typ: u8,
    pub end: usize,
    pub value: u32,
    pub count: u32,
    pub body: usize,
}

/// Bytes that cannot be a frame; the caller reports `code` (the finding's) and resynchronises.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameError {
    pub code: &'static str,
    pub detail: String,
    pub fields: Vec<(&'static str, Value)>,
}

/// Where an interrupted D walk stands: (bytes walked from the frame start, lengths read).
pub type Resume = (usize, u64);

#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    Frame(Frame),
    /// The frame needs at least `need` bytes in total; `resume` continues a D walk.
    Incomplete {
        need: u64,
        resume: Option<Resume>,
    },
    Error(FrameError),
}

/// The big-endian u32 at `at` (the caller has checked that its four bytes are there).
fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(*data[at..].first_chunk().expect("four bytes checked"))
}

/// Parse the frame starting at `data[0]` (every byte of `data` is available).
pub fn parse(data: &[u8], max_frame: usize, resume: Option<Resume>) -> Parsed {
    let have = data.len();
    if have < 2 {
        return Parsed::Incomplete {
            need: 2,
            resume: None,
        };
    }
    let (version, typ) = (data[0], data[1]);
    if !is_version(version) {
        return Parsed::Error(FrameError {
            code: "lumberjack.invalid-version",
            detail: invalid_version_text(version),
            fields: vec![("byte", version.into())],
        });
    }
    let Some(head) = header_size(typ) else {
        return Parsed::Error(FrameError {
            code: "lumberjack.unknown-frame-type",
            detail: format!("Invalid Frame Type, received: {typ} ({})", printable(typ)),
            fields: vec![("type_byte", typ.into())],
        });
    };
    if have < head {
        return Parsed::Incomplete {
            need: head as u64,
            resume: None,
        };
    }
    let value = u32_at(data, 2);
    let (count, size) = if head == 10 {
        let count = u32_at(data, 6);
        if typ == b'D' {
            return walk_pairs(data, version, value, count, max_frame, resume);
        }
        (count, count)
    } else if typ != b'C' {
        // W and A: the header is the frame.
        return Parsed::Frame(Frame {
            version,
            typ,
            end: 6,
            value,
            count: 0,
            body: 6,
        });
    } else {
        (0, value)
    };
    if size as u64 > max_frame as u64 {
        return Parsed::Error(too_long(typ, u64::from(size), max_frame));
    }
    // size <= max_frame: saturating only for a max_frame near usize::MAX (then it is Incomplete)
    let total = head.saturating_add(size as usize);
    if have < total {
        return Parsed::Incomplete {
            need: total as u64,
            resume: None,
        };
    }
    Parsed::Frame(Frame {
        version,
        typ,
        end: total,
        value,
        count,
        body: head,
    })
}

/// (seq, payload length) of a complete `2J` frame at `data[0]`; None for anything else, which
/// `parse` then handles. The per-event path of Beats traffic: same rules as `parse`.
#[inline]
pub fn whole_j2(data: &[u8], max_frame: usize) -> Option<(u32, usize)> {
    if data.len() < 10 || data[0] != b'2' || data[1] != b'J' {
        return None;
    }
    let size = u32_at(data, 6) as usize;
    (size <= max_frame && data[10..].len() >= size).then(|| (u32_at(data, 2), size))
}

fn too_long(typ: u8, size: u64, limit: usize) -> FrameError {
    FrameError {
        code: "lumberjack.bad-length",
        detail: format!(
            "{} frame declares {size} bytes, above the {limit}-byte frame limit",
            typ as char
        ),
        fields: vec![
            ("frame_type", (typ as char).to_string().into()),
            ("declared", size.into()),
            ("limit", (limit as u64).into()),
        ],
    }
}

/// Find the end of a D frame: npairs × (u32 klen, key, u32 vlen, value).
fn walk_pairs(
    data: &[u8],
    version: u8,
    seq: u32,
    npairs: u32,
    max_frame: usize,
    resume: Option<Resume>,
) -> Parsed {
    // u32 counts times 2 or 8 and u32 lengths plus a position in u64 cannot overflow
    let npairs64 = u64::from(npairs);
    if npairs64.saturating_mul(8) > max_frame as u64 {
        return Parsed::Error(FrameError {
            code: "lumberjack.bad-length",
            detail: format!(
                "D frame declares {npairs} pairs, more than a {max_frame}-byte frame can hold"
            ),
            fields: vec![
                ("frame_type", "D".into()),
                ("declared", npairs.into()),
                ("limit", (max_frame as u64 / 8).into()),
            ],
        });
    }
    let (mut rel, mut done) = resume.unwrap_or((10, 0));
    let lengths = npairs64.saturating_mul(2); // keys and values alike: u32 length + bytes
    while done < lengths {
        // `rel` is the end of the last complete field: inside `data`
        let length_end = (rel as u64).saturating_add(4);
        if (data.len() as u64) < length_end {
            return Parsed::Incomplete {
                need: length_end,
                resume: Some((rel, done)),
            };
        }
        let size = u64::from(u32_at(data, rel));
        let need = length_end.saturating_add(size);
        if need > max_frame as u64 {
            return Parsed::Error(too_long(b'D', need, max_frame));
        }
        if (data.len() as u64) < need {
            return Parsed::Incomplete {
                need,
                resume: Some((rel, done)),
            };
        }
        rel = need as usize;
        done = done.saturating_add(1); // below `lengths`
    }
    Parsed::Frame(Frame {
        version,
        typ: b'D',
        end: rel,
        value: seq,
        count: npairs,
        body: 10,
    })
}

/// The event document of a walked D frame body, written as canonical JSON text in one pass (no
/// map per event); the flag says whether any text was not UTF-8 (shown with U+FFFD). Keys repeat
/// as in a Python dict: the first position, the last value; a body that repeats one or is not
/// UTF-8 (both rare) goes through a map.
pub fn decode_pairs(body: &[u8]) -> (Document, bool) {
    let mut pairs = Vec::new();
    let mut rest = body;
    // the body was walked by `walk_pairs`: every length and its bytes are inside it
    fn text<'a>(rest: &mut &'a [u8]) -> &'a [u8] {
        let (len, after) = rest.split_first_chunk::<4>().expect("walked");
        let (s, after) = after.split_at(u32::from_be_bytes(*len) as usize);
        *rest = after;
        s
    }
    while !rest.is_empty() {
        let key = text(&mut rest);
        pairs.push((key, text(&mut rest)));
    }
    let bad = pairs
        .iter()
        .any(|(k, v)| std::str::from_utf8(k).is_err() || std::str::from_utf8(v).is_err());
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    // (text that is not UTF-8 may become a key another one is: U+FFFD for both)
    if bad || repeats_a_key(&pairs) {
        let mut map = serde_json::Map::new();
        for (k, v) in &pairs {
            map.insert(lossy(k), Value::String(lossy(v)));
        }
        return (Value::Object(map).into(), bad);
    }
    let mut out = String::with_capacity(body.len().saturating_add(2));
    out.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // (UTF-8 both: checked above)
        json::string(&mut out, std::str::from_utf8(k).unwrap_or_default());
        out.push(':');
        json::string(&mut out, std::str::from_utf8(v).unwrap_or_default());
    }
    out.push('}');
    (Document::canonical(out), bad)
}

/// Whether a key comes twice: compared pairwise for an event's few keys (no set to build per
/// event), through a set past `FEW_KEYS` (a hostile frame may hold millions).
fn repeats_a_key(pairs: &[(&[u8], &[u8])]) -> bool {
    const FEW_KEYS: usize = 16;
    if pairs.len() <= FEW_KEYS {
        return pairs
            .iter()
            .enumerate()
            .any(|(i, (k, _))| pairs[..i].iter().any(|(other, _)| other == k));
    }
    let mut keys: HashSet<&[u8]> = HashSet::with_capacity(pairs.len());
    !pairs.iter().all(|(k, _)| keys.insert(k))
}

/// Whether a resync candidate `[12][WJDCA]` at `data[0]` looks like a real frame (None: need
/// more bytes).
///
/// Stricter than `parse`: after garbage or a gap we want few false starts, so sizes must be
/// modest, a J body must begin like a JSON object or array and a C body like zlib. A length field
/// made of text bytes is far above these bounds, so a header spelled inside JSON text (`"2J..."`)
/// can only pass if its length field reaches into the next real header, and then its body starts
/// with a version byte, not `{`.
pub fn plausible(data: &[u8], max_frame: usize) -> Option<bool> {
    let typ = data[1];
    let need = match typ {
        b'J' => 11,
        b'D' => 14,
        b'C' => 8,
        _ => 6,
    };
    if data.len() < need {
        return None;
    }
    let value = u32_at(data, 2);
    Some(match typ {
        b'W' => value <= PLAUSIBLE_WINDOW,
        b'A' => true,
        b'C' => {
            let (cmf, flg) = (u32::from(data[6]), u32::from(data[7]));
            2 <= value
                && value as u64 <= max_frame as u64
                && cmf & 0x0F == 8
                && ((cmf << 8) | flg) % 31 == 0
        }
        b'J' => {
            let count = u32_at(data, 6);
            2 <= count && count as u64 <= max_frame as u64 && matches!(data[10], b'{' | b'[')
        }
        _ => {
            let count = u32_at(data, 6);
            0 < count && count <= PLAUSIBLE_PAIRS && u32_at(data, 10) <= PLAUSIBLE_KEY
        }
    })
}

/// Logstash's wording ('Invalid version of beats protocol: N') plus what N usually means.
pub fn invalid_version_text(byte: u8) -> String {
    let hint = match byte {
        0x16 => "a TLS handshake sent to a plaintext Beats input",
        b'{' | b'[' | b'"' => "raw JSON, not Lumberjack",
        b'<' => "syslog, not Lumberjack",
        // GET POST PUT HEAD DELETE OPTIONS CONNECT TRACE PATCH
        b'G' | b'P' | b'H' | b'D' | b'O' | b'C' | b'T' => "HTTP or other text, not Lumberjack",
        _ => "not a Lumberjack frame",
    };
    format!(
        "Invalid version of beats protocol: {byte} ({}: {hint})",
        printable(byte)
    )
}

/// A byte as Python prints it in these sentences: `repr(chr(b))` when printable, else `0x..`.
pub fn printable(byte: u8) -> String {
    if (32..127).contains(&byte) {
        super::report::py_repr_latin1(&[byte])
    } else {
        format!("0x{byte:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(p: Parsed) -> Frame {
        match p {
            Parsed::Frame(f) => f,
            other => panic!("not a frame: {other:?}"),
        }
    }

    /// The 2J fast path inside C frames (decoder.rs) must take exactly the frames the general parser
    /// reads as a whole 2J frame, with the same fields: lengths around the limit and the data end,
    /// empty and cut payloads, every header byte pair nearby.
    #[test]
    fn fast_path_agrees_with_the_general_parser() {
        let max_frame = 64;
        let mut tried = 0;
        for (v, t) in [
            (b'2', b'J'),
            (b'1', b'J'),
            (b'2', b'D'),
            (b'2', b'W'),
            (b'3', b'J'),
        ] {
            for len in [0u32, 1, 2, 5, 63, 64, 65, 1 << 31, u32::MAX] {
                for extra in [0usize, 1, 5, 70] {
                    let mut data = vec![v, t, 0, 0, 0, 9];
                    data.extend_from_slice(&len.to_be_bytes());
                    data.extend(std::iter::repeat_n(b'{', extra));
                    tried += 1;
                    match (whole_j2(&data, max_frame), parse(&data, max_frame, None)) {
                        (Some((seq, size)), Parsed::Frame(f)) => assert_eq!(
                            (f.version, f.typ, f.value, f.count as usize, f.body, f.end),
                            (b'2', b'J', seq, size, 10, 10 + size),
                            "{data:?}"
                        ),
                        (Some(_), other) => panic!("fast path took {data:?}, parser: {other:?}"),
                        (None, Parsed::Frame(f)) => assert!(
                            f.version != b'2' || f.typ != b'J',
                            "fast path missed a whole 2J frame: {data:?}"
                        ),
                        (None, _) => {}
                    }
                }
            }
        }
        assert_eq!(tried, 180);
    }

    #[test]
    fn headers_and_bodies() {
        let w = frame(parse(b"2W\x00\x00\x00\x03rest", 100, None));
        assert_eq!((w.typ, w.end, w.value), (b'W', 6, 3));
        let j = frame(parse(b"2J\x00\x00\x00\x07\x00\x00\x00\x02{}", 100, None));
        assert_eq!(
            (j.typ, j.value, j.count, j.body, j.end),
            (b'J', 7, 2, 10, 12)
        );
        assert_eq!(
            whole_j2(b"2J\x00\x00\x00\x07\x00\x00\x00\x02{}", 100),
            Some((7, 2))
        );
        assert_eq!(whole_j2(b"2J\x00\x00\x00\x07\x00\x00\x00\x02{", 100), None);
        assert_eq!(
            parse(b"2J\x00\x00\x00\x07\x00\x00\x00\x02{", 100, None),
            Parsed::Incomplete {
                need: 12,
                resume: None
            }
        );
    }

    #[test]
    fn lengths_are_checked_before_anything_is_read() {
        let Parsed::Error(e) = parse(b"2J\x00\x00\x00\x01\x40\x00\x00\x00", 1 << 20, None) else {
            panic!()
        };
        assert_eq!(e.code, "lumberjack.bad-length");
        assert_eq!(e.fields[1], ("declared", Value::from(1u64 << 30)));
        let Parsed::Error(e) = parse(b"1D\x00\x00\x00\x01\xff\xff\xff\xff", 1 << 20, None) else {
            panic!()
        };
        assert_eq!(e.fields[2], ("limit", Value::from((1u64 << 20) / 8)));
    }

    #[test]
    fn d_walk_resumes_where_it_stopped() {
        let mut d = b"1D\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        d.extend(b"\x00\x00\x00\x01k\x00\x00\x00\x02vv");
        let Parsed::Incomplete { need, resume } = parse(&d[..17], 100, None) else {
            panic!()
        };
        assert_eq!((need, resume), (19, Some((15, 1))));
        let f = frame(parse(&d, 100, resume));
        assert_eq!((f.end, f.count), (d.len(), 1));
        let (doc, bad) = decode_pairs(&d[10..]);
        assert_eq!((doc.text(), bad), (r#"{"k":"vv"}"#, false));
    }

    #[test]
    fn d_pairs_written_as_text_are_the_text_of_their_map() {
        fn body(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
            let mut b = Vec::new();
            for (k, v) in pairs {
                for t in [k, v] {
                    b.extend((t.len() as u32).to_be_bytes());
                    b.extend(*t);
                }
            }
            b
        }
        let cases: [&[(&[u8], &[u8])]; 5] = [
            &[],
            &[(b"line", b"GET /\"q\" \x01\t\xc3\xa9"), (b"host", b"web-1")],
            &[(b"bad\xff", b"v\xfe"), (b"k", b"")],
            // a repeated key: its first position, its last value (a Python dict)
            &[(b"a", b"1"), (b"b", b"2"), (b"a", b"3")],
            &[(b"\xff", b"1"), (b"\xfe", b"2")], // two keys made the same by U+FFFD
        ];
        for pairs in cases {
            let mut map = serde_json::Map::new();
            for (k, v) in pairs {
                let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                map.insert(lossy(k), Value::String(lossy(v)));
            }
            let bad = pairs
                .iter()
                .any(|(k, v)| std::str::from_utf8(k).is_err() || std::str::from_utf8(v).is_err());
            let (doc, flagged) = decode_pairs(&body(pairs));
            assert_eq!(doc.text(), Document::from(Value::Object(map)).text());
            assert_eq!(flagged, bad);
        }
        let (doc, _) = decode_pairs(&body(&[(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]));
        assert_eq!(doc.text(), r#"{"a":"3","b":"2"}"#);
        // past the few keys compared pairwise: 20 keys, the first one repeated last
        let keys: Vec<Vec<u8>> = (0..20).map(|i| format!("k{i}").into_bytes()).collect();
        let mut many: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"v"[..])).collect();
        let (doc, _) = decode_pairs(&body(&many));
        assert!(
            doc.text().starts_with(r#"{"k0":"v","k1":"v""#)
                && doc.text().ends_with(r#""k19":"v"}"#)
        );
        many.push((b"k0", b"last"));
        let (doc, _) = decode_pairs(&body(&many));
        assert!(doc.text().starts_with(r#"{"k0":"last","k1":"v""#));
    }

    #[test]
    fn texts_as_python_writes_them() {
        assert_eq!(
            invalid_version_text(123),
            "Invalid version of beats protocol: 123 ('{': raw JSON, not Lumberjack)"
        );
        assert_eq!(printable(0x16), "0x16");
        assert_eq!(printable(b'\''), "\"'\"");
        assert_eq!(printable(b'\\'), "'\\\\'");
    }

    #[test]
    fn plausible_headers() {
        assert_eq!(plausible(b"2W\x00\x00", 100), None);
        assert_eq!(plausible(b"2W\x00\x00\x00\x01", 100), Some(true));
        assert_eq!(
            plausible(b"2J\x00\x00\x00\x01\x00\x00\x00\x02{", 100),
            Some(true)
        );
        assert_eq!(
            plausible(b"2J\x00\x00\x00\x01\x00\x00\x00\x02x", 100),
            Some(false)
        );
        assert_eq!(plausible(b"2C\x00\x00\x00\x09\x78\x9c", 100), Some(true));
    }
}
