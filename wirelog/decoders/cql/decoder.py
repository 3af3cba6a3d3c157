"""The per-connection CQL state machine: envelopes, v5 frames, pairing, resynchronisation.

Each direction is in one of four modes: `probe` (nothing known yet: the first bytes decide between a
v5 frame header with a valid CRC24 and an envelope header), `envelope` (v3/v4, or v5 before the
handshake), `crc` or `lz4` (v5 frames). A STARTUP at version >= 5 switches the client side to frames
right after the STARTUP and the server side right after its answer (reference/cql.md §1, §13).

When the position is lost (bad header CRC, implausible envelope header, a gap) the direction searches
forward. Every decision depends only on the bytes, never on how they were chunked: a candidate that
needs more bytes to be confirmed makes the search wait, and only `close()` may give up on it. A
frame candidate needs a valid CRC24 and CRC32; an envelope candidate a plausible header and a body
that decodes without leftovers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from wirelog.decoders.base import StreamContext
from wirelog.decoders.buffer import StreamBuffer
from wirelog.decoders.cql import envelope as env
from wirelog.decoders.cql import framing
from wirelog.decoders.cql.compression import DecompressionError, lz4_block, lz4_body, snappy_body
from wirelog.decoders.cql.messages import Body, BodyContext, Prepared, decode
from wirelog.model import Chunk, Direction, Finding, Gap, Message, Record, Severity

PROTOCOL = "cql"
MAX_PREPARED = 10_000  # statements remembered per server
ENVELOPE = "envelope"
PROBE = "probe"
CRC = "crc"
LZ4 = "lz4"


@dataclass(slots=True)
class _Partial:
    """An envelope arriving in non-self-contained frames."""

    data: bytearray
    offset: int
    frame: int | None
    ts: int | None
    frames: int = 1


@dataclass(slots=True)
class _Side:
    direction: Direction
    buf: StreamBuffer = field(default_factory=StreamBuffer)
    mode: str = PROBE
    searching: bool = False
    skipped: int = 0  # bytes dropped by the current search
    skip_from: int = 0  # stream offset where the current search began
    partial: _Partial | None = None

    @property
    def response(self) -> bool:
        return self.direction is Direction.S2C


@dataclass(slots=True)
class _Pending:
    """A request waiting for its response."""

    opcode: str
    offset: int
    frame: int | None
    ts: int | None
    query: str | None
    prepared_id: bytes | None


class CqlDecoder:
    """Decodes both directions of one CQL connection."""

    def __init__(self, ctx: StreamContext) -> None:
        self._ctx = ctx
        self._max = min(ctx.limits.max_frame, env.MAX_LENGTH)
        self._sides = {d: _Side(d) for d in Direction}
        self._out: list[Record] = []
        self._version: int | None = None  # fixed by the first STARTUP
        self._compression: str | None = None  # STARTUP COMPRESSION, lower case
        self._startup_stream: int | None = None
        self._framing_after_startup: str | None = None
        self._inflight: dict[int, _Pending] = {}
        servers = ctx.shared.setdefault("prepared", {})
        self._prepared: dict[bytes, Prepared] = servers.setdefault((ctx.server, ctx.server_port), {})
        self._body_ctx = BodyContext(0, ctx.show_secrets, ctx.limits.max_depth, self._prepared)

    # ---- decoder contract ------------------------------------------------------------------------

    def feed(self, chunk: Chunk) -> list[Record]:
        side = self._sides[chunk.direction]
        side.buf.append(chunk)
        self._run(side, False)
        return self._flush()

    def gap(self, gap: Gap) -> list[Record]:
        side = self._sides[gap.direction]
        self._run(side, True)
        lost = len(side.buf) + (len(side.partial.data) if side.partial else 0)
        if lost:
            self._finding(
                side,
                "truncated",
                Severity.WARNING,
                f"{lost} bytes of an incomplete frame or envelope dropped at a {gap.length}-byte gap",
                side.buf.offset if len(side.buf) else gap.offset,
                gap.frame,
                gap.ts,
                bytes=lost,
            )
        side.buf.reset(gap.offset + gap.length)
        side.partial = None
        if side.mode != PROBE:
            self._start_search(side, side.buf.offset)
        return self._flush()

    def close(self) -> list[Record]:
        for side in self._sides.values():
            self._run(side, True)
            self._end_search(side)
            left = len(side.buf) + (len(side.partial.data) if side.partial else 0)
            if left:
                frame, ts = side.buf.origin()
                self._finding(
                    side,
                    "truncated",
                    Severity.WARNING,
                    f"stream ended inside a frame or envelope ({left} bytes left undecoded)",
                    side.buf.offset,
                    frame,
                    ts,
                    bytes=left,
                )
                side.buf.skip(len(side.buf))
                side.partial = None
        for stream_id, p in sorted(self._inflight.items(), key=lambda kv: kv[1].offset):
            self._out.append(
                Finding(
                    "cql.unanswered-request",
                    Severity.INFO,
                    f"{p.opcode.upper()} on stream {stream_id} got no response in the capture",
                    PROTOCOL,
                    Direction.C2S,
                    p.offset,
                    p.frame,
                    p.ts,
                    {"stream_id": stream_id, "opcode": p.opcode},
                )
            )
        self._inflight.clear()
        return self._flush()

    # ---- driving ---------------------------------------------------------------------------------

    def _flush(self) -> list[Record]:
        out, self._out = self._out, []
        return out

    def _run(self, side: _Side, final: bool) -> None:
        while len(side.buf):
            if side.searching:
                progressed = self._search(side, final)
            elif side.mode == PROBE:
                progressed = self._probe(side, final)
            elif side.mode == ENVELOPE:
                progressed = self._envelope(side, final)
            else:
                progressed = self._frame(side, final)
            if not progressed:
                return

    def _finding(
        self,
        side: _Side,
        code: str,
        severity: Severity,
        message: str,
        offset: int | None,
        frame: int | None,
        ts: int | None,
        **fields: Any,
    ) -> None:
        self._out.append(
            Finding(f"cql.{code}", severity, message, PROTOCOL, side.direction, offset, frame, ts, fields)
        )

    def _finding_here(self, side: _Side, code: str, severity: Severity, message: str, **fields: Any) -> None:
        frame, ts = side.buf.origin()
        self._finding(side, code, severity, message, side.buf.offset, frame, ts, **fields)

    # ---- probe and search ------------------------------------------------------------------------

    def _probe(self, side: _Side, final: bool) -> bool:
        """Decide the framing of a direction from its first bytes."""
        buf = side.buf
        if len(buf) < env.HEADER:
            return False  # even at the end: a few stray bytes are reported as truncated, not searched
        head = buf.peek(framing.LZ4_HEADER + 1)
        for lz4 in (False, True):
            if len(head) >= framing.header_size(lz4) and framing.parse_header(head, lz4).crc_ok:
                side.mode = LZ4 if lz4 else CRC
                return True
        envelope = env.parse(head)
        problem = env.problem(envelope, side.response, self._max)
        if problem is None:
            side.mode = ENVELOPE
            return True
        if envelope.version in env.VERSIONS and envelope.response == side.response:
            self._report_header(side, problem)  # an envelope header, but not a sane one
        self._start_search(side, buf.offset)
        return True

    def _start_search(self, side: _Side, offset: int) -> None:
        side.searching = True
        side.skipped = 0
        side.skip_from = offset

    def _search_kinds(self, side: _Side) -> tuple[str, ...]:
        if side.mode == PROBE:
            return (CRC, LZ4, ENVELOPE)
        if side.mode == ENVELOPE:
            return (ENVELOPE,)
        return (side.mode, LZ4 if side.mode == CRC else CRC)

    def _search(self, side: _Side, final: bool) -> bool:
        """Look for the next frame or envelope boundary; True once found (or bytes were skipped)."""
        buf = side.buf
        kinds = self._search_kinds(side)
        while len(buf):
            verdict = None
            for kind in kinds:
                v = self._candidate(side, kind, final)
                if v == "accept":
                    side.mode = kind
                    self._end_search(side)
                    return True
                if v == "wait":
                    verdict = "wait"
            if verdict == "wait":
                return False
            step = self._next_candidate(side, kinds)
            if step == 0:
                if not final:
                    return False
                step = len(buf)
            side.skipped += step
            buf.skip(step)
        if final:
            self._end_search(side)
        return False

    def _end_search(self, side: _Side) -> None:
        if side.searching and side.skipped:
            frame, ts = side.buf.origin(side.skip_from)
            self._finding(
                side,
                "resync",
                Severity.WARNING,
                f"skipped {side.skipped} bytes to resynchronise",
                side.skip_from,
                frame,
                ts,
                bytes=side.skipped,
            )
        side.searching = False
        side.skipped = 0

    def _next_candidate(self, side: _Side, kinds: tuple[str, ...]) -> int:
        """Bytes to skip to the next position worth testing (0 = only undecidable tail bytes remain)."""
        view = side.buf.view()
        try:
            n = len(view)
            best = max(n - framing.LZ4_HEADER + 1, 0)
            for kind in kinds:
                if kind == ENVELOPE:
                    pos = _next_version_byte(view, 1, side.response)
                else:
                    pos = framing.next_candidate(view, 1, kind == LZ4)
                if pos >= 0:
                    best = min(best, pos)
            return best
        finally:
            view.release()

    def _candidate(self, side: _Side, kind: str, final: bool) -> str:
        """'accept', 'reject' or 'wait' for a boundary of `kind` at the read position."""
        buf = side.buf
        if kind == ENVELOPE:
            if len(buf) < env.HEADER:
                return "reject" if final else "wait"
            head = env.parse(buf.peek(env.HEADER))
            if not env.plausible(head, side.response, self._max):
                return "reject"
            if self._version is not None and head.version != self._version:
                return "reject"
            if len(buf) < head.total:
                return "reject" if final else "wait"
            body, _ = self._inflate(head, buf.peek(head.length, env.HEADER))
            if body is None:
                return "reject"
            decoded = decode(head, body, self._body_context(head))
            return "accept" if decoded.error is None and not decoded.trailing else "reject"
        lz4 = kind == LZ4
        size = framing.header_size(lz4)
        if len(buf) < size:
            return "reject" if final else "wait"
        h = framing.parse_header(buf.peek(size), lz4)
        if not h.crc_ok or h.padding:
            return "reject"  # senders write the padding bits as 0 (and _next_candidate relies on it)
        if len(buf) < h.total:
            return "reject" if final else "wait"
        stored, computed = framing.trailer_crc32(buf.peek(h.total), h)
        return "accept" if stored == computed else "reject"

    # ---- unframed envelopes ----------------------------------------------------------------------

    def _envelope(self, side: _Side, final: bool) -> bool:
        buf = side.buf
        if len(buf) < env.HEADER:
            return False
        head = env.parse(buf.peek(env.HEADER))
        problem = env.problem(head, side.response, self._max)
        if problem is not None:
            self._report_header(side, problem)
            self._start_search(side, buf.offset)
            side.skipped = 1
            buf.skip(1)
            return True
        if len(buf) < head.total:
            return False
        frame, ts = buf.origin()
        offset = buf.offset
        data = buf.consume(head.total)
        body, _ = self._inflate(head, data[env.HEADER :], side, offset, frame, ts)
        self._message(side, head, body, offset, frame, ts, {})
        return True

    def _report_header(self, side: _Side, problem: tuple[str, str]) -> None:
        code, sentence = problem
        header = side.buf.peek(env.HEADER).hex()
        self._finding_here(side, code, Severity.ERROR, f"bad envelope header: {sentence}", header=header)

    def _inflate(
        self,
        head: env.EnvelopeHeader,
        body: bytes,
        side: _Side | None = None,
        offset: int = 0,
        frame: int | None = None,
        ts: int | None = None,
    ) -> tuple[bytes | None, str | None]:
        """The pre-v5 body, decompressed if flagged; (None, algorithm) when that fails."""
        if not head.flags & env.FLAG_COMPRESSION or head.version >= 5 or not body:
            return body, None
        algorithms = [self._compression] if self._compression in (LZ4, "snappy") else [LZ4, "snappy"]
        cap = self._ctx.limits.max_inflated
        errors = []
        for algorithm in algorithms:
            try:
                return (lz4_body(body, cap) if algorithm == LZ4 else snappy_body(body, cap)), algorithm
            except DecompressionError as exc:
                errors.append(f"{algorithm}: {exc}")
        if side is not None:
            self._finding(
                side,
                "decompression-failed",
                Severity.ERROR,
                f"compressed {head.opcode_name.upper()} body could not be decompressed ({'; '.join(errors)})",
                offset,
                frame,
                ts,
                algorithm="/".join(algorithms),
            )
        return None, None

    # ---- v5 frames -------------------------------------------------------------------------------

    def _frame(self, side: _Side, final: bool) -> bool:
        buf = side.buf
        lz4 = side.mode == LZ4
        size = framing.header_size(lz4)
        if len(buf) < size:
            return False
        h = framing.parse_header(buf.peek(size), lz4)
        if not h.crc_ok:
            if len(buf) < env.HEADER and not final:
                return False
            return self._bad_frame_header(side, h)
        if len(buf) < h.total:
            return False
        frame, ts = buf.origin()
        offset = buf.offset
        raw = buf.consume(h.total)
        stored, computed = framing.trailer_crc32(raw, h)
        if stored != computed:
            self._finding(
                side,
                "crc32-mismatch",
                Severity.ERROR,
                f"frame payload CRC32 is {stored:08x}, computed {computed:08x}",
                offset,
                frame,
                ts,
                stored=f"{stored:08x}",
                computed=f"{computed:08x}",
                payload_length=h.payload_length,
            )
        payload = raw[size : size + h.payload_length]
        if h.uncompressed_length:
            try:
                payload = lz4_block(payload, h.uncompressed_length, framing.MAX_PAYLOAD)
            except DecompressionError as exc:
                self._finding(
                    side, "decompression-failed", Severity.ERROR, str(exc), offset, frame, ts, algorithm=LZ4
                )
                self._drop_partial(side, offset, frame, ts)
                return True
        base = (
            None if h.uncompressed_length else offset + size
        )  # envelope offsets exist only if not compressed
        if h.self_contained:
            self._split(side, payload, base, offset, frame, ts)
        else:
            self._assemble(side, payload, offset, frame, ts)
        return True

    def _bad_frame_header(self, side: _Side, h: framing.FrameHeader) -> bool:
        buf = side.buf
        other = framing.parse_header(buf.peek(framing.LZ4_HEADER), not h.lz4)
        if len(buf) >= other.size and other.crc_ok:
            self._finding_here(
                side,
                "frame-kind-mismatch",
                Severity.WARNING,
                f"{'LZ4' if other.lz4 else 'uncompressed'} frame where "
                f"{'LZ4' if h.lz4 else 'uncompressed'} frames were negotiated",
            )
            side.mode = LZ4 if other.lz4 else CRC
            return True
        if len(buf) >= env.HEADER:
            head = env.parse(buf.peek(env.HEADER))
            if head.version in env.FRAMED_VERSIONS and env.plausible(head, side.response, self._max):
                self._finding_here(
                    side,
                    "unframed-envelope",
                    Severity.WARNING,
                    "unframed v5 envelope where v5 frames were expected (pre-final v5-beta peer?)",
                )
                side.mode = ENVELOPE
                return True
        self._finding_here(
            side,
            "crc24-mismatch",
            Severity.ERROR,
            f"frame header CRC24 is {h.stored_crc24:06x}, computed {h.computed_crc24:06x}: "
            "length not trusted",
            stored=f"{h.stored_crc24:06x}",
            computed=f"{h.computed_crc24:06x}",
            header=buf.peek(h.size).hex(),
        )
        self._start_search(side, buf.offset)
        side.skipped = 1
        buf.skip(1)
        return True

    def _split(
        self, side: _Side, payload: bytes, base: int | None, offset: int, frame: int | None, ts: int | None
    ) -> None:
        """The complete envelopes of a self-contained frame."""
        pos = 0
        while pos < len(payload):
            at = offset if base is None else base + pos
            if len(payload) - pos < env.HEADER:
                self._overrun(
                    side, at, frame, ts, f"{len(payload) - pos} bytes left in frame, less than a header"
                )
                return
            head = env.parse(payload, pos)
            if head.total > len(payload) - pos:
                self._overrun(
                    side,
                    at,
                    frame,
                    ts,
                    f"envelope of {head.total} bytes, {len(payload) - pos} left in the frame",
                )
                return
            fields = {"framing": side.mode}
            self._message(side, head, payload[pos + env.HEADER : pos + head.total], at, frame, ts, fields)
            pos += head.total

    def _overrun(self, side: _Side, offset: int, frame: int | None, ts: int | None, detail: str) -> None:
        self._finding(
            side,
            "envelope-overrun",
            Severity.ERROR,
            f"envelope runs past its frame: {detail}",
            offset,
            frame,
            ts,
        )

    def _assemble(self, side: _Side, payload: bytes, offset: int, frame: int | None, ts: int | None) -> None:
        """Append a non-self-contained frame's payload and emit the envelopes it completes."""
        part = side.partial
        if part is None:
            part = side.partial = _Partial(bytearray(), offset, frame, ts, 0)
        part.data += payload
        part.frames += 1
        while len(part.data) >= env.HEADER:
            head = env.parse(part.data)
            if head.total > self._max:
                self._finding(
                    side,
                    "envelope-too-large",
                    Severity.ERROR,
                    f"envelope body length {head.length} exceeds the limit of {self._max}",
                    part.offset,
                    part.frame,
                    part.ts,
                )
                side.partial = None
                return
            if len(part.data) < head.total:
                return
            fields = {"framing": side.mode, "frames": part.frames}
            self._message(
                side,
                head,
                bytes(part.data[env.HEADER : head.total]),
                part.offset,
                part.frame,
                part.ts,
                fields,
            )
            del part.data[: head.total]
            if not part.data:
                side.partial = None
                return
            part.offset, part.frame, part.ts, part.frames = offset, frame, ts, 1

    def _drop_partial(self, side: _Side, offset: int, frame: int | None, ts: int | None) -> None:
        if side.partial is not None:
            self._finding(
                side,
                "truncated",
                Severity.WARNING,
                f"{len(side.partial.data)} bytes of a multi-frame envelope dropped with an undecodable frame",
                offset,
                frame,
                ts,
                bytes=len(side.partial.data),
            )
            side.partial = None

    # ---- messages --------------------------------------------------------------------------------

    def _body_context(self, head: env.EnvelopeHeader, pending: _Pending | None = None) -> BodyContext:
        """The connection's one BodyContext, set up for this envelope."""
        ctx = self._body_ctx
        ctx.version = head.version
        ctx.request_query = ctx.result_types = None
        if pending is not None:
            ctx.request_query = pending.query if pending.opcode == "prepare" else None
            prep = self._prepared.get(pending.prepared_id) if pending.prepared_id is not None else None
            ctx.result_types = prep.result_types if prep is not None else None
        return ctx

    def _message(
        self,
        side: _Side,
        head: env.EnvelopeHeader,
        body: bytes | None,
        offset: int,
        frame: int | None,
        ts: int | None,
        fields: dict[str, Any],
    ) -> None:
        """Validate, decode, pair and record one envelope (body None: it could not be decompressed)."""
        fields.update(opcode=head.opcode_name, stream_id=head.stream, flags=head.flags)
        if head.flags:
            fields["flag_names"] = head.flag_names
        self._check_header(side, head, offset, frame, ts)
        pending = self._pair(side, head, offset, frame, ts, fields)
        decoded = Body({})
        if body is not None:
            decoded = decode(head, body, self._body_context(head, pending))
            fields.update(decoded.fields)
        if decoded.error is not None:
            self._finding(
                side,
                "malformed-body",
                Severity.ERROR,
                f"{head.opcode_name.upper()} body is malformed: {decoded.error}",
                offset,
                frame,
                ts,
                stream_id=head.stream,
            )
        elif decoded.trailing:
            self._finding(
                side,
                "trailing-bytes",
                Severity.WARNING,
                f"{decoded.trailing} bytes after the end of the {head.opcode_name.upper()} body",
                offset,
                frame,
                ts,
                bytes=decoded.trailing,
            )
        if not side.response and head.stream not in self._inflight and head.opcode in env.REQUESTS:
            self._inflight[head.stream] = _Pending(
                head.opcode_name,
                offset,
                frame,
                ts,
                decoded.fields.get("query"),
                bytes.fromhex(decoded.fields["prepared_id"])
                if head.opcode == 0x0A and "prepared_id" in decoded.fields
                else None,
            )
        if decoded.prepared is not None and len(self._prepared) < MAX_PREPARED:
            pid, prep = decoded.prepared
            self._prepared[pid] = prep
        kind = head.opcode_name
        self._out.append(
            Message(PROTOCOL, kind, side.direction, offset, head.total, frame, ts, head.version_name, fields)
        )
        self._handshake(side, head, decoded)

    def _check_header(
        self, side: _Side, head: env.EnvelopeHeader, offset: int, frame: int | None, ts: int | None
    ) -> None:
        if head.version not in env.VERSIONS:
            self._finding(
                side,
                "unknown-version",
                Severity.ERROR,
                f"unknown protocol version 0x{head.version:02x}",
                offset,
                frame,
                ts,
            )
        elif head.opcode not in env.OPCODES:
            self._finding(
                side,
                "unknown-opcode",
                Severity.ERROR,
                f"unknown opcode 0x{head.opcode:02x}",
                offset,
                frame,
                ts,
            )
        if head.version == 5 and head.flags & env.FLAG_BETA:
            self._finding(
                side,
                "v5-beta",
                Severity.INFO,
                "v5 envelope with USE_BETA: a pre-final v5-beta peer",
                offset,
                frame,
                ts,
            )
        if self._version is not None and head.version != self._version and head.opcode != 0x00:
            # (servers answer version errors in their own version: that is negotiation, not a change)
            self._finding(
                side,
                "version-changed",
                Severity.WARNING,
                f"envelope version {head.version_name} on a connection at "
                f"{env.VERSIONS.get(self._version, self._version)}",
                offset,
                frame,
                ts,
                expected=self._version,
                seen=head.version,
            )
            self._version = head.version  # report each change once

    def _pair(
        self,
        side: _Side,
        head: env.EnvelopeHeader,
        offset: int,
        frame: int | None,
        ts: int | None,
        fields: dict[str, Any],
    ) -> _Pending | None:
        """Pair a response with its request by stream id; flag reused ids and orphan responses."""
        if not side.response:
            if head.stream in self._inflight:
                first = self._inflight[head.stream]
                self._finding(
                    side,
                    "stream-id-reused",
                    Severity.WARNING,
                    f"stream id {head.stream} reused while its {first.opcode.upper()} is still unanswered",
                    offset,
                    frame,
                    ts,
                    stream_id=head.stream,
                    first_frame=first.frame,
                )
                del self._inflight[head.stream]
            return None
        if head.opcode == 0x0C:  # EVENT: server-initiated, stream -1
            return None
        pending = self._inflight.pop(head.stream, None)
        if pending is None:
            self._finding(
                side,
                "response-without-request",
                Severity.WARNING,
                f"{head.opcode_name.upper()} on stream {head.stream} answers no request seen in the capture",
                offset,
                frame,
                ts,
                stream_id=head.stream,
            )
            return None
        fields["request_opcode"] = pending.opcode
        fields["request_frame"] = pending.frame
        if ts is not None and pending.ts is not None:
            fields["latency_ns"] = ts - pending.ts
        return pending

    def _handshake(self, side: _Side, head: env.EnvelopeHeader, decoded: Body) -> None:
        """STARTUP fixes the version and compression; at v5+ it switches both sides to frames."""
        if not side.response and head.opcode == 0x01:
            options = decoded.fields.get("options", {})
            compression = next((v for k, v in options.items() if k.upper() == "COMPRESSION"), None)
            self._compression = compression.lower() if compression else None
            if self._version is None:
                self._version = head.version
            if head.version in env.FRAMED_VERSIONS and side.mode == ENVELOPE:
                kind = LZ4 if self._compression == LZ4 else CRC
                side.mode = kind
                self._framing_after_startup = kind
                self._startup_stream = head.stream
        elif (
            side.response
            and side.mode == ENVELOPE
            and self._framing_after_startup is not None
            and head.stream == self._startup_stream
        ):
            if head.version in env.FRAMED_VERSIONS:
                side.mode = self._framing_after_startup
            else:  # a server without v5 refused the STARTUP (driver downgrade): nobody frames
                client = self._sides[Direction.C2S]
                if client.mode in (CRC, LZ4):
                    client.mode = ENVELOPE
            self._framing_after_startup = None


_VERSION_BYTES = {
    response: re.compile(b"[" + re.escape(bytes(v | (0x80 if response else 0) for v in env.VERSIONS)) + b"]")
    for response in (False, True)
}


def _next_version_byte(view: memoryview, start: int, response: bool) -> int:
    """The next offset >= start holding a version byte for this direction, or -1."""
    m = _VERSION_BYTES[response].search(view, start)
    return -1 if m is None else m.start()
