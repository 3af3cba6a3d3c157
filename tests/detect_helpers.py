"""Protocol detection as the tests drive it: the core's detectors (native/src/decoders/detect.rs)
behind a sample type, one protocol's own score, and the engine's choice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from wirelog.engine import protocols

THRESHOLD = 0.5  # the least score that claims a stream (detect.rs)


@dataclass(frozen=True)
class Sample:
    """The first bytes of each direction of a stream."""

    c2s: bytes
    s2c: bytes
    client_port: int
    server_port: int
    closed: bool

    def args(self) -> tuple[bytes, bytes, int, int, bool]:
        return self.c2s, self.s2c, self.client_port, self.server_port, self.closed


def detector(protocol: str) -> Callable[[Sample], float | None]:
    """`protocol`'s own confidence for a sample (None: it wants more bytes)."""

    def detect(sample: Sample) -> float | None:
        return protocols.scores(*sample.args())[protocol]

    return detect


def choose(sample: Sample) -> str | bool | None:
    """The engine's choice: a protocol name, None (no protocol), False (wait for more bytes)."""
    return protocols.detect(*sample.args())
