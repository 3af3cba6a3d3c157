"""The Log Courier connection decoder: a sans-IO state machine over both directions.

Each direction is framed on its own (`framing.py`); an EVNT keeps its direction in a streaming
state until its zlib stream ends. Semantics that span directions live here: handshake order,
PING/PONG pairing, which side may send what; acknowledgement bookkeeping is in `delivery.py`,
cross-connection resends in `resend.py`, the software fingerprint in `fingerprint.py`.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from enum import Enum

from wirelog.decoders.base import StreamContext
from wirelog.decoders.buffer import StreamBuffer
from wirelog.decoders.courier import framing, handshake, resend
from wirelog.decoders.courier.delivery import At, Delivery, Payload
from wirelog.decoders.courier.findings import PROTOCOL, finding
from wirelog.decoders.courier.fingerprint import Fingerprint
from wirelog.decoders.courier.framing import HEADER, NONCE, Action, Verdict
from wirelog.decoders.courier.payload import Inflater, RawEvent, parse_json, split_events
from wirelog.model import Chunk, Direction, Gap, Message, Record

EVNT_HEAD = HEADER + NONCE


class Mode(Enum):
    FRAME = "frame"  # at a message boundary
    RESYNC = "resync"  # looking for the next plausible header
    DEAD = "dead"  # the direction is not Courier (TLS): ignore the rest


@dataclass(slots=True)
class Lost:
    """Where framing was lost; reported once the next header is found (or at close)."""

    at: At
    code: str
    reason: str
    skipped: int = 0
    dropped: int = 0  # bytes of a partial message discarded at a gap


@dataclass(slots=True)
class Streaming:
    """An EVNT whose zlib stream has not ended yet."""

    at: At
    nonce: bytes
    inflater: Inflater
    payload: Payload | None  # None when the EVNT came from the wrong side
    fields: dict[str, object]
    findings: list[Record]


class Side:
    """The framing state of one direction."""

    __slots__ = ("buf", "evnt", "lost", "messages", "mode", "version")

    def __init__(self) -> None:
        self.buf = StreamBuffer()
        self.mode = Mode.FRAME
        self.evnt: Streaming | None = None
        self.lost: Lost | None = None
        self.messages = 0
        self.version: str | None = None


class CourierDecoder:
    """Decodes one connection; see the module docstring."""

    def __init__(self, ctx: StreamContext) -> None:
        self._ctx = ctx
        self._max_frame = ctx.limits.max_frame
        self._sides = {Direction.C2S: Side(), Direction.S2C: Side()}
        self._delivery = Delivery(ctx.limits.max_pending_events)
        self._fp = Fingerprint()
        self._kinds: Counter[str] = Counter()
        self._first: At | None = None
        self._helo = False
        self._pings = 0
        self._unknown_sent = 0
        self._wrong: set[bytes] = set()
        self._acks_lost = False
        self._ff_seen = False  # fingerprint-mismatch reported

    # -- the Decoder interface ------------------------------------------------------------------

    def feed(self, chunk: Chunk) -> list[Record]:
        side = self._sides[chunk.direction]
        side.buf.append(chunk)
        out: list[Record] = []
        self._pump(chunk.direction, side, out)
        return out

    def gap(self, gap: Gap) -> list[Record]:
        side = self._sides[gap.direction]
        out: list[Record] = []
        if gap.direction is Direction.S2C:
            self._acks_lost = True
        if side.evnt is not None:
            out += self._end_evnt(
                gap.direction, side, ("courier.truncated", "the capture lost bytes inside it")
            )
        if side.mode is Mode.RESYNC:  # an earlier loss still open: report it before this one
            out += self._report_lost(gap.direction, side, len(side.buf))
            side.buf.skip(len(side.buf))
        dropped = len(side.buf)
        side.buf.reset(gap.offset + gap.length)
        if side.mode is not Mode.DEAD:
            side.mode = Mode.RESYNC
            at = (gap.offset + gap.length, gap.frame, gap.ts)
            side.lost = Lost(
                at, "courier.resync-after-gap", f"after {gap.length} missing bytes", dropped=dropped
            )
        return out

    def close(self) -> list[Record]:
        out: list[Record] = []
        for d, side in self._sides.items():
            if side.evnt is not None:
                out += self._end_evnt(
                    d, side, ("courier.truncated", "the stream ended before its zlib stream did")
                )
            elif side.mode is Mode.RESYNC:
                left = len(side.buf)
                side.buf.skip(left)
                out += self._report_lost(d, side, left)
            elif side.mode is Mode.FRAME and len(side.buf):
                out.append(self._truncated(d, side))
        out += self._delivery.close(self._acks_lost)
        if self._first is not None:
            out.append(self._summary())
        return out

    # -- framing --------------------------------------------------------------------------------

    def _pump(self, d: Direction, side: Side, out: list[Record]) -> None:
        buf = side.buf
        while True:
            if side.mode is Mode.DEAD:
                buf.skip(len(buf))
                return
            if side.evnt is not None:
                if not self._stream(d, side, out):
                    return
                continue
            if side.mode is Mode.RESYNC:
                if not self._resync(d, side, out):
                    return
                continue
            if len(buf) < HEADER:
                if len(buf) >= 3 and framing.looks_like_tls(buf.peek(3)):  # e.g. a 7-byte TLS alert
                    out += self._tls(d, side, buf.peek(HEADER))
                    continue
                return
            head = buf.peek(HEADER)
            mtype, length = framing.parse_header(head)
            verdict = framing.judge(mtype, length, self._max_frame)
            if verdict.action is Action.DESYNC:
                self._lose(side, verdict)
            elif verdict.action is Action.TLS:
                out += self._tls(d, side, head)
            elif verdict.action is Action.STREAM:
                if len(buf) < EVNT_HEAD:
                    return
                self._start_evnt(d, side, out)
            else:
                if len(buf) < HEADER + length:
                    return
                at = self._at(side)
                body = buf.consume(HEADER + length)[HEADER:]
                out += self._message(d, side, mtype, body, at, verdict)

    def _at(self, side: Side) -> At:
        frame, ts = side.buf.origin()
        at = (side.buf.offset, frame, ts)
        if self._first is None:
            self._first = at
        return at

    def _lose(self, side: Side, verdict: Verdict) -> None:
        """Bad header: skip at least one byte and hunt for the next plausible header."""
        frame, ts = side.buf.origin()
        head = side.buf.peek(HEADER).hex()
        code = verdict.problem or "courier.desync"
        reason = f"header {head} is not a valid Log Courier message ({verdict.detail})"
        side.lost = Lost((side.buf.offset, frame, ts), code, reason, skipped=1)
        side.buf.skip(1)
        side.mode = Mode.RESYNC

    def _resync(self, d: Direction, side: Side, out: list[Record]) -> bool:
        pos, drop = framing.find_header(side.buf.peek(len(side.buf)), self._max_frame)
        side.buf.skip(drop)
        if pos is None:
            if side.lost is not None:
                side.lost.skipped += drop
            return False
        out += self._report_lost(d, side, pos)
        side.mode = Mode.FRAME
        return True

    def _report_lost(self, d: Direction, side: Side, more: int) -> list[Record]:
        lost, side.lost = side.lost, None
        if lost is None:
            return []
        skipped = lost.skipped + more
        if not skipped and not lost.dropped:
            return []
        dropped = f"; {lost.dropped} bytes of a cut message dropped" if lost.dropped else ""
        msg = f"{lost.reason}: skipped {skipped} bytes to the next message header{dropped}"
        return [finding(lost.code, msg, d, lost.at, skipped=skipped, dropped=lost.dropped)]

    def _tls(self, d: Direction, side: Side, head: bytes) -> list[Record]:
        """Explain TLS bytes in a Courier stream; the direction is then skipped (`Mode.DEAD`)."""
        side.mode = Mode.DEAD
        at = self._at(side)
        bogus = struct.unpack_from(">I", head, 4)[0] if len(head) >= HEADER else None
        if d is Direction.S2C and self._sides[Direction.C2S].mode is Mode.DEAD:
            return []  # both sides speak TLS: simply an encrypted stream, already reported
        if d is Direction.C2S:
            msg = (
                "the client speaks TLS (transport tls, the default): a plain tcp Log Courier server reads "
                f"ClientHello bytes 4-7 ({head[4:8].hex()}) as a length of {bogus} and rejects it as "
                "'packet too large'; if the server answers in TLS too, the stream is just encrypted"
            )
        else:
            msg = "the server answers with TLS: the client uses transport tcp against a tls server"
        return [finding("courier.tls-mismatch", msg, d, at, bogus_length=bogus, tls_header=head[:5].hex())]

    def _truncated(self, d: Direction, side: Side) -> Record:
        at = self._at(side)
        left = len(side.buf)
        head = side.buf.peek(HEADER)
        what = f"{head[:4]!r} message" if left >= 4 else "message header"
        msg = f"the stream ended inside a {what}: {left} bytes left undecoded"
        return finding("courier.truncated", msg, d, at, bytes=left)

    # -- messages -------------------------------------------------------------------------------

    def _allowed(self, d: Direction, mtype: bytes, at: At, out: list[Record]) -> bool:
        if mtype not in framing.TYPES or framing.sender(mtype) is d:
            return True
        if mtype not in self._wrong:
            self._wrong.add(mtype)
            who = "client" if d is Direction.C2S else "server"
            msg = (
                f"{mtype.decode()} sent by the {who}, which never sends it "
                "(or this stream's client side was inferred wrongly)"
            )
            out.append(finding("courier.wrong-direction", msg, d, at, type=mtype.decode()))
        return False

    def _message(
        self, d: Direction, side: Side, mtype: bytes, body: bytes, at: At, verdict: Verdict
    ) -> list[Record]:
        kind = framing.KINDS.get(mtype, "unknown_type")
        fields: dict[str, object] = {"type": mtype.decode("latin-1")}
        msg = Message(PROTOCOL, kind, d, at[0], HEADER + len(body), at[1], at[2], side.version, fields)
        out: list[Record] = [msg]
        if verdict.problem:
            detail = verdict.detail or (
                f"unknown message type {mtype!r} ({len(body)}-byte body skipped): "
                "a Ruby server answers ????, a Go server closes the connection"
            )
            out.append(finding(verdict.problem, detail, d, at, type=fields["type"], body_length=len(body)))
        ok = self._allowed(d, mtype, at, out)
        if ok:
            self._order_checks(d, side, mtype, at, out)
        if mtype in (b"HELO", b"VERS"):
            self._handshake(d, side, mtype, body, at, ok, fields, out)
            msg.version = side.version
        elif mtype == b"ACKN" and len(body) >= NONCE + 4:
            nonce, seq = body[:NONCE].hex(), struct.unpack_from(">I", body, NONCE)[0]
            fields |= {"nonce": nonce, "sequence": seq}
            if ok:
                out += self._delivery.ack(nonce, seq, at)
        elif mtype in (b"JDAT", b"EVNT") and len(body) > NONCE:
            inf = Inflater(self._ctx.limits.max_inflated)
            inf.feed(body[NONCE:])
            trailing = len(body) - NONCE - inf.consumed if inf.eof else 0
            p = self._open(d, body[:NONCE], kind, at, ok, out)
            out += self._payload(d, kind, body[:NONCE], inf, at, fields, trailing, p)
        elif ok:
            self._control(mtype, at, out)
        side.messages += 1
        self._kinds[kind] += 1
        return out

    def _order_checks(self, d: Direction, side: Side, mtype: bytes, at: At, out: list[Record]) -> None:
        """HELO first from the client; VERS/???? first from the server (and only then)."""
        if d is Direction.C2S:
            self._fp.client_messages += 1
            if mtype == b"HELO" and side.messages:
                out.append(
                    finding(
                        "courier.helo-not-first",
                        "HELO after other client messages; it must come first",
                        d,
                        at,
                    )
                )
            if mtype == b"PING" and side.messages == 0 and at[0] == 0 and not self._ctx.midstream:
                msg = (
                    "the connection opens with PING, not HELO or JDAT: a client before 2.5 idle before its "
                    "first payload; Ruby servers from 2.7 expect HELO or JDAT first and end the connection"
                )
                out.append(finding("courier.ping-first", msg, d, at))
            if mtype == b"HELO":
                self._helo = True
            elif mtype not in framing.TYPES:
                self._unknown_sent += 1
            return
        reply = mtype in (b"VERS", b"????")
        if side.messages == 0 and self._helo and not reply:
            first = mtype.decode("latin-1")
            msg = f"the client sent HELO but the server's first message is {first}, not VERS or ????"
            out.append(finding("courier.vers-not-first", msg, d, at))
        elif side.messages and reply and not (mtype == b"????" and self._unknown_sent):
            msg = f"{mtype.decode()} is not the server's first message; it may only answer the handshake"
            out.append(finding("courier.vers-not-first", msg, d, at))
        if mtype == b"????":
            if side.messages == 0 and self._helo:
                self._fp.server_declined = True
            self._unknown_sent = max(0, self._unknown_sent - 1)

    def _handshake(
        self,
        d: Direction,
        side: Side,
        mtype: bytes,
        body: bytes,
        at: At,
        ok: bool,
        fields: dict[str, object],
        out: list[Record],
    ) -> None:
        hs = handshake.parse(body)
        fields |= hs.fields()
        if not ok:
            return
        side.version = hs.version
        if hs.length not in handshake.KNOWN_LENGTHS:
            msg = f"{mtype.decode()} body of {hs.length} bytes matches no known layout; read zero-padded"
            out.append(finding("courier.handshake-layout", msg, d, at, body_length=hs.length))
        if mtype == b"HELO":
            self._fp.helo = self._fp.helo or hs
            return
        self._fp.vers = self._fp.vers or hs
        if not self._helo:
            out.append(
                finding("courier.vers-without-helo", "VERS sent although the client sent no HELO", d, at)
            )
        if hs.length == 8 and hs.evnt:
            msg = (
                "8-byte VERS advertising EVNT: the Ruby gem 2.7.0/2.7.1 bug; a Go client will stream EVNT, "
                "which that server cannot read"
            )
            out.append(finding("courier.evnt-flag-bug", msg, d, at))

    def _control(self, mtype: bytes, at: At, out: list[Record]) -> None:
        if mtype == b"PING":
            if self._delivery.pending():
                msg = "PING while payloads are unacknowledged: legal, but a Go receiver drops the connection"
                out.append(finding("courier.ping-while-pending", msg, Direction.C2S, at))
            self._pings += 1
        elif mtype == b"PONG":
            if self._pings:
                self._pings -= 1
            else:
                out.append(
                    finding("courier.pong-without-ping", "PONG with no outstanding PING", Direction.S2C, at)
                )

    # -- payloads -------------------------------------------------------------------------------

    def _open(
        self, d: Direction, nonce: bytes, kind: str, at: At, ok: bool, out: list[Record]
    ) -> Payload | None:
        if not ok:
            return None
        if kind == "evnt" and not (self._fp.vers and self._fp.vers.evnt):
            msg = "EVNT without a VERS advertising it (flag 0x01): the server cannot read streamed payloads"
            out.append(finding("courier.evnt-not-negotiated", msg, d, at))
        self._fp.see_nonce(nonce)
        if (
            b"\xff" in nonce
            and self._fp.helo is not None
            and self._fp.client()[0] == "go"
            and not self._ff_seen
        ):
            self._ff_seen = True
            msg = (
                f"nonce {nonce.hex()} contains 0xFF, which Go's Intn(255) never produces, yet the HELO "
                "announces a Go client: another implementation (or a replay) speaks as Log Courier"
            )
            out.append(finding("courier.fingerprint-mismatch", msg, d, at, nonce=nonce.hex()))
        out += self._delivery.open(nonce.hex(), kind, at)
        return self._delivery.payloads[nonce.hex()]

    def _start_evnt(self, d: Direction, side: Side, out: list[Record]) -> None:
        at = self._at(side)
        nonce = side.buf.peek(NONCE, HEADER)
        found: list[Record] = []
        ok = self._allowed(d, b"EVNT", at, found)
        if ok:
            self._order_checks(d, side, b"EVNT", at, found)
        p = self._open(d, nonce, "evnt", at, ok, found)
        inf = Inflater(self._ctx.limits.max_inflated)
        side.evnt = Streaming(at, nonce, inf, p, {"type": "EVNT"}, found)

    def _stream(self, d: Direction, side: Side, out: list[Record]) -> bool:
        """Feed the EVNT's new bytes to its inflater; True once the message has ended."""
        st = side.evnt
        assert st is not None
        inf, buf = st.inflater, side.buf
        pos = EVNT_HEAD + inf.consumed
        if len(buf) > pos:
            inf.feed(buf.peek(len(buf) - pos, pos))
        if inf.done:
            out += self._end_evnt(d, side, None)
            return True
        if EVNT_HEAD + inf.consumed > self._max_frame:
            why = f"it is still streaming after {self._max_frame} bytes (the frame cap)"
            out += self._end_evnt(d, side, ("courier.length-over-limit", why))
            return True
        return False

    def _end_evnt(self, d: Direction, side: Side, cut: tuple[str, str] | None) -> list[Record]:
        """Emit a finished EVNT, or one `cut` = (code, why) short; when its end is unknown, resync."""
        st = side.evnt
        assert st is not None
        side.evnt = None
        inf = st.inflater
        length = EVNT_HEAD + inf.consumed
        msg = Message(PROTOCOL, "evnt", d, st.at[0], length, st.at[1], st.at[2], side.version, st.fields)
        extra: list[Record] = list(st.findings)
        if cut is not None and not inf.done:
            text = f"EVNT cut short: {cut[1]} ({inf.consumed} compressed bytes read, stream not finished)"
            extra.append(finding(cut[0], text, d, st.at, consumed=inf.consumed))
        side.buf.skip(min(length, len(side.buf)))
        if not inf.eof:
            side.mode = Mode.RESYNC
            why = cut[1] if cut else ("its zlib stream failed" if inf.error else "it exceeds the inflate cap")
            side.lost = Lost(st.at, "courier.desync", f"EVNT end unknown because {why}")
        side.messages += 1
        self._kinds["evnt"] += 1
        payload = self._payload(d, "evnt", st.nonce, inf, st.at, st.fields, 0, st.payload, cut is None)
        return [msg, *extra, *payload]

    def _payload(
        self,
        d: Direction,
        kind: str,
        nonce: bytes,
        inf: Inflater,
        at: At,
        fields: dict[str, object],
        trailing: int,
        p: Payload | None,
        whole: bool = True,
    ) -> list[Record]:
        """Findings and events of one JDAT/EVNT body (`whole`: all its bytes arrived); events go to
        delivery, held until acknowledged."""
        out: list[Record] = []
        hexnonce = nonce.hex()
        data = inf.output
        fields |= {
            "nonce": hexnonce,
            "compressed_length": inf.consumed,
            "inflated_length": len(data),
            "zlib_header": inf.head.hex(),
            "zlib_level": inf.level(),
        }
        if inf.error:
            out.append(
                finding("courier.decompress-failed", f"zlib error in {kind} {hexnonce}: {inf.error}", d, at)
            )
        elif inf.over_cap:
            cap = self._ctx.limits.max_inflated
            msg = f"{kind} {hexnonce} inflates beyond the {cap}-byte inflate cap; later events dropped"
            out.append(finding("courier.inflate-limit", msg, d, at, cap=self._ctx.limits.max_inflated))
        elif not inf.eof and whole:
            msg = f"{kind} {hexnonce}: the zlib stream is truncated (no end after {inf.consumed} bytes)"
            out.append(finding("courier.decompress-failed", msg, d, at))
        if trailing:
            msg = f"{trailing} bytes follow the end of the zlib stream inside {kind} {hexnonce}"
            out.append(finding("courier.trailing-data", msg, d, at, bytes=trailing))
        cut = split_events(data, complete=inf.eof)
        if cut.problem:
            out.append(finding(cut.problem[0], f"{kind} {hexnonce}: {cut.problem[1]}", d, at))
        events, bad = self._events(kind, hexnonce, cut.events, at)
        fields["events"] = len(events)
        if bad:
            first = bad[0]
            msg = f"{len(bad)} event(s) of {kind} {hexnonce} not JSON objects (event {first[0]}: {first[1]})"
            out.append(finding("courier.invalid-json", msg, d, at, count=len(bad), first_index=first[0]))
        if p is None:
            return out + events
        self._fp.zlib_levels.add(inf.level() or "unknown")
        self._fp.go_tail |= inf.go_tail()
        limit = self._ctx.limits.max_pending_events
        digests = resend.digest([e.data for e in cut.events]) if len(events) <= limit else None
        p.count = len(events)
        out += resend.check(
            self._ctx.shared, hexnonce, self._ctx.stream, p, digests, self._fp.unseeded_possible()
        )
        return out + self._delivery.fill(p, events)

    def _events(
        self, kind: str, nonce: str, raw: list[RawEvent], at: At
    ) -> tuple[list[Message], list[tuple[int, str]]]:
        events: list[Message] = []
        bad: list[tuple[int, str]] = []
        version = self._sides[Direction.C2S].version
        for ev in raw:
            doc, err = parse_json(ev.data)
            fields: dict[str, object] = {
                "nonce": nonce,
                "index": ev.index,
                "sequence": ev.index + 1,
                "payload": kind,
                "ack_frame": None,
            }
            if err is not None:
                bad.append((ev.index, err))
                fields["json_error"] = err
            events.append(
                Message(
                    PROTOCOL, "event", Direction.C2S, at[0], len(ev.data), at[1], at[2], version, fields, doc
                )
            )
        return events, bad

    # -- summary --------------------------------------------------------------------------------

    def _summary(self) -> Message:
        hist = self._delivery.history
        counted = [p.count for p in hist if p.count is not None]
        fields: dict[str, object] = {
            "messages": dict(sorted(self._kinds.items())),
            "handshake": self._handshake_state(),
            "payloads": len(hist),
            "events": sum(counted),
            "acked_events": sum(p.acked for p in hist),
            "unacked_events": sum(counted) - sum(p.acked for p in hist),
            "complete_payloads": sum(p.complete for p in hist),
            "resends": sum(p.resend for p in hist),
            "acks_lost": self._acks_lost,
        }
        fields |= self._fp.fields()
        offset, frame, ts = self._first or (None, None, None)
        return Message(PROTOCOL, "connection", None, offset, 0, frame, ts, None, fields)

    def _handshake_state(self) -> str:
        if not self._helo:
            return "none"
        if self._fp.vers is not None:
            return "helo+vers"
        return "helo+declined" if self._fp.server_declined else "helo-unanswered"
