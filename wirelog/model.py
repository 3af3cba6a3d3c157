"""The records every layer speaks.

Imports flow one way (cli → engine → pcap/decoders/export → model), so this module imports nothing
from wirelog. Timestamps are integer nanoseconds since the Unix epoch (None when unknown, e.g. raw
dumps); frame numbers are 1-based like Wireshark's; offsets are byte positions in one direction of a
reassembled stream, counted from the first byte after the SYN (or the first byte seen when mid-stream).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Buffer  # (Python 3.12's name for what the buffer protocol reads)


class Direction(StrEnum):
    """Direction of bytes inside a stream, relative to the (possibly inferred) client."""

    C2S = "c2s"
    S2C = "s2c"

    @property
    def other(self) -> Direction:
        return Direction.S2C if self is Direction.C2S else Direction.C2S


# Why a TLS stream's application data was not decrypted: its `tls.not_decrypted` code, in words.
NOT_DECRYPTED = {
    "tls.no-key": "no key log line for its client random",
    "tls.unsupported-suite": "a TLS version or cipher suite wirelog does not decrypt",
    "tls.decrypt-failed": "its records do not authenticate with the logged keys",
    "tls.no-server-hello": "the server never answered in TLS",
    None: "no protected record in the capture",
}


def tls_state(tls: dict[str, Any]) -> str:
    """'decrypted', or 'not decrypted: <why>' (a stream's `tls` description, docs/tls.md)."""
    if tls["decrypted"]:
        return "decrypted"
    why = tls.get("not_decrypted")
    return f"not decrypted: {NOT_DECRYPTED.get(why, why)}"


def capture_loss_text(loss: dict[str, int]) -> str | None:
    """The sentence that opens `inspect`, `validate` and the report when the capture itself is
    incomplete (`loss`: `bytes`, `gaps`, `streams`, as `inspect --json` gives them), like Zeek's
    capture_loss: bytes the capture did not record are not bytes the peers lost. None when complete."""
    if not loss["gaps"]:
        return None
    s = "" if loss["streams"] == 1 else "s"
    return (
        f"the capture missed {loss['bytes']:,} bytes in {loss['gaps']:,} gap{'' if loss['gaps'] == 1 else 's'} "
        f"on {loss['streams']:,} stream{s}: packets the capture did not record, not data the peers lost "
        "(findings that follow only from them say so)"
    )


class Severity(StrEnum):
    """How bad a finding is; ordered so that `rank` compares them."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass(slots=True)
class StreamInfo:
    """One TCP connection (or one raw dump) and what the reassembler saw of it.

    `stream` is 0-based per capture in order of first packet, like tshark's `tcp.stream`, except that
    a new SYN on a closed 4-tuple opens a new stream (flagged `port_reuse`).
    """

    capture: str
    stream: int
    client: str
    server: str
    client_port: int
    server_port: int
    client_by: str = "syn"  # how the client side was chosen: syn | port | first | raw
    first_ts: int | None = None
    last_ts: int | None = None
    first_frame: int | None = None
    last_frame: int | None = None
    packets_c2s: int = 0
    packets_s2c: int = 0
    bytes_c2s: int = 0
    bytes_s2c: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    retransmissions: int = 0
    out_of_order: int = 0
    conflicts: int = 0
    handshake: bool = False
    midstream: bool = False
    fin_c2s: bool = False
    fin_s2c: bool = False
    reset: bool = False
    port_reuse: bool = False
    protocol: str | None = None
    tls: dict[str, Any] | None = (
        None  # version, cipher_suite, sni, alpn, decrypted[, not_decrypted] (docs/tls.md)
    )
    # Not part of the record (export/json.py leaves it out): nothing of this stream comes after this
    # summary in the run, no event of it waiting for its fate, so a consumer may fold it now.
    settled: bool = field(default=False, compare=False)

    @property
    def flags(self) -> list[str]:
        """Short labels for the table view, in a fixed order."""
        names = ("handshake", "midstream", "fin_c2s", "fin_s2c", "reset", "port_reuse")
        return [n for n in names if getattr(self, n)]


@dataclass(slots=True)
class StreamLines:
    """Stream summaries the core already wrote as NDJSON (`streams --json`), in stream id order."""

    capture: str
    data: bytes


@dataclass(slots=True)
class RecordLines:
    """Records a native decoder wrote as NDJSON lines (`convert --to json`), in record order: `data`
    is the core's text as it wrote it, a read-only buffer (`_core.Buffer`: `file.write(data)`
    writes it without a copy; `bytes(data)` where bytes are needed)."""

    data: Buffer
    count: int


@dataclass(slots=True)
class EventCounts:
    """Records a summary run (records="summary" or "report") had the core count instead of making
    an object of each. `counts`: event messages (those carrying a document), rows of (stream,
    protocol, version, acked, count); `messages`: CQL messages but each batch's five slowest
    answers, rows of (stream, protocol, version, kind, framing, count). Messages with a `tls` field
    are never counted; the others come as Message objects. `findings`: the findings of decoders and
    of the verdict past the first five of their code in the input (those come as Finding objects,
    in their place), rows of (stream, code, severity, protocol, count)."""

    capture: str
    counts: list[tuple[int | None, str, str | None, bool | None, int]]
    messages: list[tuple[int | None, str, str | None, str, str | None, int]] = field(default_factory=list)
    findings: list[tuple[int | None, str, Severity, str, int]] = field(default_factory=list)


@dataclass(slots=True)
class RecordRows:
    """Records a native decoder wrote as Arrow rows in the Parquet schema (`convert --to parquet`)."""

    batch: Any  # pyarrow.RecordBatch


@dataclass(slots=True)
class TableRows:
    """Rows a native decoder wrote into the typed tables (`convert --to parquet --tables`,
    docs/schema.md): one Arrow batch per table, by table name."""

    batches: dict[str, Any]  # table name → pyarrow.RecordBatch


@dataclass(slots=True)
class Chunk:
    """Contiguous, in-order bytes of one direction of a stream, as carried by one frame."""

    stream: int
    direction: Direction
    offset: int
    data: bytes
    frame: int | None = None
    ts: int | None = None


@dataclass(slots=True)
class Gap:
    """Bytes of one direction that the capture does not have; the consumer must resynchronise.

    `frame`/`ts` are those of the packet that revealed the gap (the next data or the ACK beyond it).
    """

    stream: int
    direction: Direction
    offset: int
    length: int
    frame: int | None = None
    ts: int | None = None


@dataclass(slots=True)
class Message:
    """Anything a decoder decoded: a frame, a request, a response, a log event.

    `fields` holds protocol fields (flat, JSON-compatible values only: str, int, float, bool, None,
    lists and dicts of those; bytes must be rendered as hex by the decoder). Their names must not
    collide with the common columns in `COMMON_MESSAGE_KEYS`. Log events put the decoded document
    in `event` and their delivery state in `acked` (True/False; None when the protocol cannot say);
    the delivery verdict names the event (`event_id`, the same on every copy) and its fate
    (`delivery`: docs/records.md).
    """

    protocol: str
    kind: str
    direction: Direction | None
    offset: int | None
    length: int
    frame: int | None = None
    ts: int | None = None
    version: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    event: Any = None
    acked: bool | None = None
    stream: int | None = None
    capture: str = ""
    client: str | None = None
    server: str | None = None
    event_id: str | None = None
    delivery: str | None = None

    record = "message"


@dataclass(slots=True)
class Finding:
    """A problem or notable fact, with a stable dotted `code` (e.g. `tcp.gap`, `cql.crc32-mismatch`).

    `message` is one human sentence; `fields` carries machine-readable details (stored/computed CRC,
    the frame of the first copy of conflicting bytes, ...).
    """

    code: str
    severity: Severity
    message: str
    protocol: str
    direction: Direction | None = None
    offset: int | None = None
    frame: int | None = None
    ts: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    stream: int | None = None
    capture: str = ""
    client: str | None = None
    server: str | None = None

    record = "finding"


Record = Message | Finding

REDACTED = "<redacted>"  # the value of a credential field when --show-secrets is not given

COMMON_MESSAGE_KEYS = frozenset(
    {
        "record", "capture", "stream", "client", "server", "direction", "frame", "offset", "ts",
        "protocol", "kind", "version", "length", "event", "acked", "event_id", "delivery", "code",
        "severity", "message",
    }
)  # fmt: skip


@dataclass(slots=True)
class CaptureInfo:
    """What one input (capture file, stdin or raw dump set) held, for summaries."""

    capture: str
    format: str = ""  # pcap | pcapng | raw
    compression: str | None = None
    packets: int = 0
    tcp_packets: int = 0
    non_tcp_packets: int = 0
    bytes: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    link_types: list[int] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None
    # The delivery verdict of the input's log events, per protocol (docs/records.md, "Delivery").
    delivery: dict[str, dict[str, Any]] = field(default_factory=dict)
    # With records="report": the core's timeline of the input (native/src/report/, `wirelog report`).
    timeline: dict[str, Any] | None = None
