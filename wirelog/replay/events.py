"""What the sans-IO senders tell their driver (h11-style small immutable events), and the one
error they raise: bytes from the receiver that its protocol does not allow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# One event to send: its key (the `event_id`, which the journal records) and its encoded document.
Item = tuple[Any, bytes]


@dataclass(frozen=True, slots=True)
class Acked:
    """The receiver acknowledged these events (their keys, in the order they were sent)."""

    keys: list[Any]


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """The receiver is alive but acknowledged nothing new (Lumberjack ACK 0, a repeated ACK)."""


@dataclass(frozen=True, slots=True)
class Ready:
    """The handshake is done (Log Courier's VERS, or `????` from a receiver without one)."""

    receiver: str


@dataclass(frozen=True, slots=True)
class Pong:
    """Log Courier's answer to a PING."""


Event = Acked | KeepAlive | Ready | Pong


class ProtocolError(Exception):
    """The receiver sent bytes its protocol does not allow; the message says what, in one line."""


class Rejected(Exception):
    """The receiver refused the events for good (a Hercules Gate's 4xx): no retry can help; the
    message says what it answered, in one line."""
