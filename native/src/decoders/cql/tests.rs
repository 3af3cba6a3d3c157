//! Golden vectors from reference/cql.md §7 (CRCs, frames, a genuine driver QUERY, a RESULT Rows,
//! AUTH_RESPONSE, a v4 LZ4 body), typed values against the texts Python's `str()` gives, and the
//! decoder's invariants on truncated and re-chunked input.

use crate::decoders::{Chunk, Decoder, Gap, Shared, StreamContext};
use crate::model::{Direction, Message, Record, Value};

use super::envelope;
use super::frame_v5::{self, crc24, crc32, encode_frame, encode_header, parse_header};
use super::types::{decode_value, ip, Cell, CqlType, Reader};
use super::CqlDecoder;

const C2S: Direction = Direction::C2S;
const S2C: Direction = Direction::S2C;

fn h(s: &str) -> Vec<u8> {
    let s: String = s
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '|')
        .collect();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

const VEC_F: &str = "270002 7a6d6b | 05 00 0002 07 0000001e | 00000014 53454c45435420762046524f4d206b732e74626c 0001 00000000 | d9a5dca4";
const VEC_G: &str = "300002 953f3e | 85 00 0002 08 00000027 | 00000002 00000001 00000001 0002 6b73 0003 74626c 0001 76 0003 00000001 00000005 68656c6c6f | b8bf6f5a";
const VEC_H: &str =
    "170002 856491 | 05 00 0002 0f 0000000e | 0000000a 00757365720070617373 | dfbfdbe4";
const VEC_I: &str = "04 01 0002 07 00000021 | 0000001b | f00c0000001453454c45435420762046524f4d206b732e74626c000100";

fn ctx(show_secrets: bool) -> StreamContext {
    StreamContext {
        server: "10.0.0.2".into(),
        server_port: 9042,
        show_secrets,
        ..StreamContext::default()
    }
}

/// Feed (direction, bytes) events in the given pieces, then close; all records.
fn run_split(events: &[(Direction, Vec<u8>)], piece: usize, show_secrets: bool) -> Vec<Record> {
    let mut dec = CqlDecoder::new(ctx(show_secrets));
    let mut shared = Shared::default();
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    for (i, (d, data)) in events.iter().enumerate() {
        for part in data.chunks(piece.max(1)) {
            let o = &mut offsets[usize::from(*d == S2C)];
            let chunk = Chunk {
                direction: *d,
                offset: *o,
                data: part,
                frame: Some(i as u64 + 1),
                ts: Some(1000 * (i as i64 + 1)),
            };
            dec.feed(&chunk, &mut shared, &mut out);
            *o += part.len() as u64;
        }
    }
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    out
}

fn run(events: &[(Direction, Vec<u8>)]) -> Vec<Record> {
    run_split(events, usize::MAX, false)
}

fn messages(recs: &[Record]) -> Vec<&Message> {
    recs.iter()
        .filter_map(|r| {
            if let Record::Message(m) = r {
                Some(m)
            } else {
                None
            }
        })
        .collect()
}

fn codes(recs: &[Record]) -> Vec<&'static str> {
    recs.iter()
        .filter_map(|r| {
            if let Record::Finding(f) = r {
                Some(f.code)
            } else {
                None
            }
        })
        .collect()
}

fn field<'m>(m: &'m Message, name: &str) -> &'m Value {
    m.get(name)
        .unwrap_or_else(|| panic!("no field {name} in {:?}", m.fields))
}

#[test]
fn crc_check_values() {
    assert_eq!(crc24(b"123456789"), 0x4B3F02);
    assert_eq!(crc32(b""), 0x44777ED3);
    assert_eq!(crc24(&h("ffff01")), 0xFE9138); // vector B
}

#[test]
fn frame_vectors_a_to_e() {
    let a = h("320002 a5ffee")
        .into_iter()
        .chain([0x62; 50])
        .chain(h("7aaeeb7c"))
        .collect::<Vec<_>>();
    assert_eq!(encode_frame(&[0x62; 50], true, false), a);
    let ha = parse_header(&a, false).unwrap();
    assert!(ha.crc_ok() && ha.self_contained && ha.payload_length == 50);
    assert_eq!(ha.trailer_crc32(&a), (0x7CEBAE7A, 0x7CEBAE7A));
    assert_eq!(encode_header(131071, 0, false, false), h("ffff01 3891fe"));
    for (raw, lz4, len, unc) in [
        ("050002 19999a", false, 5, 0),
        ("0500180004 9e0838", true, 5, 12),
        ("0500feff07 ae6cdc", true, 5, 131071),
    ] {
        let hd = parse_header(&h(raw), lz4).unwrap();
        assert!(hd.crc_ok() && hd.self_contained && hd.padding == 0, "{raw}");
        assert_eq!((hd.payload_length, hd.uncompressed_length), (len, unc));
        assert_eq!(encode_header(len, unc, true, lz4), h(raw));
    }
    let d = h("0b00640004 2dacc4 | 1f62010019506262626262 | 25c4f9e0");
    let hd = parse_header(&d, true).unwrap();
    assert_eq!((hd.payload_length, hd.uncompressed_length), (11, 50));
    assert_eq!(hd.trailer_crc32(&d).0, hd.trailer_crc32(&d).1);
    assert_eq!(
        encode_frame(b"b", true, true),
        h("0100000004 06a587 62 e91b206e")
    ); // E: stored raw
    let mut bad = a.clone();
    bad[3] ^= 1;
    assert!(!parse_header(&bad, false).unwrap().crc_ok());
}

#[test]
fn vectors_f_g_query_and_rows_midstream() {
    let recs = run(&[(C2S, h(VEC_F)), (S2C, h(VEC_G))]);
    assert_eq!(codes(&recs), Vec::<&str>::new());
    let m = messages(&recs);
    let (q, r) = (m[0], m[1]);
    assert_eq!(
        (q.kind, q.version, q.offset, q.length),
        ("query", Some("v5"), Some(6), 39)
    );
    assert_eq!(field(q, "query"), "SELECT v FROM ks.tbl");
    assert_eq!(
        (field(q, "consistency"), field(q, "framing")),
        (&Value::from("ONE"), &Value::from("crc"))
    );
    assert_eq!(field(r, "rows"), &serde_json::json!([["68656c6c6f"]]));
    assert_eq!(
        field(r, "columns"),
        &serde_json::json!([{"keyspace": "ks", "table": "tbl", "name": "v", "type": "blob"}])
    );
    assert_eq!(
        (field(r, "request_opcode"), field(r, "latency_ns")),
        (&Value::from("query"), &Value::from(1000))
    );
}

#[test]
fn vector_h_credentials_redacted_unless_asked() {
    let recs = run(&[(C2S, h(VEC_H))]);
    let m = messages(&recs)[0];
    assert_eq!(
        (field(m, "token"), field(m, "auth_user")),
        (&Value::from("<redacted>"), &Value::from("user"))
    );
    assert!(m.get("auth_password").is_none());
    let recs = run_split(&[(C2S, h(VEC_H))], usize::MAX, true);
    let m = messages(&recs)[0];
    assert_eq!(
        (field(m, "token"), field(m, "auth_password")),
        (&Value::from("00757365720070617373"), &Value::from("pass"))
    );
}

#[test]
fn vector_i_v4_lz4_body() {
    let recs = run(&[(C2S, h(VEC_I))]);
    let m = messages(&recs)[0];
    assert_eq!(
        (m.version, field(m, "flag_names")),
        (Some("v4"), &serde_json::json!(["compression"]))
    );
    assert_eq!(field(m, "query"), "SELECT v FROM ks.tbl");
}

/// A v5 connection: plain OPTIONS/STARTUP, then frames (LZ4 when asked), a query answered by rows.
fn v5_session(lz4: bool) -> Vec<(Direction, Vec<u8>)> {
    let mut startup = vec![0, 1, 0, 11];
    startup.extend_from_slice(b"COMPRESSION");
    startup.extend_from_slice(&[0, 3]);
    startup.extend_from_slice(b"lz4");
    let startup = if lz4 { startup } else { vec![0, 0] };
    let query = h(VEC_F)[6..6 + 39].to_vec();
    let rows = h(VEC_G)[6..6 + 48].to_vec();
    vec![
        (C2S, envelope::encode(5, 0, 1, 0x01, &startup)),
        (S2C, envelope::encode(0x85, 0, 1, 0x02, b"")),
        (C2S, encode_frame(&query, true, lz4)),
        (S2C, encode_frame(&[rows.clone(), rows].concat(), true, lz4)),
    ]
}

#[test]
fn v5_switches_to_frames_after_startup() {
    for lz4 in [false, true] {
        let recs = run(&v5_session(lz4));
        // the second result reuses the answered stream id
        assert_eq!(codes(&recs), ["cql.response-without-request"], "lz4 {lz4}");
        let kinds: Vec<_> = messages(&recs)
            .iter()
            .map(|m| (m.kind, m.get("framing").cloned()))
            .collect();
        let framing = Some(Value::from(if lz4 { "lz4" } else { "crc" }));
        assert_eq!(
            kinds,
            [
                ("startup", None),
                ("ready", None),
                ("query", framing.clone()),
                ("result", framing.clone()),
                ("result", framing)
            ]
        );
    }
}

#[test]
fn large_envelope_over_non_self_contained_frames() {
    let text = vec![b'x'; 200_000];
    let mut body = (text.len() as u32).to_be_bytes().to_vec();
    body.extend_from_slice(&text);
    body.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
    let env = envelope::encode(5, 0, 3, 0x07, &body);
    let frames: Vec<u8> = env
        .chunks(131_060)
        .flat_map(|c| encode_frame(c, false, false))
        .collect();
    let recs = run(&[(C2S, frames)]);
    let m = messages(&recs);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (field(m[0], "frames"), m[0].length),
        (&Value::from(2), env.len() as u64)
    );
    assert_eq!(codes(&recs), ["cql.unanswered-request"]);
}

#[test]
fn corrupt_crcs_are_reported_and_the_decoder_resynchronises() {
    let mut frames = encode_frame(&h(VEC_F)[6..45], true, false);
    let good = frames.clone();
    frames[1] ^= 0x40; // header: CRC24 fails
    frames.extend_from_slice(&good);
    let mut payload_bad = good.clone();
    payload_bad[10] ^= 1; // payload: CRC32 fails, the envelope still parses
    let recs = run(&[(C2S, [good, frames, payload_bad].concat())]);
    let c = codes(&recs);
    assert!(
        c.contains(&"cql.crc24-mismatch")
            && c.contains(&"cql.resync")
            && c.contains(&"cql.crc32-mismatch"),
        "{c:?}"
    );
    assert_eq!(messages(&recs).len(), 3);
}

fn value(code: u16, custom: &str, data: &[u8]) -> Value {
    let mut t = CqlType::native(code);
    t.custom = custom.to_owned();
    decode_value(&t, Cell::Bytes(data), 0)
        .unwrap_or_else(|e| Value::from(format!("error: {}", e.0)))
}

#[test]
fn typed_values_as_python_writes_them() {
    // decimal: str(Decimal(unscaled).scaleb(-scale))
    assert_eq!(value(6, "", &h("00000002 3039")), "123.45");
    assert_eq!(value(6, "", &h("00000000 ff85")), "-123");
    assert_eq!(value(6, "", &h("fffffffe 7b")), "1.23E+4");
    assert_eq!(value(6, "", &h("00000009 01")), "1E-9");
    assert_eq!(value(6, "", &h("00000007 00")), "0E-7");
    assert_eq!(value(6, "", &h("00000003 00")), "0.000");
    // 30 digits rounded half-even to 28: 123456789012345678901234567895 -> ...2345678901234567890 E+2
    assert_eq!(
        value(6, "", &h("00000000 018ee90ff6c373e0ee4e3f0ad7")),
        "1.234567890123456789012345679E+29"
    );
    assert_eq!(
        value(6, "", &h("00000028 fe7116f0093c8c1f11b1c0f533")),
        "-1.234567890123456789012345679E-11"
    );
    assert_eq!(
        value(6, "", &h("00000000 018ee90ff6c373e0ee4e3f0aaa")),
        "1.234567890123456789012345678E+29"
    );
    assert_eq!(
        value(6, "", &h("00000003 febce1f051928de83560000005")),
        "-100000000000000000000000000.0"
    );
    // varint: integers within 64 bits, strings beyond
    assert_eq!(value(0x0E, "", &h("ff")), -1);
    assert_eq!(
        value(0x0E, "", &h("00ffffffffffffffff")),
        "18446744073709551615"
    );
    assert_eq!(
        value(0x0E, "", &h("ff7fffffffffffffff")),
        "-9223372036854775809"
    );
    assert_eq!(value(0x0E, "", &h("ff8000000000000000")), i64::MIN);
    // timestamp and date (Python's datetime range, the number outside it)
    assert_eq!(
        value(0x0B, "", &(-1i64).to_be_bytes()),
        "1969-12-31T23:59:59.999Z"
    );
    assert_eq!(
        value(0x0B, "", &1_763_700_000_123i64.to_be_bytes()),
        "2025-11-21T04:40:00.123Z"
    );
    assert_eq!(value(0x0B, "", &i64::MAX.to_be_bytes()), i64::MAX);
    assert_eq!(value(0x11, "", &(1u32 << 31).to_be_bytes()), "1970-01-01");
    assert_eq!(value(0x11, "", &0u32.to_be_bytes()), 0);
    // duration: v5 code and the v4 custom class
    let dur = serde_json::json!({"months": 1, "days": 2, "nanoseconds": 3});
    assert_eq!(value(0x15, "", &h("02 04 06")), dur);
    assert_eq!(
        value(
            0,
            "org.apache.cassandra.db.marshal.DurationType",
            &h("02 04 06")
        ),
        dur
    );
    assert_eq!(value(0, "org.example.Other", &h("02 04 06")), "020406");
    assert_eq!(
        value(0x15, "", &h("ff 00000000000000ff 01 01")).get("months"),
        Some(&Value::from(-128))
    );
    // floats and bad lengths
    assert_eq!(value(8, "", &h("7fc00000")), "NaN");
    assert_eq!(value(7, "", &h("fff0000000000000")), "-Infinity");
    assert_eq!(
        value(9, "", &h("0102")),
        "error: 2 bytes are not a valid int value"
    );
}

#[test]
fn addresses_as_python_ipaddress_writes_them() {
    assert_eq!(ip(&[10, 0, 0, 1]), "10.0.0.1");
    assert_eq!(ip(&h("00000000000000000000000000000001")), "::1");
    assert_eq!(ip(&h("00000000000000000000000000000000")), "::");
    assert_eq!(
        ip(&h("20010db8000000010000000000000001")),
        "2001:db8:0:1::1"
    );
    assert_eq!(
        ip(&h("20010db8000000000001000000000001")),
        "2001:db8::1:0:0:1"
    );
    assert_eq!(ip(&h("00000000000000000000ffff0a000001")), "::ffff:a00:1");
}

#[test]
fn collections_udts_and_type_names() {
    let map = h("0021 000d 0009"); // map<varchar, int>
    let t = Reader::new(&map).option(0, 8).unwrap();
    assert_eq!(t.name(), "map<varchar, int>");
    let cell = h("00000002 00000001 61 00000004 00000001 00000001 62 ffffffff");
    assert_eq!(
        decode_value(&t, Cell::Bytes(&cell), 0).unwrap(),
        serde_json::json!({"a": 1, "b": null})
    );
    let udt = h("0030 0002 6b73 0001 75 0002 0001 61 0009 0001 62 0020 000d");
    let t = Reader::new(&udt).option(0, 8).unwrap();
    assert_eq!(t.name(), "ks.u");
    let cell = h("00000004 00000007"); // trailing field omitted
    assert_eq!(
        decode_value(&t, Cell::Bytes(&cell), 0).unwrap(),
        serde_json::json!({"a": 7})
    );
    let deep = [h("0020").repeat(10), h("0009")].concat();
    assert_eq!(
        Reader::new(&deep).option(0, 8).unwrap_err().0,
        "type nesting deeper than 8"
    );
}

#[test]
fn any_prefix_and_any_chunking_give_the_same_records() {
    let session = [v5_session(true), vec![(C2S, h(VEC_H))]].concat();
    let whole = run(&session);
    for piece in [1, 2, 3, 7, 64] {
        assert_eq!(
            run_split(&session, piece, false),
            whole,
            "pieces of {piece}"
        );
    }
    let stream: Vec<u8> = session
        .iter()
        .filter(|(d, _)| *d == C2S)
        .flat_map(|(_, b)| b.clone())
        .collect();
    for cut in 0..stream.len() {
        let recs = run(&[(C2S, stream[..cut].to_vec())]);
        let lost: u64 = recs
            .iter()
            .filter_map(|r| match r {
                Record::Finding(f) if f.code == "cql.truncated" => f.fields[0].1.as_u64(),
                _ => None,
            })
            .sum();
        let decoded: u64 = messages(&recs).iter().map(|m| m.length).sum();
        assert!(decoded + lost <= cut as u64, "cut {cut}");
    }
}

#[test]
fn a_gap_drops_the_partial_envelope_and_resynchronises() {
    let stream: Vec<u8> = v5_session(false)
        .into_iter()
        .filter(|(d, _)| *d == C2S)
        .flat_map(|(_, b)| b)
        .collect();
    let mut dec = CqlDecoder::new(ctx(false));
    let (mut shared, mut out) = (Shared::default(), Vec::new());
    let cut = stream.len() - 10;
    dec.feed(
        &Chunk {
            direction: C2S,
            offset: 0,
            data: &stream[..cut],
            frame: Some(1),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    dec.gap(
        &Gap {
            direction: C2S,
            offset: cut as u64,
            length: 5,
            frame: Some(2),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    let again = encode_frame(&h(VEC_F)[6..45], true, false);
    let mut data = vec![0xEE; 3];
    data.extend_from_slice(&again);
    dec.feed(
        &Chunk {
            direction: C2S,
            offset: cut as u64 + 5,
            data: &data,
            frame: Some(3),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    assert_eq!(
        codes(&out),
        [
            "cql.truncated",
            "cql.resync",
            "cql.unanswered-request", // the STARTUP
            "cql.unanswered-request"  // the QUERY after the gap
        ]
    );
    assert_eq!(
        messages(&out).iter().map(|m| m.kind).collect::<Vec<_>>(),
        ["startup", "query"]
    );
}

#[test]
fn hostile_lengths_never_allocate() {
    // an LZ4 body declaring 4 GiB, a v5 multi-frame envelope declaring 4 GiB, rows of no columns
    let body = [h("ffffffff"), vec![0; 8]].concat();
    let recs = run(&[(C2S, envelope::encode(4, 1, 0, 0x07, &body))]);
    assert!(codes(&recs).contains(&"cql.decompression-failed"));
    let env = envelope::encode(5, 0, 0, 0x07, b"");
    let mut huge = env.clone();
    huge[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
    let recs = run(&[(C2S, encode_frame(&huge, false, false))]);
    assert!(codes(&recs).contains(&"cql.envelope-too-large"));
    let rows = h("00000002 00000000 00000000 7fffffff");
    let recs = run(&[(S2C, envelope::encode(0x84, 0, 0, 0x08, &rows))]);
    assert!(codes(&recs).contains(&"cql.malformed-body"));
    assert_eq!(frame_v5::MAX_PAYLOAD, 131_071);
}

#[test]
fn detection_evidence_is_a_clean_decode() {
    let query = &h(VEC_F)[6..45];
    assert!(super::envelope_decodes(query));
    assert!(!super::envelope_decodes(&query[..30])); // incomplete
    let mut longer = query.to_vec();
    longer[8] += 1; // a body byte more than the fields use
    longer.push(0);
    assert!(!super::envelope_decodes(&longer));
}

#[test]
fn v5_query_flags_are_a_signed_int() {
    // QUERY "x", consistency ONE, [int] flags with the top bit set (no flagged fields follow)
    let body = h("00000001 78 0001 80000000");
    let recs = run(&[(
        C2S,
        encode_frame(&envelope::encode(5, 0, 1, 0x07, &body), true, false),
    )]);
    assert_eq!(field(messages(&recs)[0], "query_flags"), i32::MIN);
}

#[test]
fn declared_sizes_beyond_what_the_data_can_hold_are_refused_cheaply() {
    use super::compression::{lz4_body, snappy_body};
    let block = lz4_flex::block::compress(&[b'b'; 50]);
    let mut body = 50_000_000u32.to_be_bytes().to_vec();
    body.extend_from_slice(&block);
    let cap = 64 << 20;
    assert_eq!(
        lz4_body(&body, cap).unwrap_err(),
        "LZ4 block inflated to 50 bytes, declared 50000000"
    );
    body[..4].copy_from_slice(&50u32.to_be_bytes());
    assert_eq!(lz4_body(&body, cap).unwrap(), [b'b'; 50]);
    let snappy = snap::raw::Encoder::new()
        .compress_vec(&[b'b'; 500])
        .unwrap();
    assert_eq!(snappy_body(&snappy, cap).unwrap(), [b'b'; 500]);
    let huge = [0x80, 0x80, 0x80, 0x10, 0]; // varint 32 MiB, then nothing
    assert!(snappy_body(&huge, cap)
        .unwrap_err()
        .starts_with("Snappy buffer corrupt"));
}

#[test]
fn finding_codes_and_severities_are_the_documented_ones() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/protocols/cql.md");
    let text = std::fs::read_to_string(docs).unwrap();
    let rows: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("| `cql."))
        .filter_map(|l| {
            let mut cells = l.split('|').map(str::trim);
            Some((cells.next()?.trim_end_matches('`'), cells.next()?))
        })
        .collect();
    assert_eq!(rows.len(), 20);
    for (code, severity) in rows {
        let code = format!("cql.{code}");
        assert_eq!(
            super::findings::severity(&code).as_str(),
            severity,
            "{code}"
        );
    }
}

/// A v4 QUERY and its RESULT Rows (global keyspace "ks", table "tbl") with these columns.
fn query_and_rows(
    stream: u8,
    columns: &[(&str, u16)],
    cells: &[&[u8]],
) -> [(Direction, Vec<u8>); 2] {
    let string = |s: &str| [&(s.len() as u16).to_be_bytes()[..], s.as_bytes()].concat();
    let envelope = |version: u8, opcode: u8, body: Vec<u8>| {
        let head = [version, 0, 0, stream, opcode];
        [&head[..], &(body.len() as u32).to_be_bytes(), &body].concat()
    };
    let text = b"SELECT * FROM ks.tbl";
    let query = [&(text.len() as u32).to_be_bytes()[..], text, &[0, 1, 0]].concat();
    let mut rows = [2i32, 1, columns.len() as i32]
        .map(i32::to_be_bytes)
        .concat();
    rows.extend([string("ks"), string("tbl")].concat());
    for (name, code) in columns {
        rows.extend([string(name), code.to_be_bytes().to_vec()].concat());
    }
    rows.extend(1i32.to_be_bytes());
    for cell in cells {
        rows.extend([&(cell.len() as i32).to_be_bytes()[..], cell].concat());
    }
    [
        (C2S, envelope(4, 0x07, query)),
        (S2C, envelope(0x84, 0x08, rows)),
    ]
}

#[test]
fn column_specs_remembered_are_those_of_the_same_bytes() {
    let spec = |name: &str, t: &str| serde_json::json!({"keyspace": "ks", "table": "tbl", "name": name, "type": t});
    let cases = [
        (
            vec![("v", 0x0003)],
            vec![&b"a"[..]],
            serde_json::json!([spec("v", "blob")]),
        ),
        (
            vec![("w", 0x0003)],
            vec![&b"b"[..]],
            serde_json::json!([spec("w", "blob")]),
        ),
        (
            vec![("v", 0x0003)],
            vec![&b"c"[..]],
            serde_json::json!([spec("v", "blob")]),
        ),
        // the same first column, one more: not the one-column specs again
        (
            vec![("v", 0x0003), ("n", 0x0009)],
            vec![&b"d"[..], &[0, 0, 0, 7][..]],
            serde_json::json!([spec("v", "blob"), spec("n", "int")]),
        ),
        (
            vec![("v", 0x000d)],
            vec![&b"e"[..]],
            serde_json::json!([spec("v", "varchar")]),
        ),
    ];
    let events: Vec<_> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, (columns, cells, _))| query_and_rows(i as u8 + 1, columns, cells))
        .collect();
    let recs = run(&events);
    assert_eq!(codes(&recs), Vec::<&str>::new());
    let results: Vec<_> = messages(&recs)
        .into_iter()
        .filter(|m| m.kind == "result")
        .collect();
    assert_eq!(results.len(), cases.len());
    for (m, (_, _, expected)) in results.iter().zip(&cases) {
        assert_eq!(field(m, "columns"), expected);
    }
    assert_eq!(field(results[3], "rows"), &serde_json::json!([["64", 7]]));
    assert_eq!(field(results[4], "rows"), &serde_json::json!([["e"]]));
}

/// A compressed Rows result of nulls: four bytes a cell on the wire, a JSON value each once
/// decoded. Its cells are paid from the frame's budget after its inflated bytes, so a bomb of
/// them is refused before any row is decoded; a result within the budget decodes.
#[test]
fn cells_of_an_inflated_rows_result_are_paid_from_the_cap() {
    let result = |rows: u32| {
        let mut body = h("00000002 00000001 00000001 0002 6b73 0003 74626c 0001 76 0009");
        body.extend(rows.to_be_bytes());
        body.extend(std::iter::repeat_n(0xFFu8, 4 * rows as usize));
        let mut packed = (body.len() as u32).to_be_bytes().to_vec();
        packed.extend(lz4_flex::block::compress(&body));
        envelope::encode(0x84, 1, 0, 0x08, &packed)
    };
    let recs = run(&[(S2C, result(1000))]);
    assert!(!codes(&recs).contains(&"cql.malformed-body"));
    let recs = run(&[(S2C, result(600_000))]);
    let f = recs
        .iter()
        .find_map(|r| match r {
            Record::Finding(f) if f.code == "cql.malformed-body" => Some(f),
            _ => None,
        })
        .expect("refused");
    assert!(
        f.message.contains("600000 rows of 1 columns")
            && f.message.contains("67108864-byte inflate cap"),
        "{}",
        f.message
    );
}

/// A request and its answer at the two ends of the i64 time range (pcapng interfaces with
/// if_tsoffset put capture times anywhere in it): no latency, and no overflow (it panicked).
#[test]
fn latency_beyond_i64_is_left_out() {
    let request = envelope::encode(4, 0, 7, 0x05, b"");
    let answer = envelope::encode(0x84, 0, 7, 0x06, &[0, 0]);
    for (asked, answered, latency) in [
        (i64::MIN, i64::MAX, None),
        (i64::MAX, i64::MIN, None),
        (-11, i64::MAX - 10, None),
        (-10, i64::MAX - 10, Some(i64::MAX)),
        (i64::MIN, -1, Some(i64::MAX)),
    ] {
        let mut dec = CqlDecoder::new(ctx(false));
        let (mut shared, mut out) = (Shared::default(), Vec::new());
        for (i, (d, data, ts)) in [(C2S, &request, asked), (S2C, &answer, answered)]
            .into_iter()
            .enumerate()
        {
            let chunk = Chunk {
                direction: d,
                offset: 0,
                data,
                frame: Some(i as u64 + 1),
                ts: Some(ts),
            };
            dec.feed(&chunk, &mut shared, &mut out);
        }
        let answer = messages(&out)[1];
        assert_eq!(answer.kind, "supported");
        let got = answer.get("latency_ns").cloned();
        assert_eq!(got, latency.map(Value::from), "{asked} {answered}");
    }
}

#[test]
fn kinds_are_the_opcode_names_and_unknown() {
    let mut named: Vec<&str> = (0..=u8::MAX).filter_map(envelope::opcode_name).collect();
    named.push("unknown");
    assert_eq!(named, envelope::KINDS);
}

/// The requests' records with their outcome and the responses' ids, per (kind, stream id).
fn outcomes(recs: &[Record]) -> Vec<(&'static str, Value, Option<&'static str>)> {
    messages(recs)
        .iter()
        .map(|m| {
            let outcome = m.delivery.map(crate::model::Delivery::as_str);
            (m.kind, field(m, "stream_id").clone(), outcome)
        })
        .collect()
}

/// Steps of one connection: data in either direction, or a gap in the server's bytes.
enum Step {
    Data(Direction, Vec<u8>),
    ServerGap(u64),
}

/// Run `steps` and end the connection (`closed`: by FIN or RST, else the capture ended first).
fn run_ending(steps: &[Step], closed: bool) -> Vec<Record> {
    let mut dec = CqlDecoder::new(ctx(false));
    let (mut shared, mut out) = (Shared::default(), Vec::new());
    let mut offsets = [0u64; 2];
    for (i, step) in steps.iter().enumerate() {
        let frame = Some(i as u64 + 1);
        match step {
            Step::Data(d, data) => {
                let o = &mut offsets[usize::from(*d == S2C)];
                let chunk = Chunk {
                    direction: *d,
                    offset: *o,
                    data,
                    frame,
                    ts: Some(1000),
                };
                dec.feed(&chunk, &mut shared, &mut out);
                *o += data.len() as u64;
            }
            Step::ServerGap(length) => {
                let gap = Gap {
                    direction: S2C,
                    offset: offsets[1],
                    length: *length,
                    frame,
                    ts: Some(1000),
                };
                dec.gap(&gap, &mut shared, &mut out);
                offsets[1] += length;
            }
        }
    }
    dec.ending(closed);
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    out
}

fn options(stream: i16) -> Step {
    Step::Data(C2S, envelope::encode(4, 0, stream, 0x05, b""))
}

fn supported(stream: i16) -> Step {
    Step::Data(S2C, envelope::encode(0x84, 0, stream, 0x06, &[0, 0]))
}

fn error(stream: i16) -> Step {
    // ERROR 0x2200 (invalid) with a message
    let body = [&0x2200i32.to_be_bytes()[..], &[0, 3], b"bad"].concat();
    Step::Data(S2C, envelope::encode(0x84, 0, stream, 0x00, &body))
}

#[test]
fn each_request_carries_its_outcome_and_its_response_the_same_id() {
    // pipelined: 1, 2, 3 sent; 2 answered with an error, 1 answered, 3 never
    let steps = [options(1), options(2), options(3), error(2), supported(1)];
    for (closed, last) in [(true, "unanswered"), (false, "unknown")] {
        let out = run_ending(&steps, closed);
        assert_eq!(
            outcomes(&out),
            [
                ("options", Value::from(2), Some("error")),
                ("error", Value::from(2), Some("error")),
                ("options", Value::from(1), Some("answered")),
                ("supported", Value::from(1), Some("answered")),
                ("options", Value::from(3), Some(last)),
            ],
            "closed {closed}"
        );
        let m = messages(&out);
        assert_eq!(m[0].event_id, m[1].event_id);
        assert_eq!(m[2].event_id, m[3].event_id);
        let ids: std::collections::HashSet<_> = m.iter().map(|m| m.event_id.unwrap()).collect();
        assert_eq!(ids.len(), 3, "one id a request");
        // the request's record is as it would have been written at once: its place and fields
        assert_eq!((m[0].offset, m[0].frame), (Some(9), Some(2)));
        assert_eq!(codes(&out), ["cql.unanswered-request"]);
    }
}

#[test]
fn a_response_the_capture_may_have_missed_makes_the_outcome_unknown() {
    // 1 waits across a gap in the server's bytes: its answer may be in it (closed or not)
    let steps = [options(1), Step::ServerGap(11), options(2), supported(2)];
    let out = run_ending(&steps, true);
    assert_eq!(
        outcomes(&out),
        [
            ("options", Value::from(2), Some("answered")),
            ("supported", Value::from(2), Some("answered")),
            ("options", Value::from(1), Some("unknown")),
        ]
    );
    // answered after the gap after all: answered
    let steps = [options(1), Step::ServerGap(11), supported(1)];
    let out = run_ending(&steps, true);
    assert_eq!(outcomes(&out)[0].2, Some("answered"));
}

#[test]
fn a_stream_id_reused_leaves_the_first_request_unanswered() {
    let steps = [options(1), options(1), supported(1)];
    // the client gave up on it: unanswered, even on a connection still open at the end
    for closed in [true, false] {
        let out = run_ending(&steps, closed);
        assert_eq!(
            outcomes(&out),
            [
                ("options", Value::from(1), Some("answered")),
                ("supported", Value::from(1), Some("answered")),
                ("options", Value::from(1), Some("unanswered")),
            ]
        );
        assert_eq!(codes(&out), ["cql.stream-id-reused"]);
    }
    // a gap in the server's bytes, before the reuse or found after it: the first's answer may
    // have been in it
    for steps in [
        [options(1), Step::ServerGap(11), options(1), supported(1)],
        [options(1), options(1), Step::ServerGap(11), supported(1)],
    ] {
        let out = run_ending(&steps, true);
        assert_eq!(
            outcomes(&out)[2],
            ("options", Value::from(1), Some("unknown"))
        );
    }
}

#[test]
fn the_end_of_many_unanswered_requests_comes_in_parts() {
    let steps: Vec<Step> = (0..5000)
        .map(|i| {
            let stream = i16::try_from(i).unwrap().to_be_bytes();
            Step::Data(C2S, [&[4, 0][..], &stream, &[0x05, 0, 0, 0, 0]].concat())
        })
        .collect();
    let mut dec = CqlDecoder::new(ctx(false));
    let mut shared = Shared::default();
    let mut out = Vec::new();
    let mut offset = 0u64;
    for step in &steps {
        let Step::Data(d, data) = step else { continue };
        let chunk = Chunk {
            direction: *d,
            offset,
            data,
            frame: Some(1),
            ts: None,
        };
        dec.feed(&chunk, &mut shared, &mut out);
        offset += data.len() as u64;
    }
    assert!(out.is_empty(), "requests wait for their outcome");
    dec.ending(true);
    let parts = crate::decoders::close_in_parts(&mut dec, &mut shared);
    assert!(parts.len() > 1 && parts.iter().all(|p| p.len() <= 4098));
    let all: Vec<Record> = parts.into_iter().flatten().collect();
    let requests = messages(&all);
    assert_eq!(requests.len(), 5000);
    // in the order they were sent
    assert!(requests.windows(2).all(|w| w[0].offset < w[1].offset));
    assert!(requests
        .iter()
        .all(|m| m.delivery == Some(crate::model::Delivery::Unanswered)));
}

#[test]
fn requests_past_the_kept_budget_wait_packed_and_come_back_the_same() {
    // 80 QUERYs of 100 kB (~32 MB of estimated records: past the 16 MiB kept as they are)
    let query = |i: usize| {
        let text = format!("SELECT '{}' -- {i}", "x".repeat(100_000));
        let body = [
            &(text.len() as u32).to_be_bytes()[..],
            text.as_bytes(),
            &[0, 1, 0],
        ]
        .concat();
        envelope::encode(4, 0, i16::try_from(i).unwrap(), 0x07, &body)
    };
    let answer = |i: usize| envelope::encode(0x84, 0, i16::try_from(i).unwrap(), 0x06, &[0, 0]);
    let mut steps: Vec<Step> = (0..80).map(|i| Step::Data(C2S, query(i))).collect();
    steps.extend((0..40).map(|i| Step::Data(S2C, answer(i))));
    let out = run_ending(&steps, true);
    let requests: Vec<&Message> = messages(&out)
        .into_iter()
        .filter(|m| m.kind == "query")
        .collect();
    assert_eq!(requests.len(), 80);
    for m in &requests {
        let i = usize::try_from(field(m, "stream_id").as_i64().unwrap()).unwrap();
        let text = field(m, "query").as_str().unwrap();
        assert!(text.ends_with(&format!(" -- {i}")) && text.len() > 100_000);
        let outcome = if i < 40 { "answered" } else { "unanswered" };
        assert_eq!(
            m.delivery.map(crate::model::Delivery::as_str),
            Some(outcome)
        );
    }
}
