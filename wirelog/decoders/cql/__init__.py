"""Cassandra CQL native protocol v3/v4/v5 (v5 CRC24/CRC32 frames, LZ4/Snappy).

Detection (`detect`, with the CRC24 of `crc`) is here; the decoder is in the native core
(native/src/decoders/cql/). Record kinds and finding codes: docs/protocols/cql.md.
"""

from __future__ import annotations

from wirelog.decoders.base import ProtocolSpec
from wirelog.decoders.cql.detect import detect

SPEC = ProtocolSpec(
    name="cql",
    detect=detect,
    decoder=None,
    ports=frozenset({9042, 9142}),
    description="Cassandra CQL native protocol v3/v4/v5 (v5 CRC24/CRC32 frames, LZ4/Snappy)",
)

__all__ = ["SPEC"]
