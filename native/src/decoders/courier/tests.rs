//! The decoder on the genuine byte sequences of reference/courier.md §4, cut, split, gapped and
//! over its limits.

use crate::decoders::{Chunk, Decoder, Gap, Limits, Shared, StreamContext};
use crate::model::{Direction, Finding, Message, Record, Value};

use super::CourierDecoder;

const C2S: Direction = Direction::C2S;
const S2C: Direction = Direction::S2C;

use crate::model::text::unhex;

const GO_HELO: &str =
    "48454c4f0000002000000000000000020000000c000000004c434f52000000000000000000000000";
const RUBY_VERS: &str = "564552530000001400000000000000020000000c0000000052594c43";
const GO_ACKN: &str = "41434b4e00000014ca832a423b8577145701d5813760742700000002";
const PING: &str = "50494e4700000000";
const PONG: &str = "504f4e4700000000";
const RUBY_JDAT: &str = "4a44415400000047b7b84ca035a49023405f0ced89ed4cb4789c63606050ae56ca4d2d2e4e4c4f55b252ca48cdc9c9573050d251cac82f2e010aa4a4e6e62bd532605566489c3223746500bdd12269";
const RUBY_ACKN: &str = "41434b4e00000014b7b84ca035a49023405f0ced89ed4cb400000003";
const STUB_VERS: &str =
    "564552530000002001000000000000020000000c000000004c435652000000000000000000000000";
const GO_EVNT: &str = "45564e54ffffffff1f8050fb57c75276df775331e97c67b5785e94d03b8ac3301087719fe55fcb8b247bfd986a0fb1d52e29041e3f0a59263324846072f590ce4d827d800f7e7c5996ad77fce8145934c405046f7d953b977bf76b4b2a3db9e2abb645eb6cfbedff60302651102e11069145c2c020a4996190fa5e5841d660093a8220da4d330c340c02fa3f19e86d79051dc784f508a0aa2bf71ea0d7b4019407008fbd079aa2f90418cfbc7dd0ec253c030000ffffe2ae6f0f";

/// Drives one decoder with whole messages (or pieces of `split` bytes) per side.
struct Conv {
    dec: CourierDecoder,
    shared: Shared,
    offsets: [u64; 2],
    frame: u64,
    split: usize,
    records: Vec<Record>,
}

impl Conv {
    fn new(limits: Limits, split: usize) -> Self {
        let ctx = StreamContext {
            limits,
            ..StreamContext::default()
        };
        Conv {
            dec: CourierDecoder::new(ctx),
            shared: Shared::default(),
            offsets: [0; 2],
            frame: 0,
            split,
            records: Vec::new(),
        }
    }

    fn send(&mut self, d: Direction, hexdata: &str) -> &mut Self {
        self.raw(d, &unhex(hexdata))
    }

    fn raw(&mut self, d: Direction, data: &[u8]) -> &mut Self {
        self.frame += 1;
        let i = usize::from(d == S2C);
        let step = if self.split > 0 {
            self.split
        } else {
            data.len().max(1)
        };
        for part in data.chunks(step) {
            let chunk = Chunk {
                direction: d,
                offset: self.offsets[i],
                data: part,
                frame: Some(self.frame),
                ts: Some(self.frame as i64 * 1_000_000_000),
            };
            self.dec.feed(&chunk, &mut self.shared, &mut self.records);
            self.offsets[i] += part.len() as u64;
        }
        self
    }

    fn gap(&mut self, d: Direction, length: u64) -> &mut Self {
        self.frame += 1;
        let i = usize::from(d == S2C);
        let gap = Gap {
            direction: d,
            offset: self.offsets[i],
            length,
            frame: Some(self.frame),
            ts: None,
        };
        self.dec.gap(&gap, &mut self.shared, &mut self.records);
        self.offsets[i] += length;
        self
    }

    fn close(&mut self) -> Vec<Record> {
        while self.dec.close(&mut self.shared, &mut self.records) == crate::decoders::Closing::More
        {
        }
        std::mem::take(&mut self.records)
    }
}

fn messages<'a>(recs: &'a [Record], kind: &str) -> Vec<&'a Message> {
    recs.iter()
        .filter_map(|r| match r {
            Record::Message(m) if m.kind == kind => Some(m),
            _ => None,
        })
        .collect()
}

fn codes(recs: &[Record]) -> Vec<&'static str> {
    recs.iter()
        .filter_map(|r| match r {
            Record::Finding(f) => Some(f.code),
            _ => None,
        })
        .collect()
}

fn finding<'a>(recs: &'a [Record], code: &str) -> &'a Finding {
    recs.iter()
        .find_map(|r| match r {
            Record::Finding(f) if f.code == code => Some(f),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {code} in {:?}", codes(recs)))
}

fn ruby_conversation(split: usize) -> Vec<Record> {
    let mut c = Conv::new(Limits::default(), split);
    let helo = format!("48454c4f{}", &RUBY_VERS[8..]);
    c.send(C2S, &helo)
        .send(S2C, RUBY_VERS)
        .send(C2S, RUBY_JDAT)
        .send(S2C, RUBY_ACKN);
    c.close()
}

#[test]
fn ruby_client_and_server_vectors() {
    let recs = ruby_conversation(0);
    assert!(codes(&recs).is_empty(), "{:?}", codes(&recs));
    let events = messages(&recs, "event");
    assert_eq!(events.len(), 3);
    for (n, e) in events.iter().enumerate() {
        let doc: Value =
            serde_json::from_str(&format!(r#"{{"message":"hello {n}","host":"demo"}}"#)).unwrap();
        assert_eq!(*e.event.as_ref().unwrap(), doc);
        assert_eq!((e.acked, e.length, e.offset), (Some(true), 0x23, Some(28)));
        assert_eq!(e.get("ack_frame"), Some(&Value::from(4)));
        assert_eq!(e.version, Some("2.12.0"));
    }
    let jdat = messages(&recs, "jdat")[0];
    assert_eq!(jdat.get("zlib_level"), Some(&Value::from("default")));
    assert_eq!(
        jdat.get("nonce"),
        Some(&Value::from("b7b84ca035a49023405f0ced89ed4cb4"))
    );
    let delivery = messages(&recs, "delivery")[0];
    assert_eq!(delivery.get("complete"), Some(&Value::Bool(true)));
    let conn = messages(&recs, "connection")[0];
    assert_eq!(conn.get("handshake"), Some(&Value::from("helo+vers")));
    assert_eq!(
        conn.get("client_class"),
        Some(&Value::from("Ruby gem >= 2.7.2"))
    );
    assert_eq!(conn.get("acked_events"), Some(&Value::from(3)));
}

#[test]
fn any_split_gives_the_same_records() {
    let whole = ruby_conversation(0);
    for split in [1, 3, 7, 29] {
        assert_eq!(ruby_conversation(split).len(), whole.len(), "split {split}");
    }
    let evnt = |split| {
        let mut c = Conv::new(Limits::default(), split);
        c.send(C2S, GO_HELO)
            .send(S2C, STUB_VERS)
            .send(C2S, GO_EVNT)
            .send(C2S, PING);
        c.close()
    };
    let whole = evnt(0);
    assert_eq!(messages(&whole, "evnt")[0].length, 186);
    assert_eq!(messages(&whole, "ping")[0].offset, Some(40 + 186));
    let lengths: Vec<u64> = messages(&whole, "event").iter().map(|e| e.length).collect();
    assert_eq!(lengths, [125, 125, 127]);
    assert!(!codes(&whole).contains(&"courier.evnt-not-negotiated"));
    assert_eq!(
        messages(&whole, "connection")[0].get("zlib_go_tail"),
        Some(&Value::Bool(true))
    );
    for split in [1, 2, 5, 64] {
        assert_eq!(evnt(split), whole, "split {split}");
    }
}

#[test]
fn go_handshake_ack_and_keepalive_vectors() {
    let mut c = Conv::new(Limits::default(), 0);
    c.send(C2S, GO_HELO)
        .send(S2C, RUBY_VERS)
        .send(S2C, GO_ACKN)
        .send(C2S, PING)
        .send(S2C, PONG);
    let recs = c.close();
    let helo = messages(&recs, "helo")[0];
    assert_eq!(helo.get("client_id"), Some(&Value::from("LCOR")));
    assert_eq!(helo.get("layout"), Some(&Value::from(32)));
    assert_eq!(
        messages(&recs, "ackn")[0].get("sequence"),
        Some(&Value::from(2))
    );
    assert_eq!(codes(&recs), ["courier.unknown-nonce"]);
    let conn = messages(&recs, "connection")[0];
    assert_eq!(
        conn.get("client_class"),
        Some(&Value::from("Go log-courier >= 2.6.4"))
    );
}

#[test]
fn legacy_go_client_without_handshake() {
    let mut c = Conv::new(Limits::default(), 0);
    c.send(C2S, "4a4441540000007e56847afe9799739b3d9677972a3b58ef785e");
    let recs = c.close();
    let t = finding(&recs, "courier.truncated");
    assert_eq!(
        t.message,
        "the stream ended inside a b'JDAT' message: 26 bytes left undecoded"
    );
    assert_eq!(
        messages(&recs, "connection")[0].get("handshake"),
        Some(&Value::from("none"))
    );
}

#[test]
fn every_truncation_keeps_what_came_before() {
    let helo = unhex(GO_HELO);
    let mut all = helo.clone();
    all.extend(unhex(RUBY_JDAT));
    for cut in 0..all.len() {
        let mut c = Conv::new(Limits::default(), 0);
        c.raw(C2S, &all[..cut]);
        let recs = c.close();
        assert_eq!(
            messages(&recs, "helo").len(),
            usize::from(cut >= helo.len())
        );
        if cut > 0 && cut != helo.len() {
            assert!(codes(&recs).contains(&"courier.truncated"), "cut {cut}");
        }
    }
}

#[test]
fn gap_inside_a_payload_resyncs_on_the_next_header() {
    let mut c = Conv::new(Limits::default(), 0);
    let jdat = unhex(RUBY_JDAT);
    c.send(C2S, GO_HELO)
        .raw(C2S, &jdat[..30])
        .gap(C2S, 20)
        .raw(C2S, &jdat[50..])
        .send(C2S, PING);
    let recs = c.close();
    let f = finding(&recs, "courier.resync-after-gap");
    assert_eq!(f.offset, Some(40 + 50));
    assert_eq!(
        f.message,
        "after 20 missing bytes: skipped 29 bytes to the next message header; 30 bytes of a cut message dropped"
    );
    assert_eq!(messages(&recs, "ping")[0].offset, Some(40 + 79));
}

#[test]
fn hostile_lengths_are_never_allocated() {
    let mut c = Conv::new(Limits::default(), 0);
    c.raw(C2S, b"JDAT\xff\xff\xff\x00").send(C2S, PING);
    let recs = c.close();
    let f = finding(&recs, "courier.length-over-limit");
    assert!(f.message.starts_with(
        "header 4a444154ffffff00 is not a valid Log Courier message (length 4294967040 exceeds"
    ));
    assert_eq!(messages(&recs, "ping").len(), 1);
}

#[test]
fn inflate_cap_is_a_finding() {
    let limits = Limits {
        max_inflated: 50,
        ..Limits::default()
    };
    let mut c = Conv::new(limits, 0);
    c.send(C2S, GO_HELO).send(C2S, RUBY_JDAT);
    let recs = c.close();
    let f = finding(&recs, "courier.inflate-limit");
    assert_eq!(f.fields, vec![("cap", Value::from(50))]);
    let jdat = messages(&recs, "jdat")[0];
    assert_eq!(jdat.get("inflated_length"), Some(&Value::from(50)));
    // the cap is spent on the inflated bytes: nothing is left to pay for events
    assert!(messages(&recs, "event").is_empty());
}

/// A bomb of zeros frames as millions of empty events: the events are paid from the same cap as
/// the inflated bytes, so the payload stops at the cap with a finding, not at the end of memory.
#[test]
fn events_of_an_inflated_payload_are_paid_from_the_cap() {
    use crate::decoders::budget::RECORD_COST;
    use flate2::{write::ZlibEncoder, Compression};
    use std::io::Write;
    let zeros = 1 << 20; // 262 144 empty events
    let mut z = ZlibEncoder::new(Vec::new(), Compression::best());
    z.write_all(&vec![0u8; zeros]).unwrap();
    let z = z.finish().unwrap();
    let mut jdat = b"JDAT".to_vec();
    jdat.extend_from_slice(&((16 + z.len()) as u32).to_be_bytes());
    jdat.extend_from_slice(&[7u8; 16]);
    jdat.extend_from_slice(&z);
    let cap = zeros + 100 * RECORD_COST + 10;
    let limits = Limits {
        max_inflated: cap,
        ..Limits::default()
    };
    let mut c = Conv::new(limits, 0);
    c.send(C2S, GO_HELO)
        .raw(C2S, &jdat)
        .raw(C2S, b"PING\0\0\0\0");
    let recs = c.close();
    let f = finding(&recs, "courier.inflate-limit");
    assert_eq!(f.frame, Some(2));
    assert_eq!(
        f.fields,
        vec![
            ("cap", Value::from(cap)),
            ("events", Value::from(100)),
            ("skipped", Value::from(zeros - 400)),
        ]
    );
    assert_eq!(messages(&recs, "event").len(), 100);
    assert_eq!(
        messages(&recs, "jdat")[0].get("events"),
        Some(&Value::from(100))
    );
    assert_eq!(
        messages(&recs, "ping").len(),
        1,
        "the stream goes on after the payload"
    );
}

#[test]
fn tls_client_is_explained() {
    let mut c = Conv::new(Limits::default(), 0);
    c.raw(C2S, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
    c.raw(S2C, b"\x16\x03\x03\x00\x7a\x02");
    let recs = c.close();
    assert_eq!(codes(&recs), ["courier.tls-mismatch"]);
    let f = finding(&recs, "courier.tls-mismatch");
    assert_eq!(f.fields[0], ("bogus_length", Value::from(0x0001_0001)));
}

/// Timing of the decoder alone on 100 Go-shaped payloads of 1024 events (run with --release
/// --ignored --nocapture).
#[test]
#[ignore]
fn timing() {
    use std::io::Write;
    let mut block = Vec::new();
    for i in 0..1024 {
        let e = format!(
            r#"{{"@timestamp":"2026-11-21T04:41:22.700273042Z","host":"vm","message":"a log line number {i} with some text","offset":{},"path":"/var/log/app.log","tags":[],"type":"demo"}}"#,
            i * 50
        );
        block.extend_from_slice(&(e.len() as u32).to_be_bytes());
        block.extend_from_slice(e.as_bytes());
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(3));
    z.write_all(&block).unwrap();
    let z = z.finish().unwrap();
    let mut c = Conv::new(Limits::default(), 1448);
    c.send(C2S, GO_HELO).send(S2C, RUBY_VERS);
    let t = std::time::Instant::now();
    let mut n = 0;
    for p in 0..100u32 {
        let mut nonce = [0u8; 16];
        nonce[..4].copy_from_slice(&p.to_be_bytes());
        let mut m = b"JDAT".to_vec();
        m.extend_from_slice(&((16 + z.len()) as u32).to_be_bytes());
        m.extend_from_slice(&nonce);
        m.extend_from_slice(&z);
        c.raw(C2S, &m);
        let mut a = b"ACKN\0\0\0\x14".to_vec();
        a.extend_from_slice(&nonce);
        a.extend_from_slice(&1024u32.to_be_bytes());
        c.raw(S2C, &a);
        n += c.records.len();
        c.records.clear();
    }
    let decode = t.elapsed();
    let recs = c.close();
    let t = std::time::Instant::now();
    let mut out = String::new();
    for r in &recs {
        crate::records::json::record_line(&mut out, "", None, r, None);
    }
    println!(
        "{n} records decoded in {decode:?}; json of {} in {:?}",
        recs.len(),
        t.elapsed()
    );
}

/// A JDAT frame: `nonce` and the events, zlib-compressed.
fn jdat<E: AsRef<[u8]>>(nonce: [u8; 16], events: &[E]) -> Vec<u8> {
    use std::io::Write;
    let mut plain = Vec::new();
    for e in events {
        plain.extend((e.as_ref().len() as u32).to_be_bytes());
        plain.extend(e.as_ref());
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&plain).unwrap();
    let body = z.finish().unwrap();
    let mut jdat = b"JDAT".to_vec();
    jdat.extend(((16 + body.len()) as u32).to_be_bytes());
    jdat.extend(nonce);
    jdat.extend(body);
    jdat
}

#[test]
fn an_event_that_is_not_utf8_keeps_its_bytes_in_base64() {
    let jdat = jdat([7u8; 16], &[&b"\xfe\xff"[..], br#"{"message":"ok"}"#]);
    let mut c = Conv::new(Limits::default(), 0);
    c.send(C2S, GO_HELO).raw(C2S, &jdat);
    let recs = c.close();
    let events = messages(&recs, "event");
    assert_eq!(events[0].get("raw_base64"), Some(&Value::from("/v8=")));
    assert_eq!(
        *events[0].event.as_ref().unwrap(),
        serde_json::json!({"message": "\u{fffd}\u{fffd}"})
    );
    assert!(events[1].get("raw_base64").is_none());
    assert!(events[1].get("json_error").is_none());
}

#[test]
fn a_connections_end_gives_its_unacknowledged_payloads_in_parts() {
    let mut c = Conv::new(Limits::default(), 0);
    c.send(C2S, GO_HELO).send(S2C, RUBY_VERS);
    for p in 0..3u8 {
        let events: Vec<String> = (0..3000)
            .map(|i| format!(r#"{{"message":"{p} {i}"}}"#))
            .collect();
        c.raw(C2S, &jdat([p; 16], &events));
    }
    let parts = crate::decoders::close_in_parts(&mut c.dec, &mut c.shared);
    // about 4096 records a part, and the rest of a payload
    assert!(parts.len() >= 2);
    assert!(parts.iter().all(|p| p.len() <= 4096 + 3000 + 3));
    let all = parts.concat();
    let events = messages(&all, "event");
    let sent = (0..3).flat_map(|p| (0..3000).map(move |i| format!("{p} {i}")));
    assert_eq!(events.len(), 9000);
    for (e, text) in events.iter().zip(sent) {
        assert_eq!(
            *e.event.as_ref().unwrap(),
            serde_json::json!({ "message": text })
        );
        assert_eq!(e.acked, Some(false));
    }
    let unacked = codes(&all)
        .into_iter()
        .filter(|c| *c == "courier.unacked-at-close");
    assert_eq!(unacked.count(), 3);
    let Some(Record::Message(last)) = all.last() else {
        panic!("no summary last");
    };
    assert_eq!(last.kind, "connection"); // the summary
}

/// Payloads share one inflater (restarted for each): a payload whose zlib stream is broken, or
/// cut by the cap, leaves nothing behind for the next one.
#[test]
fn each_payload_inflates_afresh_after_a_broken_or_capped_one() {
    let good = |p: u8, n: usize| {
        let events: Vec<String> = (0..n).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
        jdat([p; 16], &events)
    };
    let mut broken = good(1, 5);
    let at = broken.len() - 12;
    broken[at..].iter_mut().for_each(|b| *b ^= 0x5a);
    let limits = Limits {
        max_inflated: 8000,
        ..Limits::default()
    };
    let mut c = Conv::new(limits, 0);
    c.send(C2S, GO_HELO);
    // frames 2 (broken), 3 (good), 4 (over the cap), 5 (good)
    c.raw(C2S, &broken).raw(C2S, &good(2, 3));
    c.raw(C2S, &good(3, 2000)).raw(C2S, &good(4, 3));
    let recs = c.close();
    let at_frame = |code: &str| -> Vec<Option<u64>> {
        recs.iter()
            .filter_map(|r| match r {
                Record::Finding(f) if f.code == code => Some(f.frame),
                _ => None,
            })
            .collect()
    };
    assert_eq!(at_frame("courier.decompress-failed"), [Some(2)]);
    assert_eq!(at_frame("courier.inflate-limit"), [Some(4)]);
    let payloads = messages(&recs, "jdat");
    for p in [payloads[1], payloads[3]] {
        assert_eq!(p.get("zlib_level"), Some(&Value::from("default")));
        assert_eq!(p.get("inflated_length"), Some(&Value::from(33)));
    }
    let events: Vec<_> = messages(&recs, "event")
        .iter()
        .filter(|e| e.frame == Some(3) || e.frame == Some(5))
        .map(|e| e.event.clone().unwrap())
        .collect();
    let three: Vec<_> = (0..3).map(|i| serde_json::json!({ "n": i })).collect();
    assert_eq!(events, [three.clone(), three].concat());
}
