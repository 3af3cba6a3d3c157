"""TCP reassembly: segments in, per-direction ordered byte chunks and explicit gaps out.

Per connection and direction we keep the next stream offset to deliver and, only when segments arrive
out of order, a small sorted list of pending segments. Sequence numbers are unwrapped into unbounded
offsets (32-bit modular arithmetic, so a stream may cross 2^32). Policy for bytes seen twice:

- `first` (default, like Wireshark's Follow TCP Stream and Zeek): the first copy wins and is delivered
  as soon as it is in order;
- `last` (like Suricata's old-linux policy): the latest copy wins; in-order bytes are held until the
  peer acknowledges them (or buffers fill, or the stream ends), so a later copy can still replace them.

Either way a copy whose bytes differ is a `tcp.overlap-conflict` finding naming both frames. Missing
bytes are never zero-filled: they become a `Gap` (and a `tcp.gap` finding) once the peer acknowledged
data beyond them, the out-of-order buffer fills, or the stream ends. Memory is bounded: pending bytes,
retransmission history and live connections are capped, idle and closed connections are evicted.

The engine pushes segments with `segment(...)` and drains `out` (Chunk, Gap, Finding, and a
StreamInfo when a connection is finished).
"""

from __future__ import annotations

import ipaddress
from bisect import bisect_left, bisect_right, insort
from collections import deque

from wirelog.model import Chunk, Direction, Finding, Gap, Severity, StreamInfo

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
MOD = 1 << 32
HALF = 1 << 31

POLICIES = ("first", "last")
HISTORY_SEGMENTS = 512  # delivered segments kept for comparison: a storm of tiny retransmissions stays linear


def _start(segment: list) -> int:
    return segment[0]


class _Half:
    """One direction of a connection: where delivery stands and what waits."""

    __slots__ = (
        "direction", "base", "next_off", "pending", "pending_bytes", "history", "history_bytes",
        "ack_raw", "ack_first", "fin_off", "syn_seen", "is_c2s",
    )  # fmt: skip

    def __init__(self, direction: Direction) -> None:
        self.direction = direction
        self.is_c2s = direction is Direction.C2S
        self.base: int | None = None  # raw sequence number of stream offset 0
        self.next_off = 0
        self.pending: list[list] = []  # sorted [off, data, frame, ts], never overlapping
        self.pending_bytes = 0
        self.history: deque[tuple[int, bytes, int | None]] = deque()  # recently delivered
        self.history_bytes = 0
        self.ack_raw: int | None = None  # highest ACK the peer sent for this direction (raw)
        self.ack_first: int | None = None  # first such ACK (for data never captured at all)
        self.fin_off: int | None = None
        self.syn_seen = False

    def offset(self, seq: int) -> int:
        """Unwrap a raw sequence number to the stream offset nearest to the delivery point."""
        rel = (seq - self.base) % MOD
        return rel + ((self.next_off - rel + HALF) // MOD) * MOD

    def acked_offset(self) -> int | None:
        if self.ack_raw is None or self.base is None:
            return None
        return self.offset(self.ack_raw)


class _Conn:
    __slots__ = ("info", "halves", "closed", "client_key", "emit")

    def __init__(self, info: StreamInfo, client_key: tuple, emit: bool) -> None:
        self.info = info
        self.emit = emit  # produce Chunk objects (False once nobody wants this stream's bytes)
        self.halves = {Direction.C2S: _Half(Direction.C2S), Direction.S2C: _Half(Direction.S2C)}
        self.closed = False
        self.client_key = client_key


def _overlap(off: int, data: bytes, o_off: int, o_data: bytes) -> tuple[int, int, bytes, bytes] | None:
    """Where a segment meets another: (start, end, the other's bytes there, this one's), or None."""
    lo, hi = max(off, o_off), min(off + len(data), o_off + len(o_data))
    if lo >= hi:
        return None
    return lo, hi, bytes(o_data[lo - o_off : hi - o_off]), bytes(data[lo - off : hi - off])


def format_ip(addr: bytes) -> str:
    return str(ipaddress.ip_address(addr))


def endpoint(addr: bytes, port: int) -> str:
    ip = format_ip(addr)
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class Reassembler:
    """Reassembles every TCP connection of one capture; see the module docstring."""

    def __init__(
        self,
        capture: str,
        server_ports: frozenset[int] = frozenset(),
        overlap: str = "first",
        *,
        max_pending: int = 4 * 1024 * 1024,
        max_segments: int = 4096,
        history: int = 32 * 1024,
        idle_timeout: float = 600.0,
        close_grace: float = 5.0,
        max_connections: int = 50_000,
        sweep_every: int = 8192,
        emit_data: bool = True,
    ) -> None:
        if overlap not in POLICIES:
            raise ValueError(f"overlap policy must be one of {POLICIES}, not {overlap!r}")
        self.capture = capture
        self.server_ports = server_ports
        self.last_wins = overlap == "last"
        self.emit_data = emit_data  # False: only account (stream summaries), no Chunk objects
        self.out: list = []
        self._max_pending = max_pending
        self._max_segments = max_segments  # pending segments: bounds the cost of each insertion too
        self._history = history
        self._idle_ns = int(idle_timeout * 1e9)
        self._grace_ns = int(close_grace * 1e9)
        self._max_conns = max_connections
        self._sweep_every = sweep_every
        self._until_sweep = sweep_every
        self._now = 0
        self._conns: dict[tuple, tuple[_Conn, _Half, _Half]] = {}
        self._live: dict[int, _Conn] = {}  # stream id → connection, in creation order
        self._next_id = 0

    def stream_info(self, stream: int) -> StreamInfo | None:
        """The StreamInfo of a live (not yet finished) stream."""
        conn = self._live.get(stream)
        return None if conn is None else conn.info

    def mute(self, stream: int) -> None:
        """Stop producing Chunks for a live stream (its protocol is unknown); gaps still come."""
        conn = self._live.get(stream)
        if conn is not None:
            conn.emit = False

    # ------------------------------------------------------------------ per packet

    def segment(
        self,
        frame: int,
        ts: int,
        src: bytes,
        sport: int,
        dst: bytes,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        missing: int = 0,
    ) -> None:
        """Account one TCP segment; results are appended to `out`."""
        if ts > self._now:
            self._now = ts
        entry = self._conns.get((src, sport, dst, dport))
        if entry is None or (flags & SYN and self._reopens(entry, flags, seq)):
            entry = self._open(frame, ts, src, sport, dst, dport, flags, entry)
        conn, half, peer = entry
        info = conn.info
        info.last_ts = ts
        info.last_frame = frame
        if half.is_c2s:
            info.packets_c2s += 1
        else:
            info.packets_s2c += 1

        if flags & SYN:
            seq = self._syn(half, info, seq, flags)
        elif half.base is None:
            half.base = seq
            info.midstream = True

        if flags & ACK:
            last = peer.ack_raw
            if last is None or (ack - last) % MOD < HALF:
                if last is None:
                    peer.ack_first = ack
                peer.ack_raw = ack
                if peer.pending:
                    self._acked(conn, peer, frame, ts)

        if payload:
            off = half.offset(seq)
            if off == half.next_off and not half.pending and not self.last_wins:
                self._deliver(conn, half, off, payload, frame, ts)
                if missing:
                    self._gap(conn, half, half.next_off, missing, frame, ts)
            else:
                self._insert(conn, half, off, payload, frame, ts)
        if flags & (FIN | RST):
            self._fin_rst(conn, half, peer, seq, flags, len(payload) + missing)

        self._until_sweep -= 1
        if not self._until_sweep:
            self._sweep()

    @staticmethod
    def _syn(half: _Half, info: StreamInfo, seq: int, flags: int) -> int:
        """Take the ISN from a SYN; returns the sequence number of the first data byte."""
        if not half.syn_seen:
            half.syn_seen = True
            if half.base is None or not half.next_off:
                half.base = (seq + 1) % MOD
            if flags & ACK:
                info.handshake = True
        return (seq + 1) % MOD

    @staticmethod
    def _fin_rst(conn: _Conn, half: _Half, peer: _Half, seq: int, flags: int, length: int) -> None:
        info = conn.info
        if flags & FIN and half.fin_off is None:
            half.fin_off = half.offset(seq) + length
            if half.is_c2s:
                info.fin_c2s = True
            else:
                info.fin_s2c = True
            if peer.fin_off is not None:
                conn.closed = True
        if flags & RST:
            info.reset = True
            conn.closed = True

    def _reopens(self, entry: tuple[_Conn, _Half, _Half], flags: int, seq: int) -> bool:
        """A SYN on a known 4-tuple: a new connection unless it repeats the one we have."""
        conn, half, _ = entry
        if conn.closed:
            return True
        return half.syn_seen and half.base != (seq + 1) % MOD and half.next_off > 0

    def _open(self, frame, ts, src, sport, dst, dport, flags, old) -> tuple[_Conn, _Half, _Half]:
        """Create a connection, deciding which side is the client.

        The SYN sender; else the side talking to a well-known server port (`server_ports`, then any
        port below 1024 against one above); else the first sender.
        """
        if flags & SYN:
            src_is_client = not flags & ACK
            by = "syn"
        elif (dport in self.server_ports) != (sport in self.server_ports):
            src_is_client = dport in self.server_ports
            by = "port"
        elif (dport < 1024) != (sport < 1024):  # a system port against an ephemeral one
            src_is_client = dport < 1024
            by = "port"
        else:
            src_is_client = True
            by = "first"
        if old is not None:
            self._finish(old[0])
        c_ip, c_port, s_ip, s_port = (src, sport, dst, dport) if src_is_client else (dst, dport, src, sport)
        info = StreamInfo(
            capture=self.capture,
            stream=self._next_id,
            client=endpoint(c_ip, c_port),
            server=endpoint(s_ip, s_port),
            client_port=c_port,
            server_port=s_port,
            client_by=by,
            first_ts=ts,
            first_frame=frame,
            port_reuse=old is not None,
        )
        self._next_id += 1
        conn = _Conn(info, (c_ip, c_port, s_ip, s_port), self.emit_data)
        c2s, s2c = conn.halves[Direction.C2S], conn.halves[Direction.S2C]
        self._conns[(c_ip, c_port, s_ip, s_port)] = (conn, c2s, s2c)
        self._conns[(s_ip, s_port, c_ip, c_port)] = (conn, s2c, c2s)
        self._live[info.stream] = conn
        if old is not None:
            self.out.append(
                Finding(
                    "tcp.port-reuse",
                    Severity.INFO,
                    f"new connection on the ports of stream {old[0].info.stream} "
                    f"({'after a reset' if old[0].info.reset else 'after it closed'})",
                    "tcp",
                    None,
                    None,
                    frame,
                    ts,
                    {"previous_stream": old[0].info.stream},
                    info.stream,
                )
            )
        if len(self._live) > self._max_conns:
            self._finish(next(iter(self._live.values())))
        return self._conns[(src, sport, dst, dport)]

    # ------------------------------------------------------------------ delivery

    def _deliver(self, conn: _Conn, half: _Half, off: int, data: bytes, frame, ts) -> None:
        n = len(data)
        if conn.emit:
            self.out.append(Chunk(conn.info.stream, half.direction, off, data, frame, ts))
        half.next_off = off + n
        if half.is_c2s:
            conn.info.bytes_c2s += n
        else:
            conn.info.bytes_s2c += n
        hist = half.history
        hist.append((off, data, frame))
        half.history_bytes += n
        while (half.history_bytes > self._history and len(hist) > 1) or len(hist) > HISTORY_SEGMENTS:
            half.history_bytes -= len(hist.popleft()[1])

    def _gap(self, conn: _Conn, half: _Half, off: int, length: int, frame, ts, why: str = "") -> None:
        info = conn.info
        info.gaps += 1
        info.gap_bytes += length
        self.out.append(Gap(info.stream, half.direction, off, length, frame, ts))
        self.out.append(
            Finding(
                "tcp.gap",
                Severity.WARNING,
                f"{length} bytes missing in capture ({half.direction.value} offset {off}){why}",
                "tcp",
                half.direction,
                off,
                frame,
                ts,
                {"length": length, "seq": (half.base + off) % MOD},
                info.stream,
            )
        )
        half.next_off = off + length

    def _release(self, conn: _Conn, half: _Half) -> None:
        """Deliver pending segments that are now in order (and acknowledged, under `last`)."""
        pending = half.pending
        limit = half.acked_offset() if self.last_wins else None
        while pending and pending[0][0] <= half.next_off:
            off, data, frame, ts = pending[0]
            end = off + len(data)
            if self.last_wins and (limit is None or limit < end) and half.pending_bytes <= self._max_pending:
                return
            pending.pop(0)
            half.pending_bytes -= len(data)
            if end > half.next_off:
                self._deliver(conn, half, half.next_off, bytes(data[half.next_off - off :]), frame, ts)

    def _insert(self, conn: _Conn, half: _Half, off: int, data: bytes, frame, ts) -> None:
        """The slow path: retransmissions, overlaps and out-of-order segments."""
        info = conn.info
        end = off + len(data)
        if off < half.next_off:
            self._compare_history(conn, half, off, data, frame, ts)
            if end <= half.next_off:
                info.retransmissions += 1
                return
            data = data[half.next_off - off :]
            off = half.next_off
        elif off > half.next_off:
            info.out_of_order += 1
        pieces = self._merge(conn, half, off, data, frame, ts)
        for piece in pieces:
            insort(half.pending, piece)
            half.pending_bytes += len(piece[1])
        self._release(conn, half)
        if half.pending:
            self._maybe_gap(conn, half, frame, ts)
        if half.pending_bytes > self._max_pending or len(half.pending) > self._max_segments:
            self._force(conn, half, frame, ts)

    def _merge(self, conn: _Conn, half: _Half, off: int, data: bytes, frame, ts) -> list[list]:
        """Fit a new segment among the pending ones under the policy; report differing bytes."""
        end = off + len(data)
        pieces = []
        cursor = off
        pending = half.pending
        first = max(0, bisect_right(pending, off, key=_start) - 1)  # the only earlier one that may overlap
        last = bisect_left(pending, end, lo=first, key=_start)
        for seg in pending[first:last]:
            s_off, s_data = seg[0], seg[1]
            s_end = s_off + len(s_data)
            common = _overlap(off, data, s_off, s_data)
            if common is None:
                continue
            lo, hi, old, new = common
            if old != new:
                self._conflict(conn, half, lo, old, new, seg[2], frame, ts)
            if self.last_wins:
                pending.remove(seg)
                half.pending_bytes -= len(s_data)
                if s_off < off:
                    pieces.append([s_off, s_data[: off - s_off], seg[2], seg[3]])
                if s_end > end:
                    pieces.append([end, s_data[end - s_off :], seg[2], seg[3]])
            else:
                if lo > cursor:
                    pieces.append([cursor, data[cursor - off : lo - off], frame, ts])
                cursor = max(cursor, hi)
        if self.last_wins:
            pieces.append([off, data, frame, ts])
        elif cursor < end:
            pieces.append([cursor, data[cursor - off :], frame, ts])
        return pieces

    def _compare_history(self, conn: _Conn, half: _Half, off: int, data: bytes, frame, ts) -> None:
        """A copy of bytes already delivered: equal is a plain retransmission, different is a finding."""
        for h_off, h_data, h_frame in half.history:
            common = _overlap(off, data, h_off, h_data)
            if common is not None and common[2] != common[3]:
                self._conflict(
                    conn, half, common[0], common[2], common[3], h_frame, frame, ts, delivered=True
                )
                return

    def _conflict(self, conn, half, off, old, new, old_frame, frame, ts, delivered=False) -> None:
        conn.info.conflicts += 1
        kept = "first" if delivered or not self.last_wins else "last"
        note = " (first copy already acknowledged and delivered)" if delivered and self.last_wins else ""
        self.out.append(
            Finding(
                "tcp.overlap-conflict",
                Severity.WARNING,
                f"{len(new)} bytes at {half.direction.value} offset {off} were sent twice with different "
                f"content (frames {old_frame} and {frame}); kept the {kept} copy{note}",
                "tcp",
                half.direction,
                off,
                frame,
                ts,
                {
                    "first_frame": old_frame,
                    "length": len(new),
                    "first_bytes": old[:64].hex(),
                    "second_bytes": new[:64].hex(),
                    "kept": kept,
                },
                conn.info.stream,
            )
        )

    def _acked(self, conn: _Conn, half: _Half, frame, ts) -> None:
        """The peer acknowledged more of `half`: release held bytes, detect gaps it skipped."""
        self._release(conn, half)
        if half.pending:
            self._maybe_gap(conn, half, frame, ts)

    def _maybe_gap(self, conn: _Conn, half: _Half, frame, ts) -> None:
        """Declare the hole before the first pending segment once the peer acknowledged past it."""
        acked = half.acked_offset()
        first = half.pending[0][0]
        if acked is not None and first > half.next_off and acked >= first:
            self._gap(conn, half, half.next_off, first - half.next_off, frame, ts)
            self._release(conn, half)

    def _force(self, conn: _Conn, half: _Half, frame, ts) -> None:
        """Out-of-order buffer full: give up on the hole (or the ack wait) and deliver."""
        self.out.append(
            Finding(
                "tcp.buffer-full",
                Severity.WARNING,
                f"more than {self._max_pending} bytes or {self._max_segments} segments waiting in "
                f"{half.direction.value}; "
                "delivering without waiting for missing or unacknowledged bytes",
                "tcp",
                half.direction,
                half.next_off,
                frame,
                ts,
                {},
                conn.info.stream,
            )
        )
        self._flush(conn, half, frame, ts)

    def _flush(self, conn: _Conn, half: _Half, frame, ts) -> None:
        """Deliver everything pending, with gaps for the holes between."""
        while half.pending:
            first = half.pending[0][0]
            if first > half.next_off:
                self._gap(conn, half, half.next_off, first - half.next_off, frame, ts)
            off, data, p_frame, p_ts = half.pending.pop(0)
            half.pending_bytes -= len(data)
            if off + len(data) > half.next_off:
                self._deliver(conn, half, half.next_off, bytes(data[half.next_off - off :]), p_frame, p_ts)

    # ------------------------------------------------------------------ end of streams

    def _finish(self, conn: _Conn) -> None:
        """Flush a connection, report what never arrived, and emit its StreamInfo."""
        info = conn.info
        if info.stream not in self._live:
            return
        for half in conn.halves.values():
            self._flush(conn, half, info.last_frame, info.last_ts)
            if half.base is not None:
                acked = half.acked_offset()
                end = half.next_off + (1 if half.fin_off is not None else 0)
                if acked is not None and HALF > acked - end > 0:
                    self._gap(conn, half, half.next_off, acked - end, info.last_frame, info.last_ts,
                              " (acknowledged by the peer but not captured)")  # fmt: skip
            elif half.ack_first is not None and half.ack_raw != half.ack_first:
                unseen = (half.ack_raw - half.ack_first) % MOD
                # The decoder learns the direction is missing (e.g. ACKs it cannot see: "acked" unknown).
                self.out.append(Gap(info.stream, half.direction, 0, unseen, info.last_frame, info.last_ts))
                self.out.append(
                    Finding(
                        "tcp.unseen-data",
                        Severity.WARNING,
                        f"the peer acknowledged {unseen} bytes of {half.direction.value} data "
                        "that the capture does not contain",
                        "tcp",
                        half.direction,
                        None,
                        info.last_frame,
                        info.last_ts,
                        {"length": unseen},
                        info.stream,
                    )
                )
        for key in (conn.client_key, (conn.client_key[2], conn.client_key[3], *conn.client_key[:2])):
            if self._conns.get(key, (None,))[0] is conn:
                del self._conns[key]
        del self._live[info.stream]
        self.out.append(info)

    def _sweep(self) -> None:
        """Evict idle connections and closed ones past their grace period (capture time)."""
        self._until_sweep = self._sweep_every
        now = self._now
        for conn in list(self._live.values()):
            idle = now - conn.info.last_ts
            if idle > self._idle_ns or (conn.closed and idle > self._grace_ns):
                self._finish(conn)

    def finish(self) -> None:
        """End of capture: finish every live connection in stream order."""
        for conn in list(self._live.values()):
            self._finish(conn)
