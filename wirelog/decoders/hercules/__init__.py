"""Vostok Hercules: binary event codec, Gate HTTP traffic, bare event streams."""

from wirelog.decoders.hercules.decoder import SPEC, HerculesDecoder, decode_event_stream

__all__ = ["SPEC", "HerculesDecoder", "decode_event_stream"]
