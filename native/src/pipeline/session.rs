//! The decoding side of one capture (or raw dump set): each stream's protocol (detected from its
//! first bytes, or forced), the streams decoded in the core, the state their connections share,
//! the delivery verdict, and where their records go.
//!
//! A stream's bytes are held until detection decides (decoders/detect.rs); then they are replayed
//! into the protocol's native decoder.
//! A capture that begins inside a frame is searched for a frame start (`hunt`).
//!
//! A TLS stream's bytes go through its connection's TLS layer first (decoders/tls/): the decrypted
//! bytes of each direction then take the same way as a plaintext stream's (held, detected,
//! decoded), and the stream's records carry its `tls` description.

use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use super::fates::{self, Fates};
use super::held::{Held, OwnedChunk};
use super::hunt::Hunt;
use super::out::RecordOut;
use crate::decoders::detect::{self, Decision, Sample, SAMPLE_LIMIT};
use crate::decoders::tls::{KeyLog, Output, TlsConnection};
use crate::decoders::{
    self, delivery::Verdict, Chunk, Closing, Decoder, Gap, Limits, Shared, StreamContext,
};
use crate::held::pack::Back;
use crate::model::{Direction, Finding, Message, Record, Severity, Stamp, Value};

/// Items held per stream while detection waits, before it must decide (each item adds a byte to
/// a sample or is a gap: only a stream of gaps reaches this).
const MAX_HELD: usize = 4096;

struct Native {
    decoder: Box<dyn Decoder>,
    protocol: &'static str,
    stamp: Stamp,
}

/// A TLS stream's layer, and the stream its records are written for.
struct TlsLayer {
    conn: TlsConnection,
    stamp: Stamp,
}

/// A stream whose protocol is not decided yet.
struct Pending {
    ctx: StreamContext,
    sample: [Vec<u8>; 2],
    held: Vec<Held>,
    /// Mid-stream and unknown: searching the client bytes for a frame start.
    hunt: Option<Hunt>,
}

enum Stream {
    Pending(Box<Pending>),
    Native(Native),
    /// No known protocol: its bytes are dropped.
    Unknown,
    /// Its decoder failed: its bytes are dropped until it ends.
    Failed(&'static str),
}

impl Stream {
    fn protocol(&self) -> Option<&'static str> {
        match self {
            Stream::Pending(_) => None,
            Stream::Native(n) => Some(n.protocol),
            Stream::Failed(p) => Some(p),
            Stream::Unknown => Some("unknown"),
        }
    }
}

/// How each stream's protocol is chosen.
#[derive(Clone, Debug, Default)]
pub struct Detection {
    /// `--decode-as PORT=PROTO`: a server or client port forces a protocol.
    pub decode_as: HashMap<u16, String>,
    /// Every stream is this protocol (raw dumps of a named protocol).
    pub forced: Option<String>,
}

pub struct Session {
    capture: String,
    /// Given to every decoder (`--show-secrets`, Hercules events' bytes, limits).
    pub show_secrets: bool,
    pub event_bytes: bool,
    pub limits: Limits,
    pub detection: Detection,
    streams: ById<Stream>,
    shared: Shared,
    verdict: Verdict,
    pub out: RecordOut,
    scratch: Vec<Record>,
    /// Streams found to be of no known protocol since the last `take_unknown` (the source can
    /// stop producing their bytes).
    unknown: Vec<u64>,
    /// The TLS layer of each TLS stream, in front of its plaintext's detection and decoder.
    tls: ById<TlsLayer>,
    /// Every key log given (`--tls-keylog`) or found in the capture so far.
    keylog: Arc<KeyLog>,
    /// The stream whose decoder's `close` has more records to give, and whether it is TLS.
    closing: Option<(u64, bool)>,
    /// Event records waiting for their fate across connections.
    fates: Fates,
    /// Streams with an event whose fate waited for other connections or the end of the input:
    /// records and verdict findings of theirs come after their summary (`Ended::settled`).
    awaiting: HashSet<u64, foldhash::fast::RandomState>,
}

/// By stream id: looked up for every chunk of every stream (foldhash, not SipHash: the ids are
/// the capture's order of connections, nothing a peer chooses to collide).
type ById<V> = HashMap<u64, V, foldhash::fast::RandomState>;

/// What the end of a stream settled.
pub struct Ended {
    pub protocol: Option<&'static str>,
    /// A TLS stream's description.
    pub tls: Option<Value>,
    /// Nothing of the stream comes after its summary: no event of it waits for its fate.
    pub settled: bool,
}

impl Session {
    pub fn new(capture: &str, out: RecordOut, show_secrets: bool, limits: Limits) -> Self {
        let mut shared = Shared::new(&limits);
        let horizon = limits.fate_horizon_ns;
        let fates = Fates::new(horizon);
        // unacknowledged Lumberjack events wait here under their decoder's handles (`step`)
        shared.lumberjack.held.set_lending(!fates.at_once());
        shared.set_notes(out.reads_messages());
        Session {
            capture: capture.to_owned(),
            show_secrets,
            event_bytes: false,
            limits,
            detection: Detection::default(),
            streams: ById::default(),
            shared,
            verdict: Verdict::default(),
            out,
            scratch: Vec::new(),
            unknown: Vec::new(),
            tls: ById::default(),
            keylog: Arc::default(),
            closing: None,
            fates,
            awaiting: HashSet::default(),
        }
    }

    /// Secrets for TLS streams (NSS key log text; `source` names it in the warnings of lines that
    /// cannot be read). Streams whose ServerHello comes later use them.
    pub fn add_keylog(&mut self, source: &str, text: &str) {
        let mut findings = Vec::new();
        Arc::make_mut(&mut self.keylog).add(source, text, &mut findings);
        for f in findings {
            self.out.write(f.into(), None, None);
        }
    }

    /// Key logs read once for the run (`--tls-keylog`; shared, not copied) and the findings of
    /// their bad lines, which every capture reports, as with `add_keylog`.
    pub fn use_keylog(&mut self, keylog: &KeyLog, findings: &[Finding]) {
        Arc::make_mut(&mut self.keylog).extend(keylog);
        for f in findings {
            self.out.write(f.clone().into(), None, None);
        }
    }

    /// Whether the session has seen `stream` (else `open` it before its first bytes).
    pub fn knows(&self, stream: u64) -> bool {
        self.streams.contains_key(&stream)
    }

    /// A new stream: its protocol is decided from its first bytes (or forced).
    pub fn open(&mut self, ctx: StreamContext) {
        self.streams.entry(ctx.stream).or_insert_with(|| {
            Stream::Pending(Box::new(Pending {
                ctx,
                sample: [Vec::new(), Vec::new()],
                held: Vec::new(),
                hunt: None,
            }))
        });
    }

    /// The protocol decided for a stream (`unknown` when none), None while undecided. A TLS
    /// stream is its plaintext's protocol, or `tls` while that is not known.
    pub fn protocol(&self, stream: u64) -> Option<&'static str> {
        let decided = self.streams.get(&stream).and_then(Stream::protocol);
        if self.tls.contains_key(&stream) && matches!(decided, None | Some("unknown")) {
            return Some("tls");
        }
        decided
    }

    /// Decode `ctx.stream` as `protocol` from now on; false when the core has no such decoder.
    /// The context's secrets and limits are the session's.
    pub fn attach(&mut self, protocol: &str, ctx: StreamContext) -> bool {
        if protocol == "tls" {
            let stream = ctx.stream;
            self.streams.remove(&stream);
            self.open(ctx);
            self.start(stream, "tls", Some(Vec::new()));
            return true;
        }
        match self.native(protocol, ctx) {
            Some(native) => {
                self.adopt(native);
                true
            }
            None => false,
        }
    }

    /// A stream decoded natively from now on (the verdict learns a Lumberjack client's host).
    fn adopt(&mut self, native: Native) {
        let stamp = &native.stamp;
        if native.protocol == "lumberjack" {
            self.verdict.lumberjack_client(stamp.stream, &stamp.client);
        }
        self.streams.insert(stamp.stream, Stream::Native(native));
    }

    fn native(&self, protocol: &str, mut ctx: StreamContext) -> Option<Native> {
        ctx.show_secrets = self.show_secrets;
        ctx.event_bytes = self.event_bytes;
        ctx.limits = self.limits.clone();
        let stamp = Stamp {
            stream: ctx.stream,
            client: ctx.client.clone(),
            server: ctx.server.clone(),
        };
        let (protocol, decoder) = decoders::native(protocol, ctx)?;
        Some(Native {
            decoder,
            protocol,
            stamp,
        })
    }

    /// Bytes of a stream (false: the session does not know it).
    pub fn chunk(&mut self, stream: u64, chunk: &Chunk<'_>) -> bool {
        self.through_tls(stream, |conn, out| conn.feed(chunk, out))
            || self.plain_chunk(stream, chunk)
    }

    pub fn gap(&mut self, stream: u64, gap: &Gap) -> bool {
        self.through_tls(stream, |conn, out| conn.gap(gap, out)) || self.plain_gap(stream, gap)
    }

    /// One step of a TLS stream's layer (false: the stream has none).
    fn through_tls(
        &mut self,
        stream: u64,
        step: impl FnOnce(&mut TlsConnection, &mut Vec<Output>),
    ) -> bool {
        let Some(layer) = self.tls.get_mut(&stream) else {
            return false;
        };
        let mut outputs = Vec::new();
        step(&mut layer.conn, &mut outputs);
        self.decrypted(stream, outputs);
        true
    }

    /// What a TLS layer gave: plaintext and its gaps go on as the stream's bytes, TLS records out.
    fn decrypted(&mut self, stream: u64, outputs: Vec<Output>) {
        for output in outputs {
            match output {
                Output::Plain(c) => {
                    self.plain_chunk(stream, &c.borrow());
                }
                Output::Gap(gap) => {
                    self.plain_gap(stream, &gap);
                }
                Output::Record(record) => {
                    if let Some(layer) = self.tls.get(&stream) {
                        self.out.write(record, Some(&layer.stamp), Some("tls"));
                    }
                }
            }
        }
    }

    /// Bytes of a stream's plaintext (its own bytes, or what its TLS layer decrypted).
    fn plain_chunk(&mut self, stream: u64, chunk: &Chunk<'_>) -> bool {
        match self.streams.get_mut(&stream) {
            None => false,
            Some(Stream::Native(_)) => {
                self.step(stream, |d, shared, out| d.feed(chunk, shared, out));
                true
            }
            Some(Stream::Pending(p)) => {
                let item = OwnedChunk::of(chunk);
                if p.hunt.is_some() {
                    self.hunt(stream, Held::Chunk(item));
                } else {
                    let sample = &mut p.sample[item.direction as usize];
                    let room = SAMPLE_LIMIT.saturating_sub(sample.len());
                    sample.extend_from_slice(&item.data[..item.data.len().min(room)]);
                    p.held.push(Held::Chunk(item));
                    self.decide(stream, false);
                }
                true
            }
            Some(Stream::Unknown | Stream::Failed(_)) => true,
        }
    }

    fn plain_gap(&mut self, stream: u64, gap: &Gap) -> bool {
        match self.streams.get_mut(&stream) {
            None => false,
            Some(Stream::Native(n)) => {
                if n.protocol == "lumberjack" && gap.direction == Direction::C2S {
                    self.verdict.lumberjack_client_gap(stream);
                }
                self.step(stream, |d, shared, out| d.gap(gap, shared, out));
                true
            }
            Some(Stream::Pending(p)) => {
                if p.hunt.is_some() {
                    self.hunt(stream, Held::Gap(*gap));
                } else {
                    p.held.push(Held::Gap(*gap));
                    self.decide(stream, false);
                }
                true
            }
            Some(Stream::Unknown | Stream::Failed(_)) => true,
        }
    }

    /// The key logs known so far.
    pub fn keylog(&self) -> &Arc<KeyLog> {
        &self.keylog
    }

    /// The end of a stream (`closed`: by FIN or RST): an undecided stream is decided with what it
    /// has, a native stream's decoder is closed, and the delivery verdict learns whether missing
    /// ACKs could still have come. Returns the stream's protocol and, for a TLS stream, its
    /// description (`tls` of its StreamInfo: after the close, which may say why nothing decrypted).
    /// None while the stream's decoder has more held records to give (`Decoder::close`): call
    /// again, for this stream, once the records so far are taken.
    pub fn end(&mut self, stream: u64, closed: bool) -> Option<Ended> {
        let tls = match self.closing.take_if(|(s, _)| *s == stream) {
            Some((_, tls)) => tls,
            None => {
                let tls = self.through_tls(stream, |conn, out| conn.close(out));
                if let Some(Stream::Pending(p)) = self.streams.get_mut(&stream) {
                    match p.hunt.take() {
                        Some(hunt) => self.unknown(stream, hunt.first.as_ref()),
                        None => self.decide(stream, true),
                    }
                }
                if let Some(Stream::Native(n)) = self.streams.get_mut(&stream) {
                    n.decoder.ending(closed);
                }
                tls
            }
        };
        if matches!(self.streams.get(&stream), Some(Stream::Native(_))) {
            let mut closing = Closing::Done;
            self.step(stream, |d, shared, out| closing = d.close(shared, out));
            let native = matches!(self.streams.get(&stream), Some(Stream::Native(_)));
            if closing == Closing::More && native {
                self.closing = Some((stream, tls));
                return None;
            }
        }
        self.verdict.stream_ended(stream, closed);
        let info = self.tls.remove(&stream).map(|l| l.conn.info().to_value());
        let protocol = self.streams.remove(&stream).and_then(|s| s.protocol());
        let protocol = match protocol {
            None | Some("unknown") if tls => Some("tls"),
            _ => protocol,
        };
        Some(Ended {
            protocol,
            tls: info,
            settled: !self.awaiting.remove(&stream),
        })
    }

    /// `end` until the stream's last records are made (for callers that take them at once).
    pub fn end_all(&mut self, stream: u64, closed: bool) -> Ended {
        loop {
            if let Some(ended) = self.end(stream, closed) {
                return ended;
            }
        }
    }

    /// Streams of no known protocol since the last call.
    pub fn take_unknown(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.unknown)
    }

    /// Detection's verdict on a pending stream's sample (`closed`: no more bytes will come).
    fn decide(&mut self, stream: u64, closed: bool) {
        let Some(Stream::Pending(p)) = self.streams.get_mut(&stream) else {
            return;
        };
        let (decision, may_hunt) = verdict(&self.detection, p, closed);
        match decision {
            Decision::Wait => {}
            Decision::Protocol(protocol) => self.start(stream, protocol, None),
            Decision::Unknown if may_hunt => {
                let held = std::mem::take(&mut p.held);
                p.hunt = Some(Hunt::default());
                for item in held {
                    self.hunt(stream, item);
                }
                if let Some(Stream::Pending(p)) = self.streams.get_mut(&stream) {
                    if closed {
                        let first = p.hunt.take().and_then(|h| h.first);
                        self.unknown(stream, first.as_ref());
                    }
                }
            }
            Decision::Unknown => {
                let first = p.held.iter().find_map(|h| match h {
                    Held::Chunk(c) => Some(c.clone()),
                    Held::Gap(_) => None,
                });
                self.unknown(stream, first.as_ref());
            }
        }
    }

    /// One item of a mid-stream stream no detector placed: client bytes are searched for a
    /// frame start; once found, the protocol's decoder takes over from there. Server bytes before
    /// the client's first frame answer frames we never see: they are dropped.
    fn hunt(&mut self, stream: u64, item: Held) {
        let Some(Stream::Pending(p)) = self.streams.get_mut(&stream) else {
            // found in an earlier item: the decoder takes the rest
            match item {
                Held::Chunk(c) => self.plain_chunk(stream, &c.borrow()),
                Held::Gap(g) => self.plain_gap(stream, &g),
            };
            return;
        };
        let Some(hunt) = p.hunt.as_mut() else {
            return;
        };
        let found = match item {
            Held::Gap(g) => {
                hunt.skip_gap(g.direction);
                None
            }
            Held::Chunk(c) if c.direction == Direction::S2C => {
                hunt.skip_bytes(c.data.len());
                None
            }
            Held::Chunk(c) => hunt.feed(c),
        };
        let Some((protocol, parts)) = found else {
            if hunt.exhausted() {
                let first = p.hunt.take().and_then(|h| h.first);
                self.unknown(stream, first.as_ref());
            }
            return;
        };
        let first = p.hunt.take().and_then(|h| h.first);
        let start = &parts[0];
        let skipped = start
            .offset
            .saturating_sub(first.map_or(start.offset, |f| f.offset));
        let mut finding = Finding::new(
            "stream.midstream-start",
            Severity::Info,
            format!(
                "the capture starts inside a frame: {protocol} recognised at its first frame \
                 start, c2s byte {}; the {skipped} bytes before it are not decoded",
                start.offset
            ),
        )
        .at(start.frame, start.ts);
        finding.direction = Some(Direction::C2S);
        finding.offset = Some(start.offset);
        let stamp = stamp(&p.ctx);
        self.out.write(finding.into(), Some(&stamp), Some(protocol));
        self.start(
            stream,
            protocol,
            Some(parts.into_iter().map(Held::Chunk).collect()),
        );
    }

    /// The stream is `protocol` from now on: its decoder gets the held bytes (or `items`).
    fn start(&mut self, stream: u64, protocol: &'static str, items: Option<Vec<Held>>) {
        let Some(Stream::Pending(p)) = self.streams.remove(&stream) else {
            return;
        };
        let Pending { ctx, held, .. } = *p;
        let items = items.unwrap_or(held);
        if protocol == "tls" && self.tls.contains_key(&stream) {
            // TLS inside TLS: not decrypted twice.
            self.streams.insert(stream, Stream::Unknown);
            return;
        }
        if protocol == "tls" {
            // The plaintext is detected afresh; the held bytes go through the TLS layer.
            let layer = TlsLayer {
                conn: TlsConnection::new(Arc::clone(&self.keylog)),
                stamp: stamp(&ctx),
            };
            self.tls.insert(stream, layer);
            self.open(ctx);
            for item in items {
                match item {
                    Held::Chunk(c) => self.chunk(stream, &c.borrow()),
                    Held::Gap(g) => self.gap(stream, &g),
                };
            }
            return;
        }
        match self.native(protocol, ctx) {
            Some(native) => {
                self.adopt(native);
                for item in items {
                    match item {
                        Held::Chunk(c) => self.plain_chunk(stream, &c.borrow()),
                        Held::Gap(g) => self.plain_gap(stream, &g),
                    };
                }
            }
            // detection names only protocols the core decodes
            None => {
                self.streams.insert(stream, Stream::Unknown);
            }
        }
    }

    /// No protocol for this stream: its bytes are dropped from now on; said once.
    fn unknown(&mut self, stream: u64, first: Option<&OwnedChunk>) {
        let Some(Stream::Pending(p)) = self.streams.insert(stream, Stream::Unknown) else {
            return;
        };
        if !self.tls.contains_key(&stream) {
            // (a TLS stream's layer goes on reporting what it sees: its bytes are still wanted)
            self.unknown.push(stream);
        }
        let Some(first) = first else {
            return;
        };
        let d = first.direction;
        let sample = &p.sample[d as usize];
        let preview = sample[..sample.len().min(16)]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ");
        let midstream = if p.ctx.midstream {
            ", the capture starts mid-stream and no frame start was found"
        } else {
            ""
        };
        let mut finding = Finding::new(
            "stream.unknown-protocol",
            Severity::Info,
            format!(
                "no known protocol recognised; first {} bytes: {preview} (if you know it: \
                 --decode-as {}=PROTOCOL{midstream})",
                d.as_str(),
                p.ctx.server_port
            ),
        )
        .at(first.frame, first.ts);
        finding.direction = Some(d);
        finding.offset = Some(first.offset);
        self.out
            .write(finding.into(), Some(&stamp(&p.ctx)), Some("unknown"));
    }

    /// One decoder call. A panic in a decoder ends the decoding of its stream, never the capture:
    /// it becomes an `internal.panic` finding after the records made before it.
    fn step(
        &mut self,
        stream: u64,
        f: impl FnOnce(&mut dyn Decoder, &mut Shared, &mut Vec<Record>),
    ) -> bool {
        let Some(Stream::Native(native)) = self.streams.get_mut(&stream) else {
            return false;
        };
        let records = &mut self.scratch;
        let (decoder, shared) = (native.decoder.as_mut(), &mut self.shared);
        let failed = panic::catch_unwind(AssertUnwindSafe(|| f(decoder, shared, records))).err();
        if let Some(payload) = &failed {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            let mut finding = Finding::new(
                "internal.panic",
                Severity::Error,
                format!(
                    "the {} decoder failed ({what}); the rest of this stream is not decoded \
                     (please report it with the capture)",
                    native.protocol
                ),
            );
            let last = records.last().map(|r| match r {
                Record::Message(m) => (m.direction, m.frame, m.ts),
                Record::Finding(f) => (f.direction, f.frame, f.ts),
            });
            if let Some((direction, frame, ts)) = last {
                finding.direction = direction;
                finding = finding.at(frame, ts);
            }
            records.push(finding.into());
        }
        records.extend(self.shared.spill_findings().map(Record::from));
        // records waiting past the horizon go before these new ones can change their fate
        let (fates, shared, verdict, out) = (
            &mut self.fates,
            &mut self.shared,
            &mut self.verdict,
            &mut self.out,
        );
        records.iter().for_each(|r| fates.saw(r.ts()));
        release(fates, shared, verdict, out, None);
        self.verdict.add(stream, records);
        let tls = self.tls.get(&stream).map(|l| l.conn.info().to_value());
        // (the stream is noted once, not for each of a connection end's thousands of events)
        let mut awaiting = false;
        for mut r in records.drain(..) {
            if let Record::Message(m) = &mut r {
                if let Some((id, now)) = self.verdict.judge(stream, m) {
                    m.event_id = Some(id);
                    m.delivery = now;
                    awaiting |= now.is_none();
                    if now.is_none() && self.fates.at_once() {
                        m.delivery = Some(self.verdict.fate(stream, m));
                    } else if now.is_none() {
                        let store = fates::store(&mut self.shared, native.protocol);
                        // a lent record waits as it is, its `acked` beside it
                        let (held, acked) = match m.lent.take() {
                            Some(held) => (held, Some(m.acked)),
                            None => (store.hold(m), None),
                        };
                        let (stamp, protocol) = (&native.stamp, native.protocol);
                        let tls = tls.as_ref();
                        self.fates
                            .hold(stream, held, acked, m.ts, stamp, protocol, tls);
                        continue;
                    }
                }
                // a lent record is written whole, with what its decoder and the verdict said of it
                if let Some(held) = m.lent.take() {
                    match fates::store(&mut self.shared, native.protocol).take(held) {
                        Some(whole) => {
                            let (acked, event_id, delivery) = (m.acked, m.event_id, m.delivery);
                            *m = Message {
                                acked,
                                event_id,
                                delivery,
                                ..whole
                            };
                        }
                        None => continue, // lost with the spill file: the store says so
                    }
                }
            }
            let (stamp, protocol) = (Some(&native.stamp), Some(native.protocol));
            self.out.write_tls(r, stamp, protocol, tls.as_ref());
        }
        if awaiting {
            self.awaiting.insert(stream);
        }
        if failed.is_some() {
            let protocol = native.protocol;
            self.streams.insert(stream, Stream::Failed(protocol));
        }
        true
    }

    /// The end of the capture, in parts (false: call again once the records so far are taken):
    /// the records still waiting for their fate, `fates::PART` a call, then (`findings`) the
    /// delivery verdict's findings (a split capture's are made from every group's numbers).
    pub fn finish(&mut self, findings: bool) -> bool {
        let (fates, shared, verdict, out) = (
            &mut self.fates,
            &mut self.shared,
            &mut self.verdict,
            &mut self.out,
        );
        if release(fates, shared, verdict, out, Some(fates::PART)) {
            return false;
        }
        if findings {
            for f in self.verdict.findings(&self.capture) {
                self.out.write(f.into(), None, None);
            }
        }
        self.out.end();
        true
    }

    /// The delivery numbers per protocol (JSON object text), for `inspect`.
    pub fn delivery(&self) -> String {
        serde_json::Value::Object(self.verdict.results(&self.capture)).to_string()
    }
}

/// Event records whose fate is due, written with the verdict's class as it stands: with `end`, the
/// end of the input, all of them, at most `end` records (true: more are waiting); else those the
/// horizon or the cap let go.
fn release(
    fates: &mut Fates,
    shared: &mut Shared,
    verdict: &mut Verdict,
    out: &mut RecordOut,
    end: Option<usize>,
) -> bool {
    let mut budget = end.unwrap_or(usize::MAX);
    while let Some(w) = fates.due(end.is_some()) {
        let Some(origin @ (stream, stamp, protocol, tls)) = fates.origin(w.origin) else {
            continue; // every waiting record has its origin
        };
        let (record, acked) = (w.record, w.acked);
        // written from its bytes when it can be (a Lumberjack event that is no resend): nothing
        // is made of a stalled capture's millions of events but their lines or rows
        fates::store(shared, protocol).take_back(record, |back| {
            let p = match back {
                Back::Parts(p) => p,
                Back::Whole(m) => return release_whole(m, acked, origin, verdict, out),
            };
            if let Some(acked) = acked {
                p.head.acked = acked;
            }
            match verdict.parts_fate_and_id(stream, p) {
                Some((fate, id)) => {
                    (p.head.event_id, p.head.delivery) = (Some(id), Some(fate));
                    out.write_parts(p, Some(stamp), Some(protocol), tls);
                }
                None => release_whole(p.to_message(), None, origin, verdict, out),
            }
        });
        fates.done(w.origin);
        budget = budget.saturating_sub(1);
        if budget == 0 {
            break;
        }
    }
    for f in shared.spill_findings().collect::<Vec<_>>() {
        out.write(f.into(), None, None);
    }
    end.is_some() && fates.waiting()
}

/// A released record, whole (`acked`: its connection's last word on it, when it has one), of
/// `origin` (`Fates::origin`), given its fate and id and written.
fn release_whole(
    mut m: Message,
    acked: Option<Option<bool>>,
    (stream, stamp, protocol, tls): (u64, &Stamp, &'static str, Option<&Value>),
    verdict: &mut Verdict,
    out: &mut RecordOut,
) {
    if let Some(acked) = acked {
        m.acked = acked;
    }
    let (fate, id) = verdict.fate_and_id(stream, &m);
    (m.event_id, m.delivery) = (id, Some(fate));
    out.write_tls(m.into(), Some(stamp), Some(protocol), tls);
}

/// Detection's decision on a pending stream, and whether an unknown one may be hunted through
/// (mid-stream, nothing forced).
fn verdict(detection: &Detection, p: &Pending, closed: bool) -> (Decision, bool) {
    let ctx = &p.ctx;
    let by_port = |port| detection.decode_as.get(&port).map(String::as_str);
    let forced = detection
        .forced
        .as_deref()
        .or_else(|| by_port(ctx.server_port))
        .or_else(|| by_port(ctx.client_port));
    let decision = match forced {
        Some(name) => {
            detect::protocol(name).map_or(Decision::Unknown, |p| Decision::Protocol(p.name))
        }
        None => detect::detect(&Sample {
            c2s: &p.sample[0],
            s2c: &p.sample[1],
            client_port: ctx.client_port,
            server_port: ctx.server_port,
            closed: closed || p.held.len() >= MAX_HELD,
        }),
    };
    (decision, ctx.midstream && forced.is_none())
}

fn stamp(ctx: &StreamContext) -> Stamp {
    Stamp {
        stream: ctx.stream,
        client: ctx.client.clone(),
        server: ctx.server.clone(),
    }
}
