"""Which protocols exist, and how a stream's protocol is chosen.

Detection runs in the core (native/src/decoders/detect.rs): content decides, ports only break ties,
`--decode-as PORT=PROTO` overrides everything. This module names the protocols for the front ends
(option choices, `--decode-as` validation, descriptions).
"""

from __future__ import annotations

from wirelog import _core
from wirelog.decoders.base import ProtocolSpec

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
