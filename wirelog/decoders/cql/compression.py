"""Body and frame decompression with hard output caps (LZ4 block, Snappy raw).

Pre-v5 bodies (reference/cql.md §10): LZ4 = 4-byte BIG-endian uncompressed length + raw LZ4 block;
Snappy = raw Snappy buffer with its own varint length. v5 LZ4 frames carry the uncompressed length in
the frame header. Every declared size is checked against the cap BEFORE anything is allocated, so a
hostile length can never make us inflate gigabytes.
"""

from __future__ import annotations

import struct

import cramjam
import lz4.block


class DecompressionError(Exception):
    """The compressed bytes are corrupt, or their declared size is out of bounds or wrong."""


def lz4_block(data: bytes, size: int, cap: int) -> bytes:
    """Inflate a raw LZ4 block that must yield exactly `size` bytes."""
    if size > cap:
        raise DecompressionError(f"declared LZ4 size {size} exceeds the cap of {cap} bytes")
    try:
        out = lz4.block.decompress(data, uncompressed_size=size)
    except lz4.block.LZ4BlockError as exc:
        raise DecompressionError(f"LZ4 block corrupt or larger than the declared {size} bytes") from exc
    if len(out) != size:
        raise DecompressionError(f"LZ4 block inflated to {len(out)} bytes, declared {size}")
    return out


def lz4_body(body: bytes, cap: int) -> bytes:
    """Inflate a pre-v5 LZ4 body (big-endian length prefix + block)."""
    if len(body) < 4:
        raise DecompressionError("LZ4 body shorter than its 4-byte length prefix")
    (size,) = struct.unpack_from(">I", body)
    return lz4_block(body[4:], size, cap)


def snappy_length(body: bytes) -> int:
    """The uncompressed length a raw Snappy buffer declares (its leading varint)."""
    size = shift = 0
    for i in range(min(len(body), 5)):
        b = body[i]
        size |= (b & 0x7F) << shift
        if not b & 0x80:
            return size
        shift += 7
    raise DecompressionError("Snappy length varint missing or longer than 5 bytes")


def snappy_body(body: bytes, cap: int) -> bytes:
    """Inflate a pre-v5 Snappy body."""
    size = snappy_length(body)
    if size > cap:
        raise DecompressionError(f"declared Snappy size {size} exceeds the cap of {cap} bytes")
    try:
        return bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise DecompressionError(f"Snappy buffer corrupt: {exc}") from exc


def lz4_compress(data: bytes) -> bytes:
    """A raw LZ4 block (no size prefix), as v5 frames carry it."""
    return lz4.block.compress(data, store_size=False)
