"""Lumberjack frame layouts: find where one frame ends, without interpreting it.

Lumberjack has no length prefix, no magic and no checksum: a frame's end is known only by walking
its fields. The same parser serves the TCP stream (bytes arrive piecemeal, so an incomplete frame
says how many bytes it needs at least) and the inflated content of `C` frames (all bytes present).
`D` frames are walked pair by pair; the walk resumes where it stopped so a huge `D` arriving in many
segments costs O(bytes), not O(segments × pairs).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

U32 = struct.Struct(">I")
U32X2 = struct.Struct(">II")

VERSIONS = frozenset(b"12")
CLIENT_TYPES = frozenset(b"WJDC")
TYPES_BY_VERSION = {"1": frozenset("WDCA"), "2": frozenset("WJCA")}
HEADER_SIZES = {"W": 6, "A": 6, "C": 6, "J": 10, "D": 10}
VERSION_TEXT = {b: chr(b) for b in VERSIONS}  # byte → "1"/"2" without a chr() call per frame
TYPES = {ord(t): (t, size) for t, size in HEADER_SIZES.items()}  # type byte → (letter, header size)

PLAUSIBLE_WINDOW = 1 << 24  # resync only: no sender announces windows near this size
PLAUSIBLE_PAIRS = 1 << 16
PLAUSIBLE_KEY = 1 << 16
JSON_STARTS = frozenset(b"{[")  # resync only: events are objects (a scalar could be a header byte)


@dataclass(slots=True)
class Frame:
    """One complete frame in `data[start:end]`.

    `value` is the u32 after the header: the window count (W), the ack value (A), the sequence
    number (J/D) or the compressed length (C). `count` is the J payload length or D pair count.
    The body (JSON text, D pairs, zlib bytes) is `data[body:end]`.
    """

    version: str
    type: str
    start: int
    end: int
    value: int
    count: int
    body: int


@dataclass(slots=True)
class Incomplete:
    """The frame at `start` needs at least `need` bytes in total; `resume` continues a D walk."""

    need: int
    resume: tuple[int, int] | None = None


@dataclass(slots=True)
class FrameError:
    """Bytes at `start` cannot be a frame; the caller reports `code` and resynchronises."""

    code: str
    detail: str
    fields: dict[str, object]


ParseResult = Frame | Incomplete | FrameError


def parse(
    data: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    max_frame: int,
    resume: tuple[int, int] | None = None,
) -> ParseResult:
    """Parse the frame starting at `data[pos]` (bytes up to `end` are available)."""
    if end - pos < 2:
        return Incomplete(2)
    ver, typ = data[pos], data[pos + 1]
    version = VERSION_TEXT.get(ver)
    if version is None:
        return FrameError("invalid-version", invalid_version_text(ver), {"byte": ver})
    known = TYPES.get(typ)
    if known is None:
        return FrameError(
            "unknown-frame-type",
            f"Invalid Frame Type, received: {typ} ({_printable(typ)})",
            {"type_byte": typ},
        )
    ftype, head = known
    if end - pos < head:
        return Incomplete(head)
    if head == 10:  # J and D: u32 seq, u32 payload length or pair count
        value, count = U32X2.unpack_from(data, pos + 2)
        if ftype == "D":
            return _walk_pairs(data, pos, end, version, value, count, max_frame, resume)
        size = count
    else:
        value = size = U32.unpack_from(data, pos + 2)[0]
        count = 0
        if ftype != "C":  # W and A: the header is the frame
            return Frame(version, ftype, pos, pos + 6, value, 0, pos + 6)
    if size > max_frame:
        return _too_long(ftype, size, max_frame)
    if end - pos < head + size:
        return Incomplete(head + size)
    return Frame(version, ftype, pos, pos + head + size, value, count, pos + head)


def whole_j2(data: bytes, pos: int, end: int, max_frame: int) -> tuple[int, int] | None:
    """(seq, payload length) of a complete `2J` frame at `pos`; None for anything else, which
    `parse` then handles. The per-event path of Beats traffic: same rules as `parse`, no Frame."""
    if end - pos < 10 or data[pos] != 0x32 or data[pos + 1] != 0x4A:
        return None
    seq, size = U32X2.unpack_from(data, pos + 2)
    return (seq, size) if size <= max_frame and end - pos >= 10 + size else None


def _too_long(ftype: str, size: int, limit: int) -> FrameError:
    return FrameError(
        "bad-length",
        f"{ftype} frame declares {size} bytes, above the {limit}-byte frame limit",
        {"frame_type": ftype, "declared": size, "limit": limit},
    )


def _walk_pairs(
    data: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    version: str,
    seq: int,
    npairs: int,
    max_frame: int,
    resume: tuple[int, int] | None,
) -> ParseResult:
    """Find the end of a D frame: npairs × (u32 klen, key, u32 vlen, value)."""
    if npairs * 8 > max_frame:
        return FrameError(
            "bad-length",
            f"D frame declares {npairs} pairs, more than a {max_frame}-byte frame can hold",
            {"frame_type": "D", "declared": npairs, "limit": max_frame // 8},
        )
    rel, done = resume if resume else (10, 0)
    limit = pos + max_frame
    while done < npairs * 2:  # keys and values alike: u32 length + bytes
        p = pos + rel
        if end - p < 4:
            return Incomplete(rel + 4, (rel, done))
        size = U32.unpack_from(data, p)[0]
        if p + 4 + size > limit:
            return _too_long("D", rel + 4 + size, max_frame)
        if end - p < 4 + size:
            return Incomplete(rel + 4 + size, (rel, done))
        rel += 4 + size
        done += 1
    return Frame(version, "D", pos, pos + rel, seq, npairs, pos + 10)


def decode_pairs(data: bytes, body: int, end: int) -> tuple[dict[str, str], bool]:
    """The key/value map of a walked D frame; the flag says whether any text was not UTF-8."""
    out: dict[str, str] = {}
    bad = False
    p = body
    while p < end:
        klen = U32.unpack_from(data, p)[0]
        key = data[p + 4 : p + 4 + klen]
        p += 4 + klen
        vlen = U32.unpack_from(data, p)[0]
        val = data[p + 4 : p + 4 + vlen]
        p += 4 + vlen
        try:
            out[key.decode()] = val.decode()
        except UnicodeDecodeError:
            bad = True
            out[key.decode(errors="replace")] = val.decode(errors="replace")
    return out, bad


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


INVALID_VERSION_HINTS = {
    0x16: "a TLS handshake sent to a plaintext Beats input",
    ord("{"): "raw JSON, not Lumberjack",
    ord("["): "raw JSON, not Lumberjack",
    ord('"'): "raw JSON, not Lumberjack",
    ord("<"): "syslog, not Lumberjack",
}
HTTP_STARTS = frozenset(b"GPHDOCT")  # GET POST PUT HEAD DELETE OPTIONS CONNECT TRACE PATCH


def invalid_version_text(byte: int) -> str:
    """Logstash's wording ('Invalid version of beats protocol: N') plus what N usually means."""
    hint = INVALID_VERSION_HINTS.get(byte)
    if hint is None:
        hint = "HTTP or other text, not Lumberjack" if byte in HTTP_STARTS else "not a Lumberjack frame"
    return f"Invalid version of beats protocol: {byte} ({_printable(byte)}: {hint})"


def _printable(byte: int) -> str:
    return repr(chr(byte)) if 32 <= byte < 127 else f"0x{byte:02x}"
