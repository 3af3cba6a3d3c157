"""Calls of wirelog._core as mypy sees them through wirelog/_core.pyi (tests/test_core_stub.py, with
--warn-unused-ignores): calls shaped like the engine's must pass, and the calls the core refuses
(`REFUSED`, each run by the test: it must raise) must each fail with the error their `type: ignore`
names. `engine_calls` is only type-checked, never run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, assert_type

from wirelog import _core
from wirelog.model import Chunk, Direction, EventCounts, Finding, Message, StreamInfo


def engine_calls(data: bytes, info: StreamInfo, limits: dict[str, int | None]) -> None:
    keylogs = _core.KeyLogs([("keys.txt", [b"CLIENT_RANDOM ..."])])
    options: _core._DecodingOptions = {"records": "ndjson", "limits": limits, "protocols": {"cql"}}
    options["tls_keylogs"] = keylogs
    core = _core.Pipeline("c.pcap", None, decoding=options, server_ports=[5044], overlap="last")
    for item in core.feed(data):
        if isinstance(item, tuple):
            assert_type(item, tuple[_core.Buffer, int])
        elif isinstance(item, StreamInfo):
            assert_type(core.stream_info(item.stream), StreamInfo | None)
    assert_type(core.info()["first_ts"], int | None)

    session = _core.Decoding("", records="objects", limits=limits)
    session.attach("hercules-events", info)
    for taken in session.decode(Chunk(0, Direction.C2S, 0, data)):
        if isinstance(taken, list):
            assert_type(taken, list[Message | Finding | EventCounts])

    assert_type(_core.detect(data, closed=True), str | Literal[False] | None)
    for segment in _core.SegmentReader("c.pcap").feed(data):
        if not isinstance(segment, Finding):
            frame, _ts, _src, _sport, _dst, _dport, _seq, _ack, _flags, payload, _missing = segment
            assert_type((frame, payload), tuple[int, bytes])


REFUSED: list[Callable[[], object]] = [
    lambda: _core.Pipeline("c.pcap", overlapp="first"),  # type: ignore[call-arg]
    lambda: _core.Pipeline("c.pcap", overlap="newest"),  # type: ignore[arg-type]
    lambda: _core.Decoding("", records="rows"),  # type: ignore[arg-type]
    lambda: _core.Decoding("", protocols=["cql"]),  # type: ignore[arg-type]
    lambda: _core.Reassembler("t", [], "first", server_ports=[1]),  # type: ignore[misc]
    lambda: _core.detect(bytearray(b"2W")),  # type: ignore[arg-type]
    lambda: _core.SegmentBatches("c.pcap").route(groups=2, at=0),  # type: ignore[call-arg]
]
