"""IP fragment reassembly (IPv4 and IPv6), bounded in memory.

Fragments are collected per datagram key; when every byte from 0 to the end announced by the last
fragment is present, the payload is returned and the datagram gets the frame number and timestamp
of the fragment that completed it (what Wireshark shows). Bytes covered twice keep the first copy
(first-wins, like our TCP default); a second copy with different bytes is an `ip.fragment-overlap`
finding naming both frames. Sets that never complete, are evicted (too many, too many bytes, or
older than the timeout in capture time) or are still open at the end are `ip.fragments-incomplete`.
"""

from __future__ import annotations

from typing import Any

from wirelog.model import Severity
from wirelog.pcap.findings import FindingSink

MAX_DATAGRAM = 65535
MAX_SETS = 1024
MAX_BYTES = 64 << 20
TIMEOUT_NS = 60 * 1_000_000_000


class _Set:
    """The fragments seen so far of one datagram."""

    __slots__ = ("first_frame", "first_ts", "frags", "meta", "nbytes", "total")

    def __init__(self, frame: int, ts: int) -> None:
        self.frags: list[tuple[int, bytes, int]] = []  # (offset, data, frame) in arrival order
        self.total: int | None = None  # payload length, known once the last fragment arrived
        self.nbytes = 0
        self.meta: Any = None  # whatever the caller attached to the offset-0 fragment
        self.first_frame = frame
        self.first_ts = ts

    def complete(self) -> bool:
        if self.total is None:
            return False
        covered = 0
        for off, data, _ in sorted(self.frags, key=lambda f: f[0]):
            if off > covered:
                return False
            covered = max(covered, off + len(data))
        return covered >= self.total

    def assemble(self) -> bytes:
        """The payload; fragments are written newest first so the first copy of any byte wins."""
        assert self.total is not None
        out = bytearray(self.total)
        for off, data, _ in reversed(self.frags):
            out[off : off + len(data)] = data[: max(0, self.total - off)]
        return bytes(out)


class Defragmenter:
    """Collects fragments of one capture; `add` returns a datagram's payload once it is complete."""

    def __init__(
        self,
        sink: FindingSink,
        *,
        max_sets: int = MAX_SETS,
        max_bytes: int = MAX_BYTES,
        timeout_ns: int = TIMEOUT_NS,
    ) -> None:
        self.sink = sink
        self.max_sets = max_sets
        self.max_bytes = max_bytes
        self.timeout_ns = timeout_ns
        self._sets: dict[tuple, _Set] = {}  # insertion order = age
        self._bytes = 0

    def add(
        self,
        key: tuple,
        offset: int,
        data: bytes,
        length: int,
        more: bool,
        frame: int,
        ts: int,
        meta: Any = None,
    ) -> tuple[bytes, Any] | None:
        """Add one fragment: `data` is what was captured of its `length` payload bytes at `offset`.

        Returns (payload, meta of the offset-0 fragment) when the datagram is complete, else None.
        A fragment cut by the snaplen leaves a hole, so its datagram is reported as incomplete.
        """
        if offset + length > MAX_DATAGRAM:
            self.sink.limited(
                "ip.malformed",
                Severity.WARNING,
                f"fragment in packet {frame} ends at byte {offset + length}, beyond the largest datagram",
                frame,
                ts,
            )
            return None
        self._expire(ts)
        entry = self._sets.get(key)
        if entry is None:
            entry = self._sets[key] = _Set(frame, ts)
        if not more and entry.total is None:
            entry.total = offset + length
        if offset == 0:
            entry.meta = meta
        if self._overlaps(entry, offset, data, frame, ts):
            return None
        entry.frags.append((offset, data, frame))
        entry.nbytes += len(data)
        self._bytes += len(data)
        if entry.complete():
            del self._sets[key]
            self._bytes -= entry.nbytes
            return entry.assemble(), entry.meta
        while self._sets and (len(self._sets) > self.max_sets or self._bytes > self.max_bytes):
            self._evict(next(iter(self._sets)), "evicted to bound memory")
        return None

    def _overlaps(self, entry: _Set, offset: int, data: bytes, frame: int, ts: int) -> bool:
        """Report differing bytes covered twice; True when `data` is an exact duplicate (not stored)."""
        end = offset + len(data)
        for off, old, old_frame in entry.frags:
            lo, hi = max(off, offset), min(off + len(old), end)
            if lo >= hi:
                continue
            if off == offset and old == data:
                return True
            if old[lo - off : hi - off] != data[lo - offset : hi - offset]:
                self.sink.add(
                    "ip.fragment-overlap",
                    Severity.WARNING,
                    f"IP fragment in packet {frame} overlaps packet {old_frame} with different bytes "
                    f"(datagram bytes {lo}..{hi}); the first copy is kept",
                    frame,
                    ts,
                    first_frame=old_frame,
                    start=lo,
                    end=hi,
                )
        return False

    def _expire(self, now: int) -> None:
        while self._sets:
            key = next(iter(self._sets))
            if now - self._sets[key].first_ts <= self.timeout_ns:
                return
            self._evict(key, "timed out")

    def _evict(self, key: tuple, why: str) -> None:
        entry = self._sets.pop(key)
        self._bytes -= entry.nbytes
        have = sum(len(d) for _, d, _ in entry.frags)
        size = "unknown size" if entry.total is None else f"{entry.total} bytes"
        self.sink.limited(
            "ip.fragments-incomplete",
            Severity.WARNING,
            f"IP datagram whose first fragment is packet {entry.first_frame} was never completed "
            f"({have} bytes of {size} seen, {len(entry.frags)} fragments; {why})",
            entry.first_frame,
            entry.first_ts,
            fragments=len(entry.frags),
        )

    def finish(self) -> None:
        """Report every datagram still incomplete at the end of the capture."""
        while self._sets:
            self._evict(next(iter(self._sets)), "capture ended")
