"""Sans-IO HTTP/1.1 message framing for one direction of a Hercules Gate connection.

Only what Gate traffic needs: request and status lines, headers, bodies framed by Content-Length,
chunked transfer coding, or (responses only) the end of the connection; keep-alive connections carry
several messages back to back. A message is returned once all of it is buffered, so its offset and
frame are those of its first byte. Bodies above the size cap are skipped without being buffered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from wirelog.decoders.buffer import StreamBuffer

MAX_HEAD = 64 * 1024
_REQUEST_LINE = re.compile(rb"([A-Z]{3,10}) (\S+) HTTP/(1\.[01])\r\n")
_STATUS_LINE = re.compile(rb"HTTP/(1\.[01]) ([0-9]{3})(?: ([^\r\n]*))?\r\n")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


@dataclass(slots=True)
class HttpMessage:
    """One request or response. `body` is None when it was over the cap and skipped."""

    offset: int
    length: int
    frame: int | None
    ts: int | None
    start: tuple[str, str, str]  # (method, target, version) or (version, status, reason)
    headers: list[tuple[str, str]]
    body: bytes | None
    chunked: bool = False
    body_offset: int | None = None  # stream offset of the body when it is contiguous on the wire
    declared: int | None = None  # Content-Length, or the chunk sizes' sum

    def header(self, name: str) -> str | None:
        """The first header called `name` (case-insensitive)."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


@dataclass(slots=True)
class HttpProblem:
    """Framing trouble: `fatal` means the direction lost message boundaries until resync."""

    message: str
    offset: int
    frame: int | None
    ts: int | None
    fatal: bool
    fields: dict[str, object] = field(default_factory=dict)


class HttpReader:
    """Splits one direction into HTTP messages; `response` picks status lines over request lines.

    `feed` only reads: the bytes of the messages it returns stay in the buffer (so the caller can
    still ask `buf.origin` for any offset inside them) until the caller calls `commit`.
    """

    def __init__(self, response: bool, max_body: int) -> None:
        self.response = response
        self.max_body = max_body
        self.synced = True
        self._pos = 0  # read position relative to the buffer's: bytes taken but not committed
        self._skip = 0  # body bytes still to drop (oversized body)
        self._chunk_pos = 0  # how far a chunked body has been scanned, relative to its message
        self._chunks: list[bytes] = []
        self._chunked_size = 0

    def feed(self, buf: StreamBuffer) -> tuple[list[HttpMessage], list[HttpProblem]]:
        """Every complete message in `buf`, and framing problems."""
        msgs: list[HttpMessage] = []
        probs: list[HttpProblem] = []
        while True:
            if self._skip:
                n = min(self._skip, len(buf) - self._pos)
                self._pos += n
                self._skip -= n
                if self._skip:
                    break
            if not self.synced and not self._resync(buf):
                break
            try:
                msg = self._one(buf, probs)
            except _Broken as exc:
                frame, ts = buf.origin(buf.offset + self._pos)
                probs.append(HttpProblem(exc.args[0], buf.offset + self._pos, frame, ts, True))
                self._clear_chunks()
                self.synced = False
                self._pos += 1  # resync after this message's start
                continue
            if msg is None:
                break
            msgs.append(msg)
        return msgs, probs

    def commit(self, buf: StreamBuffer) -> None:
        """Drop the bytes of the messages returned so far."""
        buf.skip(self._pos)
        self._pos = 0

    def close(self, buf: StreamBuffer) -> HttpMessage | None:
        """At the end of the stream: a response whose body runs to the close."""
        if not (self.response and self.synced and len(buf) > self._pos):
            return None
        head = self._head(buf)
        if head is None:
            return None
        start, headers, hlen = head
        if _framing(headers) is not None:
            return None
        offset = buf.offset + self._pos
        frame, ts = buf.origin(offset)
        size = min(len(buf) - self._pos - hlen, self.max_body)
        body = buf.peek(size, self._pos + hlen)
        self._pos += hlen + size
        return HttpMessage(offset, hlen + size, frame, ts, start, headers, body, False, offset + hlen, size)

    def lost(self, buf: StreamBuffer, offset: int) -> tuple[int, int | None, int | None] | None:
        """Bytes are missing: drop what is buffered and look for the next message start.

        Returns (offset, frame, ts) of the message the gap cut short, if one was in progress.
        """
        cut = None
        if (self.synced and len(buf) > self._pos) or self._skip:
            cut = (buf.offset + self._pos, *buf.origin(buf.offset + self._pos))
        buf.reset(offset)
        self._pos = 0
        self._skip = 0
        self._clear_chunks()
        self.synced = False
        return cut

    def _clear_chunks(self) -> None:
        self._chunk_pos = 0
        self._chunks.clear()
        self._chunked_size = 0

    def _resync(self, buf: StreamBuffer) -> bool:
        data = buf.peek(len(buf) - self._pos, self._pos)
        m = (_STATUS_LINE if self.response else _REQUEST_LINE).search(data)
        if m is None:
            self._pos += max(0, len(data) - 64)
            return False
        self._pos += m.start()
        self.synced = True
        return True

    def _head(self, buf: StreamBuffer) -> tuple[tuple[str, str, str], list[tuple[str, str]], int] | None:
        at = self._pos
        end = buf.find(b"\r\n\r\n", at)
        if end < 0:
            if len(buf) - at > MAX_HEAD:
                raise _Broken(f"no end of HTTP headers within {MAX_HEAD} bytes")
            return None
        raw = buf.peek(end + 4 - at, at)
        m = (_STATUS_LINE if self.response else _REQUEST_LINE).match(raw)
        if m is None:
            line = raw.split(b"\r\n", 1)[0][:80]
            raise _Broken(f"not an HTTP/1.x {'status' if self.response else 'request'} line: {line!r}")
        a, b, c = (g.decode("latin-1") if g is not None else "" for g in m.groups())
        headers = []
        block = raw[m.end() : end - at]
        for line in block.split(b"\r\n") if block else ():
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise _Broken(f"malformed header line {line[:80]!r}")
            headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        return (a, b, c), headers, end + 4 - at

    def _one(self, buf: StreamBuffer, probs: list[HttpProblem]) -> HttpMessage | None:
        head = self._head(buf)
        if head is None:
            return None
        start, headers, hlen = head
        framing = _framing(headers)
        if framing == "chunked":
            return self._chunked(buf, start, headers, hlen)
        if framing is None:
            if self.response and not _bodiless(start):
                return None  # body runs to the end of the connection: see close()
            framing = 0
        offset = buf.offset + self._pos
        frame, ts = buf.origin(offset)
        if framing > self.max_body:
            self._pos += hlen
            self._skip = framing
            probs.append(
                HttpProblem(
                    f"body of {framing} bytes is over the {self.max_body}-byte limit; skipped",
                    offset,
                    frame,
                    ts,
                    False,
                    {"content_length": framing},
                )
            )
            return HttpMessage(offset, hlen + framing, frame, ts, start, headers, None, False, None, framing)
        if len(buf) - self._pos < hlen + framing:
            return None
        body = buf.peek(framing, self._pos + hlen)
        self._pos += hlen + framing
        return HttpMessage(
            offset, hlen + framing, frame, ts, start, headers, body, False, offset + hlen, framing
        )

    def _chunked(
        self, buf: StreamBuffer, start: tuple[str, str, str], headers: list[tuple[str, str]], hlen: int
    ) -> HttpMessage | None:
        base = self._pos
        pos = base + (self._chunk_pos or hlen)
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if len(buf) - pos > 1024:
                    raise _Broken("chunk size line longer than 1024 bytes")
                self._chunk_pos = pos - base
                return None
            m = _HEX.match(buf.peek(eol - pos, pos))
            if m is None:
                raise _Broken(f"bad chunk size line {buf.peek(min(eol - pos, 40), pos)!r}")
            size = int(m.group(), 16)
            if size == 0:
                break
            if self._chunked_size + size > self.max_body:
                raise _Broken(f"chunked body over the {self.max_body}-byte limit")
            if len(buf) < eol + 2 + size + 2:
                self._chunk_pos = pos - base
                return None
            if buf.peek(2, eol + 2 + size) != b"\r\n":
                raise _Broken("chunk data not followed by CRLF")
            self._chunks.append(buf.peek(size, eol + 2))
            self._chunked_size += size
            pos = eol + 2 + size + 2
        trailer_end = buf.find(b"\r\n\r\n", eol)
        if trailer_end < 0:
            self._chunk_pos = pos - base
            return None
        total = trailer_end + 4 - base
        offset = buf.offset + base
        frame, ts = buf.origin(offset)
        self._pos = base + total
        body = b"".join(self._chunks)
        self._clear_chunks()
        return HttpMessage(offset, total, frame, ts, start, headers, body, True, None, len(body))


class _Broken(Exception):
    """Message boundaries are lost in this direction."""


def _framing(headers: list[tuple[str, str]]) -> str | int | None:
    """'chunked', a Content-Length, or None when neither header is present."""
    te = next((v for k, v in headers if k.lower() == "transfer-encoding"), None)
    if te is not None and te.lower().rsplit(",", 1)[-1].strip() == "chunked":
        return "chunked"
    cl = next((v for k, v in headers if k.lower() == "content-length"), None)
    if cl is None:
        return None
    if not (cl.isascii() and cl.isdigit()):
        raise _Broken(f"bad Content-Length {cl[:40]!r}")
    return int(cl)


def _bodiless(start: tuple[str, str, str]) -> bool:
    status = int(start[1])
    return status < 200 or status in (204, 304)
