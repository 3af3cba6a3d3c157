"""Is this stream Lumberjack? Decided from content, whatever the port.

A client side starting with `1W`/`2W`/`1D`/`2J`/`1C`/`2C` plus a sane first field is Lumberjack; a
server side made of `?A` frames confirms it. TLS bytes score 0 (the tls spec reports them). On the
Beats ports, anything else that is not TLS is still claimed at a low score, so that the decoder can
say what Logstash would say ("Invalid version of beats protocol: 123" for raw JSON, ...).
"""

from __future__ import annotations

from wirelog.decoders.base import Limits, Sample
from wirelog.decoders.lumberjack.framing import CLIENT_TYPES, VERSIONS, plausible

PORTS = frozenset({5044, 5043})
TLS_HANDSHAKE = 0x16
WRONG_CLIENT_ON_BEATS_PORT = 0.3  # plus the registry's port bonus: enough to claim, beaten by any real match


def detect(sample: Sample) -> float | None:
    c2s, s2c = sample.c2s, sample.s2c
    if c2s[:1] == bytes([TLS_HANDSHAKE]) or s2c[:1] == bytes([TLS_HANDSHAKE]):
        return 0.0
    acks = _server_acks(s2c)
    if len(c2s) >= 2 and c2s[0] in VERSIONS and c2s[1] in CLIENT_TYPES:
        ok = plausible(c2s, 0, len(c2s), 1 << 30)
        if ok is None:
            return 0.95 if acks else (0.6 if sample.closed else None)
        if not ok:
            return 0.2
        return 0.95 if acks or not s2c else 0.6
    server_speaks_other = len(s2c) >= 2 and not (s2c[0] in VERSIONS and s2c[1] == 0x41)
    if (
        len(c2s) < 2
        and not sample.closed
        and (c2s[:1] in (b"1", b"2") or not c2s)
        and not server_speaks_other
    ):
        return 0.6 if acks else None
    if acks and not c2s:
        return 0.6
    if c2s and sample.server_port in PORTS:
        return WRONG_CLIENT_ON_BEATS_PORT
    return 0.0


_DATA_FRAMES = frozenset(b"JCD")
_MAX_FRAME = Limits().max_frame


def find_start(data: bytes) -> int | None:
    """The first window start in client bytes from the middle of a stream: a plausible `?W` header
    directly followed by a plausible data frame (`?J`, `?C`, `?D`) of the same version, a 12-byte
    signature that compressed or JSON bytes do not spell by chance."""
    end = len(data)
    at = data.find(b"W", 1)
    while at != -1 and at + 7 < end:
        pos = at - 1
        version = data[pos]
        if (
            version in VERSIONS
            and data[pos + 6] == version
            and data[pos + 7] in _DATA_FRAMES
            and plausible(data, pos, end, _MAX_FRAME)
            and plausible(data, pos + 6, end, _MAX_FRAME)
        ):
            return pos
        at = data.find(b"W", at + 1)
    return None


def _server_acks(s2c: bytes) -> bool:
    """The server side holds at least one whole `?A` frame and only `?A` frames so far."""
    whole = len(s2c) - len(s2c) % 6
    if not whole:
        return False
    return all(s2c[i] in VERSIONS and s2c[i + 1] == 0x41 for i in range(0, whole, 6))
