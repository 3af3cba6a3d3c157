//! The decoder end to end: the reference's vectors (../shared/reference/hercules.md §4), Gate
//! sessions, truncations, gaps and limits.

use super::{HerculesDecoder, Shared};
use crate::decoders::{Chunk, Decoder, Gap, Limits, Shared as AllShared, StreamContext};
use crate::formats::hercules::reader::{EventParser, Stop};
use crate::formats::hercules::render::{Cursor, Renderer, TextRenderer};
use crate::formats::hercules::tree::{decode, encode, EncodeError, Event, Var, Vector};
use crate::model::{json, Direction, Finding, Message, Record, Value};

const README_EVENT: &str = "010036462afd9ef8001120380063fd11e883e23a587d902000000204686f737409000000096c6f63616c686f73740974696d657374616d700500056d6ab2f64c00";
const FORMATTER_EVENT: &str = "010036462afd9ef8005ef182398e6c4e19b222c87fd06b003d00040a537472696e6720746167090000000c537472696e672076616c7565084e756c6c207461670b0855756964207461670a5ef182398e6c4e19b222c87fd06b003d13436f6e7461696e657220617272617920746167800100000002000110536f6d6520696e74656765722074616704075a1a9f00010f4279746520766563746f7220746167800200000004deadbeef";
const SCALARS_EVENT: &str = "0100000000000000010000000000000000000000000000000000070166060101670600016e800b000000030164083ff800000000000002666c07be800000016202ff017303fffe";
const MIXED_VECTORS: &str =
    "000106766563746f7280800000000204000000020000000100000002090000000100000001 78";

use crate::model::text::unhex;

/// An event header (version 1, README ticks, UUID 00..0f) before a container given in hex.
fn event_bytes(tags: &str) -> Vec<u8> {
    let mut v = vec![1];
    v.extend_from_slice(&15_276_799_200_000_000i64.to_be_bytes());
    v.extend(0u8..16);
    v.extend(unhex(tags));
    v
}

fn ctx() -> StreamContext {
    StreamContext {
        client: "10.0.0.1:40000".into(),
        server: "10.0.0.2:6306".into(),
        client_port: 40000,
        server_port: 6306,
        ..Default::default()
    }
}

/// Feed both directions (c2s first, in `step`-byte chunks if given) and close.
fn run_with(ctx: StreamContext, c2s: &[u8], s2c: &[u8], step: usize) -> Vec<Record> {
    let mut dec = HerculesDecoder::new(ctx);
    let mut shared = AllShared::default();
    let mut out = Vec::new();
    for (d, data) in [(Direction::C2S, c2s), (Direction::S2C, s2c)] {
        let size = if step == 0 { data.len().max(1) } else { step };
        for (i, piece) in data.chunks(size).enumerate() {
            let chunk = Chunk {
                direction: d,
                offset: (i * size) as u64,
                data: piece,
                frame: Some(i as u64 + 1),
                ts: None,
            };
            dec.feed(&chunk, &mut shared, &mut out);
        }
    }
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    out
}

fn run(c2s: &[u8], s2c: &[u8], step: usize) -> Vec<Record> {
    run_with(ctx(), c2s, s2c, step)
}

fn messages<'a>(recs: &'a [Record], kind: &str) -> Vec<&'a Message> {
    recs.iter()
        .filter_map(|r| match r {
            Record::Message(m) if m.kind == kind => Some(m),
            _ => None,
        })
        .collect()
}

fn findings(recs: &[Record]) -> Vec<&Finding> {
    recs.iter()
        .filter_map(|r| match r {
            Record::Finding(f) => Some(f),
            _ => None,
        })
        .collect()
}

fn codes(recs: &[Record]) -> Vec<&'static str> {
    findings(recs).iter().map(|f| f.code).collect()
}

fn post(body: &[u8], extra: &str) -> Vec<u8> {
    let mut v = format!(
        "POST /stream/send?stream=logs HTTP/1.1\r\nAuthorization: Hercules apiKey secret\r\nContent-Type: application/octet-stream\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

fn answer(status: u16, text: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

fn batch(events: &[&[u8]]) -> Vec<u8> {
    let mut v = (events.len() as i32).to_be_bytes().to_vec();
    for e in events {
        v.extend_from_slice(e);
    }
    v
}

#[test]
fn readme_event_decodes_as_the_reference_says() {
    let ev = unhex(README_EVENT);
    assert_eq!(ev.len(), 65);
    let recs = run(&ev, b"", 0);
    let [m] = messages(&recs, "event")[..] else {
        panic!("{recs:?}")
    };
    assert_eq!(
        m.get("timestamp"),
        Some(&Value::from(15_276_799_200_000_000i64))
    );
    assert_eq!(
        m.get("time").and_then(Value::as_str),
        Some("2018-05-30T11:32:00.0000000Z")
    );
    assert_eq!(
        m.get("uuid").and_then(Value::as_str),
        Some("11203800-63fd-11e8-83e2-3a587d902000")
    );
    assert_eq!(m.length, 65);
    assert_eq!(m.version, Some("1"));
    let doc = serde_json::json!({"host": "localhost", "timestamp": 1_527_679_920_000_000i64});
    assert_eq!(*m.event.as_ref().unwrap(), doc);
    assert!(codes(&recs).is_empty());
}

#[test]
fn gate_body_vector_is_a_batch() {
    let mut body = unhex("00000001");
    body.extend(unhex(README_EVENT));
    assert_eq!(body.len(), 69);
    let recs = run(&body, b"", 7);
    assert_eq!(messages(&recs, "batch").len(), 1);
    let ev = messages(&recs, "event");
    assert_eq!(ev[0].offset, Some(4));
    assert_eq!(ev[0].get("batch_index"), Some(&Value::from(0)));
}

#[test]
fn formatter_and_scalar_vectors_render_every_type() {
    let recs = run(&unhex(FORMATTER_EVENT), b"", 0);
    let ev = messages(&recs, "event")[0];
    assert_eq!(ev.length, 169);
    let doc = ev.event.as_ref().expect("document").value();
    assert_eq!(doc["String tag"], "String value");
    assert_eq!(doc["Null tag"], Value::Null);
    assert_eq!(doc["Uuid tag"], "5ef18239-8e6c-4e19-b222-c87fd06b003d");
    assert_eq!(
        doc["Container array tag"],
        serde_json::json!([{"Some integer tag": 123_345_567}, {"Byte vector tag": [222, 173, 190, 239]}])
    );
    // keys with spaces break the naming convention: reported once each
    assert_eq!(
        codes(&recs)
            .iter()
            .filter(|c| **c == "hercules.tag-name")
            .count(),
        6
    );

    let recs = run(&unhex(SCALARS_EVENT), b"", 0);
    let doc = messages(&recs, "event")[0].event.clone().expect("document");
    let want = serde_json::json!({"f": true, "g": false, "n": [null, null, null], "d": 1.5, "fl": -0.25, "b": 255, "s": -2});
    assert_eq!(doc, want);
    assert!(codes(&recs).contains(&"hercules.timestamp-range"));
}

#[test]
fn mixed_vector_of_vectors() {
    let recs = run(&event_bytes(MIXED_VECTORS), b"", 0);
    let doc = messages(&recs, "event")[0].event.clone().expect("document");
    assert_eq!(doc, serde_json::json!({"vector": [[1, 2], ["x"]]}));
}

#[test]
fn every_vector_decodes_then_encodes_to_the_same_bytes() {
    for hex in [README_EVENT, FORMATTER_EVENT, SCALARS_EVENT] {
        let bytes = unhex(hex);
        let (ev, n) = decode(&bytes, 1 << 20).expect("decodes");
        assert_eq!(n, bytes.len());
        assert_eq!(encode(&ev).expect("encodes"), bytes);
    }
    let bytes = event_bytes(MIXED_VECTORS);
    let (ev, _) = decode(&bytes, 1 << 20).expect("decodes");
    assert_eq!(encode(&ev).expect("encodes"), bytes);
}

#[test]
fn encoder_rejects_what_java_would_corrupt() {
    let ev = |tags| Event {
        version: 1,
        timestamp: 0,
        uuid: [0; 16],
        tags,
    };
    assert_eq!(
        encode(&ev(vec![(vec![b'k'; 256], Var::Null)])),
        Err(EncodeError::KeyTooLong(256))
    );
    assert_eq!(
        encode(&ev(vec![(vec![], Var::Null); 65536])),
        Err(EncodeError::TooManyTags(65536))
    );
    assert!(encode(&ev(vec![(
        b"n".to_vec(),
        Var::Vector(Vector::Null(1 << 31))
    )]))
    .is_err());
}

/// A tiny deterministic generator for the property test (no extra crates).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        (0..self.below(max + 1))
            .map(|_| self.next() as u8)
            .collect()
    }
}

fn random_tags(r: &mut Rng, depth: u32) -> Vec<(Vec<u8>, Var)> {
    (0..r.below(4))
        .map(|_| (r.bytes(6), random_var(r, depth)))
        .collect()
}

fn random_vector(r: &mut Rng, depth: u32) -> Vector {
    let n = r.below(4) as usize;
    match r.below(if depth == 0 { 10 } else { 12 }) {
        0 => Vector::Byte(r.bytes(5)),
        1 => Vector::Short((0..n).map(|_| r.next() as i16).collect()),
        2 => Vector::Integer((0..n).map(|_| r.next() as i32).collect()),
        3 => Vector::Long((0..n).map(|_| r.next() as i64).collect()),
        4 => Vector::Flag(r.bytes(4)),
        5 => Vector::Float((0..n).map(|_| r.next() as u32).collect()),
        6 => Vector::Double((0..n).map(|_| r.next()).collect()),
        7 => Vector::String((0..n).map(|_| r.bytes(5)).collect()),
        8 => Vector::Uuid((0..n).map(|_| [r.next() as u8; 16]).collect()),
        9 => Vector::Null(n),
        10 => Vector::Container((0..n).map(|_| random_tags(r, depth - 1)).collect()),
        _ => Vector::Vector((0..n).map(|_| random_vector(r, depth - 1)).collect()),
    }
}

fn random_var(r: &mut Rng, depth: u32) -> Var {
    match r.below(if depth == 0 { 11 } else { 13 }) {
        0 => Var::Byte(r.next() as u8),
        1 => Var::Short(r.next() as i16),
        2 => Var::Integer(r.next() as i32),
        3 => Var::Long(r.next() as i64),
        4 => Var::Flag(r.next() as u8),
        5 => Var::Float(r.next() as u32),
        6 => Var::Double(r.next()),
        7 => Var::String(r.bytes(8)),
        8 => Var::Uuid([r.next() as u8; 16]),
        9 => Var::Null,
        10 => Var::String(b"text".to_vec()),
        11 => Var::Container(random_tags(r, depth - 1)),
        _ => Var::Vector(random_vector(r, depth - 1)),
    }
}

#[test]
fn property_encode_then_decode_round_trips() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let ev = Event {
            version: r.next() as u8,
            timestamp: r.next() as i64,
            uuid: [r.next() as u8; 16],
            tags: random_tags(&mut r, 3),
        };
        let bytes = encode(&ev).expect("encodes");
        let (back, n) = decode(&bytes, 1 << 20).expect("decodes");
        assert_eq!(n, bytes.len());
        assert_eq!(back, ev);
        assert_eq!(encode(&back).expect("re-encodes"), bytes);
        // every proper prefix is truncated, never corrupt or a panic
        let cut = r.below(bytes.len() as u64) as usize;
        assert!(matches!(
            EventParser::new(1 << 20).parse(&bytes[..cut], 0, &mut Vec::new()),
            Err(Stop::Truncated { .. })
        ));
    }
}

/// Keys from a three-letter alphabet (so containers repeat keys), an eighth of them not UTF-8.
fn few_keys(tags: &mut [(Vec<u8>, Var)]) {
    for (k, v) in tags {
        *k = match k.first() {
            Some(b) if b % 8 == 0 => vec![0xc3, b'(' + b % 2],
            Some(b) => vec![b'a' + b % 3],
            None => Vec::new(),
        };
        match v {
            Var::Container(t) => few_keys(t),
            Var::Vector(vector) => few_keys_in(vector),
            _ => {}
        }
    }
}

fn few_keys_in(vector: &mut Vector) {
    match vector {
        Vector::Container(items) => items.iter_mut().for_each(|t| few_keys(t)),
        Vector::Vector(items) => items.iter_mut().for_each(few_keys_in),
        _ => {}
    }
}

#[test]
fn text_rendering_is_the_tree_written_or_gives_up() {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let (mut written, mut gave_up) = (0, 0);
    for _ in 0..5000 {
        let mut tags = random_tags(&mut r, 3);
        few_keys(&mut tags);
        let ev = Event {
            version: 1,
            timestamp: 0,
            uuid: [7; 16],
            tags,
        };
        let bytes = encode(&ev).expect("encodes");
        let tree = Renderer { mapped: false }
            .tags(&mut Cursor::new(&bytes, 25))
            .expect("renders");
        let mut text = String::new();
        match TextRenderer::default().tags(&mut Cursor::new(&bytes, 25), &mut text) {
            Some(()) => {
                let mut want = String::new();
                json::value(&mut want, &tree);
                assert_eq!(text, want);
                written += 1;
            }
            None => gave_up += 1,
        }
    }
    assert!(
        written > 2000 && gave_up > 500,
        "{written} written, {gave_up} given up"
    );
}

#[test]
fn event_documents_are_their_text_whether_rendered_or_written_from_the_tree() {
    // a=Byte 1, b=Float NaN, c=String x 0xff " (not UTF-8), u=Vector<Uuid> of one
    let tags = "0004016102010162077fc000000163090000000378ff22 0175800a000000010102030405060708090a0b0c0d0e0f10";
    let recs = run(&event_bytes(tags), b"", 0);
    let doc = messages(&recs, "event")[0].event.clone().expect("document");
    assert_eq!(
        doc.to_string(),
        "{\"a\":1,\"b\":\"NaN\",\"c\":\"x\u{fffd}\\\"\",\"u\":[\"01020304-0506-0708-090a-0b0c0d0e0f10\"]}"
    );
    // a=1, b=1, a=2: the key keeps its first position and its last value, as the tree has it
    let recs = run(&event_bytes("0003016102010162020101610202"), b"", 0);
    let doc = messages(&recs, "event")[0].event.clone().expect("document");
    assert_eq!(doc.to_string(), r#"{"a":2,"b":1}"#);
}

#[test]
fn reader_limits_and_corruption() {
    let mut p = EventParser::new(1 << 20);
    let mut probs = Vec::new();
    // negative string length
    let bad = event_bytes("0001 0161 09 ffffffff");
    let stop = p.parse(&bad, 0, &mut probs).expect_err("negative");
    assert!(
        matches!(stop, Stop::Corrupt { code: "hercules.negative-length", ref path, .. } if path == "a")
    );
    // unknown type
    let bad = event_bytes("0001 0161 0c");
    let Err(Stop::Corrupt { code, message, .. }) = p.parse(&bad, 0, &mut probs) else {
        panic!()
    };
    assert_eq!(code, "hercules.unknown-type");
    assert!(message.starts_with("unknown type code 0x0c at offset 29"));
    // a string past the event size limit
    let big = event_bytes("0001 0161 09 7fffffff");
    let Err(Stop::Corrupt { code, .. }) = EventParser::new(100).parse(&big, 0, &mut probs) else {
        panic!()
    };
    assert_eq!(code, "hercules.absurd-length");
    // nesting deeper than 64 levels
    let mut deep = String::from("0001 0161");
    for _ in 0..70 {
        deep.push_str(" 01 0001 0161");
    }
    let Err(Stop::Corrupt { code, .. }) = p.parse(&event_bytes(&deep), 0, &mut probs) else {
        panic!()
    };
    assert_eq!(code, "hercules.too-deep");
    // Vector<Null> of more than 2^20
    let nulls = event_bytes("0001 016e 80 0b 00200000");
    let Err(Stop::Corrupt { message, .. }) = p.parse(&nulls, 0, &mut probs) else {
        panic!()
    };
    assert_eq!(message, "vector of 2097152 nulls (more than 1048576)");
    // nulls cost no bytes: the cap holds for the event, not only for one vector
    let many = event_bytes("0001 016e 80 80 00000003 0b 00080000 0b 00080000 0b 00000001");
    let Err(Stop::Corrupt { message, .. }) = p.parse(&many, 0, &mut probs) else {
        panic!()
    };
    assert_eq!(
        message,
        "vector of 1 nulls takes the event over 1048576 nulls in all"
    );
    assert!(probs.is_empty());
}

#[test]
fn problems_keep_python_texts() {
    let mut p = EventParser::new(1 << 20);
    let mut probs = Vec::new();
    let ev = event_bytes("0003 0161 0601 0161 0602 02ffff 0b");
    p.parse(&ev, 0, &mut probs).expect("parses");
    let texts: Vec<_> = probs.iter().map(|p| (p.code, p.message.as_str())).collect();
    assert_eq!(
        texts,
        [
            (
                "hercules.flag-value",
                "flag byte 0x02 is neither 0 nor 1 (Java reads it as true)"
            ),
            ("hercules.invalid-utf8", "tag key ffff is not valid UTF-8"),
            (
                "hercules.duplicate-key",
                "duplicate tag keys ['a']: Java keeps the last occurrence"
            ),
        ]
    );
    // the bad key is reported once per parser
    probs.clear();
    p.parse(&ev, 0, &mut probs).expect("parses");
    assert_eq!(probs.len(), 2);
}

#[test]
fn truncated_stream_and_resync() {
    let ev = unhex(README_EVENT);
    let mut data = ev.clone();
    data.extend_from_slice(&[0xAA; 9]);
    data.extend_from_slice(&ev);
    data.extend_from_slice(&ev[..40]);
    let recs = run(&data, b"", 5);
    assert_eq!(messages(&recs, "event").len(), 2);
    assert_eq!(
        codes(&recs),
        [
            "hercules.truncated",
            "hercules.resync",
            "hercules.truncated"
        ]
    );
    let f = findings(&recs);
    assert_eq!(
        f[0].message,
        "the data ends inside an event (114 bytes from offset 65, in the header)"
    );
    assert_eq!(f[1].fields[0], ("skipped", Value::from(9)));
    assert_eq!(
        f[2].message,
        "the data ends inside an event (40 bytes from offset 139, in host)"
    );
    // chunking does not change the records
    assert_eq!(
        run(&data, b"", 0),
        run(&data, b"", 1)
            .into_iter()
            .map(|r| match r {
                Record::Message(mut m) => {
                    m.frame = Some(1);
                    Record::Message(m)
                }
                Record::Finding(mut f) => {
                    f.frame = Some(1);
                    Record::Finding(f)
                }
            })
            .collect::<Vec<_>>()
    );
}

#[test]
fn gate_request_paired_with_its_answer() {
    let ev = unhex(README_EVENT);
    let body = batch(&[&ev, &ev]);
    let mut c2s = post(&body, "");
    c2s.extend(post(&batch(&[&ev]), ""));
    let mut s2c = answer(200, "");
    s2c.extend(answer(400, "Invalid event data"));
    let recs = run(&c2s, &s2c, 13);
    let reqs = messages(&recs, "request");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].get("api_key"), Some(&Value::from("<redacted>")));
    assert_eq!(reqs[0].get("status"), Some(&Value::from(200)));
    let events = messages(&recs, "event");
    let acked: Vec<_> = events.iter().map(|e| e.acked).collect();
    assert_eq!(acked, [Some(true), Some(true), Some(false)]);
    let head = post(&body, "").len() - body.len();
    assert_eq!(events[0].offset, Some(head as u64 + 4));
    let rejected = findings(&recs);
    assert_eq!(rejected[0].code, "hercules.request-rejected");
    assert!(rejected[0]
        .message
        .starts_with("Gate answered 400 X (Invalid event data) to /stream/send for stream logs: 1 decoded event(s) of a batch of 1 rejected"));
}

#[test]
fn chunked_and_lz4_bodies() {
    let ev = unhex(README_EVENT);
    let body = batch(&[&ev, &ev, &ev]);
    let packed = lz4_flex::block::compress(&body);
    let mut c2s = post(
        &packed,
        &format!(
            "Content-Encoding: lz4\r\nOriginal-Content-Length: {}\r\n",
            body.len()
        ),
    );
    let chunked = format!(
        "POST /stream/sendAsync?stream=x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        10
    );
    c2s.extend(chunked.as_bytes());
    c2s.extend(&body[..10]);
    c2s.extend(format!("\r\n{:x}\r\n", body.len() - 10).as_bytes());
    c2s.extend(&body[10..]);
    c2s.extend(b"\r\n0\r\n\r\n");
    let mut s2c = answer(200, "");
    s2c.extend(answer(200, ""));
    let recs = run(&c2s, &s2c, 17);
    assert_eq!(messages(&recs, "event").len(), 6);
    assert_eq!(codes(&recs), ["hercules.no-content-length"]);
    // an lz4 header with an absurd original length is refused before inflating
    let bad = post(
        &packed,
        "Content-Encoding: lz4\r\nOriginal-Content-Length: 999999999999\r\n",
    );
    assert!(codes(&run(&bad, &answer(400, ""), 0)).contains(&"hercules.original-length"));
}

#[test]
fn gap_inside_a_request_keeps_pairing() {
    let ev = unhex(README_EVENT);
    let first = post(&batch(&[&ev]), "");
    let second = post(&batch(&[&ev]), "");
    let mut dec = HerculesDecoder::new(ctx());
    let mut shared = AllShared::default();
    let mut out = Vec::new();
    let c = |offset: u64, data: &'static [u8]| (offset, data);
    let _ = c;
    dec.feed(
        &Chunk {
            direction: Direction::C2S,
            offset: 0,
            data: &first[..50],
            frame: Some(1),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    dec.gap(
        &Gap {
            direction: Direction::C2S,
            offset: 50,
            length: (first.len() - 50) as u64,
            frame: Some(2),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    dec.feed(
        &Chunk {
            direction: Direction::C2S,
            offset: first.len() as u64,
            data: &second,
            frame: Some(3),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    let mut s2c = answer(200, "");
    s2c.extend(answer(200, ""));
    dec.feed(
        &Chunk {
            direction: Direction::S2C,
            offset: 0,
            data: &s2c,
            frame: Some(4),
            ts: None,
        },
        &mut shared,
        &mut out,
    );
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    assert_eq!(codes(&out), ["hercules.request-in-gap"]);
    let reqs = messages(&out, "request");
    assert_eq!(reqs[0].get("incomplete"), Some(&Value::Bool(true)));
    assert_eq!(messages(&out, "event")[0].acked, Some(true));
}

#[test]
fn limits_body_over_the_cap_and_pending_overflow() {
    let ev = unhex(README_EVENT);
    let small = StreamContext {
        limits: Limits {
            max_frame: 100,
            ..Limits::default()
        },
        ..ctx()
    };
    let recs = run_with(small, &post(&batch(&[&ev, &ev]), ""), &answer(200, ""), 0);
    assert!(codes(&recs).contains(&"hercules.body-too-large"));
    assert!(messages(&recs, "event").is_empty());

    let few = StreamContext {
        limits: Limits {
            max_pending_events: 1,
            ..Limits::default()
        },
        ..ctx()
    };
    let mut c2s = post(&batch(&[&ev, &ev]), "");
    c2s.extend(post(&batch(&[&ev]), ""));
    let recs = run_with(few, &c2s, b"", 0);
    assert_eq!(
        codes(&recs),
        ["hercules.pending-overflow", "hercules.no-response"]
    );
}

#[test]
fn hostile_count_is_bounded_and_findings_are_summed_up() {
    // 20 000 zero events (version 0, time 0): each would give two findings
    let mut body = 0x7FFF_FFFFi32.to_be_bytes().to_vec();
    body.extend(std::iter::repeat_n(0u8, 27 * 20_000));
    let recs = run(&post(&body, ""), &answer(400, ""), 0);
    assert_eq!(messages(&recs, "event").len(), 20_000);
    let f = findings(&recs);
    let version = f.iter().filter(|f| f.code == "hercules.version").count();
    assert_eq!(version, 101);
    let last = f
        .iter()
        .rfind(|f| f.code == "hercules.version")
        .expect("summary");
    assert_eq!(last.fields, vec![("count", Value::from(20_000))]);
    assert!(f.iter().any(|f| f.code == "hercules.count-mismatch"
        && f.message
            .contains("count says 2147483647 events but the body holds 20000")));
}

#[test]
fn tag_names_are_reported_once_per_capture() {
    let ev = unhex(FORMATTER_EVENT);
    let mut shared = AllShared::default();
    let mut out = Vec::new();
    for stream in 0..2 {
        let mut dec = HerculesDecoder::new(StreamContext { stream, ..ctx() });
        dec.feed(
            &Chunk {
                direction: Direction::C2S,
                offset: 0,
                data: &ev,
                frame: None,
                ts: None,
            },
            &mut shared,
            &mut out,
        );
        while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    }
    assert_eq!(
        codes(&out)
            .iter()
            .filter(|c| **c == "hercules.tag-name")
            .count(),
        6
    );
    let _ = Shared::default();
}

#[test]
fn duplicate_keys_in_a_large_container() {
    let mut tags = String::from("0029");
    for i in 0..40u8 {
        tags.push_str(&format!("01{:02x}0b", b'0' + i));
    }
    tags.push_str("01300b"); // "0" again
    let mut probs = Vec::new();
    EventParser::new(1 << 20)
        .parse(&event_bytes(&tags), 0, &mut probs)
        .expect("parses");
    let dup: Vec<_> = probs
        .iter()
        .filter(|p| p.code == "hercules.duplicate-key")
        .collect();
    assert_eq!(dup.len(), 1);
    assert_eq!(dup[0].fields[1], ("keys", serde_json::json!(["0"])));
}

#[test]
fn repeated_keys_are_found_at_their_own_level_of_nesting() {
    // {a: {a: null, b: null}, b: null, a: null}: the outer `a` repeats, the inner keys do not
    // (the inner container's keys are read between the outer's)
    let outer = "0003 0161 01 0002 0161 0b 0162 0b  0162 0b  0161 0b";
    // {x: {k: null, k: null}, y: null}: only the inner `k` repeats; then a container of 40
    // keys holding one that repeats within it
    let mut inner = String::from("0003 0178 01 0002 016b 0b 016b 0b  0179 0b  017a 01 0029");
    for i in 0..40u8 {
        inner.push_str(&format!("01{:02x}0b", b'0' + i));
    }
    inner.push_str("01300b");
    let mut parser = EventParser::new(1 << 20);
    let repeated = |parser: &mut EventParser, tags: &str| {
        let mut probs = Vec::new();
        parser
            .parse(&event_bytes(tags), 0, &mut probs)
            .expect("parses");
        let found: Vec<_> = probs
            .iter()
            .filter(|p| p.code == "hercules.duplicate-key")
            .map(|p| (p.fields[0].1.clone(), p.fields[1].1.clone()))
            .collect();
        found
    };
    let path = |p: &str| serde_json::json!(p);
    assert_eq!(
        repeated(&mut parser, outer),
        [(path(""), serde_json::json!(["a"]))]
    );
    assert_eq!(
        repeated(&mut parser, &inner),
        [
            (path("x"), serde_json::json!(["k"])),
            (path("z"), serde_json::json!(["0"]))
        ]
    );
    // an event cut short inside a container leaves nothing for the next one to compare with
    let cut = "0002 0161 01 0003 0161 0b 0162 0b";
    assert!(parser.parse(&event_bytes(cut), 0, &mut Vec::new()).is_err());
    assert_eq!(repeated(&mut parser, "0002 0161 0b 0162 0b"), []);
}

#[test]
fn documents_of_a_file_stop_at_the_first_bad_event() {
    let mut data = unhex(README_EVENT);
    data.extend(unhex(SCALARS_EVENT));
    data.extend([1, 2, 3]);
    let docs = super::documents(&data, 1 << 20);
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["uuid"], "11203800-63fd-11e8-83e2-3a587d902000");
    assert_eq!(docs[0]["tags"]["host"], "localhost");
    assert_eq!(
        (docs[1]["version"].as_u64(), docs[1]["timestamp"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(docs[1]["tags"]["n"], serde_json::json!([null, null, null]));
}

/// A request with `Content-Length: cl` and no body.
fn post_declaring(cl: &str) -> Vec<u8> {
    format!("POST /stream/send?stream=logs HTTP/1.1\r\nContent-Length: {cl}\r\n\r\n").into_bytes()
}

const HUGE_LENGTHS: [&str; 4] = [
    "18446744073709551614",
    "18446744073709551615",
    "18446744073709551616",
    "1234567890123456789012345",
];

/// Content-Lengths at and past the u64 limit, first in their stream and between good requests:
/// a finding each, never a panic, and the good requests on both sides keep their events and
/// their answers (the bad message still takes its place in the answer order).
#[test]
fn content_length_at_integer_limits_is_a_finding() {
    let ev = unhex(README_EVENT);
    let good = post(&batch(&[&ev]), "");
    for cl in HUGE_LENGTHS {
        // the bad request first, then a good one; the bad one mid-stream, between good ones
        let bad = post_declaring(cl);
        for (c2s, answers) in [
            ([bad.clone(), good.clone()].concat(), vec![400, 200]),
            (
                [good.clone(), bad.clone(), good.clone()].concat(),
                vec![200, 400, 200],
            ),
        ] {
            let s2c: Vec<u8> = answers.iter().flat_map(|&s| answer(s, "")).collect();
            for step in [0, 9] {
                let recs = run(&c2s, &s2c, step);
                let found: Vec<_> = codes(&recs)
                    .into_iter()
                    .filter(|c| *c != "hercules.request-rejected")
                    .collect();
                assert_eq!(found, ["hercules.bad-length"], "{cl}");
                let f = findings(&recs)[0];
                assert_eq!(f.fields, vec![("content_length", Value::from(cl))]);
                let reqs = messages(&recs, "request");
                let statuses: Vec<_> = reqs.iter().map(|r| r.get("status").cloned()).collect();
                let expect: Vec<_> = answers.iter().map(|&s| Some(Value::from(s))).collect();
                assert_eq!(statuses, expect, "{cl}: every request, answered in order");
                let acked: Vec<_> = messages(&recs, "event").iter().map(|e| e.acked).collect();
                assert_eq!(acked, vec![Some(true); answers.len() - 1], "{cl}");
            }
        }
    }
}

/// The same numbers in the Gate's answers: first answer and between good ones.
#[test]
fn response_content_length_at_integer_limits_is_a_finding() {
    let ev = unhex(README_EVENT);
    let good = post(&batch(&[&ev]), "");
    let c2s = [good.clone(), good.clone(), good.clone()].concat();
    for cl in HUGE_LENGTHS {
        let bad = format!("HTTP/1.1 500 X\r\nContent-Length: {cl}\r\n\r\n").into_bytes();
        for (s2c, bad_at) in [
            ([bad.clone(), answer(200, ""), answer(200, "")].concat(), 0),
            ([answer(200, ""), bad.clone(), answer(200, "")].concat(), 1),
        ] {
            let recs = run(&c2s, &s2c, 7);
            let found: Vec<_> = codes(&recs)
                .into_iter()
                .filter(|c| *c != "hercules.request-rejected")
                .collect();
            assert_eq!(found, ["hercules.bad-length"], "{cl}");
            let statuses: Vec<_> = messages(&recs, "response")
                .iter()
                .map(|r| r.get("status").cloned())
                .collect();
            let mut expect = vec![Some(Value::from(200)); 3];
            expect[bad_at] = Some(Value::from(500));
            assert_eq!(statuses, expect, "{cl}");
            let acked: Vec<_> = messages(&recs, "event").iter().map(|e| e.acked).collect();
            let mut want = vec![Some(true); 3];
            want[bad_at] = Some(false);
            assert_eq!(acked, want, "{cl}");
        }
    }
}

/// Chunk sizes at the u64 limit are framing errors, not overflows.
#[test]
fn chunk_size_at_the_integer_limit_is_a_finding() {
    let ev = unhex(README_EVENT);
    let mut c2s = b"POST /stream/sendAsync?stream=x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\nffffffffffffffff\r\n".to_vec();
    c2s.extend(post(&batch(&[&ev]), ""));
    let recs = run(&c2s, &answer(200, ""), 0);
    assert!(codes(&recs).contains(&"hercules.http-malformed"));
    assert_eq!(messages(&recs, "event").len(), 1);
}

/// An lz4 body of zeros in a small request: its events are paid from the inflate cap, so the
/// body stops at the cap with a finding instead of holding a record per 27 bytes.
#[test]
fn lz4_body_events_are_paid_from_the_cap() {
    use crate::decoders::budget::RECORD_COST;
    let mut body = 0x7FFF_FFFFi32.to_be_bytes().to_vec();
    body.extend(std::iter::repeat_n(0u8, 27 * 10_000));
    let packed = lz4_flex::block::compress(&body);
    let header = format!(
        "Content-Encoding: lz4\r\nOriginal-Content-Length: {}\r\n",
        body.len()
    );
    let cap = body.len() + 50 * RECORD_COST + 1;
    let limited = StreamContext {
        limits: Limits {
            max_inflated: cap,
            ..Limits::default()
        },
        ..ctx()
    };
    let ev = unhex(README_EVENT);
    let c2s = [post(&packed, &header), post(&batch(&[&ev]), "")].concat();
    let s2c = [answer(200, ""), answer(200, "")].concat();
    let recs = run_with(limited, &c2s, &s2c, 0);
    let f = findings(&recs)
        .into_iter()
        .find(|f| f.code == "hercules.inflate-limit")
        .expect("a finding names the cap");
    assert_eq!(f.frame, Some(1));
    assert_eq!(
        f.fields,
        vec![
            ("cap", Value::from(cap)),
            ("events", Value::from(50)),
            ("body_offset", Value::from(4 + 27 * 50)),
        ]
    );
    assert_eq!(
        messages(&recs, "event").len(),
        51,
        "50 paid for, then the next request's"
    );
    // a declared size over what the budget holds is refused before anything is allocated
    let over = format!(
        "Content-Encoding: lz4\r\nOriginal-Content-Length: {}\r\n",
        cap + 1
    );
    let limited = StreamContext {
        limits: Limits {
            max_inflated: cap,
            ..Limits::default()
        },
        ..ctx()
    };
    let recs = run_with(limited, &post(&packed, &over), &answer(400, ""), 0);
    assert!(codes(&recs).contains(&"hercules.original-length"));
}

#[test]
fn unanswered_requests_come_out_of_the_close_in_parts() {
    let ev = unhex(README_EVENT);
    let events = vec![ev.as_slice(); 3000];
    let c2s: Vec<u8> = (0..3).flat_map(|_| post(&batch(&events), "")).collect();
    let mut dec = HerculesDecoder::new(ctx());
    let mut shared = AllShared::default();
    let mut out = Vec::new();
    let chunk = Chunk {
        direction: Direction::C2S,
        offset: 0,
        data: &c2s,
        frame: Some(1),
        ts: None,
    };
    dec.feed(&chunk, &mut shared, &mut out);
    let mut parts = vec![out];
    parts.extend(crate::decoders::close_in_parts(&mut dec, &mut shared));
    // about 4096 records a part, and the rest of a request's events
    assert!(parts.len() >= 3);
    assert!(parts.iter().all(|p| p.len() <= 4096 + 3000 + 3));
    let all = parts.concat();
    let events = messages(&all, "event");
    assert_eq!(events.len(), 9000);
    assert!(events.iter().all(|e| e.acked.is_none()));
    let unanswered = findings(&all)
        .iter()
        .filter(|f| f.code == "hercules.no-response")
        .count();
    assert_eq!(unanswered, 3);
}
