//! The connection against genuine TLS stacks: transcripts of Python `ssl` (OpenSSL) connections
//! with their key logs (testdata/make.py says how they were made), fed in pieces of every size,
//! damaged and cut.

use std::sync::Arc;

use super::conn::{Output, TlsConnection};
use super::keylog::KeyLog;
use crate::decoders::{Chunk, Gap};
use crate::model::text::unhex;
use crate::model::{Direction, Finding, Record};

const REQUEST: &[u8] = b"ping from the client over TLS\nping from the client over TLS\nping from the client over TLS\n";
const LINE: usize = 30;
const REPLY: &[u8] = b"pong from the server\n";

macro_rules! fixture {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("testdata/", $name, ".transcript")),
            include_str!(concat!("testdata/", $name, ".keylog")),
        )
    };
}

const FIXTURES: [(&str, &str, &str); 9] = [
    fixture!("tls12-aes128gcm"),
    fixture!("tls12-aes256gcm"),
    fixture!("tls12-chacha20"),
    fixture!("tls12-cbc-sha-etm"),
    fixture!("tls12-cbc-sha384-mte"),
    fixture!("tls12-resumed"),
    fixture!("tls13-aes128gcm"),
    fixture!("tls13-aes256gcm"),
    fixture!("tls13-chacha20"),
];

/// The flights of a transcript: (direction, bytes).
fn flights(transcript: &str) -> Vec<(Direction, Vec<u8>)> {
    transcript
        .lines()
        .map(|l| {
            let (dir, hex) = l.split_once(' ').unwrap();
            let d = if dir == "c2s" {
                Direction::C2S
            } else {
                Direction::S2C
            };
            (d, unhex(hex))
        })
        .collect()
}

fn keylog(text: &str) -> Arc<KeyLog> {
    let mut log = KeyLog::default();
    let mut findings = Vec::new();
    log.add("fixture", text, &mut findings);
    assert!(findings.is_empty());
    Arc::new(log)
}

/// What one run gave: each direction's plaintext with its gaps as `?`s (one per gap), and the records.
#[derive(Debug, Default, PartialEq)]
struct Run {
    plain: [Vec<u8>; 2],
    records: Vec<Record>,
}

impl Run {
    fn findings(&self) -> Vec<&Finding> {
        self.records
            .iter()
            .filter_map(|r| match r {
                Record::Finding(f) => Some(f),
                _ => None,
            })
            .collect()
    }

    fn codes(&self) -> Vec<&str> {
        self.findings().iter().map(|f| f.code).collect()
    }
}

/// Feed the flights in pieces of `piece` bytes (each flight is one frame); `gaps` replaces the
/// bytes [from, to) of a flight by a gap: (flight index, from, to).
fn run(
    conn: &mut TlsConnection,
    flights: &[(Direction, Vec<u8>)],
    piece: usize,
    gap: Option<(usize, usize, usize)>,
) -> Run {
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    for (i, (d, bytes)) in flights.iter().enumerate() {
        let frame = Some(i as u64 + 1);
        let ts = Some(i as i64 * 1000);
        let k = usize::from(*d == Direction::S2C);
        let mut at = 0;
        while at < bytes.len() {
            if let Some((_, from, to)) = gap.filter(|g| g.0 == i && g.1 == at) {
                conn.gap(
                    &Gap {
                        direction: *d,
                        offset: offsets[k],
                        length: (to - from) as u64,
                        frame,
                        ts,
                    },
                    &mut out,
                );
                offsets[k] += (to - from) as u64;
                at = to;
                continue;
            }
            let mut end = (at + piece).min(bytes.len());
            if let Some((_, from, _)) = gap.filter(|g| g.0 == i && g.1 > at) {
                end = end.min(from);
            }
            let chunk = Chunk {
                direction: *d,
                offset: offsets[k],
                data: &bytes[at..end],
                frame,
                ts,
            };
            conn.feed(&chunk, &mut out);
            offsets[k] += (end - at) as u64;
            at = end;
        }
    }
    conn.close(&mut out);
    let mut r = Run::default();
    let mut next = [0u64; 2];
    for o in out {
        match o {
            Output::Plain(c) => {
                let k = usize::from(c.direction == Direction::S2C);
                assert_eq!(c.offset, next[k], "plaintext offsets tile");
                next[k] += c.data.len() as u64;
                r.plain[k].extend_from_slice(&c.data);
            }
            Output::Gap(g) => {
                let k = usize::from(g.direction == Direction::S2C);
                assert_eq!(g.offset, next[k], "gaps tile with the plaintext");
                next[k] += g.length;
                r.plain[k].push(b'?');
            }
            Output::Record(rec) => r.records.push(rec),
        }
    }
    r
}

/// The client's application records: the last c2s flight, three records.
fn app_records(flights: &[(Direction, Vec<u8>)]) -> (usize, Vec<(usize, usize)>) {
    let i = flights
        .iter()
        .rposition(|(d, _)| *d == Direction::C2S)
        .unwrap();
    let bytes = &flights[i].1;
    let mut spans = Vec::new();
    let mut at = 0;
    while at + 5 <= bytes.len() {
        let len = 5 + usize::from(u16::from_be_bytes([bytes[at + 3], bytes[at + 4]]));
        spans.push((at, at + len));
        at += len;
    }
    assert_eq!(spans.len(), 3, "three application records");
    (i, spans)
}

#[test]
fn every_fixture_decrypts_in_pieces_of_any_size() {
    let expected = [
        (
            "tls12-aes128gcm",
            "TLS 1.2",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ),
        (
            "tls12-aes256gcm",
            "TLS 1.2",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ),
        (
            "tls12-chacha20",
            "TLS 1.2",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
        (
            "tls12-cbc-sha-etm",
            "TLS 1.2",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        ),
        (
            "tls12-cbc-sha384-mte",
            "TLS 1.2",
            "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        ),
        (
            "tls12-resumed",
            "TLS 1.2",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ),
        ("tls13-aes128gcm", "TLS 1.3", "TLS_AES_128_GCM_SHA256"),
        ("tls13-aes256gcm", "TLS 1.3", "TLS_AES_256_GCM_SHA384"),
        ("tls13-chacha20", "TLS 1.3", "TLS_CHACHA20_POLY1305_SHA256"),
    ];
    for ((name, transcript, log), (ename, version, suite)) in FIXTURES.iter().zip(expected) {
        assert_eq!(*name, ename);
        let fl = flights(transcript);
        let mut whole = None;
        for piece in [1, 5, 7, 100, 1 << 20] {
            let mut conn = TlsConnection::new(keylog(log));
            let r = run(&mut conn, &fl, piece, None);
            assert_eq!(
                r.plain,
                [REQUEST.to_vec(), REPLY.to_vec()],
                "{name} in pieces of {piece}"
            );
            assert_eq!(r.codes(), Vec::<&str>::new(), "{name}");
            let info = conn.info().to_value();
            assert_eq!(info["version"], version, "{name}");
            assert_eq!(info["cipher_suite"], suite, "{name}");
            assert_eq!(info["sni"], "logstash.example", "{name}");
            assert_eq!(info["decrypted"], true, "{name}");
            assert!(info.get("not_decrypted").is_none(), "{name}");
            match &whole {
                None => whole = Some(r),
                Some(w) => assert_eq!(
                    w.records.len(),
                    r.records.len(),
                    "{name} in pieces of {piece}"
                ),
            }
        }
    }
}

#[test]
fn hellos_are_reported() {
    let (_, transcript, log) = FIXTURES[4];
    let mut conn = TlsConnection::new(keylog(log));
    let r = run(&mut conn, &flights(transcript), 1 << 20, None);
    let kinds: Vec<_> = r
        .records
        .iter()
        .filter_map(|x| match x {
            Record::Message(m) => Some(m.kind),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["client_hello", "server_hello"]);
    let Record::Message(sh) = &r.records[1] else {
        panic!()
    };
    assert_eq!(
        sh.get("encrypt_then_mac"),
        Some(&false.into()),
        "the MtE fixture turned ETM off"
    );
    assert_eq!(sh.get("extended_master_secret"), Some(&true.into()));
    assert_eq!(sh.frame, Some(2));
}

#[test]
fn a_flipped_byte_fails_that_record_only() {
    for (name, transcript, log) in FIXTURES {
        let mut fl = flights(transcript);
        let (i, spans) = app_records(&fl);
        let (from, to) = spans[1];
        fl[i].1[(from + to) / 2] ^= 0x40;
        let mut conn = TlsConnection::new(keylog(log));
        let r = run(&mut conn, &fl, 1 << 20, None);
        assert_eq!(r.codes(), ["tls.decrypt-failed"], "{name}");
        let f = r.findings()[0];
        assert_eq!((f.frame, f.offset.is_some()), (Some(i as u64 + 1), true));
        let mut want = REQUEST[..LINE].to_vec();
        want.push(b'?');
        want.extend_from_slice(&REQUEST[2 * LINE..]);
        assert_eq!(r.plain, [want, REPLY.to_vec()], "{name}");
    }
}

#[test]
fn after_a_gap_decryption_resumes_at_the_next_record() {
    for (name, transcript, log) in FIXTURES {
        let fl = flights(transcript);
        let (i, spans) = app_records(&fl);
        // The gap starts inside the first record and ends inside the second.
        let (from, to) = (spans[0].0 + 3, spans[1].1 - 4);
        let mut conn = TlsConnection::new(keylog(log));
        let r = run(&mut conn, &fl, 9, Some((i, from, to)));
        assert_eq!(r.codes(), ["tls.gap"], "{name}");
        let mut want = b"?".to_vec();
        want.extend_from_slice(&REQUEST[2 * LINE..]);
        assert_eq!(r.plain, [want, REPLY.to_vec()], "{name}");
    }
}

#[test]
fn without_the_key_the_stream_says_so_once() {
    for (name, transcript, _) in FIXTURES {
        let mut conn = TlsConnection::new(Arc::new(KeyLog::default()));
        let r = run(&mut conn, &flights(transcript), 1 << 20, None);
        assert_eq!(r.codes(), ["tls.no-key"], "{name}");
        assert!(r.findings()[0]
            .message
            .starts_with("no key log line for client random "));
        assert_eq!(r.plain, [Vec::<u8>::new(), Vec::new()]);
        let info = conn.info().to_value();
        assert_eq!(info["decrypted"], false);
        assert_eq!(info["not_decrypted"], "tls.no-key", "{name}");
    }
}

#[test]
fn a_wrong_key_is_decrypt_failed() {
    let (_, transcript, log) = FIXTURES[0];
    // The master secret's first byte changed (its line: CLIENT_RANDOM <random> <master>).
    let at = log.find("CLIENT_RANDOM ").unwrap() + "CLIENT_RANDOM ".len() + 65;
    let mut wrong = log.to_owned();
    let first = if &log[at..at + 2] == "00" { "01" } else { "00" };
    wrong.replace_range(at..at + 2, first);
    let mut conn = TlsConnection::new(keylog(&wrong));
    let r = run(&mut conn, &flights(transcript), 1 << 20, None);
    assert!(r.codes().iter().all(|c| *c == "tls.decrypt-failed") && r.codes().len() >= 4);
    assert_eq!(r.plain[0].iter().filter(|&&b| b != b'?').count(), 0);
    assert_eq!(
        conn.info().to_value()["not_decrypted"],
        "tls.decrypt-failed"
    );
}

/// RFC 8448 §3's ClientHello and ServerHello records.
fn rfc8448_hellos() -> Vec<(Direction, Vec<u8>)> {
    let ch = unhex("16 03 01 00 c4 01 00 00 c0 03 03 cb 34 ec b1 e7 81 63 ba 1c 38 c6 da cb 19 6a 6d ff a2 1a 8d 99 12
        ec 18 a2 ef 62 83 02 4d ec e7 00 00 06 13 01 13 03 13 02 01 00 00 91 00 00 00 0b 00 09 00 00 06
        73 65 72 76 65 72 ff 01 00 01 00 00 0a 00 14 00 12 00 1d 00 17 00 18 00 19 01 00 01 01 01 02 01
        03 01 04 00 23 00 00 00 33 00 26 00 24 00 1d 00 20 99 38 1d e5 60 e4 bd 43 d2 3d 8e 43 5a 7d ba
        fe b3 c0 6e 51 c1 3c ae 4d 54 13 69 1e 52 9a af 2c 00 2b 00 03 02 03 04 00 0d 00 20 00 1e 04 03
        05 03 06 03 02 03 08 04 08 05 08 06 04 01 05 01 06 01 02 01 04 02 05 02 06 02 02 02 00 2d 00 02
        01 01 00 1c 00 02 40 01");
    let sh = unhex("16 03 03 00 5a 02 00 00 56 03 03 a6 af 06 a4 12 18 60 dc 5e 6e 60 24 9c d3 4c 95 93 0c 8a c5 cb 14 34 da c1 55 77 2e
        d3 e2 69 28 00 13 01 00 00 2e 00 33 00 24 00 1d 00 20 c9 82 88 76 11 20 95 fe 66 76 2b db f7 c6 72 e1
        56 d6 cc 25 3b 83 3d f1 dd 69 b1 b0 4e 75 1f 0f 00 2b 00 02 03 04");
    vec![(Direction::C2S, ch), (Direction::S2C, sh)]
}

#[test]
fn rfc8448_client_flight() {
    // RFC 8448 §3: ClientHello, ServerHello, the client's Finished on its handshake keys, then
    // its first application data on its application keys.
    let fin = unhex("17 03 03 00 35 75 ec 4d c2 38 cc e6 0b 29 80 44 a7 1e 21 9c 56 cc 77 b0 51 7f e9
        b9 3c 7a 4b fc 44 d8 7f 38 f8 03 38 ac 98 fc 46 de b3 84 bd 1c ae ac ab 68 67 d7 26 c4 05 46");
    let app = unhex(
        "17 03 03 00 43 a2 3f 70 54 b6 2c 94 d0 af fa fe 82 28 ba 55 cb ef ac ea 42 f9 14 aa 66
        bc ab 3f 2b 98 19 a8 a5 b4 6b 39 5b d5 4a 9a 20 44 1e 2b 62 97 4e 1f 5a 62 92 a2 97 70
        14 bd 1e 3d ea e6 3a ee bb 21 69 49 15 e4",
    );
    let random = "cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7";
    let log = format!(
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET {random} b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21\n\
         CLIENT_TRAFFIC_SECRET_0 {random} 9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5\n"
    );
    let mut fl = rfc8448_hellos();
    fl.push((Direction::C2S, [fin, app].concat()));
    let mut conn = TlsConnection::new(keylog(&log));
    let r = run(&mut conn, &fl, 1 << 20, None);
    assert_eq!(r.codes(), Vec::<&str>::new());
    assert_eq!(r.plain[0], (0u8..50).collect::<Vec<u8>>());
    assert_eq!(conn.info().to_value()["sni"], "server");
}

/// A TLS 1.3 record sealed with AES-128-GCM the way a sender does (RFC 8446 §5.2): the tests'
/// own sender, to reach what no genuine peer here can be made to send (a KeyUpdate).
fn seal13(secret: &[u8], seq: u64, ctype: u8, content: &[u8]) -> Vec<u8> {
    use aes_gcm::aead::{AeadInPlace, KeyInit};
    let (key, iv) = super::keys::traffic13(super::keys::Hash::Sha256, secret, 16);
    let mut nonce = iv;
    for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
        *n ^= s;
    }
    let mut body = [content, &[ctype]].concat();
    let header = [23, 3, 3, 0, 0];
    let len = (body.len() + 16) as u16;
    let header = [header[0], header[1], header[2], (len >> 8) as u8, len as u8];
    let tag = aes_gcm::Aes128Gcm::new_from_slice(&key)
        .unwrap()
        .encrypt_in_place_detached(nonce.as_slice().into(), &header, &mut body)
        .unwrap();
    [&header[..], &body, &tag].concat()
}

#[test]
fn a_key_update_moves_its_direction_to_the_next_secret() {
    // RFC 8448's hellos, then the client's records on its application secret (no handshake
    // secrets in the key log: the first record finds them), a KeyUpdate, and a record on the next.
    let random = "cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7";
    let secret = unhex("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5");
    let log = format!(
        "CLIENT_TRAFFIC_SECRET_0 {random} {}\n",
        crate::model::text::hex(&secret)
    );
    let next = super::keys::next_secret13(super::keys::Hash::Sha256, &secret);
    let c2s = [
        seal13(&secret, 0, 23, b"one "),
        seal13(&secret, 1, 22, &[24, 0, 0, 1, 1]), // KeyUpdate, update_requested
        seal13(&next, 0, 23, b"two"),
    ]
    .concat();
    let mut fl = rfc8448_hellos();
    fl.push((Direction::C2S, c2s));
    for piece in [1, 1 << 20] {
        let mut conn = TlsConnection::new(keylog(&log));
        let r = run(&mut conn, &fl, piece, None);
        assert_eq!(r.codes(), Vec::<&str>::new());
        assert_eq!(r.plain[0], b"one two");
    }
}

#[test]
fn a_suite_not_decrypted_is_said_once_instead_of_no_key() {
    // RFC 8448's ServerHello choosing TLS_AES_128_CCM_SHA256 (0x1304) instead of 0x1301.
    let mut fl = rfc8448_hellos();
    let sh = &mut fl[1].1;
    let at = 5 + 4 + 2 + 32 + 1; // record and handshake headers, version, random, empty session id
    assert_eq!(sh[at..at + 2], [0x13, 0x01]);
    sh[at + 1] = 0x04;
    fl.push((
        Direction::C2S,
        vec![23, 3, 3, 0, 20].into_iter().chain([0; 20]).collect(),
    ));
    let mut conn = TlsConnection::new(Arc::new(KeyLog::default()));
    let r = run(&mut conn, &fl, 1 << 20, None);
    assert_eq!(r.codes(), ["tls.unsupported-suite"]);
    assert_eq!(
        r.findings()[0].message,
        "TLS 1.3 with 0x1304: wirelog does not decrypt this version or cipher suite"
    );
    assert_eq!(conn.info().to_value()["cipher_suite"], "0x1304");
    assert_eq!(
        conn.info().to_value()["not_decrypted"],
        "tls.unsupported-suite"
    );
}

#[test]
fn a_capture_that_missed_the_handshake_says_why_nothing_decrypts() {
    let (_, transcript, log) = FIXTURES[0];
    let fl = flights(transcript);
    let (i, _) = app_records(&fl);
    let mut conn = TlsConnection::new(keylog(log));
    let r = run(&mut conn, &fl[i..], 1 << 20, None);
    assert_eq!(r.codes(), ["tls.no-key"]);
    assert!(r.findings()[0]
        .message
        .starts_with("no ClientHello in the capture to match a key log line with"));
}

/// `handshake_read` (what `streams` waits for): false until the ServerHello; then true at once
/// without keys, and with keys once the server's Finished was read, before any application data,
/// with the handshake's protected records decrypted.
#[test]
fn the_handshake_is_read_before_the_application_data() {
    for (name, transcript, log) in FIXTURES {
        let flights = flights(transcript);
        let server_hello = flights
            .iter()
            .position(|(d, _)| *d == Direction::S2C)
            .unwrap();
        for keys in [true, false] {
            let mut conn = TlsConnection::new(if keys { keylog(log) } else { Arc::default() });
            let mut out = Vec::new();
            let read_at = flights.iter().enumerate().position(|(i, (d, bytes))| {
                let chunk = Chunk {
                    direction: *d,
                    offset: flights[..i]
                        .iter()
                        .filter(|f| f.0 == *d)
                        .map(|f| f.1.len() as u64)
                        .sum(),
                    data: bytes,
                    frame: None,
                    ts: None,
                };
                conn.feed(&chunk, &mut out);
                conn.handshake_read()
            });
            let read_at = read_at.unwrap_or_else(|| panic!("{name}: handshake never read"));
            assert!(read_at >= server_hello, "{name}");
            if !keys {
                assert_eq!(read_at, server_hello, "{name}");
            }
            assert!(
                !out.iter().any(|o| matches!(o, Output::Plain(_))),
                "{name}: application data before the handshake was read"
            );
            let info = conn.info();
            assert!(
                info.version.is_some() && info.cipher_suite.is_some(),
                "{name}"
            );
            assert_eq!(info.decrypted, keys, "{name} keys {keys}");
        }
    }
}
