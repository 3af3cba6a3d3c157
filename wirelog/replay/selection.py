"""Which events a replay sends, read from captures (the core's NDJSON records) or from wirelog's
own NDJSON/Parquet output, streamed: nothing here holds more than one batch of records.

An event is selected when its record's `delivery` is one of the classes asked for (by default
`never_acknowledged`) and it is the event's first copy: a copy that names another in `resend_of`
(a resend on another connection, or a Log Courier payload's tail resent) is the same event, sent
once. Records come in the core's order: per connection, in the order the events were sent.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

DEFAULT_CLASSES = frozenset({"never_acknowledged"})
CLASSES = ("never_acknowledged", "unknown", "recovered_by_resend", "delivered", "delivered_twice")
PARQUET_MAGIC = b"PAR1"


@dataclass(slots=True)
class Selected:
    key: str  # the record's event_id
    doc: Any  # the document as captured
    protocol: str
    capture: str
    stream: int | None
    tls: bool  # the stream it came from was TLS (decrypted from a key log)
    header: tuple[Any, Any, Any] | None = None  # Hercules events: (version, timestamp, uuid)
    raw: bytes | None = None  # Hercules events read from a capture: the event's bytes as captured


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)  # integers past 64 bits, which orjson refuses


def ndjson_records(chunks: Iterable[bytes]) -> Iterator[dict]:
    """Records of NDJSON text given in chunks that end on line boundaries (the core's) or not."""
    rest = b""
    for chunk in chunks:
        data = rest + chunk if rest else chunk
        lines = data.split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.strip():
                yield _loads(line)
    if rest.strip():
        yield _loads(rest)


def parquet_records(path: str, batch_rows: int = 8192) -> Iterator[dict]:
    """Event rows of wirelog's Parquet (docs/schema.md): `event` and `fields` are JSON text."""
    import pyarrow.parquet as pq  # only Parquet inputs pay for pyarrow

    pf = pq.ParquetFile(path)
    names = set(pf.schema_arrow.names)
    wanted = [c for c in ("record", "capture", "stream", "protocol", "kind", "ts", "ts_ns", "event_id",
                          "delivery", "event", "fields", "tls", "version") if c in names]  # fmt: skip
    for batch in pf.iter_batches(batch_size=batch_rows, columns=wanted):
        for row in batch.to_pylist():
            if row.get("event") is None or row.get("event_id") is None:
                continue
            row["event"] = _loads(row["event"].encode())
            fields = row.pop("fields", None)
            if fields:
                for k, v in _loads(fields.encode()).items():
                    row.setdefault(k, v)
            ts, ns = row.get("ts"), row.pop("ts_ns", None)
            if ns is not None:  # the exact time, written as the NDJSON writes it
                sec, frac = divmod(ns, 1_000_000_000)
                row["ts"] = f"{datetime.fromtimestamp(sec, UTC):%Y-%m-%dT%H:%M:%S}.{frac:09d}Z"
            elif isinstance(ts, datetime):
                row["ts"] = ts.isoformat()
            yield row


def select(
    records: Iterable[dict],
    classes: frozenset[str] = DEFAULT_CLASSES,
    keep: Callable[[dict], bool] | None = None,
    streams: frozenset[int] = frozenset(),
) -> Iterator[Selected]:
    """The events to send. `keep`: the shared filters, for records the core did not filter
    (file inputs); `streams`: the --stream filter, under which a resend whose first copy is in a
    stream left out is the copy sent."""
    for r in records:
        get = r.get
        if get("delivery") not in classes or get("event_id") is None or "event" not in r:
            continue  # (records without a delivery class: findings, requests, other messages)
        if get("record", "message") != "message":
            continue
        first = get("resend_of")
        if first and (not streams or first.get("stream") in streams):
            continue
        if keep is not None and not keep(r):
            continue
        protocol = get("protocol", "")
        header = raw = None
        if protocol == "hercules":
            header = (get("version"), get("timestamp"), get("uuid"))
            raw = _captured(get("bytes_base64"))
        yield Selected(replay_id(r), r["event"], protocol, get("capture", ""), get("stream"),
                       bool(get("tls")), header, raw)  # fmt: skip


def replay_id(r: dict) -> str:
    """The id an event is journaled and sent under: its `event_id`, which a Log Courier nonce or a
    Hercules UUID makes unique anywhere, but a Lumberjack `STREAM:FRAME:SEQ` only within its capture
    (docs/records.md). So a Lumberjack id gets the capture time of the event's first copy, to the
    nanosecond (`3:1042:17@2026-11-21T05:37:19.562021000Z`): the same whenever that capture, or
    wirelog's records of it, is replayed, while the same coordinates in another capture — which
    would otherwise share one journal line, or one Elasticsearch document — differ."""
    event_id = str(r["event_id"])
    ts = r.get("ts")
    return f"{event_id}@{ts}" if r.get("protocol") == "lumberjack" and isinstance(ts, str) else event_id


def _captured(text: Any) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def sniff(path: str) -> str:
    """`parquet`, `ndjson` (wirelog's own output) or `capture` for a local file, by content."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return "capture"  # a URI, stdin, a file that cannot be read: the capture reader says why
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if head.lstrip()[:1] == b"{" and b'"record"' in head:
        return "ndjson"
    return "capture"


def set_id(doc: Any, path: tuple[str, ...], key: str) -> bool:
    """Put `key` at `path` in the document unless something is already there; False when the
    document cannot hold it (not an object, or a non-object on the way)."""
    if not isinstance(doc, dict):
        return False
    node = doc
    for name in path[:-1]:
        child = node.get(name)
        if child is None:
            child = node[name] = {}
        elif not isinstance(child, dict):
            return False
        node = child
    node.setdefault(path[-1], key)
    return True


def encode(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc)
    except TypeError:  # an integer past 64 bits
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
