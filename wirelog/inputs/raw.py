"""Raw stream dumps: files of bytes that already are one direction of one stream.

Compressed dumps (gzip, zstd, ...) are recognised by content like captures.

One file is the client→server direction of its own stream. Two files named the way tcpflow names
flows (`SRCIP.SRCPORT-DSTIP.DSTPORT`, e.g. `010.000.000.001.41000-010.000.000.002.05044`) whose
endpoints mirror each other become the two directions of one stream; the side whose destination is a
well-known server port is the client, else the file given first.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import READ_ERRORS, STDIN, open_input, read_error
from wirelog.model import Chunk, Direction, StreamInfo

READ_SIZE = 256 * 1024

_FLOW = re.compile(r"^(?:.*?)?([0-9a-fA-F.:]+)\.(\d{5})-([0-9a-fA-F.:]+)\.(\d{5})(?:[^0-9].*)?$")


@dataclass(frozen=True, slots=True)
class FlowName:
    src: str
    sport: int
    dst: str
    dport: int


def parse_flow_name(name: str) -> FlowName | None:
    """Endpoints from a tcpflow file name (leading zeros in IPv4 octets allowed), or None."""
    m = _FLOW.match(Path(name).name)
    if not m:
        return None
    try:
        src, dst = (_ip(m.group(1)), _ip(m.group(3)))
    except ValueError:
        return None
    return FlowName(src, int(m.group(2)), dst, int(m.group(4)))


def _ip(text: str) -> str:
    if "." in text and ":" not in text:
        return str(ipaddress.IPv4Address(".".join(str(int(p)) for p in text.split("."))))
    return str(ipaddress.ip_address(text))


@dataclass(slots=True)
class RawStream:
    """One stream assembled from one or two dump files."""

    info: StreamInfo
    files: dict[Direction, str]


def pair_dumps(
    paths: list[str], capture: str, server_ports: frozenset[int], first_id: int = 0
) -> list[RawStream]:
    """Group dump files into streams (pairs by tcpflow name), numbering streams from `first_id`."""
    named = {p: parse_flow_name(p) for p in paths}
    used: set[str] = set()
    streams: list[RawStream] = []
    for path in paths:
        if path in used:
            continue
        used.add(path)
        flow = named[path]
        mate = None
        if flow is not None:
            for other in paths:
                f2 = named[other]
                if (
                    other not in used
                    and f2 is not None
                    and (f2.src, f2.sport, f2.dst, f2.dport)
                    == (
                        flow.dst,
                        flow.dport,
                        flow.src,
                        flow.sport,
                    )
                ):
                    mate = other
                    used.add(other)
                    break
        client_path, server_path = path, mate
        if (
            flow is not None
            and mate is not None
            and flow.sport in server_ports
            and flow.dport not in server_ports
        ):
            client_path, server_path = mate, path
        cflow = named[client_path]
        files = {Direction.C2S: client_path}
        if server_path is not None:
            files[Direction.S2C] = server_path
        if cflow is not None:
            client = _endpoint(cflow.src, cflow.sport)
            server = _endpoint(cflow.dst, cflow.dport)
            cport, sport = cflow.sport, cflow.dport
        else:
            client, server, cport, sport = f"file:{Path(client_path).name}", "", 0, 0
        info = StreamInfo(
            capture=capture,
            stream=first_id + len(streams),
            client=client,
            server=server,
            client_port=cport,
            server_port=sport,
            client_by="raw",
        )
        streams.append(RawStream(info, files))
    return streams


def _endpoint(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def iter_raw_chunks(
    stream: RawStream, before_stdin_read: Callable[[], None] | None = None
) -> Iterator[Chunk]:
    """The bytes of each direction in chunks as they can be read (no frames, no timestamps): a live
    pipe gives what it has, after `before_stdin_read` (see engine.local.run)."""
    info = stream.info
    for direction, path in stream.files.items():
        offset = 0
        hook = before_stdin_read if path == STDIN else None
        compression = None
        try:
            source, compression = open_input(path)
            read = getattr(source, "read1", source.read)
            with source:
                while True:
                    if hook is not None:
                        hook()
                    block = read(READ_SIZE)
                    if not block:
                        break
                    yield Chunk(info.stream, direction, offset, block)
                    offset += len(block)
        except READ_ERRORS as e:  # what was read before is decoded: a cut dump keeps its records
            why = e.strerror or e if isinstance(e, OSError) else read_error(e, compression)
            raise CaptureError(f"{path}: cannot read raw dump ({why})") from e
        if direction is Direction.C2S:
            info.bytes_c2s = offset
        else:
            info.bytes_s2c = offset
