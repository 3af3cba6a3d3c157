"""The CRC24 of CQL v5 frame headers, exactly as Cassandra computes it (reference/cql.md §4), for
content detection (the decoder in the core checks both frame checksums itself).

CRC24 protects the 3- or 5-byte frame header: polynomial 0x1974F0B, register init 0x875060, bytes in
wire order, bits MSB-first, no reflection, no final XOR. It covers only a few bytes per frame, but
detection tests it at many offsets of a mid-stream sample, so we use crcmod's C extension when it
loaded and our own table otherwise (crcmod's silent pure-Python fallback is ~50x slower than its C code).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

CRC24_INIT = 0x875060
CRC24_POLY = 0x1974F0B


def _crc24_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        reg = i << 16
        for _ in range(8):
            reg <<= 1
            if reg & 0x1000000:
                reg ^= CRC24_POLY
        table.append(reg & 0xFFFFFF)
    return tuple(table)


_TABLE = _crc24_table()


def crc24_table(data: bytes | memoryview) -> int:
    """Table-driven CRC24; the fallback when crcmod's C extension is missing."""
    crc = CRC24_INIT
    for b in data:
        crc = ((crc << 8) & 0xFFFFFF) ^ _TABLE[(crc >> 16) ^ b]
    return crc


def _pick_crc24() -> tuple[Callable[[bytes], int], str]:
    try:
        crcmod_mod = importlib.import_module("crcmod.crcmod")
    except ImportError:
        return crc24_table, "table"
    if not getattr(crcmod_mod, "_usingExtension", False):
        return crc24_table, "table"
    return crcmod_mod.mkCrcFun(CRC24_POLY, initCrc=CRC24_INIT, rev=False, xorOut=0), "crcmod-c"


crc24, CRC24_BACKEND = _pick_crc24()
"""crc24(data) -> int; CRC24_BACKEND says which implementation runs ("crcmod-c" or "table")."""
