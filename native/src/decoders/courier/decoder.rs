//! The Log Courier connection decoder: a sans-IO state machine over both directions.
//!
//! Each direction is framed on its own (`framing`); an EVNT keeps its direction in a streaming
//! state until its zlib stream ends. Semantics that span directions live here: handshake order,
//! PING/PONG pairing, which side may send what; acknowledgement bookkeeping is in `delivery`,
//! cross-connection resends in `resend`, the software fingerprint in `fingerprint`.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "frame lengths are u32 in u64; positions within a message held in memory (its length checked against max_frame); counts of messages and events"
)]

use std::collections::BTreeMap;

use serde_json::Map;

use crate::decoders::{Chunk, Closing, Decoder, Gap, Shared as AllShared, StreamContext};
use crate::model::{Direction, Fields, Message, Record, Value};

use super::delivery::Delivery;
use super::findings::{bytes_repr, finding, hex, latin1, At, PROTOCOL};
use super::fingerprint::Fingerprint;
use super::framing::{self, Action, Verdict, HEADER, NONCE};
use super::handshake::{self, KNOWN_LENGTHS};
use super::payload::{parse_json, split_events, Inflater};
use super::resend::{self, Sending};
use super::Shared;
use crate::decoders::budget::{Budget, RECORD_COST};
use crate::decoders::buffer::StreamBuffer;
use crate::decoders::fingerprint::fingerprint;
use crate::held::spill::SpillStore;

const EVNT_HEAD: usize = HEADER + NONCE;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// At a message boundary.
    Frame,
    /// Looking for the next plausible header.
    Resync,
    /// The direction is not Courier (TLS): ignore the rest.
    Dead,
}

/// Where framing was lost; reported once the next header is found (or at close).
struct Lost {
    at: At,
    code: &'static str,
    reason: String,
    skipped: u64,
    /// Bytes of a partial message discarded at a gap.
    dropped: u64,
}

/// An EVNT whose zlib stream has not ended yet.
struct Streaming {
    at: At,
    nonce: [u8; NONCE],
    inflater: Inflater,
    /// None when the EVNT came from the wrong side.
    payload: Option<usize>,
    /// Records found at its start, emitted after its message.
    found: Vec<Record>,
}

/// The framing state of one direction.
struct Side {
    buf: StreamBuffer,
    mode: Mode,
    evnt: Option<Streaming>,
    lost: Option<Lost>,
}

impl Side {
    fn new() -> Self {
        Side {
            buf: StreamBuffer::default(),
            mode: Mode::Frame,
            evnt: None,
            lost: None,
        }
    }
}

fn ix(d: Direction) -> usize {
    match d {
        Direction::C2S => 0,
        Direction::S2C => 1,
    }
}

/// Decodes one connection; see the module docs.
pub struct CourierDecoder {
    sides: [Side; 2],
    conn: Conn,
    /// `close` has begun (it gives the held payloads over several calls).
    closing: bool,
}

/// Everything but the framing state of the two directions.
struct Conn {
    stream: u64,
    midstream: bool,
    max_frame: usize,
    max_inflated: usize,
    max_pending: usize,
    delivery: Delivery,
    fp: Fingerprint,
    kinds: BTreeMap<&'static str, u64>,
    first: Option<At>,
    helo: bool,
    pings: u64,
    unknown_sent: u64,
    /// Known types already reported as sent by the wrong side (bit per `framing::type_index`).
    wrong: u8,
    acks_lost: bool,
    /// fingerprint-mismatch reported.
    ff_seen: bool,
    c2s_dead: bool,
    /// Per direction: messages decoded, software version from its HELO/VERS.
    messages: [u64; 2],
    version: [Option<&'static str>; 2],
}

impl CourierDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        let l = &ctx.limits;
        CourierDecoder {
            sides: [Side::new(), Side::new()],
            conn: Conn {
                stream: ctx.stream,
                midstream: ctx.midstream,
                max_frame: l.max_frame,
                max_inflated: l.max_inflated,
                max_pending: l.max_pending_events,
                delivery: Delivery::new(l.max_pending_events),
                fp: Fingerprint::default(),
                kinds: BTreeMap::new(),
                first: None,
                helo: false,
                pings: 0,
                unknown_sent: 0,
                wrong: 0,
                acks_lost: false,
                ff_seen: false,
                c2s_dead: false,
                messages: [0; 2],
                version: [None; 2],
            },
            closing: false,
        }
    }

    fn pump(&mut self, d: Direction, shared: &mut Shared, out: &mut Vec<Record>) {
        let Self { sides, conn, .. } = self;
        let side = &mut sides[ix(d)];
        loop {
            if side.mode == Mode::Dead {
                side.buf.skip(side.buf.len());
                return;
            }
            if side.evnt.is_some() {
                if !conn.stream_evnt(d, side, shared, out) {
                    return;
                }
                continue;
            }
            if side.mode == Mode::Resync {
                if !conn.resync(d, side, out) {
                    return;
                }
                continue;
            }
            let n = side.buf.len();
            if n < HEADER {
                // e.g. a 7-byte TLS alert
                if n >= 3 && framing::looks_like_tls(side.buf.peek(0, 3)) {
                    let head = side.buf.peek(0, HEADER).to_vec();
                    conn.tls(d, side, &head, out);
                    continue;
                }
                return;
            }
            let (t, length) = framing::parse_header(side.buf.peek(0, HEADER));
            let verdict = framing::judge(&t, length, conn.max_frame);
            match verdict.action {
                Action::Desync => conn.lose(side, &verdict),
                Action::Tls => {
                    let head = side.buf.peek(0, HEADER).to_vec();
                    conn.tls(d, side, &head, out);
                }
                Action::Stream => {
                    if n < EVNT_HEAD {
                        return;
                    }
                    conn.start_evnt(d, side, &mut shared.held);
                }
                Action::Body | Action::Unknown => {
                    let end = HEADER as u64 + u64::from(length);
                    if (n as u64) < end {
                        return;
                    }
                    let at = conn.at(side);
                    let body = &side.buf.view()[HEADER..end as usize];
                    conn.message(d, &t, body, at, &verdict, shared, out);
                    side.buf.skip(end as usize);
                }
            }
        }
    }
}

impl Conn {
    fn at(&mut self, side: &Side) -> At {
        let (frame, ts) = side.buf.origin();
        let at = At::new(side.buf.offset(), frame, ts);
        self.first.get_or_insert(at);
        at
    }

    /// Bad header: skip at least one byte and hunt for the next plausible header.
    fn lose(&mut self, side: &mut Side, verdict: &Verdict) {
        let (frame, ts) = side.buf.origin();
        let head = hex(side.buf.peek(0, HEADER));
        let code = verdict.problem.unwrap_or("courier.desync");
        let reason = format!(
            "header {head} is not a valid Log Courier message ({})",
            verdict.detail
        );
        side.lost = Some(Lost {
            at: At::new(side.buf.offset(), frame, ts),
            code,
            reason,
            skipped: 1,
            dropped: 0,
        });
        side.buf.skip(1);
        side.mode = Mode::Resync;
    }

    fn resync(&mut self, d: Direction, side: &mut Side, out: &mut Vec<Record>) -> bool {
        let (pos, drop) = framing::find_header(side.buf.view(), self.max_frame);
        side.buf.skip(drop);
        let Some(pos) = pos else {
            if let Some(lost) = &mut side.lost {
                lost.skipped += drop as u64;
            }
            return false;
        };
        report_lost(d, side, pos as u64, out);
        side.mode = Mode::Frame;
        true
    }

    /// Explain TLS bytes in a Courier stream; the direction is then skipped (`Mode::Dead`).
    fn tls(&mut self, d: Direction, side: &mut Side, head: &[u8], out: &mut Vec<Record>) {
        side.mode = Mode::Dead;
        let at = self.at(side);
        let bogus = (head.len() >= HEADER)
            .then(|| u32::from_be_bytes([head[4], head[5], head[6], head[7]]));
        if d == Direction::S2C && self.c2s_dead {
            return; // both sides speak TLS: simply an encrypted stream, already reported
        }
        let msg = if d == Direction::C2S {
            self.c2s_dead = true;
            let bogus = bogus.map_or("None".to_owned(), |b| b.to_string());
            format!(
                "the client speaks TLS (transport tls, the default): a plain tcp Log Courier server reads \
                 ClientHello bytes 4-7 ({}) as a length of {bogus} and rejects it as 'packet too large'; \
                 if the server answers in TLS too, the stream is just encrypted",
                hex(head.get(4..head.len().min(8)).unwrap_or_default())
            )
        } else {
            "the server answers with TLS: the client uses transport tcp against a tls server"
                .to_owned()
        };
        let f = finding("courier.tls-mismatch", msg, Some(d), at)
            .field("bogus_length", bogus.map_or(Value::Null, Value::from))
            .field("tls_header", hex(&head[..head.len().min(5)]));
        out.push(f.into());
    }

    fn truncated(&mut self, d: Direction, side: &Side, out: &mut Vec<Record>) {
        let at = self.at(side);
        let left = side.buf.len();
        let what = if left >= 4 {
            format!("{} message", bytes_repr(side.buf.peek(0, 4)))
        } else {
            "message header".to_owned()
        };
        let msg = format!("the stream ended inside a {what}: {left} bytes left undecoded");
        out.push(
            finding("courier.truncated", msg, Some(d), at)
                .field("bytes", left)
                .into(),
        );
    }

    // -- messages -----------------------------------------------------------------------------

    fn allowed(&mut self, d: Direction, t: &[u8], at: At, out: &mut Vec<Record>) -> bool {
        let Some(i) = framing::type_index(t) else {
            return true;
        };
        if framing::sender(t) == d {
            return true;
        }
        if self.wrong & (1 << i) == 0 {
            self.wrong |= 1 << i;
            let who = if d == Direction::C2S {
                "client"
            } else {
                "server"
            };
            let name = latin1(t);
            let msg = format!(
                "{name} sent by the {who}, which never sends it \
                 (or this stream's client side was inferred wrongly)"
            );
            out.push(
                finding("courier.wrong-direction", msg, Some(d), at)
                    .field("type", name)
                    .into(),
            );
        }
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn message(
        &mut self,
        d: Direction,
        t: &[u8; 4],
        body: &[u8],
        at: At,
        verdict: &Verdict,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        let kind = framing::kind(t);
        let mut fields: Vec<(&'static str, Value)> = vec![("type", latin1(t).into())];
        let slot = out.len();
        out.push(Record::Message(Message::new(PROTOCOL, kind)));
        if let Some(problem) = verdict.problem {
            let detail = if verdict.detail.is_empty() {
                format!(
                    "unknown message type {} ({}-byte body skipped): \
                     a Ruby server answers ????, a Go server closes the connection",
                    bytes_repr(t),
                    body.len()
                )
            } else {
                verdict.detail.clone()
            };
            let f = finding(problem, detail, Some(d), at)
                .field("type", latin1(t))
                .field("body_length", body.len());
            out.push(f.into());
        }
        let ok = self.allowed(d, t, at, out);
        if ok {
            self.order_checks(d, t, at, out);
        }
        match t {
            b"HELO" | b"VERS" => self.handshake(d, t, body, at, ok, &mut fields, out),
            b"ACKN" if body.len() >= NONCE + 4 => {
                let nonce = hex(&body[..NONCE]);
                let seq = u32::from_be_bytes([body[16], body[17], body[18], body[19]]);
                if ok {
                    let lost = self.acks_lost;
                    self.delivery
                        .ack(&nonce, seq, at, lost, &mut shared.held, out);
                }
                fields.push(("nonce", nonce.into()));
                fields.push(("sequence", seq.into()));
            }
            b"JDAT" | b"EVNT" if body.len() > NONCE => {
                let mut inf = match shared.inflater.take() {
                    Some(mut inf) => {
                        inf.restart(self.max_inflated);
                        inf
                    }
                    None => Inflater::new(self.max_inflated),
                };
                inf.feed(&[], &body[NONCE..]);
                let trailing = if inf.eof() {
                    (body.len() - NONCE) as u64 - inf.consumed
                } else {
                    0
                };
                let mut nonce = [0u8; NONCE];
                nonce.copy_from_slice(&body[..NONCE]);
                let p = self.open(d, &nonce, kind, at, ok, &mut shared.held, out);
                self.payload(
                    d,
                    kind,
                    &nonce,
                    &inf,
                    at,
                    &mut fields,
                    trailing,
                    p,
                    true,
                    shared,
                    out,
                );
                shared.inflater = Some(inf);
            }
            _ if ok => self.control(t, at, out),
            _ => {}
        }
        self.messages[ix(d)] += 1;
        *self.kinds.entry(kind).or_default() += 1;
        let mut m = Message::new(PROTOCOL, kind);
        m.direction = Some(d);
        (m.offset, m.frame, m.ts) = (at.offset, at.frame, at.ts);
        m.length = (HEADER + body.len()) as u64;
        m.version = self.version[ix(d)];
        m.fields = fields.into();
        out[slot] = m.into();
    }

    /// HELO first from the client; VERS/???? first from the server (and only then).
    fn order_checks(&mut self, d: Direction, t: &[u8], at: At, out: &mut Vec<Record>) {
        if d == Direction::C2S {
            self.fp.client_messages += 1;
            let sent = self.messages[0];
            if t == b"HELO" && sent > 0 {
                let msg = "HELO after other client messages; it must come first".to_owned();
                out.push(finding("courier.helo-not-first", msg, Some(d), at).into());
            }
            if t == b"PING" && sent == 0 && at.offset == Some(0) && !self.midstream {
                let msg = "the connection opens with PING, not HELO or JDAT: a client before 2.5 idle \
                           before its first payload; Ruby servers from 2.7 expect HELO or JDAT first and \
                           end the connection"
                    .to_owned();
                out.push(finding("courier.ping-first", msg, Some(d), at).into());
            }
            if t == b"HELO" {
                self.helo = true;
            } else if !framing::is_type(t) {
                self.unknown_sent += 1;
            }
            return;
        }
        let reply = t == b"VERS" || t == b"????";
        let sent = self.messages[1];
        if sent == 0 && self.helo && !reply {
            let msg = format!(
                "the client sent HELO but the server's first message is {}, not VERS or ????",
                latin1(t)
            );
            out.push(finding("courier.vers-not-first", msg, Some(d), at).into());
        } else if sent > 0 && reply && !(t == b"????" && self.unknown_sent > 0) {
            let msg = format!(
                "{} is not the server's first message; it may only answer the handshake",
                latin1(t)
            );
            out.push(finding("courier.vers-not-first", msg, Some(d), at).into());
        }
        if t == b"????" {
            if sent == 0 && self.helo {
                self.fp.server_declined = true;
            }
            self.unknown_sent = self.unknown_sent.saturating_sub(1);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handshake(
        &mut self,
        d: Direction,
        t: &[u8],
        body: &[u8],
        at: At,
        ok: bool,
        fields: &mut Vec<(&'static str, Value)>,
        out: &mut Vec<Record>,
    ) {
        let hs = handshake::parse(body);
        fields.extend(hs.fields());
        if !ok {
            return;
        }
        self.version[ix(d)] = hs.version.as_deref().and_then(handshake::intern);
        let name = latin1(t);
        if !KNOWN_LENGTHS.contains(&hs.length) {
            let msg = format!(
                "{name} body of {} bytes matches no known layout; read zero-padded",
                hs.length
            );
            let f = finding("courier.handshake-layout", msg, Some(d), at)
                .field("body_length", hs.length);
            out.push(f.into());
        }
        if t == b"HELO" {
            self.fp.helo.get_or_insert(hs);
            return;
        }
        let bug = hs.length == 8 && hs.evnt();
        self.fp.vers.get_or_insert(hs);
        if !self.helo {
            let msg = "VERS sent although the client sent no HELO".to_owned();
            out.push(finding("courier.vers-without-helo", msg, Some(d), at).into());
        }
        if bug {
            let msg =
                "8-byte VERS advertising EVNT: the Ruby gem 2.7.0/2.7.1 bug; a Go client will \
                       stream EVNT, which that server cannot read"
                    .to_owned();
            out.push(finding("courier.evnt-flag-bug", msg, Some(d), at).into());
        }
    }

    fn control(&mut self, t: &[u8], at: At, out: &mut Vec<Record>) {
        if t == b"PING" {
            if self.delivery.pending() {
                let msg =
                    "PING while payloads are unacknowledged: legal, but a Go receiver drops the \
                           connection"
                        .to_owned();
                let f = finding("courier.ping-while-pending", msg, Some(Direction::C2S), at);
                out.push(f.into());
            }
            self.pings += 1;
        } else if t == b"PONG" {
            if self.pings > 0 {
                self.pings -= 1;
            } else {
                let msg = "PONG with no outstanding PING".to_owned();
                out.push(
                    finding("courier.pong-without-ping", msg, Some(Direction::S2C), at).into(),
                );
            }
        }
    }

    // -- payloads -----------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn open(
        &mut self,
        d: Direction,
        nonce: &[u8; NONCE],
        kind: &'static str,
        at: At,
        ok: bool,
        held: &mut SpillStore,
        out: &mut Vec<Record>,
    ) -> Option<usize> {
        if !ok {
            return None;
        }
        if kind == "evnt" && !self.fp.vers.as_ref().is_some_and(|v| v.evnt()) {
            let msg =
                "EVNT without a VERS advertising it (flag 0x01): the server cannot read streamed \
                       payloads"
                    .to_owned();
            out.push(finding("courier.evnt-not-negotiated", msg, Some(d), at).into());
        }
        self.fp.see_nonce(nonce);
        let hexnonce = hex(nonce);
        if nonce.contains(&0xff)
            && self.fp.helo.is_some()
            && !self.ff_seen
            && self.fp.client().0 == Some("go")
        {
            self.ff_seen = true;
            let msg = format!(
                "nonce {hexnonce} contains 0xFF, which Go's Intn(255) never produces, yet the HELO \
                 announces a Go client: another implementation (or a replay) speaks as Log Courier"
            );
            let f = finding("courier.fingerprint-mismatch", msg, Some(d), at)
                .field("nonce", hexnonce.as_str());
            out.push(f.into());
        }
        Some(self.delivery.open(&hexnonce, kind, at, held, out))
    }

    fn start_evnt(&mut self, d: Direction, side: &mut Side, held: &mut SpillStore) {
        let at = self.at(side);
        let mut nonce = [0u8; NONCE];
        nonce.copy_from_slice(side.buf.peek(HEADER, NONCE));
        let mut found = Vec::new();
        let ok = self.allowed(d, b"EVNT", at, &mut found);
        if ok {
            self.order_checks(d, b"EVNT", at, &mut found);
        }
        let payload = self.open(d, &nonce, "evnt", at, ok, held, &mut found);
        side.evnt = Some(Streaming {
            at,
            nonce,
            inflater: Inflater::new(self.max_inflated),
            payload,
            found,
        });
    }

    /// Feed the EVNT's new bytes to its inflater; true once the message has ended.
    fn stream_evnt(
        &mut self,
        d: Direction,
        side: &mut Side,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) -> bool {
        let Some(st) = side.evnt.as_mut() else {
            return true;
        };
        let pos = EVNT_HEAD + st.inflater.consumed as usize;
        if side.buf.len() > pos {
            let view = side.buf.view();
            st.inflater.feed(&view[EVNT_HEAD..pos], &view[pos..]);
        }
        if st.inflater.done() {
            self.end_evnt(d, side, None, shared, out);
            return true;
        }
        if EVNT_HEAD as u64 + st.inflater.consumed > self.max_frame as u64 {
            let why = format!(
                "it is still streaming after {} bytes (the frame cap)",
                self.max_frame
            );
            self.end_evnt(
                d,
                side,
                Some(("courier.length-over-limit", why)),
                shared,
                out,
            );
            return true;
        }
        false
    }

    /// Emit a finished EVNT, or one `cut` = (code, why) short; when its end is unknown, resync.
    fn end_evnt(
        &mut self,
        d: Direction,
        side: &mut Side,
        cut: Option<(&'static str, String)>,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        let Some(st) = side.evnt.take() else {
            return;
        };
        let inf = &st.inflater;
        let length = EVNT_HEAD as u64 + inf.consumed;
        let slot = out.len();
        out.push(Record::Message(Message::new(PROTOCOL, "evnt")));
        out.extend(st.found);
        if let Some((code, why)) = &cut {
            if !inf.done() {
                let text = format!(
                    "EVNT cut short: {why} ({} compressed bytes read, stream not finished)",
                    inf.consumed
                );
                out.push(
                    finding(code, text, Some(d), st.at)
                        .field("consumed", inf.consumed)
                        .into(),
                );
            }
        }
        side.buf.skip(length.min(side.buf.len() as u64) as usize);
        if !inf.eof() {
            side.mode = Mode::Resync;
            let why = match &cut {
                Some((_, why)) => why.as_str(),
                None if inf.error.is_some() => "its zlib stream failed",
                None => "it exceeds the inflate cap",
            };
            side.lost = Some(Lost {
                at: st.at,
                code: "courier.desync",
                reason: format!("EVNT end unknown because {why}"),
                skipped: 0,
                dropped: 0,
            });
        }
        self.messages[ix(d)] += 1;
        *self.kinds.entry("evnt").or_default() += 1;
        let mut fields: Vec<(&'static str, Value)> = vec![("type", "EVNT".into())];
        let whole = cut.is_none();
        self.payload(
            d,
            "evnt",
            &st.nonce,
            inf,
            st.at,
            &mut fields,
            0,
            st.payload,
            whole,
            shared,
            out,
        );
        let mut m = Message::new(PROTOCOL, "evnt");
        m.direction = Some(d);
        (m.offset, m.frame, m.ts) = (st.at.offset, st.at.frame, st.at.ts);
        m.length = length;
        m.version = self.version[ix(d)];
        m.fields = fields.into();
        out[slot] = m.into();
    }

    /// Findings and events of one JDAT/EVNT body (`whole`: all its bytes arrived); events go to
    /// delivery, held until acknowledged.
    #[allow(clippy::too_many_arguments)]
    fn payload(
        &mut self,
        d: Direction,
        kind: &'static str,
        nonce: &[u8; NONCE],
        inf: &Inflater,
        at: At,
        fields: &mut Vec<(&'static str, Value)>,
        trailing: u64,
        p: Option<usize>,
        whole: bool,
        shared: &mut Shared,
        out: &mut Vec<Record>,
    ) {
        let hexnonce = hex(nonce);
        let data = inf.output();
        fields.extend([
            ("nonce", Value::from(hexnonce.as_str())),
            ("compressed_length", inf.consumed.into()),
            ("inflated_length", data.len().into()),
            ("zlib_header", hex(&inf.head).into()),
            ("zlib_level", inf.level().into()),
        ]);
        let f = |code, msg| finding(code, msg, Some(d), at);
        if let Some(err) = &inf.error {
            let msg = format!("zlib error in {kind} {hexnonce}: {err}");
            out.push(f("courier.decompress-failed", msg).into());
        } else if inf.over_cap {
            let cap = self.max_inflated;
            let msg = format!(
                "{kind} {hexnonce} inflates beyond the {cap}-byte inflate cap; its events are not \
                 decoded (the cap pays for the inflated bytes and {RECORD_COST} bytes per event)"
            );
            out.push(f("courier.inflate-limit", msg).field("cap", cap).into());
        } else if !inf.eof() && whole {
            let msg = format!(
                "{kind} {hexnonce}: the zlib stream is truncated (no end after {} bytes)",
                inf.consumed
            );
            out.push(f("courier.decompress-failed", msg).into());
        }
        if trailing > 0 {
            let msg = format!(
                "{trailing} bytes follow the end of the zlib stream inside {kind} {hexnonce}"
            );
            out.push(
                f("courier.trailing-data", msg)
                    .field("bytes", trailing)
                    .into(),
            );
        }
        // One budget per payload: its inflated bytes, then each event decoded from them.
        let mut budget = Budget::new(self.max_inflated);
        budget.spend(data.len());
        let cut = split_events(data, inf.eof(), budget.records_left());
        if let Some((code, why)) = cut.problem {
            out.push(f(code, format!("{kind} {hexnonce}: {why}")).into());
        }
        if let Some(stopped) = cut.stopped.filter(|_| !inf.over_cap) {
            let (cap, n) = (budget.cap(), cut.events.len());
            let msg = format!(
                "{kind} {hexnonce}: its {} inflated bytes and the events decoded from them exceed \
                 the {cap}-byte inflate cap ({RECORD_COST} bytes per event besides its own); \
                 {n} events decoded, the {} bytes after them skipped",
                data.len(),
                data.len() - stopped
            );
            let finding = f("courier.inflate-limit", msg)
                .field("cap", cap)
                .field("events", n)
                .field("skipped", data.len() - stopped);
            out.push(finding.into());
        }
        let version = self.version[0];
        let mut bad: Option<(usize, String)> = None;
        let mut bad_count = 0usize;
        let events: Vec<Message> = cut
            .events
            .iter()
            .enumerate()
            .map(|(index, range)| {
                let raw = &data[range.clone()];
                let (doc, err) = parse_json(raw);
                let mut m = Message::new(PROTOCOL, "event");
                m.direction = Some(Direction::C2S);
                (m.offset, m.frame, m.ts) = (at.offset, at.frame, at.ts);
                m.length = raw.len() as u64;
                m.version = version;
                m.fields = Fields::with_capacity(6);
                m.fields.extend([
                    ("nonce", Value::from(hexnonce.as_str())),
                    ("index", index.into()),
                    ("sequence", (index + 1).into()),
                    ("payload", kind.into()),
                    ("ack_frame", Value::Null),
                ]);
                if let Some(err) = err {
                    bad_count += 1;
                    if bad.is_none() {
                        bad = Some((index, err.clone()));
                    }
                    m.fields.push(("json_error", err.into()));
                    if let Some(bytes) = crate::decoders::raw_base64(raw) {
                        m.fields.push(("raw_base64", bytes));
                    }
                }
                m.event = Some(doc);
                m
            })
            .collect();
        fields.push(("events", events.len().into()));
        if let Some((index, err)) = bad {
            let msg = format!(
                "{bad_count} event(s) of {kind} {hexnonce} not JSON objects (event {index}: {err})"
            );
            let f = f("courier.invalid-json", msg)
                .field("count", bad_count)
                .field("first_index", index);
            out.push(f.into());
        }
        let Some(serial) = p else {
            out.extend(events.into_iter().map(Record::from));
            return;
        };
        self.fp.zlib_levels.insert(inf.level().unwrap_or("unknown"));
        self.fp.go_tail |= inf.go_tail();
        let count = events.len() as u64;
        let digests = (events.len() <= self.max_pending).then(|| {
            cut.events
                .iter()
                .map(|r| fingerprint(&data[r.clone()]))
                .collect()
        });
        let payload = &mut self.delivery.history[serial];
        payload.count = Some(count);
        let sending = Sending {
            nonce: &hexnonce,
            stream: self.stream,
            at: payload.at,
            count,
            acked: payload.acked_live.clone(),
            digests,
            unseeded: self.fp.unseeded_possible(),
        };
        let mut events = events;
        if let Some((stream, frame)) = resend::check(&mut shared.nonces, sending, out) {
            // the verdict follows each event across sendings (decoders/delivery.rs)
            let mut place = serde_json::Map::new();
            place.insert("stream".into(), stream.into());
            place.insert("frame".into(), frame.into());
            for m in &mut events {
                m.set("resend_of", Value::Object(place.clone()));
            }
        }
        self.delivery.fill(serial, events, &mut shared.held, out);
    }

    // -- summary ------------------------------------------------------------------------------

    fn summary(&self) -> Message {
        let hist = &self.delivery.history;
        let counted: u64 = hist.iter().filter_map(|p| p.count).sum();
        let acked: u64 = hist.iter().map(|p| p.acked).sum();
        let kinds: Map<String, Value> = self
            .kinds
            .iter()
            .map(|(k, n)| ((*k).to_owned(), Value::from(*n)))
            .collect();
        let state = if !self.helo {
            "none"
        } else if self.fp.vers.is_some() {
            "helo+vers"
        } else if self.fp.server_declined {
            "helo+declined"
        } else {
            "helo-unanswered"
        };
        let mut fields: Vec<(&'static str, Value)> = Vec::with_capacity(24);
        fields.extend([
            ("messages", Value::Object(kinds)),
            ("handshake", state.into()),
            ("payloads", hist.len().into()),
            ("events", counted.into()),
            ("acked_events", acked.into()),
            ("unacked_events", (counted as i64 - acked as i64).into()),
            (
                "complete_payloads",
                hist.iter().filter(|p| p.complete()).count().into(),
            ),
            ("resends", hist.iter().filter(|p| p.resend).count().into()),
            ("acks_lost", self.acks_lost.into()),
        ]);
        self.fp.fields(&mut fields);
        let first = self.first.unwrap_or_default();
        let mut m = Message::new(PROTOCOL, "connection");
        (m.offset, m.frame, m.ts) = (first.offset, first.frame, first.ts);
        m.fields = fields.into();
        m
    }
}

fn report_lost(d: Direction, side: &mut Side, more: u64, out: &mut Vec<Record>) {
    let Some(lost) = side.lost.take() else {
        return;
    };
    let skipped = lost.skipped + more;
    if skipped == 0 && lost.dropped == 0 {
        return;
    }
    let dropped = if lost.dropped > 0 {
        format!("; {} bytes of a cut message dropped", lost.dropped)
    } else {
        String::new()
    };
    let msg = format!(
        "{}: skipped {skipped} bytes to the next message header{dropped}",
        lost.reason
    );
    let f = finding(lost.code, msg, Some(d), lost.at)
        .field("skipped", skipped)
        .field("dropped", lost.dropped);
    out.push(f.into());
}

impl Decoder for CourierDecoder {
    fn feed(&mut self, chunk: &Chunk<'_>, shared: &mut AllShared, out: &mut Vec<Record>) {
        let d = chunk.direction;
        self.sides[ix(d)]
            .buf
            .append(chunk.offset, chunk.data, chunk.frame, chunk.ts);
        self.pump(d, &mut shared.courier, out);
    }

    fn gap(&mut self, gap: &Gap, shared: &mut AllShared, out: &mut Vec<Record>) {
        let d = gap.direction;
        let Self { sides, conn, .. } = self;
        let side = &mut sides[ix(d)];
        if d == Direction::S2C {
            conn.acks_lost = true;
        }
        if side.evnt.is_some() {
            let cut = (
                "courier.truncated",
                "the capture lost bytes inside it".to_owned(),
            );
            conn.end_evnt(d, side, Some(cut), &mut shared.courier, out);
        }
        if side.mode == Mode::Resync {
            // an earlier loss still open: report it before this one
            let left = side.buf.len();
            report_lost(d, side, left as u64, out);
            side.buf.skip(left);
        }
        let dropped = side.buf.len() as u64;
        let resume = gap.offset.saturating_add(gap.length);
        side.buf.reset(resume);
        if side.mode != Mode::Dead {
            side.mode = Mode::Resync;
            side.lost = Some(Lost {
                at: At::new(resume, gap.frame, gap.ts),
                code: "courier.resync-after-gap",
                reason: format!("after {} missing bytes", gap.length),
                skipped: 0,
                dropped,
            });
        }
    }

    fn close(&mut self, shared: &mut AllShared, out: &mut Vec<Record>) -> Closing {
        let Self {
            sides,
            conn,
            closing,
        } = self;
        let begun = std::mem::replace(closing, true);
        for d in [Direction::C2S, Direction::S2C] {
            if begun {
                break; // done by the first call
            }
            let side = &mut sides[ix(d)];
            if side.evnt.is_some() {
                let cut = (
                    "courier.truncated",
                    "the stream ended before its zlib stream did".to_owned(),
                );
                conn.end_evnt(d, side, Some(cut), &mut shared.courier, out);
            } else if side.mode == Mode::Resync {
                let left = side.buf.len();
                side.buf.skip(left);
                report_lost(d, side, left as u64, out);
            } else if side.mode == Mode::Frame && !side.buf.is_empty() {
                conn.truncated(d, side, out);
            }
        }
        let held = &mut shared.courier.held;
        if conn.delivery.close(conn.acks_lost, held, out) {
            return Closing::More;
        }
        if conn.first.is_some() {
            out.push(conn.summary().into());
        }
        Closing::Done
    }
}
