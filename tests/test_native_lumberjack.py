"""The gate for deleting the Python Lumberjack decoder: the core's decoder must write the same NDJSON.

Every input is decoded twice: by the Python decoder (records stamped as the engine stamps them,
written with `wirelog.export.json.dumps`) and by `wirelog._core.decode_stream`; the two outputs
must be equal byte for byte. Inputs: every decoder session the existing Lumberjack tests build
(recorded while their test functions run), hypothesis-generated sessions with random chunking and
gaps, and the streams of the Lumberjack captures as the core's reassembly cuts them.

Recorded sessions are decoded by a `wirelog._core.Decoding` session with the test's limits, one per
group of connections that shared a capture's state (resends), so that every one of them compares.
This file goes with the Python decoder.
"""

from __future__ import annotations

import inspect
import json
import struct
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import lumberjack_helpers as helpers
import pytest
import test_lumberjack_fastpath
import test_lumberjack_fuzz
import test_lumberjack_validation
import test_lumberjack_vectors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog import _core
from wirelog.decoders.base import Limits, StreamContext
from wirelog.decoders.lumberjack import LumberjackDecoder
from wirelog.export.json import dumps
from wirelog.model import Chunk, Direction, Gap

decode_stream = getattr(_core, "decode_stream", None)
pytestmark = pytest.mark.skipif(decode_stream is None, reason="wirelog._core has no decode_stream")

DATA = Path(__file__).resolve().parent / "data" / "lumberjack"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "captures"
CLIENT, SERVER, CLIENT_PORT, SERVER_PORT = "127.0.0.1:40000", "127.0.0.1:5044", 40000, 5044

Item = tuple[str, str, int, Any, int | None, int | None]  # decode_stream's item tuples


@dataclass
class Session:
    """One connection's input, as decode_stream takes it."""

    items: list[Item]
    stream: int = 0
    client: str = CLIENT
    server: str = SERVER
    client_port: int = CLIENT_PORT
    server_port: int = SERVER_PORT
    capture: str = ""
    limits: Limits = field(default_factory=Limits)


def python_ndjson(s: Session, shared: dict | None = None) -> bytes:
    ctx = StreamContext(s.stream, s.client, s.server, s.client_port, s.server_port, limits=s.limits)
    if shared is not None:
        ctx.shared = shared
    dec = LumberjackDecoder(ctx)
    out = []
    for kind, d, offset, payload, frame, ts in s.items:
        direction = Direction(d)
        if kind == "data":
            out += dec.feed(Chunk(s.stream, direction, offset, payload, frame, ts))
        else:
            out += dec.gap(Gap(s.stream, direction, offset, payload, frame, ts))
    out += dec.close()
    for r in out:
        r.capture, r.stream, r.client, r.server = s.capture, s.stream, s.client, s.server
    return b"".join(dumps(r) for r in out)


def native_ndjson(s: Session) -> bytes:
    return decode_stream(
        "lumberjack",
        s.items,
        capture=s.capture,
        stream=s.stream,
        client=s.client,
        server=s.server,
        client_port=s.client_port,
        server_port=s.server_port,
    )


def first_difference(expected: bytes, got: bytes) -> str:
    for i, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines(), strict=False)):
        if a != b:
            return (
                f"line {i}:\n  python: {a.decode(errors='replace')}\n  native: {b.decode(errors='replace')}"
            )
    lines = len(expected.splitlines()), len(got.splitlines())
    return f"line counts differ: python {lines[0]}, native {lines[1]}"


def assert_same(sessions: list[Session], label: str) -> None:
    """Every session decodes to the same bytes; reports how many were compared."""
    differing = []
    for s in sessions:
        expected, got = python_ndjson(s), native_ndjson(s)
        if expected != got:
            differing.append(first_difference(expected, got))
    print(f"{label}: {len(sessions)} compared, {len(sessions) - len(differing)} identical")
    assert not differing, f"{len(differing)} of {len(sessions)} differ; first: {differing[0]}"


# sessions of the existing tests ----------------------------------------------------------------


def native_group(sessions: list[Session]) -> list[bytes]:
    """Connections of one capture (they share its resend state) decoded in order by one session of
    the core, with their limits."""
    core = _core.Decoding(sessions[0].capture, records="ndjson", limits=asdict(sessions[0].limits))
    outs = []
    for s in sessions:
        assert core.attach("lumberjack", s.stream, s.client, s.server, s.client_port, s.server_port)
        out = b""
        for kind, d, offset, payload, frame, ts in s.items:
            item = (Chunk if kind == "data" else Gap)(s.stream, Direction(d), offset, payload, frame, ts)
            out += core.decode(item) or b""
        outs.append(out + (core.end_stream(s.stream, True) or b""))
    return outs


class Recording:
    """A Python decoder that keeps what it was fed, and which connections shared a capture."""

    sessions: ClassVar[list[Recording]] = []

    def __init__(self, ctx: StreamContext) -> None:
        self.group = id(ctx.shared)
        self._dec = LumberjackDecoder(ctx)
        self.ctx = ctx
        self.items: list[Item] = []
        Recording.sessions.append(self)

    def feed(self, chunk: Chunk) -> list:
        self.items.append(
            ("data", chunk.direction.value, chunk.offset, bytes(chunk.data), chunk.frame, chunk.ts)
        )
        return self._dec.feed(chunk)

    def gap(self, gap: Gap) -> list:
        self.items.append(("gap", gap.direction.value, gap.offset, gap.length, gap.frame, gap.ts))
        return self._dec.gap(gap)

    def close(self) -> list:
        return self._dec.close()

    def session(self) -> Session:
        c = self.ctx
        return Session(
            self.items, c.stream, c.client, c.server, c.client_port, c.server_port, limits=c.limits
        )


def recording_decoder(stream: int = 0, limits: Limits | None = None, shared: dict | None = None) -> Recording:
    """`lumberjack_helpers.decoder` with the Python decoder, recorded."""
    ctx = StreamContext(stream, CLIENT, SERVER, CLIENT_PORT, SERVER_PORT)
    if limits is not None:
        ctx.limits = limits
    if shared is not None:
        ctx.shared = shared
    return Recording(ctx)


def run_tests_of(module: Any) -> None:
    """Call every test function of `module` that needs no fixture (each parameter set of a
    parametrized one; a hypothesis test runs its examples)."""
    for name, fn in vars(module).items():
        if not name.startswith("test_") or not callable(fn):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        if marks:
            names, values = marks[0].args[0], marks[0].args[1]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            for v in values:
                fn(**dict(zip(names, v if len(names) > 1 else (v,), strict=True)))
        elif hasattr(fn, "hypothesis") or not inspect.signature(fn).parameters:
            fn()


@pytest.mark.parametrize(
    "module",
    [test_lumberjack_vectors, test_lumberjack_validation, test_lumberjack_fuzz, test_lumberjack_fastpath],
    ids=lambda m: m.__name__,
)
def test_every_session_of_the_existing_tests(module, monkeypatch):
    monkeypatch.setattr(helpers, "decoder", recording_decoder)
    monkeypatch.setattr(module, "decoder", recording_decoder, raising=False)
    monkeypatch.setattr(module, "make_decoder", recording_decoder, raising=False)
    Recording.sessions = []
    run_tests_of(module)
    groups: dict[int, list[Recording]] = {}
    for r in Recording.sessions:
        groups.setdefault(r.group, []).append(r)
    differing, compared = [], 0
    for recorded in groups.values():
        sessions = [r.session() for r in recorded]
        shared: dict = {}
        for s, got in zip(sessions, native_group(sessions), strict=True):
            expected = python_ndjson(s, shared)
            compared += 1
            if got != expected:
                differing.append(first_difference(expected, got))
    print(
        f"{module.__name__}: {compared} sessions in {len(groups)} captures compared, {compared - len(differing)} identical"
    )
    assert compared
    assert not differing, f"{len(differing)} of {compared} differ; first: {differing[0]}"


# captures ---------------------------------------------------------------------------------------


def capture_sessions(path: Path) -> list[Session]:
    """The TCP streams of a capture as the core's reassembly cuts them."""
    core = _core.Pipeline(str(path), None)
    items = core.feed(path.read_bytes()) + core.finish(None)
    streams: dict[int, list[Item]] = {}
    infos = {}
    for it in items:
        kind = type(it).__name__
        if kind == "Chunk":
            streams.setdefault(it.stream, []).append(
                ("data", it.direction.value, it.offset, it.data, it.frame, it.ts)
            )
        elif kind == "Gap":
            streams.setdefault(it.stream, []).append(
                ("gap", it.direction.value, it.offset, it.length, it.frame, it.ts)
            )
        elif kind == "StreamInfo":
            infos[it.stream] = it
    return [
        Session(
            stream_items,
            n,
            infos[n].client,
            infos[n].server,
            infos[n].client_port,
            infos[n].server_port,
            str(path),
        )
        for n, stream_items in streams.items()
        if n in infos
    ]


def lumberjack_captures() -> list[Path]:
    found = sorted(DATA.glob("*.pcap"))
    if SHARED.is_dir():
        found += sorted(p for p in SHARED.rglob("*.pcap") if "lumberjack" in p.name or "beats" in p.name)
    return found


@pytest.mark.parametrize("path", lumberjack_captures(), ids=lambda p: p.name)
def test_capture_streams(path):
    sessions = capture_sessions(path)
    assert sessions
    assert_same(sessions, path.name)


# generated sessions -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
payloads = st.one_of(
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=24),
    st.sampled_from(
        [b"{bad", b"", b"  ", b'{"a":1,}', b'"\\ud800"', b"-0", b"1e400", b'{"a":1,"a":2}', b"\xef\xbb\xbf{}"]
    ),
)


@st.composite
def frames(draw, version: bytes, depth: int = 0) -> bytes:
    kind = draw(st.sampled_from("WJJJDCAG" if depth < 2 else "WJJDG"))
    seq = draw(st.sampled_from([0, 1, 2, 3, 7, 2**31, 2**32 - 1]) | st.integers(0, 9))
    if kind == "W":
        return version + b"W" + struct.pack(">I", draw(st.sampled_from([0, 1, 2, 3, 20_000])))
    if kind == "J":
        body = draw(payloads)
        return version + b"J" + struct.pack(">II", seq, len(body)) + body
    if kind == "D":
        pairs = draw(st.lists(st.tuples(st.binary(max_size=5), st.binary(max_size=5)), max_size=3))
        return helpers.dframe(seq, pairs, v=version.decode())
    if kind == "C":
        inner = b"".join(draw(st.lists(frames(version, depth + 1), max_size=4)))
        body = zlib.compress(inner, draw(st.sampled_from([1, 3, 6, 9])))
        body = body[: draw(st.integers(1, len(body)))] if draw(st.booleans()) and depth else body
        return version + b"C" + struct.pack(">I", len(body)) + body
    if kind == "A":
        return version + b"A" + struct.pack(">I", seq)
    return draw(st.binary(max_size=6))


@st.composite
def generated(draw) -> Session:
    version = draw(st.sampled_from([b"1", b"2"]))
    turns: list[tuple[str, bytes]] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 3)) == 0:
            values = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=1, max_size=3))
            v = draw(st.sampled_from([version, b"2"]))
            turns.append(("s2c", b"".join(v + b"A" + struct.pack(">I", x) for x in values)))
        else:
            turns.append(("c2s", b"".join(draw(st.lists(frames(version), min_size=1, max_size=5)))))
    items: list[Item] = []
    offsets = {"c2s": 0, "s2c": 0}
    ts = 1_000_000_000
    for frame, (d, data) in enumerate(turns, 1):
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=3))))
        for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
            if a >= b:
                continue
            ts += draw(st.sampled_from([1, 1_500_000, 3_000_000_000, -5_000]))
            if draw(st.integers(0, 9)) == 0:
                items.append(("gap", d, offsets[d], b - a, frame, ts))
            else:
                items.append(("data", d, offsets[d], data[a:b], frame, ts))
            offsets[d] += b - a
    return Session(items)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(session=generated())
def test_generated_sessions(session):
    expected, got = python_ndjson(session), native_ndjson(session)
    assert got == expected, first_difference(expected, got)


@settings(max_examples=300, deadline=None)
@given(payload=payloads)
def test_json_documents_and_their_errors(payload):
    session = Session([("data", "c2s", 0, helpers.window(1) + helpers.jframe(1, payload), 1, 1)])
    expected, got = python_ndjson(session), native_ndjson(session)
    assert got == expected, first_difference(expected, got)


@settings(max_examples=300, deadline=None)
@given(
    inner=st.lists(
        st.sampled_from([helpers.jframe(1, {"m": 1}), helpers.jframe(2, b"x" * 300)]), min_size=1, max_size=4
    ),
    level=st.sampled_from([1, 6, 9]),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(1, 255)), min_size=1, max_size=3),
    cut=st.integers(0, 3),
)
def test_corrupt_compressed_frames(inner, level, flips, cut):
    """zlib errors, truncations and trailing bytes, worded as CPython's zlib words them."""
    body = bytearray(zlib.compress(b"".join(inner), level))
    for at, xor in flips:
        body[at % len(body)] ^= xor
    body = bytes(body[: len(body) - cut]) if cut < len(body) else bytes(body)
    frame = b"2C" + struct.pack(">I", len(body)) + body
    session = Session([("data", "c2s", 0, helpers.window(len(inner)) + frame + helpers.window(0), 1, 1)])
    expected, got = python_ndjson(session), native_ndjson(session)
    assert got == expected, first_difference(expected, got)
