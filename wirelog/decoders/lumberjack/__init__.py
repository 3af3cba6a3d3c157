"""Lumberjack v1/v2 (logstash-forwarder, Elastic Beats → Logstash / go-lumber).

Detection (`detect`) is here; the decoder is in the native core (native/src/decoders/lumberjack/).
Record kinds and finding codes: docs/protocols/lumberjack.md.
"""

from wirelog.decoders.base import ProtocolSpec
from wirelog.decoders.lumberjack.detect import PORTS, detect, find_start

SPEC = ProtocolSpec(
    name="lumberjack",
    detect=detect,
    decoder=None,
    ports=PORTS,
    description="Lumberjack v1/v2 (Beats, logstash-forwarder → Logstash, go-lumber)",
    find_start=find_start,
)

__all__ = ["SPEC"]
