"""Hercules Gate's `POST /stream/send` (vostok/hercules, hercules-gate), sans-IO.

A request is `POST /stream/send?stream=NAME` with headers `apiKey` (the header every Gate version
reads; the .NET client still sends it), `Content-Type: application/octet-stream` and
`Content-Length`, and a body of `Count:i32` + the events concatenated (no compression). The Gate
answers once Kafka has every event: 200 takes the whole request (its events are acknowledged);
429, 5xx (500: Kafka failed; 503: throttled) are worth retrying: the connection is dropped and the
request sent again after the backoff; 413 splits the request in two (the Gate takes smaller
bodies); any other answer is the Gate refusing the events for good (`Rejected`).

Requests are not pipelined (the Gate's clients send one at a time per connection). Batches stay
within the Gate's limits: at most `max_body` bytes (4 MiB, the .NET sink's `MaximumBatchSize`, half
the Gate's default `http.server.maxContentLength` of 8 MiB), and `--window` events.

An event from a capture is sent as its bytes on the wire (the record's `bytes_base64`); one read
from wirelog's NDJSON/Parquet is written back from its record: version, timestamp and UUID as
captured, the payload (the record's `event`, JSON) with types chosen from the JSON values
(`encode_event`).
"""

from __future__ import annotations

import struct
import uuid as uuidlib
from typing import Any
from urllib.parse import quote

from wirelog.replay.buffer import ReceiveBuffer
from wirelog.replay.events import Acked, Event, Item, ProtocolError, Rejected
from wirelog.replay.resend import Resending

MAX_BODY = 4 * 1024 * 1024  # bytes per request body (the .NET sink's MaximumBatchSize)
MAX_EVENT = 500_000  # the Gate's validation.max.event.size default
MAX_HEAD = 64 * 1024  # a response head longer than this is not a Gate's
MAX_RESPONSE_BODY = 1 << 20
RETRY = frozenset({429, 500, 502, 503, 504})  # retried after the backoff

# --- the event binary (../shared/reference/hercules.md §1) -----------------------------------

CONTAINER, FLAG, LONG, DOUBLE, STRING, NULL, VECTOR = 0x01, 0x06, 0x05, 0x08, 0x09, 0x0B, 0x80
_U16, _I32, _I64, _F64 = struct.Struct(">H"), struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">d")


class EncodeError(ValueError):
    """A document that cannot be a Hercules payload (the message says where)."""


def encode_event(version: Any, timestamp: Any, event_uuid: str, doc: Any) -> bytes:
    """One event: `Version:u8 Timestamp:i64 Uuid:16 Container`, the payload from `doc` (a JSON
    object as wirelog's records render it). Types are chosen from the JSON values: object →
    Container, string → String, integer → Long, float → Double, true/false → Flag, null → Null,
    array → Vector of its items' one type (integers and floats together → Double, arrays →
    Vector<Vector>, an empty array → Vector<Container>). The captured widths (Byte, Short,
    Integer, Float) and UUID values (canonical text) are not in the JSON and come back as Long,
    Double and String."""
    try:
        v = int(version) if version is not None else 1
        ts = int(timestamp)
        u = uuidlib.UUID(str(event_uuid)).bytes
    except (TypeError, ValueError):
        raise EncodeError(f"version {version!r}, timestamp {timestamp!r}, uuid {event_uuid!r}") from None
    if not 0 <= v <= 255 or not -(2**63) <= ts < 2**63:
        raise EncodeError(f"version {v} or timestamp {ts} out of range")
    if not isinstance(doc, dict):
        raise EncodeError("the document is not an object")
    out = bytearray([v])
    out += _I64.pack(ts) + u
    _container(out, doc, "")
    return bytes(out)


def _container(out: bytearray, doc: dict, path: str) -> None:
    if len(doc) > 0xFFFF:
        raise EncodeError(f"{path or 'the document'}: more than 65535 keys")
    out += _U16.pack(len(doc))
    for key, value in doc.items():
        name = str(key).encode()
        if len(name) > 255:
            raise EncodeError(f"{path}{key[:40]}...: a tag name of more than 255 bytes")
        out.append(len(name))
        out += name
        _variant(out, value, f"{path}{key}.")


def _kind(value: Any) -> int:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return FLAG
    if isinstance(value, int):
        return LONG
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, dict):
        return CONTAINER
    if isinstance(value, list):
        return VECTOR
    raise EncodeError(f"a {type(value).__name__} value")


def _variant(out: bytearray, value: Any, path: str) -> None:
    kind = _kind(value)
    out.append(kind)
    _value(out, kind, value, path)


def _value(out: bytearray, kind: int, value: Any, path: str) -> None:
    if kind == CONTAINER:
        _container(out, value, path)
    elif kind == STRING:
        data = value.encode("utf-8", "surrogatepass")
        out += _I32.pack(len(data)) + data
    elif kind == LONG:
        if not -(2**63) <= value < 2**63:
            raise EncodeError(f"{path.rstrip('.')}: {value} does not fit a Long")
        out += _I64.pack(value)
    elif kind == DOUBLE:
        out += _F64.pack(value)
    elif kind == FLAG:
        out.append(1 if value else 0)
    elif kind == VECTOR:
        _vector(out, value, path)


def _vector(out: bytearray, items: list, path: str) -> None:
    kinds = {_kind(item) for item in items}
    if kinds == {LONG, DOUBLE}:
        kinds, items = {DOUBLE}, [float(i) for i in items]
    if len(kinds) > 1:
        raise EncodeError(f"{path.rstrip('.')}: an array of mixed types (a Hercules vector has one)")
    kind = kinds.pop() if kinds else CONTAINER
    out.append(kind)
    out += _I32.pack(len(items))
    for item in items:
        _value(out, kind, item, path)


# --- the HTTP side ------------------------------------------------------------------------------


def request_head(host: str, port: int, stream: str, api_key: str, length: int) -> bytes:
    return (
        f"POST /stream/send?stream={quote(stream, safe='')} HTTP/1.1\r\n"
        f"Host: {host if ':' not in host else f'[{host}]'}:{port}\r\n"
        f"apiKey: {api_key}\r\n"
        "Content-Type: application/octet-stream\r\n"
        f"Content-Length: {length}\r\n"
        "User-Agent: wirelog-replay\r\n"
        "\r\n"
    ).encode()


class HerculesSender(Resending):
    """Requests of events out, HTTP answers in. One request on the wire at a time."""

    name = "hercules"
    pipelining = 1

    def __init__(self, host: str, port: int, stream: str, api_key: str, max_body: int = MAX_BODY) -> None:
        super().__init__()
        self.host, self.port, self.stream, self._key = host, port, stream, api_key
        self.max_bytes = max_body - 4  # Source.take: document bytes per request, under the count
        self._waiting: list[Item] | None = None
        self._buf = ReceiveBuffer()
        self.reconnect = False  # the Gate said `Connection: close`: next request on a new connection

    def connection_made(self) -> bytes:
        self._buf = ReceiveBuffer()
        self.reconnect = False
        return b""

    def connection_lost(self) -> None:
        if self._waiting is not None:
            self._resend.appendleft(self._waiting)
            self._waiting = None

    @property
    def ready(self) -> bool:
        return True

    def can_send(self) -> bool:
        return self._waiting is None and not self.reconnect

    def send(self, items: list[Item]) -> bytes:
        body = b"".join([_I32.pack(len(items)), *(payload for _, payload in items)])
        self._waiting = items
        return request_head(self.host, self.port, self.stream, self._key, len(body)) + body

    @property
    def outstanding(self) -> int:
        return len(self._waiting) if self._waiting is not None else 0

    def receive(self, data: bytes) -> list[Event]:
        self._buf.feed(data)
        out: list[Event] = []
        while (response := self._response()) is not None:
            out += self._answer(*response)
        return out

    def _response(self) -> tuple[int, str, dict[str, str], bytes] | None:
        buf = self._buf
        text = buf.peek(len(buf)) or b""
        end = text.find(b"\r\n\r\n")
        if end < 0:
            if len(text) > MAX_HEAD:
                raise ProtocolError(
                    "the receiver sent an HTTP head of more than 64 KiB (is it a Hercules Gate?)"
                )
            return None
        lines = text[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(
                f"the receiver sent {lines[0][:60]!r}, not an HTTP/1.x answer (is it a Hercules Gate?)"
            )
        status, reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() not in ("", "identity"):
            body, used = _chunked(text, end + 4)
            if body is None:
                return None
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise ProtocolError(
                    f"the Gate sent Content-Length {headers['content-length'][:40]!r}"
                ) from None
            if not 0 <= length <= MAX_RESPONSE_BODY:
                raise ProtocolError(f"the Gate announced an answer of {length} bytes")
            if len(text) < end + 4 + length:
                return None
            body, used = text[end + 4 : end + 4 + length], end + 4 + length
        buf.take(used)
        if headers.get("connection", "").lower() == "close":
            self.reconnect = True
        return status, reason, headers, body

    def _answer(self, status: int, reason: str, headers: dict[str, str], body: bytes) -> list[Event]:
        if 100 <= status < 200:
            return []  # 100 Continue and the like: the answer follows
        items, self._waiting = self._waiting, None
        if items is None:
            raise ProtocolError(f"the Gate answered {status} while no request waited for an answer")
        said = body.decode("utf-8", "replace").strip().replace("\n", " ")[:200]
        what = f"{status} {reason}".strip() + (f": {said}" if said else "")
        if status == 200:
            return [Acked([key for key, _ in items])]
        if status == 413 and len(items) > 1:  # a Gate that takes smaller bodies than ours
            half = len(items) // 2
            self._resend.extendleft([items[half:], items[:half]])
            return []
        self._resend.appendleft(items)  # kept for a retry, or counted as failed
        if status in RETRY:
            raise ProtocolError(f"the Gate answered {what} ({len(items)} events not acknowledged)")
        hint = {401: " (the API key: --api-key-file or WIRELOG_HERCULES_API_KEY)", 403: " (the API key's rights)",
                404: " (the stream name, ?stream=)", 413: " (one event larger than the Gate takes)"}.get(status, "")  # fmt: skip
        raise Rejected(f"the Gate refused a request of {len(items)} events: {what}{hint}")


def _chunked(text: bytes, at: int) -> tuple[bytes | None, int]:
    """A chunked body from `at`: (body, end) or (None, 0) while incomplete."""
    body = bytearray()
    while True:
        eol = text.find(b"\r\n", at)
        if eol < 0:
            return None, 0
        try:
            size = int(text[at:eol].split(b";")[0], 16)
        except ValueError:
            raise ProtocolError("the Gate sent a bad chunk size") from None
        if size == 0:
            end = text.find(b"\r\n\r\n", eol)
            if text[eol : eol + 4] == b"\r\n\r\n":
                return bytes(body), eol + 4
            return (bytes(body), end + 4) if end >= 0 else (None, 0)
        if len(text) < eol + 2 + size + 2:
            return None, 0
        body += text[eol + 2 : eol + 2 + size]
        if len(body) > MAX_RESPONSE_BODY:
            raise ProtocolError("the Gate sent an answer of more than 1 MiB")
        at = eol + 2 + size + 2
