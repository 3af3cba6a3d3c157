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

import importlib
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
class Sample:
    """The first bytes of each direction of a stream, for protocol detection."""

    c2s: bytes
    s2c: bytes
    client_port: int
    server_port: int
    closed: bool  # the stream ended: no more bytes will come, decide now


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    """A protocol the engine can detect and decode.

    `detect(sample)` returns a confidence in [0, 1] from the content (ports are a hint the
    registry adds on top), or None when it needs more bytes to tell. `ports` are the usual server
    ports; they also help decide which side is the client when no SYN was seen.

    `decoder` is None for a protocol decoded in the native core (`wirelog._core.NATIVE`).

    `find_start(data)` (optional) finds where a capture that began mid-stream reaches a frame
    boundary: in client→server bytes from anywhere in a stream, the offset of the first frame start
    recognised by a signature too long to occur by chance, or None. The engine uses it when the
    first bytes of a mid-stream capture are the inside of a frame, which `detect` cannot judge.
    """

    name: str
    detect: Callable[[Sample], float | None]
    decoder: Callable[[StreamContext], Decoder] | None
    ports: frozenset[int] = frozenset()
    description: str = ""
    find_start: Callable[[bytes], int | None] | None = None


def lazy_decoder(module: str, name: str) -> Callable[[StreamContext], Decoder]:
    """A `ProtocolSpec.decoder` that imports `module` when a stream first needs it.

    Detection needs only the small `detect` modules; a run that never meets the protocol skips
    importing (and, without bytecode caches, compiling) its decoder, which every CLI start pays.
    """

    def make(ctx: StreamContext) -> Decoder:
        return getattr(importlib.import_module(module), name)(ctx)

    make.__qualname__ = f"lazy_decoder({module}.{name})"
    return make


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A package `__getattr__` that imports `exports[name]` (a module) when `name` is first used, so
    a protocol package keeps exporting its decoder without importing it at start-up."""

    def __getattr__(name: str) -> object:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
