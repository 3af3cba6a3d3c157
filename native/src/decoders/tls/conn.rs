//! One TLS connection, both directions: fed the TCP chunks and gaps, it frames records, reads the
//! hellos, finds the connection's secrets in the key log, decrypts, and returns each direction's
//! plaintext (with its own offsets, stamped with the frame and time of the record's last segment),
//! plaintext gaps, and records: the hellos, alerts and TLS findings.
//!
//! When records cannot be decrypted the connection still says what it saw: `tls.no-key`,
//! `tls.unsupported-suite`. A record whose tag does not verify is `tls.decrypt-failed` and the next
//! record is read normally (its sequence number is the next one). After lost bytes (`tls.gap`) the
//! framer scans for a plausible header and a candidate is confirmed by decrypting it under the
//! sequence numbers the lost bytes could have held.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "record sequence numbers and counts grow by one per record; plaintext offsets by the bytes decrypted (or saturate, for gaps)"
)]

use std::sync::Arc;

use serde_json::json;

use super::cipher::{suite, RecordCipher, Suite};
use super::handshake::{self, encrypted_extensions_alpn, version_name, Hello, Reassembler};
use super::keylog::KeyLog;
use super::keys::{key_block12, next_secret13, traffic13};
use super::record::{self, Framed, Framer, Next};
use crate::decoders::{Chunk, Gap, OwnedChunk};
use crate::model::text::hex;
use crate::model::{Direction, Finding, Message, Record, Severity, Value};

/// Sequence numbers tried for the first record after lost bytes (each try is one tag check).
const MAX_SEQ_TRIES: u64 = 256;
/// The smallest protected record on the wire (TLS 1.3: header, type byte, tag).
const MIN_PROTECTED: u64 = 5 + 1 + 16;

/// What the connection hands on.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Decrypted application data of one direction; its offset counts plaintext bytes.
    Plain(OwnedChunk),
    /// Plaintext that is lost (bytes missing from the capture, or a record that did not decrypt):
    /// `length` is the protected bytes lost, an upper bound of the plaintext.
    Gap(Gap),
    Record(Record),
}

/// What a stream's records say about its TLS (`streams`, `inspect`, and the `tls` field).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsInfo {
    pub version: Option<u16>,
    pub cipher_suite: Option<u16>,
    pub sni: Option<String>,
    pub alpn: Option<String>,
    pub decrypted: bool,
    /// While nothing is decrypted: the code of the first finding that says why (`tls.no-key`,
    /// `tls.unsupported-suite`, `tls.decrypt-failed`, `tls.no-server-hello`).
    pub not_decrypted: Option<&'static str>,
}

impl TlsInfo {
    /// `not_decrypted` is there only while `decrypted` is false (null: no protected record yet).
    pub fn to_value(&self) -> Value {
        let mut v = json!({
            "version": self.version.map(|v| version_name(v).map_or_else(|| format!("0x{v:04x}"), str::to_owned)),
            "cipher_suite": self.cipher_suite.map(suite_name),
            "sni": self.sni,
            "alpn": self.alpn,
            "decrypted": self.decrypted,
        });
        if !self.decrypted {
            v["not_decrypted"] = json!(self.not_decrypted);
        }
        v
    }
}

/// A suite's IANA name, or its number in hex when wirelog does not know it.
pub fn suite_name(code: u16) -> String {
    suite(code).map_or_else(|| format!("0x{code:04x}"), |s| s.name.to_owned())
}

/// Where a direction's keys stand.
#[derive(Debug, Default)]
struct Half {
    framer: Framer,
    hs: Reassembler,
    /// Opens this direction's protected records.
    cipher: Option<RecordCipher>,
    /// TLS 1.2: the keys this direction turns on at its ChangeCipherSpec.
    pending: Option<RecordCipher>,
    /// TLS 1.2: ChangeCipherSpec seen, every later record is protected.
    protected: bool,
    /// TLS 1.3: the current traffic secret (to derive the next at a KeyUpdate) and the
    /// application secret that follows the handshake secret at this direction's Finished.
    secret: Option<Vec<u8>>,
    application: Option<Vec<u8>>,
    /// Application data flows (TLS 1.2 after Finished, TLS 1.3 on the application keys).
    app_phase: bool,
    seq: u64,
    /// Protected bytes lost since the last record decrypted: the sequence number is uncertain.
    lost: Option<u64>,
    plain_offset: u64,
    records: u64,
    /// The first bytes of this direction when they were not TLS (to explain a one-sided TLS).
    not_tls: Option<Vec<u8>>,
}

pub struct TlsConnection {
    keylog: Arc<KeyLog>,
    halves: [Half; 2],
    client_hello: Option<Hello>,
    client_hello_at: Option<(u64, Option<u64>, Option<i64>)>,
    suite: Option<&'static Suite>,
    tls13: bool,
    info: TlsInfo,
    reported_no_key: bool,
    failed: u64,
}

fn side(d: Direction) -> usize {
    usize::from(d == Direction::S2C)
}

impl TlsConnection {
    pub fn new(keylog: Arc<KeyLog>) -> Self {
        TlsConnection {
            keylog,
            halves: Default::default(),
            client_hello: None,
            client_hello_at: None,
            suite: None,
            tls13: false,
            info: TlsInfo::default(),
            reported_no_key: false,
            failed: 0,
        }
    }

    pub fn info(&self) -> &TlsInfo {
        &self.info
    }

    /// The handshake has said all `info` will learn: the ServerHello was read, and the server's
    /// records are on application keys (its encrypted extensions read) or nothing can be decrypted.
    pub fn handshake_read(&self) -> bool {
        let server = &self.halves[1];
        let keyed =
            server.cipher.is_some() || server.pending.is_some() || server.application.is_some();
        self.info.version.is_some() && (server.app_phase || !keyed)
    }

    pub fn feed(&mut self, chunk: &Chunk<'_>, out: &mut Vec<Output>) {
        let d = chunk.direction;
        self.halves[side(d)]
            .framer
            .push(chunk.offset, chunk.data, chunk.frame, chunk.ts);
        self.drain(d, out);
    }

    pub fn gap(&mut self, gap: &Gap, out: &mut Vec<Output>) {
        let h = &mut self.halves[side(gap.direction)];
        let partial = h.framer.pending() as u64;
        h.framer.gap(gap.end());
        h.hs.reset();
        // gap lengths are TCP's (below 2^32 each); a raw dump's come from Python: they saturate
        let lost = gap.length.saturating_add(partial);
        h.lost = Some(h.lost.unwrap_or(0).saturating_add(lost));
        out.push(Output::Record(
            finding(
                "tls.gap",
                Severity::Warning,
                format!(
                    "{} bytes missing inside the TLS stream: decryption resumes at the next record boundary found",
                    gap.length
                ),
                gap.direction,
                gap.offset,
                gap.frame,
                gap.ts,
            )
            .into(),
        ));
        if h.app_phase {
            out.push(Output::Gap(Gap {
                offset: h.plain_offset,
                length: lost,
                ..*gap
            }));
            h.plain_offset = h.plain_offset.saturating_add(lost);
        }
    }

    /// The end of the connection: a ClientHello that was never answered in TLS is explained.
    pub fn close(&mut self, out: &mut Vec<Output>) {
        let (Some(_), Some((offset, frame, ts))) = (&self.client_hello, self.client_hello_at)
        else {
            return;
        };
        let server = &self.halves[1];
        if server.records > 0 {
            return;
        }
        let reply = server.not_tls.as_deref();
        self.info.not_decrypted.get_or_insert("tls.no-server-hello");
        let said = reply.map_or_else(
            || "sent nothing back".to_owned(),
            |b| format!("answered with plaintext bytes {}", spaced_hex(b)),
        );
        out.push(Output::Record(
            finding(
                "tls.no-server-hello",
                Severity::Warning,
                format!(
                    "the client started TLS but the server {said}: a TLS client talking to a plaintext \
                     server (e.g. Beats or Log Courier with TLS enabled on one side only)?"
                ),
                Direction::C2S,
                offset,
                frame,
                ts,
            )
            .field("reply", reply.map(hex))
            .into(),
        ));
    }

    fn drain(&mut self, d: Direction, out: &mut Vec<Output>) {
        loop {
            let h = &mut self.halves[side(d)];
            match h.framer.next_record() {
                Next::Wait => return,
                Next::NotRecord {
                    offset,
                    head,
                    frame,
                    ts,
                } => {
                    if h.records == 0 && h.not_tls.is_none() {
                        h.not_tls = Some(head.clone());
                    }
                    out.push(Output::Record(
                        finding(
                            "tls.bad-record",
                            Severity::Warning,
                            format!(
                                "bytes {} are not a TLS record header: scanning for the next record",
                                hex(&head[..head.len().min(5)])
                            ),
                            d,
                            offset,
                            frame,
                            ts,
                        )
                        .into(),
                    ));
                }
                Next::Record(rec) => {
                    if rec.candidate {
                        let confirmed = self.resync(d, &rec, out);
                        self.halves[side(d)].framer.settle(&rec, confirmed);
                    } else {
                        self.record(d, &rec, out);
                    }
                }
            }
        }
    }

    /// A record is protected when TLS 1.3 says so by its outer type, or TLS 1.2's
    /// ChangeCipherSpec came before it.
    fn is_protected(&self, d: Direction, rec: &Framed) -> bool {
        if self.tls13 {
            rec.ctype() == record::APPLICATION_DATA
        } else {
            // TLS 1.2 application data is always protected, even when the handshake was missed.
            let after_ccs =
                self.halves[side(d)].protected || rec.ctype() == record::APPLICATION_DATA;
            after_ccs && rec.ctype() != record::CHANGE_CIPHER_SPEC
        }
    }

    /// A candidate record after lost bytes: true when it is one (its tag verifies under one of the
    /// sequence numbers the lost bytes allow, or nothing can be checked), and then it is handled.
    fn resync(&mut self, d: Direction, rec: &Framed, out: &mut Vec<Output>) -> bool {
        let h = &self.halves[side(d)];
        if !self.is_protected(d, rec) || h.cipher.is_none() {
            self.record(d, rec, out);
            return true;
        }
        let lost = h.lost.unwrap_or(0);
        let span = (lost / MIN_PROTECTED + 1).min(MAX_SEQ_TRIES);
        let cipher = h.cipher.as_ref().expect("checked");
        let Some((seq, opened)) = (h.seq..=h.seq + span)
            .find_map(|seq| cipher.open(seq, &rec.header, &rec.body).map(|p| (seq, p)))
        else {
            return false;
        };
        let h = &mut self.halves[side(d)];
        h.seq = seq + 1;
        h.lost = None;
        h.records += 1;
        self.plaintext(d, rec, opened.0, opened.1, out);
        true
    }

    fn record(&mut self, d: Direction, rec: &Framed, out: &mut Vec<Output>) {
        self.halves[side(d)].records += 1;
        if self.is_protected(d, rec) {
            return self.protected(d, rec, out);
        }
        match rec.ctype() {
            record::CHANGE_CIPHER_SPEC if !self.tls13 => {
                let h = &mut self.halves[side(d)];
                h.protected = true;
                h.cipher = h.pending.take();
                h.seq = 0;
            }
            record::HANDSHAKE | record::ALERT => {
                self.plaintext(d, rec, rec.ctype(), rec.body.clone(), out)
            }
            _ => {}
        }
    }

    fn protected(&mut self, d: Direction, rec: &Framed, out: &mut Vec<Output>) {
        let h = &mut self.halves[side(d)];
        let opened = match &h.cipher {
            Some(c) => c.open(h.seq, &rec.header, &rec.body),
            None => None,
        };
        // TLS 1.3 without the handshake secrets, or a Finished that was lost: the application keys.
        let opened = opened.or_else(|| {
            let secret = h.application.take()?;
            let suite = self.suite?;
            let (key, iv) = traffic13(suite.hash, &secret, suite.bulk.key_len());
            let c = RecordCipher::new(suite, &key, &iv, &[], false);
            let p = c.open(0, &rec.header, &rec.body);
            if p.is_some() {
                h.cipher = Some(c);
                h.secret = Some(secret);
                h.seq = 0;
                h.app_phase = true;
            } else {
                h.application = Some(secret);
            }
            p
        });
        match opened {
            Some((ctype, plain)) => {
                h.seq += 1;
                h.lost = None;
                self.plaintext(d, rec, ctype, plain, out);
            }
            None if h.cipher.is_none() => self.no_key(d, rec, out),
            None => {
                h.seq += 1;
                self.failed += 1;
                self.info.not_decrypted.get_or_insert("tls.decrypt-failed");
                out.push(Output::Record(
                    finding(
                        "tls.decrypt-failed",
                        Severity::Error,
                        format!(
                            "a {}-byte TLS record does not authenticate (a wrong key or altered bytes): \
                             skipped, decryption goes on at the next record",
                            rec.wire_len()
                        ),
                        d,
                        rec.offset,
                        rec.frame,
                        rec.ts,
                    )
                    .field("sequence", h.seq - 1)
                    .into(),
                ));
                if h.app_phase {
                    out.push(Output::Gap(Gap {
                        direction: d,
                        offset: h.plain_offset,
                        length: rec.body.len() as u64,
                        frame: rec.frame,
                        ts: rec.ts,
                    }));
                    h.plain_offset += rec.body.len() as u64;
                }
            }
        }
    }

    /// A protected record without keys: said once per connection.
    fn no_key(&mut self, d: Direction, rec: &Framed, out: &mut Vec<Output>) {
        if self.reported_no_key {
            return;
        }
        self.reported_no_key = true;
        self.info.not_decrypted.get_or_insert("tls.no-key");
        let why = match &self.client_hello {
            None => "no ClientHello in the capture to match a key log line with".to_owned(),
            Some(ch) => format!("no key log line for client random {}", hex(&ch.random)),
        };
        out.push(Output::Record(
            finding(
                "tls.no-key",
                Severity::Warning,
                format!("{why}: the TLS application data of this stream is not decoded"),
                d,
                rec.offset,
                rec.frame,
                rec.ts,
            )
            .field(
                "client_random",
                self.client_hello.as_ref().map(|c| hex(&c.random)),
            )
            .into(),
        ));
    }

    /// The content of a record, plain or decrypted.
    fn plaintext(
        &mut self,
        d: Direction,
        rec: &Framed,
        ctype: u8,
        plain: Vec<u8>,
        out: &mut Vec<Output>,
    ) {
        let h = &mut self.halves[side(d)];
        if h.protected || (self.tls13 && rec.ctype() == record::APPLICATION_DATA) {
            self.info.decrypted = true;
        }
        match ctype {
            record::APPLICATION_DATA if !plain.is_empty() => {
                let offset = h.plain_offset;
                h.plain_offset += plain.len() as u64;
                h.app_phase = true;
                out.push(Output::Plain(OwnedChunk {
                    direction: d,
                    offset,
                    data: plain,
                    frame: rec.frame,
                    ts: rec.ts,
                }));
            }
            record::HANDSHAKE => {
                let mut messages = Vec::new();
                h.hs.feed(&plain, &mut messages);
                for (kind, body) in messages {
                    self.handshake(d, rec, kind, &body, out);
                }
            }
            record::ALERT if plain.len() == 2 => {
                let mut m = message(d, rec, "alert");
                m.set("level", u64::from(plain[0]));
                m.set("description", u64::from(plain[1]));
                out.push(Output::Record(m.into()));
            }
            _ => {}
        }
    }

    fn handshake(
        &mut self,
        d: Direction,
        rec: &Framed,
        kind: u8,
        body: &[u8],
        out: &mut Vec<Output>,
    ) {
        match kind {
            handshake::CLIENT_HELLO if d == Direction::C2S => {
                let hello = Hello::parse(body, true);
                let mut m = message(d, rec, "client_hello");
                m.version = version_name(rec.version());
                if let Some(sni) = &hello.sni {
                    m.set("sni", sni.as_str());
                    self.info.sni = Some(sni.clone());
                }
                hello_fields(&mut m, &hello);
                if !hello.versions.is_empty() {
                    let names: Vec<Value> =
                        hello.versions.iter().map(|v| version_value(*v)).collect();
                    m.set("supported_versions", names);
                }
                out.push(Output::Record(m.into()));
                if self.client_hello_at.is_none() {
                    self.client_hello_at = Some((rec.offset, rec.frame, rec.ts));
                }
                self.client_hello = Some(hello);
            }
            handshake::SERVER_HELLO if d == Direction::S2C => {
                let hello = Hello::parse(body, false);
                let mut m = message(d, rec, "server_hello");
                m.version = version_name(rec.version());
                if let Some(code) = hello.cipher_suite {
                    m.set("cipher_suite", suite_name(code));
                }
                if hello.versions.len() == 1 {
                    m.set("supported_versions", vec![version_value(hello.version())]);
                }
                hello_fields(&mut m, &hello);
                m.set("hello_retry_request", hello.retry);
                out.push(Output::Record(m.into()));
                // A HelloRetryRequest is TLS 1.3: the client's ChangeCipherSpec that may follow
                // is for middleboxes, not a key change.
                self.tls13 |= hello.retry;
                if !hello.retry && !hello.truncated {
                    self.server_hello(d, rec, &hello, out);
                }
            }
            handshake::ENCRYPTED_EXTENSIONS if d == Direction::S2C => {
                if let Some(alpn) = encrypted_extensions_alpn(body) {
                    self.info.alpn = Some(alpn);
                }
            }
            handshake::FINISHED => {
                let tls13 = self.tls13;
                let suite = self.suite;
                let h = &mut self.halves[side(d)];
                if !tls13 {
                    h.app_phase = true;
                } else if let (Some(secret), Some(suite)) = (h.application.take(), suite) {
                    // TLS 1.3: this direction's next record is on its application keys.
                    let (key, iv) = traffic13(suite.hash, &secret, suite.bulk.key_len());
                    h.cipher = Some(RecordCipher::new(suite, &key, &iv, &[], false));
                    h.secret = Some(secret);
                    h.seq = 0;
                    h.app_phase = true;
                }
            }
            handshake::KEY_UPDATE if self.tls13 => {
                let suite = self.suite;
                let h = &mut self.halves[side(d)];
                if let (Some(secret), Some(suite)) = (h.secret.take(), suite) {
                    let next = next_secret13(suite.hash, &secret);
                    let (key, iv) = traffic13(suite.hash, &next, suite.bulk.key_len());
                    h.cipher = Some(RecordCipher::new(suite, &key, &iv, &[], false));
                    h.secret = Some(next);
                    h.seq = 0;
                }
            }
            _ => {}
        }
    }

    /// The ServerHello settles the version and suite: find the keys.
    fn server_hello(&mut self, d: Direction, rec: &Framed, hello: &Hello, out: &mut Vec<Output>) {
        let version = hello.version();
        self.info.version = Some(version);
        self.info.cipher_suite = hello.cipher_suite;
        self.tls13 = version == 0x0304;
        if let Some(alpn) = hello.alpn.first() {
            self.info.alpn = Some(alpn.clone());
        }
        let code = hello.cipher_suite.unwrap_or(0);
        let usable = suite(code).filter(|s| s.tls13 == self.tls13 && version >= 0x0303);
        let Some(suite) = usable else {
            out.push(Output::Record(
                finding(
                    "tls.unsupported-suite",
                    Severity::Warning,
                    format!(
                        "{} with {}: wirelog does not decrypt this version or cipher suite",
                        version_name(version).unwrap_or("an unknown TLS version"),
                        suite_name(code)
                    ),
                    d,
                    rec.offset,
                    rec.frame,
                    rec.ts,
                )
                .into(),
            ));
            self.reported_no_key = true; // this finding already says why nothing is decoded
            self.info
                .not_decrypted
                .get_or_insert("tls.unsupported-suite");
            return;
        };
        self.suite = Some(suite);
        // Known now, before any protected record (`streams` reads no further without a key).
        let found =
            (self.client_hello.as_ref()).and_then(|ch| Some((ch, self.keylog.get(&ch.random)?)));
        let Some((ch, secrets)) = found else {
            self.info.not_decrypted.get_or_insert("tls.no-key");
            return;
        };
        let [c, s] = &mut self.halves;
        if self.tls13 {
            let key_len = suite.bulk.key_len();
            let keyed = |secret: &Option<Vec<u8>>| {
                secret
                    .as_ref()
                    .filter(|x| x.len() == suite.hash.size())
                    .map(|x| {
                        let (key, iv) = traffic13(suite.hash, x, key_len);
                        RecordCipher::new(suite, &key, &iv, &[], false)
                    })
            };
            c.cipher = keyed(&secrets.client_handshake);
            s.cipher = keyed(&secrets.server_handshake);
            let fits = |x: &Option<Vec<u8>>| x.clone().filter(|x| x.len() == suite.hash.size());
            c.application = fits(&secrets.client_traffic);
            s.application = fits(&secrets.server_traffic);
        } else if let Some(master) = &secrets.master {
            let (ck, sk) = key_block12(
                suite.hash,
                master,
                &ch.random,
                &hello.random,
                suite.bulk.block12(),
            );
            let etm = hello.encrypt_then_mac;
            c.pending = Some(RecordCipher::new(suite, &ck.key, &ck.iv, &ck.mac, etm));
            s.pending = Some(RecordCipher::new(suite, &sk.key, &sk.iv, &sk.mac, etm));
        }
    }
}

fn hello_fields(m: &mut Message, hello: &Hello) {
    if !hello.alpn.is_empty() {
        let names: Vec<Value> = hello.alpn.iter().map(|a| a.as_str().into()).collect();
        m.set("alpn", names);
    }
    m.set("session_id", hello.session_id_hex());
    m.set("extended_master_secret", hello.extended_master_secret);
    m.set("encrypt_then_mac", hello.encrypt_then_mac);
    m.set("session_ticket", hello.session_ticket);
    if hello.truncated {
        m.set("truncated", true);
    }
}

fn version_value(v: u16) -> Value {
    version_name(v)
        .map_or_else(|| format!("0x{v:04x}"), str::to_owned)
        .into()
}

fn message(d: Direction, rec: &Framed, kind: &'static str) -> Message {
    let mut m = Message::new("tls", kind);
    m.direction = Some(d);
    m.offset = Some(rec.offset);
    m.length = rec.wire_len();
    m.frame = rec.frame;
    m.ts = rec.ts;
    m
}

fn finding(
    code: &'static str,
    severity: Severity,
    sentence: String,
    d: Direction,
    offset: u64,
    frame: Option<u64>,
    ts: Option<i64>,
) -> Finding {
    let mut f = Finding::new(code, severity, sentence).at(frame, ts);
    f.direction = Some(d);
    f.offset = Some(offset);
    f
}

fn spaced_hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}
