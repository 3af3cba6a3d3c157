//! The body of the `cql` fuzz target (native/fuzz/fuzz_targets/cql.rs), here so that `cargo test`
//! replays every input a fuzzer failed on (native/fuzz/regressions/cql/).
//!
//! The input is a script: a settings byte (small limits, credentials shown, v5 CRC / v5 LZ4 / v4 /
//! no handshake), then operations on either direction: raw bytes, gaps, envelopes built from the
//! input's own bytes inside valid v5 frames (so the message layer is reached without the fuzzer
//! inventing CRCs), the same frames with one bit flipped, envelopes split over non-self-contained
//! frames, plain v4 envelopes (LZ4-compressed or not), and RESULT rows whose column type and cell
//! come from the input. Checks: no panic; the records do not depend on how the bytes were cut
//! into chunks; no message is shorter than its header or claims bytes that were never fed.
//! `cells` is the differential target of the rows' text written from their bytes.

use crate::decoders::{Chunk, Decoder, Gap, Limits, Shared, StreamContext};
use crate::model::{Direction, Record};

use std::sync::Arc;

use crate::model::{json, Written};

use super::envelope::encode;
use super::frame_v5::encode_frame;
/// v5 frame parts for the `numbers` target, which chooses the lengths a header claims.
pub use super::frame_v5::{crc32, encode_header};
use super::rows::Rows;
use super::types::{CqlType, Reader};
use super::CqlDecoder;
use crate::fuzzing::Script;

const REQUESTS: [u8; 8] = [0x01, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F];
const RESPONSES: [u8; 8] = [0x00, 0x02, 0x03, 0x06, 0x08, 0x0C, 0x0E, 0x10];

enum Op {
    Bytes(Direction, Vec<u8>, usize),
    Gap(Direction, u64),
}

fn envelope(d: Direction, version: u8, arg: u8, body: &[u8]) -> Vec<u8> {
    let (bit, ops) = match d {
        Direction::C2S => (0, REQUESTS),
        Direction::S2C => (0x80, RESPONSES),
    };
    let flags = if arg & 0x80 != 0 { arg >> 3 & 0x0F } else { 0 };
    encode(
        version | bit,
        flags,
        i16::from(arg & 7),
        ops[usize::from(arg >> 4 & 7)],
        body,
    )
}

/// The script as operations (bytes to feed with a cut point, or gaps).
fn parse(s: &mut Script<'_>, settings: u8) -> Vec<Op> {
    let lz4 = settings & 4 != 0;
    let version = if settings & 8 != 0 { 4 } else { 5 };
    let mut ops = Vec::new();
    if settings & 16 == 0 {
        let startup = if lz4 {
            &b"\x00\x01\x00\x0bCOMPRESSION\x00\x03lz4"[..]
        } else {
            b"\x00\x00"
        };
        ops.push(Op::Bytes(
            Direction::C2S,
            encode(version, 0, 0, 0x01, startup),
            0,
        ));
        ops.push(Op::Bytes(
            Direction::S2C,
            encode(version | 0x80, 0, 0, 0x02, b""),
            0,
        ));
    }
    while let Some(op) = s.byte() {
        let d = if op & 1 == 0 {
            Direction::C2S
        } else {
            Direction::S2C
        };
        let arg = s.byte().unwrap_or(0);
        let bytes = match op >> 1 & 7 {
            0 | 1 => s.take(usize::from(arg)).to_vec(),
            2 => {
                ops.push(Op::Gap(d, u64::from(arg) + 1));
                continue;
            }
            3 => encode_frame(&envelope(d, 5, arg, s.piece()), true, lz4),
            4 => {
                let mut f = encode_frame(&envelope(d, 5, arg, s.piece()), true, lz4);
                let bit = usize::from(s.byte().unwrap_or(0)) * 8 + usize::from(arg & 7);
                let i = bit / 8 % f.len();
                f[i] ^= 1 << (bit % 8);
                f
            }
            5 => {
                let env = envelope(d, 5, arg, s.piece());
                let size = usize::from(arg % 16) + 1;
                env.chunks(size)
                    .flat_map(|c| encode_frame(c, false, lz4))
                    .collect()
            }
            6 => {
                let body = s.piece();
                if arg & 0x40 != 0 {
                    let mut packed = (body.len() as u32).to_be_bytes().to_vec();
                    packed.extend_from_slice(&lz4_flex::block::compress(body));
                    let mut e = envelope(d, 4, arg, &packed);
                    e[1] |= 1;
                    e
                } else {
                    envelope(d, 4, arg, body)
                }
            }
            _ => {
                // RESULT Rows: one column whose [option] and cell are input bytes
                let option = s.piece();
                let cell = s.piece();
                let mut body = [2i32, 1, 1]
                    .iter()
                    .flat_map(|i| i.to_be_bytes())
                    .collect::<Vec<_>>();
                body.extend_from_slice(b"\x00\x02ks\x00\x01t\x00\x01c");
                body.extend_from_slice(option);
                body.extend_from_slice(&1i32.to_be_bytes());
                body.extend_from_slice(&(cell.len() as i32).to_be_bytes());
                body.extend_from_slice(cell);
                let e = encode(version | 0x80, 0, i16::from(arg & 7), 0x08, &body);
                if version == 5 && settings & 16 == 0 {
                    encode_frame(&e, true, lz4)
                } else {
                    e
                }
            }
        };
        ops.push(Op::Bytes(d, bytes, usize::from(arg)));
    }
    ops
}

/// Every record, the bytes cut at each operation's cut point (or not cut at all).
fn decode(ops: &[Op], ctx: &StreamContext, cut: bool) -> (Vec<Record>, [u64; 2]) {
    let mut dec = CqlDecoder::new(ctx.clone());
    let mut shared = Shared::default();
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    for op in ops {
        match op {
            Op::Gap(d, length) => {
                let i = usize::from(*d == Direction::S2C);
                let gap = Gap {
                    direction: *d,
                    offset: offsets[i],
                    length: *length,
                    frame: None,
                    ts: None,
                };
                dec.gap(&gap, &mut shared, &mut out);
                offsets[i] += length;
            }
            Op::Bytes(d, bytes, at) => {
                let i = usize::from(*d == Direction::S2C);
                let at = if cut { at % (bytes.len() + 1) } else { 0 };
                for part in [&bytes[..at], &bytes[at..]] {
                    if part.is_empty() {
                        continue;
                    }
                    let chunk = Chunk {
                        direction: *d,
                        offset: offsets[i],
                        data: part,
                        frame: None,
                        ts: None,
                    };
                    dec.feed(&chunk, &mut shared, &mut out);
                    offsets[i] += part.len() as u64;
                }
            }
        }
    }
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    (out, offsets)
}

pub fn cql(data: &[u8]) {
    let mut s = Script(data);
    let Some(settings) = s.byte() else {
        return;
    };
    let small = settings & 2 != 0;
    let ctx = StreamContext {
        show_secrets: settings & 1 != 0,
        server: "10.0.0.2".into(),
        server_port: 9042,
        limits: Limits {
            max_frame: if small { 200 } else { 64 << 20 },
            max_inflated: if small { 100 } else { 64 << 20 },
            max_depth: if small { 2 } else { 8 },
            ..Limits::default()
        },
        ..StreamContext::default()
    };
    let ops = parse(&mut s, settings);
    let (whole, fed) = decode(&ops, &ctx, false);
    let (cut, _) = decode(&ops, &ctx, true);
    assert_eq!(whole, cut, "records depend on the chunking");
    for r in &whole {
        if let Record::Message(m) = r {
            assert!(m.length >= 9, "{m:?}");
            let i = usize::from(m.direction == Some(Direction::S2C));
            assert!(m.offset.unwrap_or(0) < fed[i], "{m:?} beyond {fed:?}");
        }
    }
}

/// The `cells` target: a result's rows, or a request's bound values, written straight from their
/// bytes (`Rows::write_json`, `types::write_cell`) are byte for byte the JSON text of their value
/// tree (`safe_value`), the form every cell had before. The input: a column count, a rows count
/// and a byte whose bit 0 says the columns' types follow as `[option]`s (else the cells are hex)
/// and bit 1 that the cells are one list of bound `[value]`s (else rows of `[bytes]`), then the
/// cells; an input that does not read as that is skipped, as the decoder refuses such a body.
pub fn cells(data: &[u8]) {
    if let Some((written, tree)) = texts_of_rows(data) {
        assert_eq!(written, tree, "{data:?}");
    }
}

/// The rows an input of `cells` describes, as written from their bytes and as their tree's text.
fn texts_of_rows(data: &[u8]) -> Option<(String, String)> {
    let (&[columns, rows, typed], rest) = data.split_first_chunk()?;
    let (columns, rows) = (usize::from(columns % 8), usize::from(rows % 8));
    let mut r = Reader::new(rest);
    let types: Option<Arc<[CqlType]>> = if typed & 1 != 0 {
        Some(
            (0..columns)
                .map(|_| r.option(0, 8))
                .collect::<Result<_, _>>()
                .ok()?,
        )
    } else {
        None
    };
    let cells = if typed & 2 != 0 {
        // a request's bound values: `columns` [value] cells (one may be "not set")
        let ahead = r.ahead();
        for _ in 0..columns {
            r.value().ok()?;
        }
        let bytes: Arc<[u8]> = ahead[..ahead.len() - r.ahead().len()].into();
        let (hexed, decoded) = Rows::values(bytes, columns, types);
        decoded.unwrap_or(hexed)
    } else {
        Rows::read(&mut r, types, columns, rows).ok()?
    };
    let mut written = String::new();
    cells.write_json(&mut written);
    let mut tree = String::new();
    json::value(&mut tree, &cells.value());
    Some((written, tree))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    /// One column of `code`, rows of the given cells (`None`: null), through the `cells` target.
    fn column(code: u16, cells: &[Option<&[u8]>]) {
        let mut input = vec![1, cells.len() as u8, 1];
        input.extend_from_slice(&code.to_be_bytes());
        for c in cells {
            match c {
                Some(b) => {
                    input.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    input.extend_from_slice(b);
                }
                None => input.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let (written, tree) = super::texts_of_rows(&input).expect("a rows body");
        assert_eq!(written, tree);
    }

    #[test]
    fn bound_values_written_from_their_bytes_are_their_values_text() {
        // three bound [value]s: a bigint, null, "not set"; untyped (hex) and typed (bigint ×3)
        let mut cells = Vec::new();
        cells.extend_from_slice(&8i32.to_be_bytes());
        cells.extend_from_slice(&42i64.to_be_bytes());
        cells.extend_from_slice(&(-1i32).to_be_bytes());
        cells.extend_from_slice(&(-2i32).to_be_bytes());
        for (typed, text) in [
            (0, r#"["000000000000002a",null,"<unset>"]"#),
            (1, r#"[42,null,"<unset>"]"#),
        ] {
            let mut input = vec![3, 0, 2 | typed];
            if typed != 0 {
                input.extend_from_slice(&[0, 2, 0, 2, 0, 2]);
            }
            input.extend_from_slice(&cells);
            let (written, tree) = super::texts_of_rows(&input).expect("a values body");
            assert_eq!(written, tree);
            assert_eq!(written, text);
        }
    }

    #[test]
    fn cells_written_from_their_bytes_are_their_values_text() {
        let long = |v: i64| v.to_be_bytes().to_vec();
        let texts: [&[u8]; 4] = [b"web-001", b"a \"quoted\"\n\x01 \xc3\xa9", b"\xc3\x28", b""];
        for code in [0x0001, 0x000D, 0x0003] {
            let mut cells: Vec<Option<&[u8]>> = texts.iter().map(|t| Some(*t)).collect();
            cells.push(None);
            column(code, &cells);
        }
        // in range, before year 1, past 9999, a short cell (its error object)
        let stamps = [
            long(1_763_700_000_123),
            long(-62_135_596_800_001),
            long(i64::MAX),
        ];
        let mut cells: Vec<Option<&[u8]>> = stamps.iter().map(|s| Some(&s[..])).collect();
        cells.push(Some(&[1, 2]));
        column(0x000B, &cells);
        let (min, max) = (long(i64::MIN), long(-1));
        for code in [0x0002, 0x0005, 0x0012] {
            column(code, &[Some(&min), Some(&max), Some(&[7]), None]);
        }
        column(
            0x0009,
            &[Some(&[0x80, 0, 0, 0]), Some(&[0, 0, 1, 0]), Some(&[1])],
        );
        column(0x0013, &[Some(&[0xff, 0xfe]), Some(&[0, 0, 1])]);
        column(0x0014, &[Some(&[0x80]), Some(&[0x7f]), Some(&[])]);
        column(0x0004, &[Some(&[0]), Some(&[2]), Some(&[0, 1])]);
        let uuid: Vec<u8> = (0..16).collect();
        column(0x000C, &[Some(&uuid), Some(&uuid[..15])]);
        column(0x000F, &[Some(&uuid), None]);
    }

    #[test]
    fn cells_regressions() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/cells");
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            super::cells(&fs::read(entry.path()).unwrap());
        }
    }

    #[test]
    fn cql_regressions() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/cql");
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            super::cql(&fs::read(entry.path()).unwrap());
        }
    }

    #[test]
    fn scripts_of_every_operation() {
        for settings in [0u8, 3, 4, 8, 16, 22] {
            let mut script = vec![settings];
            for op in 0..16u8 {
                script.extend_from_slice(&[op, op.wrapping_mul(37), 6, 0, 1, 0, 0x21, 9, b'x']);
            }
            super::cql(&script);
        }
    }
}
