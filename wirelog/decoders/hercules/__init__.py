"""Vostok Hercules: binary event codec, Gate HTTP traffic, bare event streams."""

from wirelog.decoders.base import ProtocolSpec, lazy_decoder, lazy_exports
from wirelog.decoders.hercules.detect import detect

SPEC = ProtocolSpec(
    name="hercules",
    detect=detect,
    decoder=lazy_decoder("wirelog.decoders.hercules.decoder", "HerculesDecoder"),
    ports=frozenset({6306}),
    description="Vostok Hercules: Gate HTTP traffic (/stream/send, /stream/sendAsync) and bare events",
)

__all__ = ["SPEC", "HerculesDecoder", "decode_event_stream"]

__getattr__ = lazy_exports(
    __name__,
    {
        "HerculesDecoder": "wirelog.decoders.hercules.decoder",
        "decode_event_stream": "wirelog.decoders.hercules.decoder",
    },
)
