"""pcap and pcapng record parsing: bytes in, packet records out.

A record is a plain tuple `(frame, ts_ns, linktype, buf, off, end, wirelen)`: the packet's captured
bytes are `buf[off:end]` (no copy is made here; `buf` is the current read block), `wirelen` is its
length on the wire, `frame` its 1-based number (Wireshark's: every packet record counts). `ts_ns` is
None for a pcapng Simple Packet Block, which carries no timestamp. `linktype` is None when a pcapng
packet names an interface that was never described (already reported as a finding), and for the
pcapng records that are not packets but that Wireshark (4.0) numbers as frames all the same —
Systemd Journal Export and custom blocks — so that our frame numbers stay Wireshark's.

The input is read in large blocks and records are cut out of each block with `struct.unpack_from`;
a record that straddles two blocks is carried over. That works the same on stdin pipes and on
decompressed streams. Lengths read from the file are checked against a cap and against what the
file still holds before anything is allocated for them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import BinaryIO

from wirelog.model import CaptureInfo, Severity
from wirelog.pcap.errors import CaptureError
from wirelog.pcap.findings import FindingSink
from wirelog.pcap.sources import READ_ERRORS

READ_SIZE = 1 << 20
MAX_BLOCK = 256 << 20  # no pcap record or pcapng block is believed beyond this
MIN_RECORD_LIMIT = 262144  # libpcap's largest snaplen; a pcap record may exceed a smaller snaplen

Record = tuple[int, int | None, int | None, bytes, int, int, int]

# pcap file magics (as read little-endian) → (byte order, ns per fraction unit)
_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
_PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
_BOMS = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}

_SHB, _IDB, _OPB, _SPB, _EPB = 0x0A0D0D0A, 1, 2, 3, 6
_HEADER_LEAST = 24  # a pcap file header; more than a pcapng section header's fixed part
_FRAME_RECORDS = frozenset({9, 0x00000BAD, 0x40000BAD})  # journal export, custom (copyable or not)
_OPT_TSRESOL, _OPT_TSOFFSET = 9, 14


class _Input:
    """Forward-only reads that never raise: a damaged stream ends the input and keeps the reason.

    A read returns what the input has as soon as it has the `least` bytes asked for, so a live pipe
    (`tcpdump -U -w - | wirelog ...`) yields its packets as they come instead of once a megabyte has
    piled up; `before_read` (if any) runs before every read of the stream, e.g. to flush output
    while the input may be about to wait.
    """

    __slots__ = ("before_read", "error", "read1")

    def __init__(self, stream: BinaryIO, before_read: Callable[[], None] | None = None) -> None:
        self.read1 = getattr(stream, "read1", stream.read)  # read1: at most one wait on the source
        self.before_read = before_read
        self.error: str | None = None

    def read(self, most: int, least: int = 1) -> bytes:
        """Between `least` and `most` bytes; fewer only at the end of the input or after a read error."""
        parts = []
        got = 0
        while got < least and self.error is None:
            if self.before_read is not None:
                self.before_read()
            try:
                part = self.read1(min(most - got, 4 * READ_SIZE))
            except READ_ERRORS as e:
                self.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                break
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)


def open_records(
    stream: BinaryIO,
    name: str,
    info: CaptureInfo,
    sink: FindingSink,
    before_read: Callable[[], None] | None = None,
) -> Iterator[Record]:
    """Recognise the capture format and return its record iterator (`before_read`: see _Input).

    Raises CaptureError (before any record) for an empty input, a damaged start, or bytes that are
    neither pcap nor pcapng. Sets info.format and info.link_types; the iterator sets info.truncated
    and info.error when reading stops early.
    """
    inp = _Input(stream, before_read)
    buf = inp.read(READ_SIZE, _HEADER_LEAST)
    what = f"after {info.compression} decompression " if info.compression else ""
    if not buf:
        if inp.error:
            raise CaptureError(f"{name}: cannot read {what}({inp.error})")
        raise CaptureError(f"{name}: empty input {what}(not a capture)".replace("  ", " "))
    magic = buf[:4]
    if magic in _PCAP_MAGICS:
        info.format = "pcap"
        return _open_pcap(inp, buf, name, info, sink)
    if magic == _PCAPNG_SHB:
        if buf[8:12] not in _BOMS:
            raise CaptureError(f"{name}: damaged pcapng section header (bad byte-order magic)")
        info.format = "pcapng"
        return _pcapng_records(inp, buf, info, sink)
    head = " ".join(f"{b:02x}" for b in buf[:4])
    raise CaptureError(f"{name}: not a pcap or pcapng capture {what}(starts with {head})")


def _stop(
    info: CaptureInfo, sink: FindingSink, code: str, severity: Severity, message: str, frame: int
) -> None:
    """Reading ends early: keep everything before, say why once."""
    info.truncated = True
    info.error = message
    sink.add(code, severity, message, frame=frame)


def _truncated(inp: _Input, info: CaptureInfo, sink: FindingSink, frame: int, have: int, need: int) -> None:
    why = f" ({inp.error})" if inp.error else ""
    _stop(
        info,
        sink,
        "pcap.truncated",
        Severity.WARNING,
        f"capture ends in the middle of record {frame} ({have} of {need} bytes present){why}; "
        f"the {frame - 1} packets before it were read",
        frame,
    )


def _refill(
    inp: _Input, buf: bytes, pos: int, need: int, info: CaptureInfo, sink: FindingSink, frame: int
) -> bytes | None:
    """The unread tail of `buf` followed by more input (at least `need` bytes in all when the input
    has them), or None at the end of the input, after reporting a record `frame` cut in the middle.
    """
    lacking = need - (len(buf) - pos)
    more = inp.read(max(READ_SIZE, lacking), max(1, lacking))
    if not more:
        if pos < len(buf) or inp.error:
            _truncated(inp, info, sink, frame, len(buf) - pos, need)
        return None
    return buf[pos:] + more


def _open_pcap(inp: _Input, buf: bytes, name: str, info: CaptureInfo, sink: FindingSink) -> Iterator[Record]:
    if len(buf) < 24:
        raise CaptureError(f"{name}: truncated pcap file header ({len(buf)} of 24 bytes)")
    order, mul = _PCAP_MAGICS[buf[:4]]
    snaplen, linktype = struct.unpack_from(order + "II", buf, 16)
    linktype &= 0xFFFF  # the upper 16 bits may carry FCS information
    info.link_types = [linktype]
    limit = min(MAX_BLOCK, max(snaplen, MIN_RECORD_LIMIT))
    return _pcap_loop(inp, buf, info, sink, struct.Struct(order + "IIII").unpack_from, mul, linktype, limit)


def _pcap_loop(
    inp: _Input,
    buf: bytes,
    info: CaptureInfo,
    sink: FindingSink,
    unpack: Callable[[bytes, int], tuple[int, int, int, int]],
    mul: int,
    linktype: int,
    limit: int,
) -> Iterator[Record]:
    pos = 24
    frame = 0
    while True:
        n = len(buf)
        need = 16
        while pos + 16 <= n:
            sec, frac, incl, orig = unpack(buf, pos)
            start = pos + 16
            end = start + incl
            if end > n or incl > limit:
                need = 16 + incl
                break
            frame += 1
            yield frame, sec * 1_000_000_000 + frac * mul, linktype, buf, start, end, orig
            pos = end
        if need > limit + 16:
            _corrupt(info, sink, frame, f"a record of {need - 16} captured bytes, the limit is {limit}")
            return
        buf = _refill(inp, buf, pos, need, info, sink, frame + 1)
        if buf is None:
            return
        pos = 0


class _Interface:
    """A pcapng interface: link type and how to turn its timestamp units into ns:
    ns = (units * mul >> shift) // div + offset_ns."""

    __slots__ = ("linktype", "mul", "offset_ns", "shift", "snaplen", "div")

    def __init__(self, linktype: int, snaplen: int) -> None:
        self.linktype = linktype
        self.snaplen = snaplen
        self.mul, self.div, self.shift = 1000, 1, 0  # default resolution: microseconds
        self.offset_ns = 0

    def set_resolution(self, code: int) -> None:
        """if_tsresol: high bit clear = 10^-n seconds, set = 2^-n seconds (integer math only)."""
        n = code & 0x7F
        if code & 0x80:
            self.mul, self.div, self.shift = 1_000_000_000, 1, n
        elif n <= 9:
            self.mul, self.div, self.shift = 10 ** (9 - n), 1, 0
        else:
            self.mul, self.div, self.shift = 1, 10 ** (n - 9), 0


def _parse_idb(buf: bytes, pos: int, blen: int, order: str) -> _Interface:
    linktype, snaplen = struct.unpack_from(order + "H2xI", buf, pos + 8)
    iface = _Interface(linktype, snaplen)
    opt, stop = pos + 16, pos + blen - 4
    while opt + 4 <= stop:
        code, length = struct.unpack_from(order + "HH", buf, opt)
        value = opt + 4
        if code == 0 or value + length > stop:
            break
        if code == _OPT_TSRESOL and length >= 1:
            iface.set_resolution(buf[value])
        elif code == _OPT_TSOFFSET and length >= 8:
            iface.offset_ns = struct.unpack_from(order + "q", buf, value)[0] * 1_000_000_000
        opt = value + ((length + 3) & ~3)
    return iface


def _pcapng_records(inp: _Input, buf: bytes, info: CaptureInfo, sink: FindingSink) -> Iterator[Record]:
    pos = 0
    frame = 0
    order = _BOMS[buf[8:12]]
    head = struct.Struct(order + "II").unpack_from
    u32 = struct.Struct(order + "I").unpack_from
    epb = struct.Struct(order + "IIIII").unpack_from
    ifaces: list[_Interface] = []
    clocks: list[tuple[int, int, int, int, int]] = []  # per interface, unpacked for the hot loop
    linktypes: set[int] = set()
    while True:
        n = len(buf)
        need = 12
        while pos + 12 <= n:
            btype, blen = head(buf, pos)
            if btype == _SHB:
                order = _BOMS.get(buf[pos + 8 : pos + 12], "")
                if not order:
                    _corrupt(info, sink, frame, "bad byte-order magic")
                    return
                head = struct.Struct(order + "II").unpack_from
                u32 = struct.Struct(order + "I").unpack_from
                epb = struct.Struct(order + "IIIII").unpack_from
                blen = head(buf, pos)[1]
                ifaces = []
                clocks = []
            if blen < 12 or blen & 3 or blen > MAX_BLOCK:
                _corrupt(info, sink, frame, f"block length {blen}")
                return
            if pos + blen > n:
                need = blen
                break
            if u32(buf, pos + blen - 4)[0] != blen:
                _corrupt(info, sink, frame, "block lengths at its start and end differ")
                return
            if btype in (_EPB, _OPB) and blen >= 32:
                iface_id, hi, lo, incl, orig = epb(buf, pos + 8)
                if btype == _OPB:  # a 16-bit interface id followed by a 16-bit drop count
                    iface_id = iface_id & 0xFFFF if order == "<" else iface_id >> 16
                frame += 1
                start = pos + 28
                end = start + min(incl, blen - 32)
                if iface_id < len(ifaces):
                    lt, mul, shift, div, offset_ns = clocks[iface_id]
                    yield (
                        frame,
                        ((hi << 32 | lo) * mul >> shift) // div + offset_ns,
                        lt,
                        buf,
                        start,
                        end,
                        orig,
                    )
                else:
                    _bad_interface(sink, frame, iface_id)
                    yield frame, None, None, buf, start, end, orig
            elif btype == _SPB and blen >= 16:  # no timestamp, interface 0, caplen implied
                frame += 1
                orig = u32(buf, pos + 8)[0]
                start = pos + 12
                incl = min(orig, blen - 16)
                if ifaces:
                    incl = min(incl, ifaces[0].snaplen or incl)
                    yield frame, None, ifaces[0].linktype, buf, start, start + incl, orig
                else:
                    _bad_interface(sink, frame, 0)
                    yield frame, None, None, buf, start, start + incl, orig
            elif btype in _FRAME_RECORDS:
                frame += 1
                yield frame, None, None, buf, pos + 8, pos + blen - 4, blen - 12
            elif btype == _IDB and blen >= 20:
                iface = _parse_idb(buf, pos, blen, order)
                ifaces.append(iface)
                clocks.append((iface.linktype, iface.mul, iface.shift, iface.div, iface.offset_ns))
                if iface.linktype not in linktypes:
                    linktypes.add(iface.linktype)
                    info.link_types = sorted(linktypes)
            pos += blen
        buf = _refill(inp, buf, pos, need, info, sink, frame + 1)
        if buf is None:
            return
        pos = 0


def _corrupt(info: CaptureInfo, sink: FindingSink, frame: int, what: str) -> None:
    msg = f"capture damaged after packet {frame} ({what}); reading stopped there"
    _stop(info, sink, "pcap.corrupt", Severity.ERROR, msg, frame + 1)


def _bad_interface(sink: FindingSink, frame: int, iface_id: int) -> None:
    sink.limited(
        "pcap.malformed-record",
        Severity.WARNING,
        f"packet {frame} names interface {iface_id}, which the section does not describe",
        frame,
        None,
        interface=iface_id,
    )
