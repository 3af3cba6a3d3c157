"""Log Courier (driskell/log-courier): HELO/VERS handshake, JDAT and streamed EVNT payloads, ACKN.

Facts and citations: ../shared/reference/courier.md. Modules: `framing` (headers and length rules),
`handshake` (HELO/VERS layouts), `payload` (capped inflate, event framing, JSON), `delivery` (ACKN
bookkeeping), `resend` (nonces across connections), `fingerprint`, `detect`, `decoder`.
"""

from __future__ import annotations

from wirelog.decoders.base import ProtocolSpec, lazy_decoder, lazy_exports
from wirelog.decoders.courier.detect import detect, find_start

SPEC = ProtocolSpec(
    name="courier",
    detect=detect,
    decoder=lazy_decoder("wirelog.decoders.courier.decoder", "CourierDecoder"),
    ports=frozenset(),
    description="Log Courier (HELO/VERS, JDAT, streamed EVNT, ACKN, PING/PONG)",
    find_start=find_start,
)

__all__ = ["SPEC", "CourierDecoder"]


__getattr__ = lazy_exports(__name__, {"CourierDecoder": "wirelog.decoders.courier.decoder"})
