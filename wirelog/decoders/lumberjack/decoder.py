"""The Lumberjack v1/v2 stream decoder: frames in both directions, C recursion, resynchronisation.

Client→server carries W/J/D/C frames, server→client only 6-byte A frames. Frames have no length
prefix, so after a capture gap or a corrupt frame the decoder scans for the next plausible
`[12][WJDC]` header and reports how many bytes it skipped. Window/ACK bookkeeping lives in
`delivery.py`, sequence checks in `sequence.py`; this module only frames and dispatches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from wirelog.decoders.base import StreamContext
from wirelog.decoders.buffer import StreamBuffer
from wirelog.decoders.lumberjack.delivery import Delivery
from wirelog.decoders.lumberjack.framing import (
    TYPES_BY_VERSION,
    VERSIONS,
    Frame,
    FrameError,
    Incomplete,
    decode_pairs,
    parse,
    plausible,
    whole_j2,
)
from wirelog.decoders.lumberjack.inflate import inflate
from wirelog.decoders.lumberjack.report import PROTOCOL, Pos, finding
from wirelog.decoders.lumberjack.sequence import SequenceChecker
from wirelog.model import Chunk, Direction, Finding, Gap, Message, Record, Severity

C2S, S2C = Direction.C2S, Direction.S2C
CANDIDATES = {C2S: re.compile(rb"[12][WJDC]"), S2C: re.compile(rb"[12]A")}
PROBLEM_TEXT = {
    "zlib-error": "invalid zlib data in C frame",
    "inflate-limit": "C frame inflation stopped at the size cap (decompression bomb?)",
    "compressed-truncated": "zlib stream in C frame ends early (Logstash: 'Insufficient bytes in "
    "compressed content to decode')",
}


@dataclass(slots=True)
class _Sync:
    """Whether one direction is at a frame boundary, and what was skipped while it was not."""

    synced: bool = True
    start: Pos | None = None
    skipped: int = 0
    reason: str = ""
    held: Finding | None = None  # error at the very first bytes, reported only if no frame follows
    seen: bool = False  # a frame was parsed in this direction

    def lose(self, start: Pos, skipped: int, reason: str) -> None:
        self.synced, self.start, self.skipped, self.reason = False, start, skipped, reason
        self.held = None


class LumberjackDecoder:
    """One connection: see the module docstring."""

    def __init__(self, ctx: StreamContext) -> None:
        self._limits = ctx.limits
        self._bufs = {C2S: StreamBuffer(), S2C: StreamBuffer()}
        self._sync = {C2S: _Sync(), S2C: _Sync()}
        self._resume: tuple[int, int] | None = None  # D-frame walk state at the C2S read position
        self._version: str | None = None
        self._types: frozenset[str] = frozenset()  # frame types of the connection's version
        self._once: set[str] = set()
        self._delivery = Delivery(ctx)
        self._seq = SequenceChecker()
        self._acks = 0
        self._keepalives = 0

    # decoder interface -------------------------------------------------------------------------

    def feed(self, chunk: Chunk) -> list[Record]:
        self._bufs[chunk.direction].append(chunk)
        return self._drain(chunk.direction)

    def gap(self, gap: Gap) -> list[Record]:
        d = gap.direction
        buf = self._bufs[d]
        lost = len(buf)
        end = gap.offset + gap.length
        buf.reset(end)
        out = self._flush_skipped(d, found=False)
        reason = f"after a {gap.length}-byte capture gap"
        if lost:
            reason += f" ({lost} bytes of an incomplete frame before it were dropped)"
        self._sync[d].lose(Pos(d, end, gap.frame, gap.ts), 0, reason)
        if d is C2S:
            self._resume = None
            self._seq.forget()
        self._delivery.gap(d is C2S)
        return out

    def close(self) -> list[Record]:
        out: list[Record] = []
        for d in (C2S, S2C):
            buf, sync = self._bufs[d], self._sync[d]
            if not sync.synced:
                sync.skipped += len(buf)
                out += self._flush_skipped(d, found=False, until="until the end of the stream")
            elif len(buf):
                out.append(self._truncated(d, buf))
            buf.skip(len(buf))
        out += self._delivery.close()
        out.append(self._summary())
        return out

    def _summary(self) -> Message:
        """One `connection` record: what the connection carried and what the decoder learned."""
        delivery = self._delivery
        stats = delivery.stats
        unacked = stats["events"] - stats["acked_events"]
        fields: dict[str, object] = {
            **stats,
            "unacked_events": 0 if delivery.acks_lost else unacked,
            "unknown_events": unacked if delivery.acks_lost else 0,
            "acks": self._acks,
            "keepalives": self._keepalives,
            "seq_profile": self._seq.profile,
            "server_kind": delivery.server_kind,
            "acks_lost": delivery.acks_lost,
        }
        return Message(PROTOCOL, "connection", None, None, 0, None, None, self._version, fields)

    # framing -----------------------------------------------------------------------------------

    def _drain(self, d: Direction) -> list[Record]:
        out: list[Record] = []
        buf, sync = self._bufs[d], self._sync[d]
        max_frame = self._limits.max_frame
        while len(buf):
            if not sync.synced and not self._resync(d, out):
                break
            if d is S2C and buf.peek(1) in (b"1", b"2") and buf.peek(1, 1) in (b"W", b"J", b"D", b"C"):
                out.append(self._wrong_direction(buf.peek(2).decode(), self._pos(d)))
                self._desync(d, "after a client frame sent by the server")
                continue
            view = buf.view()
            res = parse(view, 0, len(view), max_frame, self._resume if d is C2S else None)
            view.release()
            if isinstance(res, Incomplete):
                if d is C2S:
                    self._resume = res.resume
                break
            pos = self._pos(d)
            if isinstance(res, FrameError):
                error = finding(res.code, Severity.ERROR, res.detail, pos, **res.fields)
                if sync.seen:
                    out.append(error)
                    self._desync(d, f"after {res.code}")
                else:  # a capture started mid-frame, or not Lumberjack at all: wait and see
                    self._desync(d, "before the first frame (capture started mid-stream?)")
                    sync.held = error
                continue
            sync.seen = True
            self._resume = None
            data = buf.consume(res.end)
            if d is S2C:
                out += self._ack(res, pos)
            else:
                self._client_frame(res, data, pos, 0, None, self._limits.max_inflated, out)
        return out

    def _pos(self, d: Direction) -> Pos:
        buf = self._bufs[d]
        return Pos(d, buf.offset, *buf.origin())

    def _desync(self, d: Direction, reason: str) -> None:
        """Drop the bad header's first byte and scan for the next plausible frame."""
        self._sync[d].lose(self._pos(d), 1, reason)
        self._resume = None
        self._bufs[d].skip(1)

    def _resync(self, d: Direction, out: list[Record]) -> bool:
        """Skip to the next plausible header; False when more bytes are needed to find one."""
        buf, sync = self._bufs[d], self._sync[d]
        view = buf.view()
        end, p, skip, found = len(view), 0, None, False
        while skip is None:
            m = CANDIDATES[d].search(view, p)
            if m is None:
                skip = end - 1 if view[end - 1] in VERSIONS else end
                break
            ok = plausible(view, m.start(), end, self._limits.max_frame)
            if ok is None or ok:
                skip, found = m.start(), bool(ok)
            p = m.start() + 1
        view.release()
        buf.skip(skip)
        sync.skipped += skip
        if found:
            out += self._flush_skipped(d, found=True)
        return found

    def _flush_skipped(
        self, d: Direction, found: bool, until: str = "until the next plausible frame header"
    ) -> list[Record]:
        """Report the bytes skipped while out of sync. A held first-bytes error is reported only
        when no frame was found after it (then the stream is not Lumberjack from its start)."""
        sync = self._sync[d]
        skipped, sync.skipped = sync.skipped, 0
        held, sync.held = sync.held, None
        sync.synced = True
        if not skipped or sync.start is None:
            return []
        return [
            *([held] if held is not None and not found else []),
            finding(
                "resync",
                Severity.WARNING,
                f"{skipped} bytes skipped {sync.reason} {until}",
                sync.start,
                skipped=skipped,
            ),
        ]

    def _truncated(self, d: Direction, buf: StreamBuffer) -> Record:
        view = buf.view()
        res = parse(view, 0, len(view), self._limits.max_frame, self._resume if d is C2S else None)
        view.release()
        need = res.need if isinstance(res, Incomplete) else len(buf)
        head = buf.peek(2)
        kind = head.decode("latin-1")
        return finding(
            "truncated",
            Severity.WARNING,
            f"stream ends inside a {kind!r} frame: {len(buf)} of at least {need} bytes",
            self._pos(d),
            have=len(buf),
            need=need,
        )

    # client frames -----------------------------------------------------------------------------

    def _client_frame(
        self, f: Frame, data: bytes, pos: Pos, depth: int, c_frame: Message | None, budget: int, out: list
    ) -> None:
        """Dispatch one client frame; records go to `out` (one list per feed: this runs per event)."""
        ftype = f.type
        if f.version != self._version or ftype not in self._types:
            self._check_version(f, pos, out)
        if ftype == "J" or ftype == "D":
            self._event(f.version, ftype, f.start, f.body, f.end, f.value, f.count, data, pos, c_frame, out)
            return
        inner = f.start if c_frame is not None else None
        if ftype == "W":
            record = self._message("window", pos, f.end - f.start, f.version, {"inflated_offset": inner})
            self._seq.start_window()
            out += self._delivery.open_window(f.value, record, pos, c_frame is not None)
        elif ftype == "C":
            self._compressed(f, data, pos, depth, budget, out)
        else:
            out.append(self._wrong_direction(f"{f.version}A", pos))

    def _check_version(self, f: Frame, pos: Pos, out: list[Record]) -> None:
        if self._version is None:
            self._version = f.version
            self._types = TYPES_BY_VERSION[f.version]
        if f.version != self._version and "version-changed" not in self._once:
            self._once.add("version-changed")
            out.append(
                finding(
                    "version-changed",
                    Severity.ERROR,
                    f"{f.version}{f.type} frame on a v{self._version} connection (go-lumber: 'Event "
                    "protocol version error')",
                    pos,
                    connection_version=self._version,
                    frame_version=f.version,
                )
            )
        if f.type not in TYPES_BY_VERSION[f.version] and "frame-version-mismatch" not in self._once:
            self._once.add("frame-version-mismatch")
            out.append(
                finding(
                    "frame-version-mismatch",
                    Severity.WARNING,
                    f"{f.type} frame with version byte '{f.version}' ({f.type} belongs to "
                    f"v{'2' if f.type == 'J' else '1'})",
                    pos,
                    frame_type=f.type,
                    frame_version=f.version,
                )
            )

    def _event(
        self,
        version: str,
        ftype: str,
        start: int,
        body: int,
        stop: int,
        seq: int,
        count: int,
        data: bytes,
        pos: Pos,
        c_frame: Message | None,
        out: list,
    ) -> None:
        """One J or D frame `data[start:stop]` (the per-event path: plain values, no extra calls)."""
        payload = data[body:stop]
        compressed = c_frame is not None
        fields: dict[str, object] = {
            "seq": seq,
            "window": None,
            "ack_frame": None,
            "ack_offset": None,
            "compressed": compressed,
            "inflated_offset": start if compressed else None,
        }
        doc: object = None
        if count == 0:
            what = "Invalid json length" if ftype == "J" else "Invalid number of fields"
            out.append(
                finding(
                    "bad-length",
                    Severity.ERROR,
                    f"{ftype} frame with {what.split()[-1]} 0 (Logstash: '{what}')",
                    pos,
                    frame_type=ftype,
                    declared=0,
                )
            )
            doc = {} if ftype == "D" else None
        elif ftype == "J":
            try:
                doc = orjson.loads(payload)
            except orjson.JSONDecodeError as exc:
                fields["raw"] = payload.decode(errors="replace")
                out.append(finding("json-invalid", Severity.ERROR, f"J payload is not JSON: {exc}", pos))
            else:
                if not isinstance(doc, dict):
                    out.append(
                        finding(
                            "json-not-object",
                            Severity.WARNING,
                            f"J payload is a JSON {type(doc).__name__}, not an object (Logstash expects "
                            "a map)",
                            pos,
                        )
                    )
        else:
            doc, bad = decode_pairs(data, body, stop)
            if bad:
                text = "D frame text is not UTF-8"
                out.append(finding("kv-invalid-utf8", Severity.WARNING, text, pos, seq=seq))
        for issue in self._seq.check(seq):
            out.append(finding(issue.code, issue.severity, issue.text, pos, **issue.fields))
        record = Message(
            PROTOCOL,
            "event",
            pos.direction,
            pos.offset,
            stop - start,
            pos.frame,
            pos.ts,
            version,
            fields,
            doc,
        )
        self._delivery.add_event(record, seq, payload, pos, c_frame, out)

    def _compressed(self, f: Frame, data: bytes, pos: Pos, depth: int, budget: int, out: list) -> None:
        if depth:
            out.append(
                finding(
                    "nested-compressed",
                    Severity.WARNING,
                    f"C frame nested inside a C frame (depth {depth + 1}); servers accept it, no client "
                    "sends it",
                    pos,
                    depth=depth + 1,
                )
            )
        if depth + 1 > self._limits.max_depth:
            out.append(
                finding(
                    "compressed-too-deep",
                    Severity.ERROR,
                    f"C frames nested deeper than {self._limits.max_depth}: not inflated",
                    pos,
                    depth=depth + 1,
                )
            )
            return
        if f.value == 0:
            text = "C frame with length 0 (Logstash reads it as a signed int and rejects it)"
            out.append(finding("bad-length", Severity.ERROR, text, pos, frame_type="C", declared=0))
            return
        inf = inflate(data[f.body : f.end], budget)
        fields: dict[str, object] = {
            "window": None,
            "compressed_length": f.value,
            "inflated_length": len(inf.data),
            "zlib_header": inf.header,
            "zlib_level": inf.level,
            "depth": depth + 1,
            "frames": 0,
            "inflated_offset": f.start if depth else None,
        }
        record = self._message("compressed", pos, f.end - f.start, f.version, fields)
        out += self._delivery.begin_compressed(record, pos)
        if inf.problem:
            text = f"{PROBLEM_TEXT[inf.problem]}: {inf.detail}"
            out.append(finding(inf.problem, Severity.ERROR, text, pos))
        if inf.trailing:
            out.append(
                finding(
                    "compressed-trailing-bytes",
                    Severity.WARNING,
                    f"{inf.trailing} bytes after the end of the zlib stream inside the C frame",
                    pos,
                    trailing=inf.trailing,
                )
            )
        inner, p, end = inf.data, 0, len(inf.data)
        frames = 0
        max_frame, client_frame, inner_budget = self._limits.max_frame, self._client_frame, budget - end
        fast = self._version == "2" and "J" in self._types  # a 2J frame needs no version check
        while p < end:  # once per event: loop invariants hoisted
            j = whole_j2(inner, p, end, max_frame) if fast else None
            if j is not None:
                seq, size = j
                self._event("2", "J", p, p + 10, p + 10 + size, seq, size, inner, pos, record, out)
                frames += 1
                p += 10 + size
                continue
            res = parse(inner, p, end, max_frame)
            if isinstance(res, Frame):
                client_frame(res, inner, pos, depth + 1, record, inner_budget, out)
                frames += 1
                p = res.end
                fast = self._version == "2" and "J" in self._types
                continue
            if isinstance(res, Incomplete):
                if inf.problem:
                    break  # already reported: the zlib stream itself is cut
                code, text = (
                    "compressed-truncated",
                    f"inflated content ends inside a frame: {end - p} of at least {res.need} bytes "
                    "(Logstash: 'Insufficient bytes in compressed content to decode')",
                )
            else:
                code, text = res.code, f"{res.detail} (inside a C frame; rest of it skipped)"
            out.append(finding(code, Severity.ERROR, text, pos, inflated_offset=p))
            break
        fields["frames"] = frames

    # server frames -----------------------------------------------------------------------------

    def _ack(self, f: Frame, pos: Pos) -> list[Record]:
        out: list[Record] = []
        if self._version is None:
            self._version = f.version
        if f.version != self._version:
            if f.version == "2" and f.value == 0:
                if "keepalive-v2-on-v1" not in self._once:
                    self._once.add("keepalive-v2-on-v1")
                    out.append(
                        finding(
                            "keepalive-v2-on-v1",
                            Severity.INFO,
                            "v2 keep-alive 32 41 00000000 on a v1 connection (Logstash does this; npm "
                            "lumberjack-protocol disconnects: 'Version should be 1, is 2')",
                            pos,
                        )
                    )
            else:
                self._check_version(f, pos, out)
        record = self._message("ack", pos, 6, f.version, {"value": f.value})
        if f.value:
            self._acks += 1
        else:
            self._keepalives += 1
        return out + self._delivery.ack(f.value, record, pos)

    # helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _message(kind: str, pos: Pos, length: int, version: str, fields: dict[str, object]) -> Message:
        return Message(PROTOCOL, kind, pos.direction, pos.offset, length, pos.frame, pos.ts, version, fields)

    @staticmethod
    def _wrong_direction(header: str, pos: Pos) -> Record:
        side = "server" if pos.direction is S2C else "client"
        return finding(
            "wrong-direction",
            Severity.ERROR,
            f"{header} frame sent by the {side} (servers send only A frames, clients never do)",
            pos,
            frame_type=header[1:],
        )
