"""What a lost connection left unacknowledged, sent first on the next one: the part every sender
shares (Lumberjack windows, Log Courier payloads, Gate requests)."""

from __future__ import annotations

from collections import deque
from typing import Any

from wirelog.replay.events import Item


class Resending:
    """A queue of what to send again. An entry is a list of items, sent again with `send` (a new
    window or request); a sender whose entries are something else (Log Courier's payloads, which
    keep their nonce) overrides `_again`."""

    def __init__(self) -> None:
        self._resend: deque[Any] = deque()

    def has_resend(self) -> bool:
        return bool(self._resend)

    def send_resend(self) -> tuple[bytes, int]:
        """The next entry, as bytes to write: (bytes, events)."""
        return self._again(self._resend.popleft())

    def _again(self, items: list[Item]) -> tuple[bytes, int]:
        return self.send(items), len(items)  # type: ignore[attr-defined]  # every sender's
