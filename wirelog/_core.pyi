# Types of the native core (native/src/python/), the Rust API's contract to Python. Checked against
# the built module by tests/test_core_stub.py (mypy's stubtest); change it with python/.
#
# Argument types are what PyO3 accepts: `&[u8]` takes `bytes` only, `Vec<T>` any sequence but a str,
# `HashSet<T>` a set or frozenset, `HashMap`/`PyDict` a dict, a Rust tuple a tuple.

from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol, Self, TypeAlias, TypedDict, Unpack, final, type_check_only

from typing_extensions import CapsuleType

from wirelog.model import Chunk, EventCounts, Finding, Gap, Message, StreamInfo

__all__ = [
    "Pipeline",
    "Decoding",
    "KeyLogs",
    "ArrowRecords",
    "Buffer",
    "table_schemas",
    "detect",
    "detect_scores",
    "find_start",
    "PROTOCOLS",
    "KINDS",
    "WELL_KNOWN_PORTS",
    "HUNT_LIMIT",
    "NATIVE",
    "Reassembler",
    "SegmentReader",
    "SplitScanner",
    "SegmentBatches",
    "route_spans",
    "delivery_findings",
    "StreamRanks",
    "set_debug",
    "on_out_of_memory",
    "hercules_documents",
    "HerculesEvents",
    "HerculesWriter",
    "CaptureFormatError",
    "__version__",
    "INFLATED",
]

__version__: str
PROTOCOLS: list[tuple[str, list[int]]]  # (protocol, its ports) in detection order
KINDS: list[tuple[str, list[str]]]  # (protocol, its message kinds)
WELL_KNOWN_PORTS: list[int]
HUNT_LIMIT: int
NATIVE: list[str]  # the protocols the core decodes
INFLATED: list[str]  # the compressions the core undoes itself

class CaptureFormatError(ValueError): ...

# --- The private names below exist only in this stub: they name the shapes python/ builds.

# Anything with the Arrow PyCapsule stream interface (a pyarrow RecordBatch, Spark's batches).
@type_check_only
class _ArrowStream(Protocol):
    def __arrow_c_stream__(self) -> object: ...

# What the core reads of a stream it decodes: a StreamInfo, or anything with these.
@type_check_only
class _StreamContext(Protocol):
    @property
    def stream(self) -> int: ...
    @property
    def client(self) -> str: ...
    @property
    def server(self) -> str: ...
    @property
    def client_port(self) -> int: ...
    @property
    def server_port(self) -> int: ...
    @property
    def midstream(self) -> bool: ...

# The reassembler's keyword options (python/capture.rs `config`; an unknown name is a TypeError there).
@type_check_only
class _TcpOptions(TypedDict, total=False):
    emit_data: bool
    max_pending: int
    max_segments: int
    close_grace: float  # seconds
    max_connections: int
    sweep_every: int
    reorder_packets: int
    ids_by_frame: bool
    stream_ranks: StreamRanks

# Pipeline's; Reassembler takes these two as parameters of their own.
@type_check_only
class _ReassemblyOptions(_TcpOptions, total=False):
    server_ports: Sequence[int]
    overlap: Literal["first", "last"]

_Form: TypeAlias = Literal["objects", "summary", "report", "ndjson", "arrow", "tables", "hercules"]

# A decoding session's options (python/decoding.rs `session`; an unknown name is a TypeError there).
@type_check_only
class _DecodingOptions(TypedDict, total=False):
    records: _Form
    show_secrets: bool
    event_bytes: bool
    stall_ns: int
    # wirelog.engine.protocols.Limits as a dict (`asdict`): max_frame, max_inflated, max_depth,
    # max_pending_events, held_memory, fate_horizon_ns (None: until the input ends)
    limits: dict[str, int | None]
    protocols: set[str] | frozenset[str]
    streams: set[int] | frozenset[int]
    kinds: set[str] | frozenset[str]
    events: bool
    since: int | None
    until: int | None
    findings: bool
    decode_as: dict[int, str]
    forced: str | None
    tls_keylogs: KeyLogs | None

# A decoding session's records, in the form its `records` option chose: NDJSON bytes with their line
# count, one Arrow batch, the typed tables' batches by name, Hercules event bodies, or objects.
_Taken: TypeAlias = (
    tuple[Buffer, int]
    | ArrowRecords
    | dict[str, ArrowRecords]
    | HerculesEvents
    | list[Message | Finding | EventCounts]
)
# What a Pipeline gives per call: TCP records, stream summaries and, in their place, a session's.
_Item: TypeAlias = Chunk | Gap | Finding | StreamInfo | _Taken
# A TCP segment as SegmentReader gives it (Reassembler.segment takes the same as its arguments):
# (frame, ts, src, sport, dst, dport, seq, ack, flags, payload, missing); addresses packed (4 or 16 bytes).
_Segment: TypeAlias = tuple[int, int, bytes, int, bytes, int, int, int, int, bytes, int]

@type_check_only
class _CaptureInfo(TypedDict):
    format: str  # "pcap", "pcapng", or "" until recognised
    packets: int
    tcp_packets: int
    non_tcp_packets: int
    bytes: int
    first_ts: int | None
    last_ts: int | None
    link_types: list[int]
    truncated: bool
    error: str | None

@type_check_only
class _HerculesDocument(TypedDict):
    version: int
    timestamp: int
    uuid: str
    tags: dict[str, Any]  # Any: the event's payload as a JSON document, values of any JSON type

# --- Classes (none can be subclassed: PyO3 classes are final unless declared otherwise).

@final
class Buffer:  # made by the core only (no constructor): NDJSON text or Hercules events, read in place through the
    # buffer protocol (bytes(), memoryview(), file.write); Python 3.11 has no __buffer__ to name
    def __len__(self) -> int: ...

@final
class ArrowRecords:  # made by the core only (no constructor)
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> CapsuleType: ...

@final
class HerculesEvents:  # made by the core only (no constructor)
    def __len__(self) -> int: ...

@final
class StreamRanks:
    def __new__(cls, frames: Sequence[int]) -> Self: ...

@final
class KeyLogs:
    def __new__(cls, logs: Iterable[tuple[str, Iterable[bytes]]]) -> Self: ...
    def __len__(self) -> int: ...

@final
class Pipeline:
    def __new__(
        cls,
        capture: str,
        compression: str | None = None,
        panic_at_frame: int | None = None,
        stream_lines: bool = False,
        decode: bool = True,
        chunks: bool = False,
        decoding: _DecodingOptions | None = None,
        **options: Unpack[_ReassemblyOptions],
    ) -> Self: ...
    def feed(self, data: bytes) -> list[_Item]: ...
    def more(self) -> list[_Item] | None: ...
    def feed_segments(self, segments: _ArrowStream) -> list[_Item]: ...
    def finish(self, read_error: str | None = None) -> list[_Item]: ...
    def take_stream_lines(self) -> bytes: ...
    def info(self) -> _CaptureInfo: ...
    def stream_info(self, stream: int) -> StreamInfo | None: ...
    def mute(self, stream: int) -> None: ...
    def finish_decoding(self, findings: bool = True) -> tuple[bool, _Taken | None]: ...
    def delivery(self) -> str: ...  # JSON
    def report(self, top: int) -> str | None: ...  # JSON

@final
class Decoding:
    def __new__(cls, capture: str, **decoding: Unpack[_DecodingOptions]) -> Self: ...
    def open(self, info: _StreamContext) -> None: ...
    def attach(self, protocol: str, info: _StreamContext) -> bool: ...
    def decode(self, item: Chunk | Gap) -> list[_Taken]: ...
    def end_stream(self, stream: int, closed: bool) -> tuple[str | None, list[_Taken]]: ...
    def finish_decoding(self, findings: bool = True) -> tuple[bool, _Taken | None]: ...
    def delivery(self) -> str: ...  # JSON
    def report(self, top: int) -> str | None: ...  # JSON

@final
class Reassembler:
    def __new__(
        cls,
        capture: str,
        server_ports: Sequence[int] = ...,
        overlap: Literal["first", "last"] = "first",
        **options: Unpack[_TcpOptions],
    ) -> Self: ...
    def segment(
        self,
        frame: int,
        ts: int,
        src: bytes,
        sport: int,
        dst: bytes,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        missing: int = 0,
    ) -> None: ...
    def finish(self) -> None: ...
    def drain(self) -> list[Chunk | Gap | Finding | StreamInfo]: ...

@final
class SegmentReader:
    def __new__(cls, name: str, compression: str | None = None, first_frame: int = 1) -> Self: ...
    def feed(self, data: bytes) -> list[_Segment | Finding]: ...
    def finish(self, read_error: str | None = None) -> list[_Segment | Finding]: ...
    def info(self) -> _CaptureInfo: ...

@final
class SegmentBatches:
    def __new__(cls, name: str, first_frame: int = 1) -> Self: ...
    def route(self, groups: int, position: int) -> None: ...
    def set_position(self, position: int) -> None: ...
    def take_routes(self) -> list[bytes]: ...
    def feed_routed(
        self, data: bytes, at: int, routes: bytes, first: int, last: int
    ) -> ArrowRecords | None: ...
    def feed(self, data: bytes) -> list[Finding]: ...
    def finish(self, read_error: str | None = None) -> list[Finding]: ...
    def secrets(self) -> list[bytes]: ...

@final
class SplitScanner:
    def __new__(cls, prefix: bytes, start: int, end: int, trusted: bool) -> Self: ...
    @staticmethod
    def head(prefix: bytes) -> tuple[int, bytes]: ...
    def feed(self, data: bytes, eof: bool) -> bool: ...
    # (start, next, frames, context [(offset, bytes)], holes [(from, to)])
    def result(self) -> tuple[int | None, int, int, list[tuple[int, bytes]], list[tuple[int, int]]]: ...

@final
class HerculesWriter:
    def __new__(cls) -> Self: ...
    def write(self, events: HerculesEvents) -> Buffer: ...
    def write_message(self, m: Message) -> Buffer: ...
    def write_arrow(self, batch: _ArrowStream) -> Buffer: ...
    def take_notes(self) -> list[tuple[str, bytes]]: ...  # (sentence, NDJSON finding line)

# --- Functions.

def table_schemas() -> dict[str, ArrowRecords]: ...

# The protocol's name, None when none claims the bytes, False when it needs more of them.
def detect(
    c2s: bytes, s2c: bytes | None = None, client_port: int = 0, server_port: int = 0, closed: bool = False
) -> str | Literal[False] | None: ...
def detect_scores(
    c2s: bytes, s2c: bytes | None = None, client_port: int = 0, server_port: int = 0, closed: bool = False
) -> list[tuple[str, float | None]]: ...
def find_start(data: bytes) -> tuple[str, int] | None: ...
def route_spans(routes: bytes) -> list[tuple[int, int, int, int]]: ...
def delivery_findings(results: str) -> list[Finding]: ...
def set_debug(on: bool) -> None: ...
def on_out_of_memory(line: str | None, status: int = 4) -> None: ...
def hercules_documents(data: bytes) -> list[_HerculesDocument]: ...
