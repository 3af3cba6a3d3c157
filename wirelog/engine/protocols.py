"""The protocols wirelog knows, and what the decoding of a stream is given.

Detection and decoding run in the core (native/src/decoders/: `detect.rs` chooses a stream's
protocol, content first, ports only to break ties, `--decode-as PORT=PROTO` over everything). This
module names the protocols for the front ends (option choices, `--decode-as` validation,
descriptions) and holds the Python side of the decoding options: `Limits` (caps against hostile
input) and `StreamContext` (what a decoder may know of its stream besides the bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wirelog import _core


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps that protect memory against hostile input; decoders must honour them."""

    max_frame: int = 64 * 1024 * 1024  # one frame/message on the wire
    max_inflated: int = 64 * 1024 * 1024  # a compressed frame's bytes + 1 KiB per record (decoders/budget.rs)
    max_depth: int = 8  # nesting of compressed frames, containers, ...
    max_pending_events: int = 100_000  # events held back per stream while waiting for their ack
    # bytes of held records kept in memory, all streams; then a spill file
    held_memory: int = 128 * 1024 * 1024
    # capture time (ns) an event record waits for a resend to decide its fate; None: until the
    # input ends (live inputs get local.FATE_HORIZON_NS)
    fate_horizon_ns: int | None = None


@dataclass(slots=True)
class StreamContext:
    """What a decoder may know about its stream besides the bytes.

    `shared` is one dict per capture and protocol, for state that spans connections (e.g. Log
    Courier resends recognised by nonce across connections). It lives as long as the capture run.
    """

    stream: int
    client: str
    server: str
    client_port: int
    server_port: int
    show_secrets: bool = False
    limits: Limits = field(default_factory=Limits)
    shared: dict[str, Any] = field(default_factory=dict)
    midstream: bool = False  # no SYN seen: offset 0 is where the capture began, not the connection


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    """A protocol the engine knows: detection chooses it in the core (native/src/decoders/detect.rs).

    `ports` are its usual server ports (a tie-breaker for detection; they also tell which side is
    the client when no SYN was seen).
    """

    name: str
    ports: frozenset[int] = frozenset()
    description: str = ""


_DESCRIPTIONS = {
    "tls": "TLS (decrypted with --tls-keylog, the plaintext then detected and decoded)",
    "lumberjack": "Lumberjack v1/v2 (Beats, logstash-forwarder → Logstash, go-lumber)",
    "courier": "Log Courier (HELO/VERS, JDAT, streamed EVNT, ACKN, PING/PONG)",
    "hercules": "Vostok Hercules: Gate HTTP traffic (/stream/send, /stream/sendAsync) and bare events",
    "cql": "Cassandra CQL native protocol v3/v4/v5 (v5 CRC24/CRC32 frames, LZ4/Snappy)",
}

# In the core's order (ties in detection go to the earlier one).
_SPECS: tuple[ProtocolSpec, ...] = tuple(
    ProtocolSpec(name, frozenset(ports), _DESCRIPTIONS[name]) for name, ports in _core.PROTOCOLS
)


def specs() -> tuple[ProtocolSpec, ...]:
    """Every known protocol, in a fixed order (ties go to the earlier one)."""
    return _SPECS


def spec(name: str) -> ProtocolSpec:
    """The protocol called `name`; raises KeyError with the known names otherwise."""
    for s in _SPECS:
        if s.name == name:
            return s
    raise KeyError(f"unknown protocol {name!r} (known: {', '.join(names())})")


def port_protocol(item: str) -> tuple[int, str]:
    """`5044=lumberjack` → (5044, 'lumberjack'), the `--decode-as` syntax of every front end.

    Raises ValueError with a one-line reason (ASCII digits only: `²` passes str.isdigit, not int()).
    """
    port, sep, proto = (part.strip() for part in item.partition("="))
    if not sep or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(f"{item!r} is not PORT=PROTOCOL")
    try:
        return int(port), spec(proto).name
    except KeyError as e:
        raise ValueError(e.args[0]) from None


def names() -> list[str]:
    return [s.name for s in _SPECS]


# The layers below the protocols whose findings carry their own name as `protocol` (a finding's
# code begins with it: `tcp.gap`, `pcap.snaplen-truncated`; docs/records.md).
LAYERS = ("pcap", "ip", "tcp", "stream", "internal")


def record_protocols() -> list[str]:
    """Every `protocol` a record can carry: the decoders' protocols, then the layers'."""
    return [*names(), *LAYERS]


def kinds() -> dict[str, tuple[str, ...]]:
    """The kinds of the message records each protocol's decoder writes (the core's list, which
    docs/protocols/*.md's "Record kinds" tables follow)."""
    return {name: tuple(ks) for name, ks in _core.KINDS}


def well_known_ports() -> frozenset[int]:
    """Server ports used to infer the client side of SYN-less streams (documented in docs/records.md)."""
    return frozenset(_core.WELL_KNOWN_PORTS)


def detect(
    c2s: bytes, s2c: bytes = b"", client_port: int = 0, server_port: int = 0, closed: bool = False
) -> str | bool | None:
    """The protocol of a stream from its first bytes, as the engine chooses it: its name, None when no
    protocol claims the stream, or False when the decision must wait for more bytes."""
    return _core.detect(c2s, s2c, client_port, server_port, closed)


def scores(
    c2s: bytes, s2c: bytes = b"", client_port: int = 0, server_port: int = 0, closed: bool = False
) -> dict[str, float | None]:
    """Each protocol's own confidence in [0, 1] for a stream's first bytes (None: it wants more)."""
    return dict(_core.detect_scores(c2s, s2c, client_port, server_port, closed))


def find_start(data: bytes) -> tuple[str, int] | None:
    """The earliest frame start a protocol recognises in client bytes from the middle of a stream."""
    return _core.find_start(data)
