"""Hercules Gate traffic: HTTP requests carrying event batches, paired with the Gate's answers.

A request is held until its response arrives (HTTP/1.1 answers in order, also when pipelined), so
the `request` record carries the status and its events carry `acked` (True for 2xx, False for a
rejection, None when the capture has no answer). A 4xx/5xx answer to a batch is a finding naming the
events it rejected. `Content-Encoding: lz4` bodies are raw LZ4 blocks whose size comes from
`Original-Content-Length`, checked against the Gate's range and our inflate cap before inflating.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import lz4.block

from wirelog.decoders.base import StreamContext
from wirelog.decoders.buffer import StreamBuffer
from wirelog.decoders.hercules.codec import Batch, EventParser, decode_batch
from wirelog.decoders.hercules.http import HttpMessage, HttpProblem, HttpReader
from wirelog.decoders.hercules.records import PROTOCOL, Reporter, event_message
from wirelog.model import REDACTED, Direction, Finding, Gap, Message, Record, Severity

SEND_PATHS = frozenset({"/stream/send", "/stream/sendAsync"})
# Stream/Timeline API reads: the answer is State, then Count:i32 + events. State = Count:i32 and
# per shard (Partition:i32, Offset:i64), or per timeline slice (Slice:i32, Offset:i64, EventId:24).
READ_STATES = {"/stream/read": (">iq", ("partition", "offset")), "/timeline/read": (">iq24s", ("slice", "offset", "event_id"))}  # fmt: skip
MAX_STATE = 1000  # state entries kept in the record
MAX_ORIGINAL_LENGTH = 100 * 1024 * 1024  # SendRequestProcessor's accepted range for the header
MAX_NAMED = 100  # rejected events named by UUID in one finding
MAX_TEXT = 512  # response body text kept


@dataclass(slots=True)
class _Pending:
    request: Message
    events: list[Message] = field(default_factory=list)


def _api_key(msg: HttpMessage) -> tuple[str | None, str | None]:
    """(key, header it came in), as AuthUtil reads it: Authorization first, then apiKey."""
    auth = msg.header("Authorization")
    if auth:
        scheme, _, rest = auth.partition(" ")
        kind, _, key = rest.strip().partition(" ")
        if scheme == "Hercules" and kind in ("apiKey", "masterApiKey") and key:
            return key.strip(), "Authorization"
    for name in ("apiKey", "masterApiKey"):
        key = msg.header(name)
        if key is not None:
            return key, name
    return None, None


class Gateway:
    """Both directions of one Gate connection."""

    def __init__(self, ctx: StreamContext, parser: EventParser, reporter: Reporter) -> None:
        self.ctx = ctx
        self.parser = parser
        self.reporter = reporter
        self.requests = HttpReader(False, ctx.limits.max_frame)
        self.responses = HttpReader(True, ctx.limits.max_frame)
        self.pending: deque[_Pending] = deque()
        self.held_events = 0

    def feed(self, direction: Direction, buf: StreamBuffer) -> list[Record]:
        reader = self.requests if direction is Direction.C2S else self.responses
        msgs, probs = reader.feed(buf)
        out: list[Record] = [self._framing(direction, p) for p in probs]
        for msg in msgs:
            if direction is Direction.C2S:
                out += self._request(msg, buf)
            else:
                out += self._response(msg, buf)
        reader.commit(buf)
        return out

    def gap(self, direction: Direction, buf: StreamBuffer, gap: Gap) -> list[Record]:
        """Missing bytes: a request they cut short still takes its place in the response order."""
        reader = self.requests if direction is Direction.C2S else self.responses
        cut = reader.lost(buf, gap.offset + gap.length)
        if cut is None or direction is Direction.S2C:
            return []
        start, frame, ts = cut
        fields = {"method": None, "path": None, "incomplete": True}
        req = Message(PROTOCOL, "request", direction, start, gap.offset - start, frame, ts, None, fields)
        self.pending.append(_Pending(req))
        return [
            Finding(
                "hercules.request-lost",
                Severity.ERROR,
                f"{gap.length} bytes missing inside the request at offset {start}: its events are lost",
                PROTOCOL,
                direction,
                start,
                gap.frame,
                gap.ts,
                {"missing": gap.length},
            )
        ]

    def close(self, bufs: dict[Direction, StreamBuffer]) -> list[Record]:
        out: list[Record] = []
        last = self.responses.close(bufs[Direction.S2C])
        if last is not None:
            out += self._response(last, bufs[Direction.S2C])
        self.responses.commit(bufs[Direction.S2C])
        while self.pending:
            p = self.pending.popleft()
            req = p.request
            text = (
                f"no Gate response in the capture for {req.fields['method']} {req.fields['path']}; "
                f"delivery of its {len(p.events)} event(s) is unknown"
            )
            out += self._unanswered(p, "hercules.no-response", text)
        return out

    def _framing(self, direction: Direction, p: HttpProblem) -> Finding:
        code = "hercules.http-malformed" if p.fatal else "hercules.body-too-large"
        message = p.message + ("; looking for the next message" if p.fatal else "")
        return Finding(
            code, Severity.ERROR, message, PROTOCOL, direction, p.offset, p.frame, p.ts, dict(p.fields)
        )

    def _request(self, msg: HttpMessage, buf: StreamBuffer) -> list[Record]:
        method, target, version = msg.start
        url = urlsplit(target)
        query = parse_qs(url.query)
        fields: dict[str, Any] = {"method": method, "path": url.path, "http_version": version}
        if "stream" in query:
            fields["stream_name"] = query["stream"][0]
        if "timeline" in query:
            fields["timeline"] = query["timeline"][0]
        key, header = _api_key(msg)
        if key is not None:
            fields["api_key"] = key if self.ctx.show_secrets else REDACTED
            fields["api_key_header"] = header
        for name in ("Content-Type", "Content-Encoding", "Original-Content-Length"):
            value = msg.header(name)
            if value is not None:
                fields[name.lower().replace("-", "_")] = value
        fields["content_length"] = msg.declared
        fields["chunked"] = msg.chunked
        req = Message(
            PROTOCOL, "request", Direction.C2S, msg.offset, msg.length, msg.frame, msg.ts, version, fields
        )
        entry = _Pending(req)
        out: list[Record] = []
        if method == "POST" and url.path in SEND_PATHS:
            out += self._batch(msg, buf, entry)
        self.pending.append(entry)
        self.held_events += len(entry.events)
        out += self._release_overflow()
        return out

    @staticmethod
    def _finding(
        msg: HttpMessage, d: Direction, code: str, severity: Severity, text: str, **extra: Any
    ) -> Finding:
        return Finding(code, severity, text, PROTOCOL, d, msg.offset, msg.frame, msg.ts, extra)

    def _body(self, msg: HttpMessage, d: Direction) -> tuple[bytes | None, list[Finding]]:
        """The body after Content-Encoding, or None (with findings saying why)."""
        if msg.body is None:
            return None, []
        notes: list[Finding] = []
        encoding = (msg.header("Content-Encoding") or "identity").strip().lower()
        if encoding == "identity":
            return msg.body, notes
        if encoding != "lz4":
            notes.append(
                self._finding(
                    msg,
                    d,
                    "hercules.content-encoding",
                    Severity.ERROR,
                    f"Content-Encoding {encoding!r} is not lz4: the Gate answers 415; body not decoded",
                    content_encoding=encoding,
                )
            )
            return None, notes
        ocl = (msg.header("Original-Content-Length") or "").strip()
        cap = min(MAX_ORIGINAL_LENGTH, self.ctx.limits.max_inflated)
        if not (ocl.isascii() and ocl.isdigit()) or int(ocl) > cap:
            notes.append(
                self._finding(
                    msg,
                    d,
                    "hercules.original-length",
                    Severity.ERROR,
                    f"lz4 body with Original-Content-Length {ocl[:40]!r}, not an integer in [0, {cap}]: "
                    "the Gate answers 400; body not decoded",
                    original_content_length=ocl[:40],
                )
            )
            return None, notes
        size = int(ocl)
        try:
            body = lz4.block.decompress(msg.body, uncompressed_size=size) if size else b""
        except lz4.block.LZ4BlockError as exc:
            notes.append(
                self._finding(
                    msg,
                    d,
                    "hercules.lz4-error",
                    Severity.ERROR,
                    f"lz4 body does not inflate to {size} bytes ({exc}): the Gate answers 400",
                )
            )
            return None, notes
        if len(body) != size:
            notes.append(
                self._finding(
                    msg,
                    d,
                    "hercules.original-length",
                    Severity.WARNING,
                    f"lz4 body inflates to {len(body)} bytes, Original-Content-Length says {size}",
                    original_content_length=size,
                    inflated=len(body),
                )
            )
        return body, notes

    def _batch(self, msg: HttpMessage, buf: StreamBuffer, entry: _Pending) -> list[Record]:
        """A request to a send path: its events are held in `entry` until the answer."""
        fields = entry.request.fields
        out: list[Record] = []
        if msg.header("Content-Length") is None:
            how = "a chunked body" if msg.chunked else "no body"
            text = f"request without Content-Length ({how}): the Gate answers 411"
            out.append(
                self._finding(msg, Direction.C2S, "hercules.no-content-length", Severity.WARNING, text)
            )
        body, notes = self._body(msg, Direction.C2S)
        out += notes
        if body is None:
            return out
        fields["body_length"] = len(body)
        extra = {"request_offset": msg.offset}
        if "stream_name" in fields:
            extra["stream_name"] = fields["stream_name"]
        events, notes, batch = self._events(msg, Direction.C2S, buf, body, 0, extra)
        fields["count"] = batch.count
        fields["events"] = len(events)
        entry.events += events
        return out + notes

    def _events(
        self,
        msg: HttpMessage,
        d: Direction,
        buf: StreamBuffer,
        body: bytes,
        start: int,
        extra: dict[str, Any],
    ) -> tuple[list[Message], list[Finding], Batch]:
        """The `Count:i32` + events part of a body, from `start` on."""
        batch = decode_batch(body[start:], self.parser)
        # Positions in the stream exist only for a plain Content-Length body; otherwise events and
        # findings sit at the message, with their place inside the decoded body in `body_offset`.
        base = None if msg.body_offset is None or msg.header("Content-Encoding") else msg.body_offset + start
        events = []
        for i, dec in enumerate(batch.events):
            offset = msg.offset if base is None else base + dec.offset
            origin = (msg.frame, msg.ts) if base is None else buf.origin(offset)
            info = {**extra, "batch_index": i, "body_offset": start + dec.offset}
            events.append(event_message(dec, d, offset, origin, info))
        findings = []
        for p in batch.problems:
            if base is None:
                f = self.reporter.finding(
                    p, d, msg.offset, (msg.frame, msg.ts), {"body_offset": start + p.offset}
                )
            else:
                f = self.reporter.finding(p, d, base + p.offset, buf.origin(base + p.offset))
            if f is not None:
                findings.append(f)
        return events, findings, batch

    def _release_overflow(self) -> list[Record]:
        out: list[Record] = []
        while self.held_events > self.ctx.limits.max_pending_events and len(self.pending) > 1:
            p = self.pending.popleft()
            self.held_events -= len(p.events)
            text = (
                f"more than {self.ctx.limits.max_pending_events} events wait for Gate answers: the request "
                f"at offset {p.request.offset} is emitted before its answer (acked unknown)"
            )
            out += self._unanswered(p, "hercules.pending-overflow", text)
        return out

    @staticmethod
    def _unanswered(p: _Pending, code: str, text: str) -> list[Record]:
        """A request and its events emitted without an answer (acked stays None), and why."""
        req = p.request
        note = Finding(
            code,
            Severity.INFO,
            text,
            PROTOCOL,
            Direction.C2S,
            req.offset,
            req.frame,
            req.ts,
            {"events": len(p.events)},
        )
        return [req, *p.events, note]

    def _response(self, msg: HttpMessage, buf: StreamBuffer) -> list[Record]:
        version, status_text, reason = msg.start
        status = int(status_text)
        binary = (msg.header("Content-Type") or "").startswith("application/octet-stream")
        text = "" if binary else (msg.body or b"")[:MAX_TEXT].decode("utf-8", "replace")
        fields: dict[str, Any] = {
            "status": status,
            "reason": reason,
            "body": text,
            "content_length": msg.declared,
        }
        resp = Message(
            PROTOCOL, "response", Direction.S2C, msg.offset, msg.length, msg.frame, msg.ts, version, fields
        )
        if status < 200:
            return [resp]
        if not self.pending:
            fields["unpaired"] = True
            return [resp]
        p = self.pending.popleft()
        self.held_events -= len(p.events)
        req = p.request
        req.fields.update(status=status, reason=reason, response_offset=msg.offset, response_frame=msg.frame)
        fields["request_offset"] = req.offset
        acked = status < 300
        for ev in p.events:
            ev.acked = acked
        out: list[Record] = [req, *p.events, resp]
        if status >= 400 and req.fields["path"] in SEND_PATHS:
            out.append(self._rejected(req, p.events, msg, status, reason, text))
        if status == 200 and req.fields["path"] in READ_STATES:
            out += self._read(msg, buf, req, fields)
        return out

    def _read(
        self, msg: HttpMessage, buf: StreamBuffer, req: Message, fields: dict[str, Any]
    ) -> list[Record]:
        """Events a Stream/Timeline API read returned, after the read state."""
        body, out = self._body(msg, Direction.S2C)
        if body is None:
            return list(out)
        layout, names = READ_STATES[req.fields["path"]]
        entry = struct.Struct(layout)
        count = struct.unpack_from(">i", body)[0] if len(body) >= 4 else -1
        start = 4 + count * entry.size
        if count < 0 or start + 4 > len(body):
            text = (
                f"read answer of {len(body)} bytes does not hold its state ({count} entries) and event count"
            )
            return [
                *out,
                self._finding(msg, Direction.S2C, "hercules.read-state", Severity.ERROR, text, entries=count),
            ]
        state = [
            dict(zip(names, entry.unpack_from(body, 4 + i * entry.size), strict=True))
            for i in range(min(count, MAX_STATE))
        ]
        for item in state:
            if "event_id" in item:
                item["event_id"] = item["event_id"].hex()
        fields["state"] = state
        extra: dict[str, Any] = {"request_offset": req.offset}
        for name in ("stream_name", "timeline"):
            if name in req.fields:
                extra[name] = req.fields[name]
        events, notes, batch = self._events(msg, Direction.S2C, buf, body, start, extra)
        fields["count"] = batch.count
        fields["events"] = len(events)
        return [*events, *out, *notes]

    def _rejected(
        self, req: Message, events: list[Message], msg: HttpMessage, status: int, reason: str, text: str
    ) -> Finding:
        uuids = [ev.fields["uuid"] for ev in events]
        count = req.fields.get("count")
        answer = f"{status} {reason}".strip() + (f" ({text.strip()})" if text.strip() else "")
        message = (
            f"Gate answered {answer} to {req.fields['path']}"
            f"{' for stream ' + req.fields['stream_name'] if 'stream_name' in req.fields else ''}: "
            f"{len(events)} decoded event(s) of a batch of {count} rejected"
        )
        if status == 400 and count is not None and len(events) < count:
            message += "; events before the failure may already be in Kafka"
        return Finding(
            "hercules.request-rejected",
            Severity.ERROR,
            message,
            PROTOCOL,
            Direction.S2C,
            msg.offset,
            msg.frame,
            msg.ts,
            {
                "status": status,
                "request_offset": req.offset,
                "request_frame": req.frame,
                "events": len(events),
                "uuids": uuids[:MAX_NAMED],
            },
        )
