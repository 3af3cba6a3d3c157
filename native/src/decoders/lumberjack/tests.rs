//! Decoder tests: the byte vectors of reference/lumberjack.md §9, truncations, gaps and limits.
//! The encoder here is written from the reference (§1), independent of the decoder.

use std::io::Write;

use flate2::{write::ZlibEncoder, Compression};

use super::LumberjackDecoder;
use crate::decoders::{Chunk, Decoder, Gap, Limits, Shared, StreamContext};
use crate::model::{Direction, Finding, Message, Record, Severity, Value};

const C2S: Direction = Direction::C2S;
const S2C: Direction = Direction::S2C;

pub use crate::model::text::unhex as h;

pub fn window(count: u32, v: u8) -> Vec<u8> {
    let mut out = vec![v, b'W'];
    out.extend(count.to_be_bytes());
    out
}

pub fn jframe(seq: u32, doc: &[u8]) -> Vec<u8> {
    let mut out = b"2J".to_vec();
    out.extend(seq.to_be_bytes());
    out.extend((doc.len() as u32).to_be_bytes());
    out.extend(doc);
    out
}

pub fn js(seqs: &[u32]) -> Vec<u8> {
    seqs.iter()
        .flat_map(|&s| {
            jframe(
                s,
                format!("{{\"message\":\"line {s}\",\"n\":{s}}}").as_bytes(),
            )
        })
        .collect()
}

pub fn dframe(seq: u32, pairs: &[(&[u8], &[u8])], v: u8) -> Vec<u8> {
    let mut out = vec![v, b'D'];
    out.extend(seq.to_be_bytes());
    out.extend((pairs.len() as u32).to_be_bytes());
    for (k, val) in pairs {
        out.extend((k.len() as u32).to_be_bytes());
        out.extend(*k);
        out.extend((val.len() as u32).to_be_bytes());
        out.extend(*val);
    }
    out
}

pub fn zlib(data: &[u8], level: u32) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::new(level));
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn cframe(inner: &[u8], level: u32) -> Vec<u8> {
    let body = zlib(inner, level);
    let mut out = b"2C".to_vec();
    out.extend((body.len() as u32).to_be_bytes());
    out.extend(body);
    out
}

pub fn ack(value: u32, v: u8) -> Vec<u8> {
    let mut out = vec![v, b'A'];
    out.extend(value.to_be_bytes());
    out
}

pub fn ctx(stream: u64, limits: Limits) -> StreamContext {
    StreamContext {
        stream,
        client: "127.0.0.1:40000".into(),
        server: "127.0.0.1:5044".into(),
        client_port: 40000,
        server_port: 5044,
        limits,
        ..StreamContext::default()
    }
}

/// One step of a test session.
pub enum Step<'a> {
    Data(Direction, &'a [u8]),
    Gap(Direction, u64),
}

/// Feed steps in order (every data step is one packet: frame = step number, ts = frame × 1 ms),
/// each data step cut at `cuts`; then close.
pub fn feed(
    dec: &mut LumberjackDecoder,
    shared: &mut Shared,
    steps: &[Step],
    cuts: &[usize],
) -> Vec<Record> {
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    let mut frame = 0;
    for step in steps {
        match *step {
            Step::Data(d, data) => {
                let mut bounds = vec![0];
                bounds.extend(cuts.iter().copied().filter(|&c| 0 < c && c < data.len()));
                bounds.push(data.len());
                bounds.dedup();
                for w in bounds.windows(2) {
                    frame += 1;
                    let i = d as usize;
                    let chunk = Chunk {
                        direction: d,
                        offset: offsets[i],
                        data: &data[w[0]..w[1]],
                        frame: Some(frame),
                        ts: Some(frame as i64 * 1_000_000),
                    };
                    dec.feed(&chunk, shared, &mut out);
                    offsets[i] += (w[1] - w[0]) as u64;
                }
            }
            Step::Gap(d, length) => {
                frame += 1;
                let i = d as usize;
                let gap = Gap {
                    direction: d,
                    offset: offsets[i],
                    length,
                    frame: Some(frame),
                    ts: Some(frame as i64 * 1_000_000),
                };
                dec.gap(&gap, shared, &mut out);
                offsets[i] += length;
            }
        }
    }
    while dec.close(shared, &mut out) == crate::decoders::Closing::More {}
    out
}

pub fn run_with(limits: Limits, steps: &[Step]) -> Vec<Record> {
    let mut dec = LumberjackDecoder::new(ctx(0, limits));
    feed(&mut dec, &mut Shared::default(), steps, &[])
}

pub fn run(steps: &[Step]) -> Vec<Record> {
    run_with(Limits::default(), steps)
}

pub fn messages<'a>(out: &'a [Record], kind: &str) -> Vec<&'a Message> {
    out.iter()
        .filter_map(|r| match r {
            Record::Message(m) if m.kind == kind => Some(m),
            _ => None,
        })
        .collect()
}

pub fn findings<'a>(out: &'a [Record], code: &str) -> Vec<&'a Finding> {
    let full = format!("lumberjack.{code}");
    out.iter()
        .filter_map(|r| match r {
            Record::Finding(f) if f.code == full => Some(f),
            _ => None,
        })
        .collect()
}

fn field<'a>(m: &'a Message, name: &str) -> &'a Value {
    m.get(name).unwrap_or(&Value::Null)
}

fn ffield<'a>(f: &'a Finding, name: &str) -> &'a Value {
    f.fields
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&Value::Null, |(_, v)| v)
}

// §9 A: logstash-input-beats BeatsParserTest.testInvalidCompression
const INVALID_COMPRESSION: &str = "3257000000013243000000 09789c33f26260606004626617ff600007e00167";

#[test]
fn invalid_compression_declared_length_is_truncated() {
    let data = h(INVALID_COMPRESSION);
    let out = run(&[Step::Data(C2S, &data)]);
    assert_eq!(findings(&out, "compressed-truncated").len(), 1);
    assert!(messages(&out, "event").is_empty());
    let comp = messages(&out, "compressed");
    assert_eq!(field(comp[0], "compressed_length"), &Value::from(9));
    assert_eq!(field(comp[0], "zlib_header"), &Value::from("789c"));
    assert_eq!(field(comp[0], "zlib_level"), &Value::from("6"));
    let bad = findings(&out, "invalid-version");
    assert_eq!((bad.len(), bad[0].offset), (1, Some(21)));
    assert_eq!(
        ffield(findings(&out, "resync")[0], "skipped"),
        &Value::from(10)
    );
    let win = messages(&out, "window");
    assert_eq!(field(win[0], "received"), &Value::from(0));
}

#[test]
fn invalid_compression_full_body_holds_one_non_json_event() {
    let data = h(INVALID_COMPRESSION);
    let body = &data[12..];
    assert_eq!(body.len(), 19);
    let mut c2s = data[..6].to_vec();
    c2s.extend(b"2C");
    c2s.extend(19u32.to_be_bytes());
    c2s.extend(body);
    let a = h("324100000001");
    let out = run(&[Step::Data(C2S, &c2s), Step::Data(S2C, &a)]);
    let ev = messages(&out, "event");
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].event.as_ref(), ev[0].acked), (None, Some(true)));
    assert_eq!(field(ev[0], "raw"), &Value::from("DOS"));
    let f = findings(&out, "json-invalid");
    assert_eq!(
        f[0].message,
        "J payload is not JSON: unexpected character, expected a JSON value: line 1 column 1 (char 0)"
    );
}

#[test]
fn real_filebeat_prefix_waits_then_is_truncated() {
    let prefix = h("3257000000013243000005917 85e8c56516f");
    let out = run(&[Step::Data(C2S, &prefix)]);
    let t = findings(&out, "truncated");
    assert_eq!(t[0].offset, Some(6));
    assert_eq!(
        t[0].fields,
        vec![("have", 12.into()), ("need", (6 + 0x591).into())]
    );
    assert_eq!(
        t[0].message,
        "stream ends inside a '2C' frame: 12 of at least 1431 bytes"
    );
}

const GO_LUMBER_DOC: &str = r#"{"@metadata":{"beat":"filebeat","type":"_doc","version":"8.11.0"},"@timestamp":"2024-01-02T03:04:05.000Z","message":"ev","n":N}"#;

#[test]
fn go_lumber_plain_window() {
    let mut c2s = h("325700000002");
    for (seq, n) in [(1u32, 0), (2, 1)] {
        let doc = GO_LUMBER_DOC.replace('N', &n.to_string());
        assert_eq!(doc.len(), 0x7f);
        c2s.extend(jframe(seq, doc.as_bytes()));
    }
    let a = h("324100000002");
    let out = run(&[Step::Data(C2S, &c2s), Step::Data(S2C, &a)]);
    let evs = messages(&out, "event");
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[1].event.as_ref().unwrap().value()["n"], 1);
    assert_eq!(
        [evs[0].offset, evs[1].offset],
        [Some(6), Some(6 + 10 + 127)]
    );
    assert!(evs.iter().all(|e| e.acked == Some(true)));
    let acks = messages(&out, "ack");
    assert_eq!(
        field(acks[0], "interpretation"),
        &Value::from("count=highest-seq")
    );
    assert!(out
        .iter()
        .all(|r| !matches!(r, Record::Finding(f) if f.severity != Severity::Info)));
}

#[test]
fn pylogbeat_second_send_split_segments() {
    let w = h("325700000001");
    let c = h("32430000002e789c33f2626060600662b96aa5dcd4e2e2c4f454252ba5a2c472dde292a2ccbc74ddd4b2d4bc12a55a00bf210b9a");
    let a = h("324100000003");
    let out = run(&[
        Step::Data(C2S, &w),
        Step::Data(C2S, &c),
        Step::Data(S2C, &a),
    ]);
    let ev = messages(&out, "event");
    assert_eq!(
        ev[0].event.as_ref().unwrap().value()["message"],
        "raw-string-event"
    );
    assert_eq!(
        (field(ev[0], "seq"), ev[0].frame, ev[0].acked),
        (&Value::from(3), Some(2), Some(true))
    );
    assert_eq!(field(ev[0], "ack_frame"), &Value::from(3));
    assert_eq!(
        field(messages(&out, "compressed")[0], "inflated_length"),
        &Value::from(40)
    );
    assert_eq!(
        field(messages(&out, "compressed")[0], "frames"),
        &Value::from(1)
    );
}

#[test]
fn lumberjack_protocol_v1_window() {
    let pairs: [(&[u8], &[u8]); 3] = [
        (b"line", b"hello v1"),
        (b"file", b"/var/log/a.log"),
        (b"offset", b"0"),
    ];
    let mut c2s = h("315700000003");
    for s in 1..=3 {
        c2s.extend(dframe(s, &pairs, b'1'));
    }
    let a = h("314100000003");
    let out = run(&[Step::Data(C2S, &c2s), Step::Data(S2C, &a)]);
    let evs = messages(&out, "event");
    assert_eq!(evs.len(), 3);
    assert_eq!(
        evs[0].event.as_ref().unwrap().to_string(),
        r#"{"line":"hello v1","file":"/var/log/a.log","offset":"0"}"#
    );
    assert!(evs
        .iter()
        .all(|e| e.version == Some("1") && e.acked == Some(true)));
    assert_eq!(messages(&out, "ack")[0].version, Some("1"));
}

#[test]
fn keepalive_timeline_go_lumber() {
    let inner: Vec<u8> = (1..=4).flat_map(|s| jframe(s, b"{}")).collect();
    let mut win = h("325700000004");
    let body = zlib(&inner, 3);
    assert_eq!(&body[..2], &h("785e")[..]);
    win.extend(b"2C");
    win.extend((body.len() as u32).to_be_bytes());
    win.extend(&body);
    let (k, a) = (h("324100000000"), h("324100000004"));
    let timeline: [(i64, Direction, &[u8]); 6] = [
        (1_000_000, C2S, &win),
        (3_002_000_000, S2C, &k),
        (3_293_000_000, S2C, &a),
        (3_294_000_000, C2S, &win),
        (6_294_000_000, S2C, &k),
        (7_293_000_000, S2C, &a),
    ];
    let mut dec = LumberjackDecoder::new(ctx(0, Limits::default()));
    let mut shared = Shared::default();
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    for (frame, (ts, d, data)) in timeline.iter().enumerate() {
        let chunk = Chunk {
            direction: *d,
            offset: offsets[*d as usize],
            data,
            frame: Some(frame as u64 + 1),
            ts: Some(*ts),
        };
        dec.feed(&chunk, &mut shared, &mut out);
        offsets[*d as usize] += data.len() as u64;
    }
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    let acks = messages(&out, "ack");
    let intervals: Vec<_> = acks
        .iter()
        .map(|a| field(a, "interval_ms").clone())
        .collect();
    assert_eq!(intervals[0], Value::from(3001.0));
    assert_eq!(intervals[2], Value::from(3000.0));
    let ka = findings(&out, "keepalive");
    assert_eq!(
        ka[0].message,
        "2 keep-alive ACK 0 while windows were outstanding, interval 3000..3001 ms (go-lumber sends \
         one every 3 s, Logstash every 5 s)"
    );
    let frames: Vec<_> = messages(&out, "event")
        .iter()
        .map(|e| field(e, "ack_frame").clone())
        .collect();
    assert_eq!(frames, [3, 3, 3, 3, 6, 6, 6, 6].map(Value::from));
}

#[test]
fn records_in_order_and_connection_summary() {
    let mut c2s = window(2, b'2');
    c2s.extend(cframe(&js(&[1, 2]), 6));
    c2s.extend(window(1, b'2'));
    c2s.extend(js(&[1]));
    let mut s2c = ack(0, b'2');
    s2c.extend(ack(2, b'2'));
    let out = run(&[Step::Data(C2S, &c2s), Step::Data(S2C, &s2c)]);
    let kinds: Vec<_> = out
        .iter()
        .filter_map(|r| match r {
            Record::Message(m) => Some(m.kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "ack",
            "window",
            "compressed",
            "event",
            "event",
            "ack",
            "window",
            "event",
            "connection"
        ]
    );
    let summary = messages(&out, "connection")[0];
    let names: Vec<_> = summary.fields.iter().map(|f| f.0).collect();
    assert_eq!(
        names,
        [
            "windows",
            "events",
            "acked_events",
            "unacked_events",
            "unknown_events",
            "acks",
            "keepalives",
            "seq_profile",
            "server_kind",
            "acks_lost"
        ]
    );
    assert_eq!(field(summary, "unacked_events"), &Value::from(1));
    assert_eq!(field(summary, "seq_profile"), &Value::from("per-window"));
}

#[test]
fn truncation_keeps_every_complete_frame() {
    let mut c2s = window(3, b'2');
    c2s.extend(js(&[1, 2, 3]));
    let frame = js(&[1]).len();
    for cut in 0..c2s.len() {
        let out = run(&[Step::Data(C2S, &c2s[..cut])]);
        let complete = if cut < 6 { 0 } else { (cut - 6) / frame };
        assert_eq!(messages(&out, "event").len(), complete, "cut at {cut}");
        assert!(messages(&out, "event")
            .iter()
            .all(|e| e.acked == Some(false)));
        assert_eq!(messages(&out, "connection").len(), 1);
    }
}

#[test]
fn segmentation_never_changes_the_records() {
    let mut c2s = window(2, b'2');
    c2s.extend(cframe(&js(&[1, 2]), 6));
    c2s.extend(window(2, b'1'));
    c2s.extend(dframe(1, &[(b"line", b"x")], b'1'));
    c2s.extend(dframe(2, &[(b"line", b"y\xff")], b'1'));
    let s2c = [ack(2, b'2'), ack(2, b'1')].concat();
    let steps = [Step::Data(C2S, &c2s), Step::Data(S2C, &s2c)];
    let whole = run(&steps);
    let strip = |out: Vec<Record>| -> Vec<String> {
        out.into_iter()
            .map(|r| match r {
                Record::Message(mut m) => {
                    m.frame = None;
                    m.ts = None;
                    m.set("ack_frame", Value::Null);
                    format!("{m:?}")
                }
                Record::Finding(mut f) => {
                    f.frame = None;
                    f.ts = None;
                    format!("{f:?}")
                }
            })
            .collect()
    };
    let whole = strip(whole);
    for cut in 1..c2s.len() {
        let mut dec = LumberjackDecoder::new(ctx(0, Limits::default()));
        let cuts: Vec<usize> = (0..c2s.len()).filter(|c| c % cut == 0).collect();
        let split = feed(&mut dec, &mut Shared::default(), &steps, &cuts);
        assert_eq!(strip(split), whole, "cuts every {cut}");
    }
}

#[test]
fn gap_then_resync_keeps_later_windows() {
    let mut w1 = window(3, b'2');
    w1.extend(js(&[1, 2, 3]));
    let mut w2 = window(2, b'2');
    w2.extend(js(&[4, 5]));
    let cut = 6 + js(&[1]).len() + 5;
    let rest = [&w1[cut + 7..], &w2[..]].concat();
    let a = ack(5, b'2');
    let out = run(&[
        Step::Data(C2S, &w1[..cut]),
        Step::Gap(C2S, 7),
        Step::Data(C2S, &rest),
        Step::Data(S2C, &a),
    ]);
    let resync = findings(&out, "resync");
    assert_eq!(resync[0].offset, Some(cut as u64 + 7));
    assert!(resync[0]
        .message
        .contains("after a 7-byte capture gap (5 bytes of an incomplete frame"));
    let seqs: Vec<_> = messages(&out, "event")
        .iter()
        .map(|e| field(e, "seq").clone())
        .collect();
    assert_eq!(seqs, [1, 3, 4, 5].map(Value::from));
    assert_eq!(
        findings(&out, "window-truncated")[0].severity,
        Severity::Info
    );
}

#[test]
fn server_gap_leaves_ack_state_unknown() {
    let mut c2s = window(2, b'2');
    c2s.extend(js(&[1, 2]));
    let (k, w) = (ack(0, b'2'), [window(1, b'2'), js(&[1])].concat());
    let out = run(&[
        Step::Data(C2S, &c2s),
        Step::Data(S2C, &k),
        Step::Gap(S2C, 6),
        Step::Data(C2S, &w),
    ]);
    assert!(messages(&out, "event").iter().all(|e| e.acked.is_none()));
    let summary = messages(&out, "connection")[0];
    assert_eq!(field(summary, "unknown_events"), &Value::from(3));
}

fn severities(out: &[Record]) -> Vec<(&str, Severity)> {
    out.iter()
        .filter_map(|r| match r {
            Record::Finding(f) => Some((f.code, f.severity)),
            _ => None,
        })
        .collect()
}

/// Two pipelined windows of 3 events with `lost` bytes cut out of the first window's tail by a
/// client→server capture gap, answered by count ACKs of 3 and 3 (go-lumber).
fn window_tail_in_gap(lost_events: usize, acks: &[u32]) -> Vec<Record> {
    let w1 = [window(3, b'2'), js(&[1, 2, 3])].concat();
    let w2 = [window(3, b'2'), js(&[1, 2, 3])].concat();
    let lost = (lost_events * js(&[3]).len()) as u64;
    let kept = w1.len() - lost as usize;
    let a: Vec<u8> = acks.iter().flat_map(|&v| ack(v, b'2')).collect();
    run(&[
        Step::Data(C2S, &w1[..kept]),
        Step::Gap(C2S, lost),
        Step::Data(C2S, &w2),
        Step::Data(S2C, &a),
    ])
}

#[test]
fn an_ack_of_events_lost_in_a_client_gap_is_the_captures_shortfall() {
    let out = window_tail_in_gap(1, &[3, 3]);
    // not "too high", and the second window's ACK still pairs with the second window
    assert!(findings(&out, "ack-too-high").is_empty(), "{out:?}");
    let beyond = findings(&out, "ack-beyond-capture");
    assert_eq!(beyond.len(), 1);
    assert_eq!(beyond[0].severity, Severity::Info);
    assert_eq!(ffield(beyond[0], "window"), &Value::from(1));
    let acks: Vec<_> = messages(&out, "ack")
        .iter()
        .map(|a| (field(a, "window").clone(), field(a, "acked_events").clone()))
        .collect();
    assert_eq!(
        acks,
        [(1, 2), (2, 3)].map(|(w, n)| (Value::from(w), Value::from(n)))
    );
    assert!(messages(&out, "event")
        .iter()
        .all(|e| e.acked == Some(true)));
    // a gapped window does not teach the server kind, nor is its ACK partial
    assert!(findings(&out, "server-kind").is_empty());
    assert!(findings(&out, "ack-partial").is_empty());
    assert!(severities(&out).iter().all(|(_, s)| *s != Severity::Error));
}

#[test]
fn an_ack_above_the_announced_window_is_an_error_gap_or_not() {
    let out = window_tail_in_gap(1, &[9]);
    let too_high = findings(&out, "ack-too-high");
    assert_eq!(too_high.len(), 1);
    assert_eq!(too_high[0].severity, Severity::Error);
    assert!(findings(&out, "ack-beyond-capture").is_empty());
}

#[test]
fn events_whose_window_header_is_in_a_client_gap_open_a_window_of_their_own() {
    // the gap takes window 2's W frame and first event: its last two events follow window 1
    let w1 = [window(2, b'2'), js(&[1, 2])].concat();
    let w2 = [window(3, b'2'), js(&[1, 2, 3])].concat();
    let lost = 6 + js(&[1]).len();
    let a = [ack(2, b'2'), ack(3, b'2')].concat();
    let out = run(&[
        Step::Data(C2S, &w1),
        Step::Gap(C2S, lost as u64),
        Step::Data(C2S, &w2[lost..]),
        Step::Data(S2C, &a),
    ]);
    let codes: Vec<_> = severities(&out);
    assert!(
        !codes.iter().any(|(_, s)| *s == Severity::Error),
        "{codes:?}"
    );
    assert_eq!(findings(&out, "window-in-gap").len(), 1);
    let windows: Vec<_> = messages(&out, "event")
        .iter()
        .map(|e| field(e, "window").clone())
        .collect();
    assert_eq!(windows, [1, 1, 2, 2].map(Value::from));
    assert!(messages(&out, "event")
        .iter()
        .all(|e| e.acked == Some(true)));
}

/// Windows 1 (4 events) and 2 (`second` events), numbered from 1 as go-lumber does, with a
/// client→server gap that takes window 1's last two events, window 2's W frame and its first event:
/// (window 1's captured head, the gap's length, window 2's captured tail).
fn header_in_gap(second: u32) -> (Vec<u8>, u64, Vec<u8>) {
    let w1 = [window(4, b'2'), js(&[1, 2, 3, 4])].concat();
    let seqs: Vec<u32> = (1..=second).collect();
    let w2 = [window(second, b'2'), js(&seqs)].concat();
    let kept1 = 6 + 2 * js(&[1]).len();
    let lost2 = 6 + js(&[1]).len();
    let lost = (w1.len() - kept1 + lost2) as u64;
    (w1[..kept1].to_vec(), lost, w2[lost2..].to_vec())
}

#[test]
fn a_window_acknowledged_whole_over_a_gap_takes_no_later_event() {
    // go-lumber, 65 KB segments: the gap takes window 1's tail, window 2's W frame and first event;
    // window 1's count ACK comes before window 2's remaining events. Window 1 is then complete
    // (the server counted all 4), so those events open a window of their own and window 2's ACK
    // is theirs: before, they joined window 1, which took window 2's ACK, and the last window
    // of the connection was left "never acknowledged".
    let (head, lost, tail) = header_in_gap(4);
    let w3 = [window(2, b'2'), js(&[1, 2])].concat();
    let out = run(&[
        Step::Data(C2S, &head),
        Step::Gap(C2S, lost),
        Step::Data(S2C, &ack(4, b'2')),
        Step::Data(C2S, &tail),
        Step::Data(S2C, &ack(4, b'2')),
        Step::Data(C2S, &w3),
        Step::Data(S2C, &ack(2, b'2')),
    ]);
    let codes = severities(&out);
    assert!(
        !codes.iter().any(|(_, s)| *s == Severity::Error),
        "{codes:?}"
    );
    assert!(findings(&out, "unacked").is_empty(), "{codes:?}");
    let windows: Vec<_> = messages(&out, "event")
        .iter()
        .map(|e| (field(e, "window").clone(), e.acked))
        .collect();
    let want = [1, 1, 2, 2, 2, 3, 3].map(|w| (Value::from(w), Some(true)));
    assert_eq!(windows, want);
}

#[test]
fn events_numbered_again_from_below_after_a_gap_open_the_next_window() {
    // go-lumber numbers each window from 1: the gap takes window 1's tail, window 2's W and its
    // first event; window 2's events 2..3 come before window 1's ACK. Before, they joined window
    // 1 (it had room for its count), window 1's count ACK was an "ack-stall" for a client that
    // numbers continuously, and the last window was left never acknowledged.
    let (head, lost, tail) = header_in_gap(3);
    let out = run(&[
        Step::Data(C2S, &head),
        Step::Gap(C2S, lost),
        Step::Data(C2S, &tail),
        Step::Data(S2C, &[ack(4, b'2'), ack(3, b'2')].concat()),
    ]);
    let codes = severities(&out);
    assert!(codes.iter().all(|(_, s)| *s == Severity::Info), "{codes:?}");
    let windows: Vec<_> = messages(&out, "event")
        .iter()
        .map(|e| (field(e, "window").clone(), e.acked))
        .collect();
    assert_eq!(windows, [1, 1, 2, 2].map(|w| (Value::from(w), Some(true))));
}

#[test]
fn the_same_events_without_a_gap_exceed_their_window() {
    let bytes = [window(2, b'2'), js(&[1, 2]), js(&[2, 3])].concat();
    let out = run(&[Step::Data(C2S, &bytes), Step::Data(S2C, &ack(2, b'2'))]);
    assert_eq!(
        findings(&out, "window-exceeded")[0].severity,
        Severity::Error
    );
    assert!(findings(&out, "window-in-gap").is_empty());
}

#[test]
fn an_ack_lost_in_a_server_gap_leaves_its_window_unknown_not_the_next_ack_too_high() {
    // pylogbeat to Logstash: continuing seqs, highest-seq ACKs; the ACK of window 1 is missing
    let c2s = [window(2, b'2'), js(&[1, 2]), window(2, b'2'), js(&[3, 4])].concat();
    let out = run(&[
        Step::Data(C2S, &c2s),
        Step::Gap(S2C, 6),
        Step::Data(S2C, &ack(4, b'2')),
    ]);
    assert!(findings(&out, "ack-too-high").is_empty(), "{out:?}");
    let mut acked: Vec<_> = messages(&out, "event")
        .iter()
        .map(|e| (field(e, "seq").clone(), e.acked))
        .collect();
    acked.sort_by_key(|(seq, _)| format!("{seq:?}"));
    let want = [(1, None), (2, None), (3, Some(true)), (4, Some(true))];
    assert_eq!(acked, want.map(|(s, a)| (Value::from(s), a)));
}

#[test]
fn limits_bound_frames_bombs_depth_and_pending_events() {
    // a J length above max_frame is refused before anything is allocated
    let mut huge = window(2, b'2');
    huge.extend(b"2J\x00\x00\x00\x01\x40\x00\x00\x00");
    huge.extend(js(&[2]));
    let limits = Limits {
        max_frame: 1 << 20,
        ..Limits::default()
    };
    let out = run_with(limits, &[Step::Data(C2S, &huge)]);
    let f = &findings(&out, "bad-length")[0];
    assert_eq!(ffield(f, "declared"), &Value::from(1u64 << 30));
    assert_eq!(messages(&out, "event").len(), 1);
    // a decompression bomb stops at the cap
    let bomb_doc = [b"\"".as_slice(), &vec![b'a'; 8_000_000], b"\""].concat();
    let bomb = [window(1, b'2'), cframe(&jframe(1, &bomb_doc), 9)].concat();
    assert!(bomb.len() < 20_000);
    let limits = Limits {
        max_inflated: 1 << 20,
        ..Limits::default()
    };
    let out = run_with(limits, &[Step::Data(C2S, &bomb)]);
    assert_eq!(findings(&out, "inflate-limit")[0].severity, Severity::Error);
    assert!(messages(&out, "event").is_empty());
    // nesting
    let mut body = js(&[1]);
    for _ in 0..5 {
        body = cframe(&body, 6);
    }
    let deep = [window(1, b'2'), body].concat();
    let limits = Limits {
        max_depth: 3,
        ..Limits::default()
    };
    let out = run_with(limits, &[Step::Data(C2S, &deep)]);
    assert_eq!(
        ffield(findings(&out, "compressed-too-deep")[0], "depth"),
        &Value::from(4)
    );
    // held events
    let c2s = [window(2, b'2'), js(&[1, 2]), window(2, b'2'), js(&[1, 2])].concat();
    let s2c = [ack(2, b'2'), ack(2, b'2')].concat();
    let limits = Limits {
        max_pending_events: 3,
        ..Limits::default()
    };
    let out = run_with(limits, &[Step::Data(C2S, &c2s), Step::Data(S2C, &s2c)]);
    assert_eq!(findings(&out, "pending-overflow").len(), 1);
    let acked: Vec<_> = messages(&out, "event").iter().map(|e| e.acked).collect();
    assert_eq!(acked, [None, None, Some(true), Some(true)]);
}

#[test]
fn resend_on_a_later_connection() {
    let mut shared = Shared::default();
    let c2s = [window(2, b'2'), js(&[1, 2])].concat();
    let a = ack(2, b'2');
    let mut first = LumberjackDecoder::new(ctx(3, Limits::default()));
    let out = feed(&mut first, &mut shared, &[Step::Data(C2S, &c2s)], &[]);
    assert!(findings(&out, "resend").is_empty());
    let mut second = LumberjackDecoder::new(ctx(4, Limits::default()));
    let out = feed(
        &mut second,
        &mut shared,
        &[Step::Data(C2S, &c2s), Step::Data(S2C, &a)],
        &[],
    );
    assert_eq!(
        ffield(findings(&out, "resend")[0], "first_stream"),
        &Value::from(3)
    );
    let ev = messages(&out, "event");
    assert_eq!(
        field(ev[1], "resend_of").to_string(),
        r#"{"stream":3,"frame":1,"seq":2}"#
    );
}

/// The compressed path makes its fingerprints ahead, in batches (decoder::prints_ahead): they
/// must name the same events as those made one by one, across batch boundaries and duplicates.
#[test]
fn a_resend_compressed_differently_names_every_first_copy() {
    let mut shared = Shared::default();
    let seqs: Vec<u32> = (1..=70).collect();
    let plain = [window(70, b'2'), js(&seqs)].concat();
    let mut first = LumberjackDecoder::new(ctx(3, Limits::default()));
    feed(&mut first, &mut shared, &[Step::Data(C2S, &plain)], &[]);
    // The resend: the same 70 events in one C frame, then event 40's document again as seq 71.
    let mut inner = js(&seqs);
    inner.extend_from_slice(&jframe(71, &js(&[40])[10..]));
    let resend = [window(71, b'2'), cframe(&inner, 3)].concat();
    let mut second = LumberjackDecoder::new(ctx(4, Limits::default()));
    let out = feed(&mut second, &mut shared, &[Step::Data(C2S, &resend)], &[]);
    let firsts: Vec<String> = messages(&out, "event")
        .iter()
        .map(|e| field(e, "resend_of").to_string())
        .collect();
    let expected: Vec<String> = (1..=70)
        .chain([40])
        .map(|seq| format!(r#"{{"stream":3,"frame":1,"seq":{seq}}}"#))
        .collect();
    assert_eq!(firsts, expected);
}

#[test]
fn midstream_pickup_is_a_resync_not_a_protocol_error() {
    let tail = js(&[2]);
    let tail = &tail[tail.len() - 10..];
    let c2s = [tail, &window(1, b'2'), &js(&[3])].concat();
    let a = ack(2, b'2');
    let s2c = [&a[3..], &ack(1, b'2')[..]].concat();
    let out = run(&[Step::Data(C2S, &c2s), Step::Data(S2C, &s2c)]);
    assert!(findings(&out, "invalid-version").is_empty());
    let r = findings(&out, "resync");
    assert_eq!(
        (ffield(r[0], "skipped"), ffield(r[1], "skipped")),
        (&Value::from(10), &Value::from(3))
    );
    assert!(r[0].message.contains("mid-stream"));
    assert_eq!(messages(&out, "event")[0].acked, Some(true));
}

/// CPU time of this thread, in nanoseconds (Linux; 0 elsewhere).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time of the decoder alone and of the NDJSON writing of its records (`LJ_WINDOWS=50 cargo
/// test --release -- --ignored --nocapture bench_`): Filebeat-shaped events, windows of 2048 in
/// zlib level 3 C frames, each window ACKed before the next (as a Beats client waits for it).
#[test]
#[ignore]
fn bench_filebeat_windows() {
    let windows: usize = std::env::var("LJ_WINDOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut steps_data = Vec::new();
    let mut n = 0u64;
    for _ in 0..windows {
        let mut docs = Vec::new();
        for i in 1..=2048u32 {
            n += 1;
            let doc = format!(
                r#"{{"@timestamp":"2026-11-21T06:00:01.000Z","@metadata":{{"beat":"filebeat","type":"_doc","version":"8.11.0"}},"message":"10.0.4.17 - - [21/Nov/2026:06:00:01 +0000] \"GET /api/orders/{n} HTTP/1.1\" 200 {}","log":{{"offset":{},"file":{{"path":"/var/log/nginx/access.log"}}}},"input":{{"type":"filestream"}},"host":{{"name":"web-1"}},"agent":{{"type":"filebeat","version":"8.11.0"}},"ecs":{{"version":"8.0.0"}}}}"#,
                n % 977,
                n * 120
            );
            docs.extend(jframe(i, doc.as_bytes()));
        }
        steps_data.push((C2S, [window(2048, b'2'), cframe(&docs, 3)].concat()));
        steps_data.push((S2C, ack(2048, b'2')));
    }
    let steps: Vec<Step> = steps_data.iter().map(|(d, b)| Step::Data(*d, b)).collect();
    let t = thread_cpu_ns();
    let mut dec = LumberjackDecoder::new(ctx(0, Limits::default()));
    let out = feed(&mut dec, &mut Shared::default(), &steps, &[65536]);
    let decode = thread_cpu_ns() - t;
    let mut text = String::new();
    for r in &out {
        crate::records::json::record_line(&mut text, "", None, r, None);
    }
    let write = thread_cpu_ns() - t - decode;
    println!(
        "{n} events: decode {} ms cpu, ndjson {} ms cpu, {} bytes",
        decode / 1_000_000,
        write / 1_000_000,
        text.len()
    );
}

#[test]
fn an_event_that_is_not_utf8_keeps_its_bytes_in_base64() {
    let mut c2s = h("325700000002");
    for (seq, payload) in [(1u32, &b"\xff{}"[..]), (2, b"DOS")] {
        c2s.extend(b"2J");
        c2s.extend(seq.to_be_bytes());
        c2s.extend((payload.len() as u32).to_be_bytes());
        c2s.extend(payload);
    }
    let out = run(&[Step::Data(C2S, &c2s)]);
    let ev = messages(&out, "event");
    assert_eq!(field(ev[0], "raw"), &Value::from("\u{fffd}{}"));
    assert_eq!(field(ev[0], "raw_base64"), &Value::from("/3t9"));
    assert_eq!(field(ev[1], "raw"), &Value::from("DOS"));
    assert!(
        ev[1].get("raw_base64").is_none(),
        "text needs no base64 copy"
    );
    assert_eq!(findings(&out, "json-invalid").len(), 2);
}

/// A C frame of many small frames: each is paid from the frame's budget after its inflated
/// bytes, so the frame stops at the cap with a finding naming it.
#[test]
fn frames_of_a_c_frame_are_paid_from_the_cap() {
    use crate::decoders::budget::RECORD_COST;
    let seqs: Vec<u32> = (1..=5000).collect();
    let inner: Vec<u8> = seqs.iter().flat_map(|&s| jframe(s, b"{}")).collect();
    let cap = inner.len() + 30 * RECORD_COST + 5;
    let limits = Limits {
        max_inflated: cap,
        ..Limits::default()
    };
    let data = [window(5000, b'2'), cframe(&inner, 9)].concat();
    let out = run_with(limits, &[Step::Data(C2S, &data)]);
    let f = &findings(&out, "inflate-limit")[0];
    assert_eq!(ffield(f, "cap"), &Value::from(cap));
    assert_eq!(ffield(f, "inflated_offset"), &Value::from(30 * 12));
    assert_eq!(messages(&out, "event").len(), 30);
}

#[test]
fn parked_windows_come_back_with_their_acks_as_live_ones_do() {
    // Eight windows sent before any ACK (plain and compressed, one with seqs that are not a run,
    // one spread over two C frames); the server then ACKs five of them, one in two parts. The
    // windows past the oldest two are parked while they wait: the records must be those of a
    // decoder that keeps every window live, with a budget and with everything spilled.
    let mut client = Vec::new();
    for w in 0..8u32 {
        match w % 4 {
            0 => {
                client.extend(window(3, b'2'));
                client.extend(js(&[1, 2, 3]));
            }
            1 => {
                client.extend(window(3, b'2'));
                client.extend(cframe(&js(&[1, 2, 3]), 3));
            }
            2 => {
                client.extend(window(4, b'2'));
                client.extend(js(&[1, 2, 4, 3]));
            }
            _ => {
                client.extend(window(4, b'2'));
                client.extend(cframe(&js(&[1, 2]), 6));
                client.extend(cframe(&js(&[3, 4]), 6));
            }
        }
    }
    let server: Vec<u8> = [3, 3, 3, 2, 4, 3]
        .iter()
        .flat_map(|&v| ack(v, b'2'))
        .collect();
    let steps = [Step::Data(C2S, &client), Step::Data(S2C, &server)];
    let session = |dec: LumberjackDecoder, budget: usize| {
        let mut dec = dec;
        let mut shared = Shared::new(&Limits {
            held_memory: budget,
            ..Limits::default()
        });
        let mut out = Vec::new();
        let mut offsets = [0u64; 2];
        let mut parked = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            let Step::Data(d, data) = *step else {
                unreachable!()
            };
            let chunk = Chunk {
                direction: d,
                offset: offsets[d as usize],
                data,
                frame: Some(i as u64 + 1),
                ts: Some((i as i64 + 1) * 1_000_000),
            };
            dec.feed(&chunk, &mut shared, &mut out);
            offsets[d as usize] += data.len() as u64;
            parked.push(dec.parked_windows());
        }
        while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
        (out, parked)
    };
    let (live, none) = session(
        LumberjackDecoder::new(ctx(0, Limits::default())).without_parking(),
        1 << 20,
    );
    assert_eq!(none, [0, 0]);
    for budget in [1 << 20, 0] {
        let (out, parked) = session(LumberjackDecoder::new(ctx(0, Limits::default())), budget);
        // windows 3-7 parked (the oldest two and the newest stay live); after the ACKs, 6-8 wait live
        assert_eq!(parked, [5, 0], "budget {budget}");
        assert_eq!(out, live, "budget {budget}");
    }
    let events = messages(&live, "event");
    assert_eq!(events.len(), 28);
    let acked = events.iter().filter(|e| e.acked == Some(true)).count();
    assert_eq!(
        acked,
        3 + 3 + 4 + 4 + 3,
        "windows 1-5 acknowledged, 6-8 not"
    );
}

#[test]
fn records_kept_as_they_are_come_out_as_held_ones_do() {
    // Windows acknowledged at once, one the server never answers, one that outgrows what the store
    // lets a decoder keep, then a later connection that resends a window (its events are held:
    // their `resend_of` is nested). With room to keep them, records come out of their windows
    // without being held and read back; they must be those of a store that keeps nothing
    // (everything through the spill file).
    let mut first: Vec<(Direction, Vec<u8>)> = Vec::new();
    for w in 0..6u32 {
        let mut client = window(4, b'2');
        match w % 3 {
            0 => client.extend(js(&[1, 2, 3, 4])),
            _ => client.extend(cframe(&js(&[1, 2, 3, 4]), 3)),
        }
        first.push((C2S, client));
        if w != 4 {
            first.push((S2C, ack(4, b'2')));
        }
    }
    let mut resent = window(4, b'2');
    resent.extend(js(&[1, 2, 3, 4]));
    let second = [(C2S, resent), (S2C, ack(4, b'2'))];
    let steps = |data: &[(Direction, Vec<u8>)]| -> Vec<Vec<u8>> {
        data.iter().map(|(_, b)| b.clone()).collect()
    };
    let (first_bytes, second_bytes) = (steps(&first), steps(&second));
    let session = |budget: usize| {
        let mut shared = Shared::new(&Limits {
            held_memory: budget,
            ..Limits::default()
        });
        let mut out = Vec::new();
        for (stream, data, bytes) in [
            (0, &first[..], &first_bytes),
            (1, &second[..], &second_bytes),
        ] {
            let steps: Vec<Step> = data
                .iter()
                .zip(bytes)
                .map(|((d, _), b)| Step::Data(*d, b))
                .collect();
            let mut dec = LumberjackDecoder::new(ctx(stream, Limits::default()));
            out.extend(feed(&mut dec, &mut shared, &steps, &[]));
        }
        (out, shared.lumberjack.held.taken())
    };
    let (held, all) = session(0);
    // a share of 128 KiB keeps every event; of 3 KiB, a few, then the rest of their window is held
    for budget in [1 << 20, 24 << 10] {
        let (out, taken) = session(budget);
        assert_eq!(out, held, "budget {budget}");
        if budget == 1 << 20 {
            // the W records, the unanswered window's events (at the stream's end they are its
            // newest: still kept) and the resent events (held) went to the store: not the others
            assert!(taken * 3 < all, "{taken} of {all} bytes read back");
        }
    }
    let events = messages(&held, "event");
    assert_eq!(events.len(), 28);
    let acked = events.iter().filter(|e| e.acked == Some(true)).count();
    assert_eq!(acked, 28 - 4);
    let resends = events.iter().filter(|e| e.get("resend_of").is_some());
    assert_eq!(resends.count(), 4);
}
