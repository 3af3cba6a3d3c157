"""What the decoding of a stream is given (its context and limits), and the description of a protocol.

Every decoder is native (native/src/decoders/): a plain state machine for one TCP connection, fed
the reassembled bytes and gaps of both directions, that never raises on bad bytes and never
allocates from a length field before checking it against the limits. Records need only their
protocol-level fields; the engine stamps `capture`, `stream`, `client` and `server`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps that protect memory against hostile input; decoders must honour them."""

    max_frame: int = 64 * 1024 * 1024  # one frame/message on the wire
    max_inflated: int = 64 * 1024 * 1024  # output of one decompression (zlib/LZ4/Snappy bombs)
    max_depth: int = 8  # nesting of compressed frames, containers, ...
    max_pending_events: int = 100_000  # events held back per stream while waiting for their ack


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
