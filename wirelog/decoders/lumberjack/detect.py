"""Is this stream Lumberjack? Decided from content, whatever the port.

A client side starting with `1W`/`2W`/`1D`/`2J`/`1C`/`2C` plus a sane first field is Lumberjack; a
server side made of `?A` frames confirms it. TLS bytes score 0 (the tls spec reports them). On the
Beats ports, anything else that is not TLS is still claimed at a low score, so that the decoder can
say what Logstash would say ("Invalid version of beats protocol: 123" for raw JSON, ...).
"""

from __future__ import annotations

import struct

from wirelog.decoders.base import Limits, Sample

U32 = struct.Struct(">I")
VERSIONS = frozenset(b"12")
CLIENT_TYPES = frozenset(b"WJDC")
# Bounds of a plausible header (the decoder's resync uses the same: native/src/decoders/lumberjack/framing.rs).
PLAUSIBLE_WINDOW = 1 << 24  # no sender announces windows near this size
PLAUSIBLE_PAIRS = 1 << 16
PLAUSIBLE_KEY = 1 << 16
JSON_STARTS = frozenset(b"{[")  # events are objects (a scalar could be a header byte)
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


def plausible(data: bytes | bytearray | memoryview, pos: int, end: int, max_frame: int) -> bool | None:
    """Whether a resync candidate `[12][WJDCA]` at `pos` looks like a real frame (None: need bytes).

    Stricter than `parse`: after garbage or a gap we want few false starts, so sizes must be
    modest, a J body must begin like a JSON object or array and a C body like zlib. A length
    field made of text bytes is far above these bounds, so a header spelled inside JSON text
    (`"2J..."`) can only pass if its length field reaches into the next real header, and then its
    body starts with a version byte, not `{`.
    """
    typ = data[pos + 1]
    need = {ord("J"): 11, ord("D"): 14, ord("C"): 8}.get(typ, 6)
    if end - pos < need:
        return None
    value = U32.unpack_from(data, pos + 2)[0]
    if typ == ord("W"):
        return value <= PLAUSIBLE_WINDOW
    if typ == ord("A"):
        return True
    if typ == ord("C"):
        cmf, flg = data[pos + 6], data[pos + 7]
        return 2 <= value <= max_frame and cmf & 0x0F == 8 and ((cmf << 8) | flg) % 31 == 0
    count = U32.unpack_from(data, pos + 6)[0]
    if typ == ord("J"):
        return 2 <= count <= max_frame and data[pos + 10] in JSON_STARTS
    return 0 < count <= PLAUSIBLE_PAIRS and U32.unpack_from(data, pos + 10)[0] <= PLAUSIBLE_KEY
