"""NDJSON: one record per line, a fixed key order, byte-identical for the same input.

orjson is used because JSON writing is on the hot path for log events (several times faster than
the stdlib encoder, see bench/); it refuses anything that is not plain JSON data, which keeps the
record contract honest. Bytes that slipped into a record are written as hex.
"""

from __future__ import annotations

import json
import time
from collections.abc import Set as AbstractSet
from dataclasses import fields
from functools import lru_cache
from typing import IO, Any

import orjson

from wirelog.model import COMMON_MESSAGE_KEYS, Finding, Message, StreamInfo

_OPTS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


@lru_cache(maxsize=4096)
def _second(sec: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))


@lru_cache(maxsize=1024)  # records of one packet share its ts (a C frame's hundreds of events)
def rfc3339(ts: int | None) -> str | None:
    """Nanosecond RFC 3339 UTC text, e.g. 2026-11-21T04:41:22.700273042Z."""
    if ts is None:
        return None
    sec, ns = divmod(ts, 1_000_000_000)
    return f"{_second(sec)}.{ns:09d}Z"


def record_dict(rec: Message | Finding) -> dict[str, Any]:
    """The JSON object of a record: common keys first, then protocol fields (see docs/records.md)."""
    if isinstance(rec, Message):
        d = _message_head(rec)
        d.update(_message_tail(rec))
        return d
    d = _common(rec)
    d["code"] = rec.code
    d["severity"] = rec.severity
    d["message"] = rec.message
    fields = rec.fields
    if d.keys().isdisjoint(fields):
        d.update(fields)
    else:
        _add_renamed(d, rec.protocol, fields, d.keys())  # a live view: renamed keys count too
    return d


def _common(rec: Message | Finding) -> dict[str, Any]:
    return {
        "record": rec.record,
        "capture": rec.capture,
        "stream": rec.stream,
        "client": rec.client,
        "server": rec.server,
        "direction": rec.direction,
        "frame": rec.frame,
        "offset": rec.offset,
        "ts": rfc3339(rec.ts),
        "protocol": rec.protocol,
    }


def _message_head(rec: Message) -> dict[str, Any]:
    """A message's keys up to `version`: the same for every message of one packet and kind."""
    d = _common(rec)
    d["kind"] = rec.kind
    d["version"] = rec.version
    return d


def _message_tail(rec: Message) -> dict[str, Any]:
    """A message's keys from `length` on. A renamed field (`<protocol>_<name>`) has an underscore, so
    it never collides with a head key: head and tail can be encoded apart (see JsonWriter)."""
    fields = rec.fields
    if COMMON_MESSAGE_KEYS.isdisjoint(fields):  # the usual case
        return {
            "length": rec.length,
            **fields,
            "event": rec.event,
            "acked": rec.acked,
            "event_id": rec.event_id,
            "delivery": rec.delivery,
        }
    d = {"length": rec.length}
    _add_renamed(d, rec.protocol, fields, COMMON_MESSAGE_KEYS)
    d["event"] = rec.event
    d["acked"] = rec.acked
    d["event_id"] = rec.event_id
    d["delivery"] = rec.delivery
    return d


def _add_renamed(
    d: dict[str, Any], protocol: str, fields: dict[str, Any], reserved: AbstractSet[str]
) -> None:
    """Protocol fields after the common keys; one named like a reserved key gets a protocol prefix."""
    for key, value in fields.items():
        d[f"{protocol}_{key}" if key in reserved else key] = value


def json_default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).hex()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON data")


def dumps_line(obj: dict[str, Any]) -> bytes:
    """One NDJSON line (with its newline); integers beyond 64 bits fall back to the stdlib encoder.

    Non-string keys (CQL maps) need OPT_NON_STR_KEYS, which makes orjson ~15 % slower on every
    record, so it is used only when the plain encoding refuses a key; str keys encode the same.
    """
    try:
        return orjson.dumps(obj, default=json_default, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        pass
    try:
        return orjson.dumps(obj, default=json_default, option=_OPTS)
    except orjson.JSONEncodeError:
        text = json.dumps(obj, default=json_default, ensure_ascii=False, separators=(",", ":"))
        return text.encode() + b"\n"


def dumps(rec: Message | Finding) -> bytes:
    """One NDJSON line for a record."""
    return dumps_line(record_dict(rec))


_STREAM_FIELDS = tuple(
    f.name for f in fields(StreamInfo) if f.name != "settled"
)  # (the run's, not the record's)


def stream_dict(info: StreamInfo) -> dict[str, Any]:
    """The JSON object of a stream summary (`wirelog streams --json`; for captures the core writes
    the same line itself, native/src/records/json.rs)."""
    d = {name: getattr(info, name) for name in _STREAM_FIELDS}
    d["first_ts"] = rfc3339(info.first_ts)
    d["last_ts"] = rfc3339(info.last_ts)
    d["flags"] = info.flags
    return d


class JsonWriter:
    """Streams records to a binary file object as NDJSON.

    Consecutive messages often share every key up to `version` (the hundreds of events of one
    Lumberjack C frame carry its position): that head is encoded once and each line is the head
    plus the message's own tail. orjson writes objects as `{"k":v,...}` without spaces, so the
    joined line is byte for byte `dumps(rec)`; when the tail needs another encoding (non-string
    keys, 65+-bit ints) the whole line is encoded the usual way.
    """

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self.count = 0
        self._head: tuple | None = None
        self._prefix = b""  # `{"record":...,"version":...,` of self._head

    def write(self, rec: Message | Finding) -> None:
        line = None
        if isinstance(rec, Message):
            head = (
                rec.capture, rec.stream, rec.client, rec.server, rec.direction, rec.frame, rec.offset,
                rec.ts, rec.protocol, rec.kind, rec.version,
            )  # fmt: skip
            try:
                if head != self._head:
                    self._prefix = orjson.dumps(_message_head(rec), default=json_default)[:-1] + b","
                    self._head = head
                tail = orjson.dumps(
                    _message_tail(rec), default=json_default, option=orjson.OPT_APPEND_NEWLINE
                )
                line = self._prefix + tail[1:]
            except orjson.JSONEncodeError:
                pass  # encoded below the usual way
        self._out.write(dumps(rec) if line is None else line)
        self.count += 1

    def write_lines(self, data: bytes, count: int) -> None:
        """`count` records the core already wrote as NDJSON lines (native/src/records/json.rs)."""
        self._out.write(data)
        self.count += count

    def close(self) -> None:
        self._out.flush()
