"""The per-stream decoder interface and the description of a protocol.

A decoder is a plain state machine for one TCP connection (both directions). The engine feeds it the
reassembled `Chunk`s and `Gap`s of both directions in capture order and calls `close()` once at the
end; each call returns the records produced so far. A decoder never raises on bad bytes: every
violation becomes a `Finding` and the decoder resynchronises. It never allocates from a length field
before checking it against `ctx.limits`.

Records returned by a decoder need only their protocol-level fields (protocol, kind, direction,
offset, length, frame, ts, ...); the engine stamps `capture`, `stream`, `client` and `server`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from wirelog.model import Chunk, Gap, Record


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


class Decoder(Protocol):
    """What the engine calls; see the module docstring for the contract."""

    def feed(self, chunk: Chunk) -> list[Record]: ...

    def gap(self, gap: Gap) -> list[Record]: ...

    def close(self) -> list[Record]: ...


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    """A protocol the engine knows: detection chooses it in the core (native/src/decoders/detect.rs).

    `ports` are its usual server ports (a tie-breaker for detection; they also tell which side is
    the client when no SYN was seen). `decoder` makes its Python decoder, None for a protocol the
    core decodes (`wirelog._core.NATIVE`).
    """

    name: str
    decoder: Callable[[StreamContext], Decoder] | None
    ports: frozenset[int] = frozenset()
    description: str = ""
