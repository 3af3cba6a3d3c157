"""Inflate the zlib body of a `C` frame with a hard output cap.

Neither Logstash nor go-lumber caps the inflated size, so a capture can hold a decompression bomb;
`decompressobj().decompress(data, max_length)` stops at the cap instead of allocating it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

LEVEL_CLASSES = ("0-1", "2-5", "6", "7-9")  # zlib header FLEVEL bits: the sender's level class


@dataclass(slots=True)
class Inflated:
    """What came out of one zlib body; `problem` is a finding code suffix when something is wrong."""

    data: bytes
    header: str
    level: str | None
    problem: str | None = None
    detail: str = ""
    trailing: int = 0  # bytes left after the end of the zlib stream, inside the C frame


def level_class(cmf: int, flg: int) -> str | None:
    """The compression level class from a zlib header, or None when it is not a zlib header."""
    if cmf & 0x0F != 8 or ((cmf << 8) | flg) % 31:
        return None
    return LEVEL_CLASSES[flg >> 6]


def inflate(body: bytes, cap: int) -> Inflated:
    """Inflate `body` (RFC 1950 zlib), producing at most `cap` bytes."""
    header = body[:2].hex()
    level = level_class(body[0], body[1]) if len(body) >= 2 else None
    if level is None:
        kind = "gzip" if body[:2] == b"\x1f\x8b" else "raw deflate or garbage"
        return Inflated(b"", header, None, "zlib-error", f"not a zlib header ({header}: {kind})")
    dec = zlib.decompressobj()
    try:
        out = dec.decompress(body, max(cap, 1))  # max_length 0 would mean "no limit"
    except zlib.error as exc:
        return Inflated(b"", header, level, "zlib-error", str(exc))
    if len(out) > cap or dec.unconsumed_tail or (len(out) == cap and not dec.eof):
        return Inflated(b"", header, level, "inflate-limit", f"inflates to more than {cap} bytes")
    if not dec.eof:
        detail = f"{len(body)} bytes inflate to {len(out)} without reaching the end of the stream"
        return Inflated(out, header, level, "compressed-truncated", detail)
    return Inflated(out, header, level, trailing=len(dec.unused_data))
