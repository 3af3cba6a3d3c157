"""Cassandra CQL native protocol v3/v4/v5: envelopes, v5 CRC/LZ4 frames, every opcode.

Modules: crc (CRC24/CRC32), framing (v5 frames), envelope (9-byte headers), types (notation and cell
values), messages (bodies per opcode and version), compression (capped LZ4/Snappy), decoder (the
per-connection state machine), detect (content detection).
"""

from __future__ import annotations

from wirelog.decoders.base import ProtocolSpec, lazy_decoder, lazy_exports
from wirelog.decoders.cql.detect import detect

SPEC = ProtocolSpec(
    name="cql",
    detect=detect,
    decoder=lazy_decoder("wirelog.decoders.cql.decoder", "CqlDecoder"),
    ports=frozenset({9042, 9142}),
    description="Cassandra CQL native protocol v3/v4/v5 (v5 CRC24/CRC32 frames, LZ4/Snappy)",
)


__getattr__ = lazy_exports(__name__, {"CqlDecoder": "wirelog.decoders.cql.decoder"})
