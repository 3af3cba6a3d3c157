"""TLS key logs for the decoding sessions (docs/tls.md).

A key log is named by its path (`--tls-keylog`: read here in pieces, never as one string: it can be
as large as the traffic it serves) or given as text (a pcapng's Decryption Secrets Block, the Spark
data source's `tlsKeylogs` option). The core reads each once per process into its secrets alone
(`_core.KeyLogs`, native/src/decoders/tls/keylog.rs), shared by the session of every capture.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

from wirelog import _core

READ_SIZE = 1 << 20  # bytes of a key log file handed to the core at a time


@dataclass(frozen=True, slots=True)
class KeyLogSource:
    """A key log: `name` (in its findings) and its `path` or its `text`."""

    name: str
    path: str | None = None
    text: str | None = None

    def pieces(self) -> Iterator[bytes]:
        if self.path is None:
            yield (self.text or "").encode()
            return
        with open(self.path, "rb") as f:
            while piece := f.read(READ_SIZE):
                yield piece

    def read_text(self) -> str:
        """The whole text (the Spark engine ships it to its tasks, which cannot open the path)."""
        if self.path is None:
            return self.text or ""
        with open(self.path, encoding="utf-8", errors="replace") as f:
            return f.read()


@functools.lru_cache(maxsize=1)  # one run's key logs, for every capture it decodes
def core_keylogs(sources: tuple[KeyLogSource, ...]) -> _core.KeyLogs | None:
    """The core's reading of `sources` (None without any)."""
    return _core.KeyLogs((s.name, s.pieces()) for s in sources) if sources else None
