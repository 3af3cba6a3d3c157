"""Lumberjack v1/v2 (logstash-forwarder, Elastic Beats → Logstash / go-lumber).

Modules: `framing` (frame layouts), `inflate` (capped zlib), `sequence` (seq profiles),
`delivery` (windows, ACKs, per-event delivery truth), `resend` (resends across connections),
`decoder` (the stream state machine), `detect` (content-based detection).
Record kinds and finding codes: docs/protocols/lumberjack.md.
"""

from wirelog.decoders.base import ProtocolSpec
from wirelog.decoders.lumberjack.decoder import LumberjackDecoder
from wirelog.decoders.lumberjack.detect import PORTS, detect, find_start

SPEC = ProtocolSpec(
    name="lumberjack",
    detect=detect,
    decoder=LumberjackDecoder,
    ports=PORTS,
    description="Lumberjack v1/v2 (Beats, logstash-forwarder → Logstash, go-lumber)",
    find_start=find_start,
)

__all__ = ["SPEC", "LumberjackDecoder"]
