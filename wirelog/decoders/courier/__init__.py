"""Log Courier (driskell/log-courier): HELO/VERS handshake, JDAT and streamed EVNT payloads, ACKN.

Facts and citations: ../shared/reference/courier.md. Detection is here (`detect`, with the header
rules of `framing`); the decoder is in the native core (native/src/decoders/courier/).
"""

from __future__ import annotations

from wirelog.decoders.base import ProtocolSpec
from wirelog.decoders.courier.detect import detect, find_start

SPEC = ProtocolSpec(
    name="courier",
    detect=detect,
    decoder=None,
    ports=frozenset(),
    description="Log Courier (HELO/VERS, JDAT, streamed EVNT, ACKN, PING/PONG)",
    find_start=find_start,
)

__all__ = ["SPEC"]
