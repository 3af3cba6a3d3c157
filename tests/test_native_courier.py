"""The gate for deleting the Python Log Courier decoder: the core's decoder must write the same NDJSON.

Every input is decoded twice: by the Python decoder (records stamped as the engine stamps them,
written with `wirelog.export.json.dumps`) and by the core (`wirelog._core.Decoding`, the same
session a capture gets, so limits and resend state shared by several connections replay too); the
two outputs must be equal byte for byte. Inputs: every decoder session the existing Log Courier
tests build (recorded while their test functions run, in the order their calls happened),
hypothesis-generated conversations with random chunking and gaps, and the streams of the shared
Log Courier captures as the core's reassembly cuts them. This file goes with the Python decoder.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import courier_helpers as helpers
import pytest
import test_courier_fuzz
import test_courier_peers
import test_courier_semantics
import test_courier_vectors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog import _core
from wirelog.decoders.base import Limits, StreamContext
from wirelog.decoders.courier import CourierDecoder
from wirelog.export import courier as enc
from wirelog.export.json import dumps
from wirelog.model import Chunk, Direction, Gap

pytestmark = pytest.mark.skipif(
    not _core.Decoding("").attach("courier", 0, "a:1", "b:2", 1, 2),
    reason="wirelog._core has no courier decoder",
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "captures"
C2S, S2C = Direction.C2S, Direction.S2C


@dataclass
class Stream:
    """One connection's identity, as the session attaches it."""

    stream: int = 0
    client: str = "127.0.0.1:40000"
    server: str = "127.0.0.1:12345"
    client_port: int = 40000
    server_port: int = 12345
    midstream: bool = False


@dataclass
class Step:
    """One call on one connection: ("open", None), ("feed", Chunk), ("gap", Gap) or ("close", None)."""

    stream: Stream
    op: str
    item: Any = None


@dataclass
class Replay:
    """The connections of one capture (one resend state), their calls in order, their limits."""

    steps: list[Step] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    capture: str = ""
    contexts: list = field(default_factory=list)  # keeps each `shared` alive: its id is the key


def stamped(records: list, s: Stream, capture: str) -> bytes:
    out = []
    for r in records:
        r = copy.copy(r)
        r.capture, r.stream, r.client, r.server = capture, s.stream, s.client, s.server
        out.append(dumps(r))
    return b"".join(out)


def python_ndjson(rep: Replay) -> bytes:
    shared: dict = {}
    live: dict[int, CourierDecoder] = {}
    out = []
    for step in rep.steps:
        s = step.stream
        if step.op == "open":
            ctx = StreamContext(
                s.stream,
                s.client,
                s.server,
                s.client_port,
                s.server_port,
                limits=rep.limits,
                midstream=s.midstream,
            )
            ctx.shared = shared
            live[s.stream] = CourierDecoder(ctx)
            continue
        dec = live[s.stream]
        recs = dec.close() if step.op == "close" else getattr(dec, step.op)(step.item)
        out.append(stamped(recs, s, rep.capture))
    return b"".join(out)


def native_ndjson(rep: Replay) -> bytes:
    session = _core.Decoding(rep.capture, records="ndjson", limits=asdict(rep.limits))
    out = []
    for step in rep.steps:
        s = step.stream
        if step.op == "open":
            assert session.attach(
                "courier", s.stream, s.client, s.server, s.client_port, s.server_port, s.midstream
            )
            continue
        got = session.end_stream(s.stream, True) if step.op == "close" else session.decode(step.item)
        out.append(got or b"")
    return b"".join(out)


def first_difference(expected: bytes, got: bytes) -> str:
    for i, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines(), strict=False)):
        if a != b:
            return (
                f"line {i}:\n  python: {a.decode(errors='replace')}\n  native: {b.decode(errors='replace')}"
            )
    lines = len(expected.splitlines()), len(got.splitlines())
    return f"line counts differ: python {lines[0]}, native {lines[1]}"


def assert_same(replays: list[Replay], label: str) -> None:
    """Every replay decodes to the same bytes; reports how many were compared."""
    differing = []
    for rep in replays:
        expected, got = python_ndjson(rep), native_ndjson(rep)
        if expected != got:
            differing.append(first_difference(expected, got))
    print(f"{label}: {len(replays)} compared, {len(replays) - len(differing)} identical")
    assert not differing, f"{len(differing)} of {len(replays)} differ; first: {differing[0]}"


# sessions of the existing tests ----------------------------------------------------------------


class Recording:
    """A Python decoder that logs its calls into the replay of its `shared` dict (one per capture)."""

    replays: ClassVar[dict[int, Replay]] = {}
    comparable: ClassVar[dict[int, bool]] = {}

    def __init__(self, ctx: StreamContext) -> None:
        key = id(ctx.shared)
        if key not in Recording.replays:
            Recording.replays[key] = Replay(limits=ctx.limits)
            # state left by connections before the recording began cannot be replayed
            Recording.comparable[key] = not ctx.shared
        self.replay = Recording.replays[key]
        self.s = Stream(ctx.stream, ctx.client, ctx.server, ctx.client_port, ctx.server_port, ctx.midstream)
        open_streams = {st.stream.stream for st in self.replay.steps if st.op == "open"} - {
            st.stream.stream for st in self.replay.steps if st.op == "close"
        }
        if ctx.stream in open_streams or ctx.limits != self.replay.limits:
            Recording.comparable[key] = False  # two live decoders on one stream id: no session can
        self.replay.steps.append(Step(self.s, "open"))
        self._dec = CourierDecoder(ctx)
        self._ctx = ctx
        self.replay.contexts.append(ctx)

    def feed(self, chunk: Chunk) -> list:
        self.s.midstream = self._ctx.midstream  # a test may set it after building the decoder
        c = Chunk(self.s.stream, chunk.direction, chunk.offset, bytes(chunk.data), chunk.frame, chunk.ts)
        self.replay.steps.append(Step(self.s, "feed", c))
        return self._dec.feed(chunk)

    def gap(self, gap: Gap) -> list:
        g = Gap(self.s.stream, gap.direction, gap.offset, gap.length, gap.frame, gap.ts)
        self.replay.steps.append(Step(self.s, "gap", g))
        return self._dec.gap(gap)

    def close(self) -> list:
        self.replay.steps.append(Step(self.s, "close"))
        return self._dec.close()


def run_tests_of(module: Any) -> None:
    """Call every test function of `module` that needs no fixture (each parameter set of a
    parametrized one; a hypothesis test runs its examples); a skip skips that call only."""
    for name, fn in vars(module).items():
        if not name.startswith("test_") or not callable(fn):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        calls = []
        if marks:
            names, values = marks[0].args[0], marks[0].args[1]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            for v in values:
                v = v.values if hasattr(v, "values") else v
                calls.append(dict(zip(names, v if len(names) > 1 else (v,), strict=True)))
        elif hasattr(fn, "hypothesis") or not inspect.signature(fn).parameters:
            calls.append({})
        for kwargs in calls:
            with contextlib.suppress(pytest.skip.Exception):
                fn(**kwargs)


@pytest.mark.parametrize(
    "module",
    [test_courier_vectors, test_courier_semantics, test_courier_fuzz, test_courier_peers],
    ids=lambda m: m.__name__,
)
def test_every_session_of_the_existing_tests(module, monkeypatch):
    for target in (helpers, module):  # the tests drive the Python decoder or the core's
        if hasattr(target, "CourierDecoder"):
            monkeypatch.setattr(target, "CourierDecoder", Recording)
        if hasattr(target, "CoreDecoder"):
            monkeypatch.setattr(target, "CoreDecoder", lambda protocol, ctx: Recording(ctx))
    Recording.replays, Recording.comparable = {}, {}
    if module is test_courier_fuzz:  # its baseline was decoded at import, by the other decoder
        segs = [helpers.Segment(d, b, i + 1, i) for i, (d, b) in enumerate(module.CONVERSATION)]
        monkeypatch.setattr(module, "BASELINE", helpers.decode_segments(segs))
    run_tests_of(module)
    replays = [r for k, r in Recording.replays.items() if Recording.comparable[k]]
    total = len(Recording.replays)
    print(f"{module.__name__}: {total} recorded, {total - len(replays)} not comparable")
    if module is test_courier_peers and not replays:
        pytest.skip("the peer captures are not available")
    assert replays
    assert_same(replays, module.__name__)


# captures ---------------------------------------------------------------------------------------


def capture_replay(path: Path) -> Replay:
    """The TCP streams of a capture as the core's reassembly cuts them, closed at the end."""
    core = _core.Pipeline(str(path), None)
    items = core.feed(path.read_bytes()) + core.finish(None)
    streams: dict[int, list] = {}
    infos = {}
    for it in items:
        kind = type(it).__name__
        if kind in ("Chunk", "Gap"):
            streams.setdefault(it.stream, []).append(it)
        elif kind == "StreamInfo":
            infos[it.stream] = it
    rep = Replay(capture=str(path))
    for n, its in streams.items():
        i = infos[n]
        s = Stream(n, i.client, i.server, i.client_port, i.server_port, i.midstream)
        rep.steps.append(Step(s, "open"))
        rep.steps += [Step(s, "feed" if type(it).__name__ == "Chunk" else "gap", it) for it in its]
        rep.steps.append(Step(s, "close"))
    return rep


def courier_captures() -> list[Path]:
    return sorted(SHARED.rglob("courier*.pcap")) if SHARED.is_dir() else []


@pytest.mark.skipif(not courier_captures(), reason="../shared/captures holds no Log Courier capture")
@pytest.mark.parametrize("path", courier_captures(), ids=lambda p: p.name)
def test_capture_streams(path):
    rep = capture_replay(path)
    assert any(s.op == "feed" for s in rep.steps)
    assert_same([rep], path.name)


# generated conversations ------------------------------------------------------------------------

NONCES = [bytes(range(16)), bytes([0xFF]) * 16, bytes.fromhex("56847afe9799739b3d9677972a3b58ef")]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
event_bytes = st.one_of(
    st.dictionaries(st.text(max_size=8), json_values, max_size=5).map(lambda d: enc.event_json(d, "ruby")),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
    st.binary(max_size=20),
)


@st.composite
def message(draw) -> tuple[Direction, bytes]:
    kind = draw(st.sampled_from(["helo", "vers", "ping", "pong", "unknown", "ackn", "jdat", "evnt", "junk"]))
    nonce = draw(st.sampled_from(NONCES))
    if kind == "helo":
        return C2S, enc.helo(
            draw(st.sampled_from([0, 8, 20, 32])), 0, (2, 12, 0), draw(st.sampled_from([b"LCOR", b"RYLC"]))
        )
    if kind == "vers":
        return S2C, enc.vers(draw(st.sampled_from([1, 8, 20, 32])), draw(st.integers(0, 1)))
    if kind in ("ping", "pong", "unknown"):
        d = draw(st.sampled_from([C2S, S2C]))
        return d, {"ping": enc.ping(), "pong": enc.pong(), "unknown": enc.unknown_reply()}[kind]
    if kind == "ackn":
        return S2C, enc.ackn(nonce, draw(st.integers(0, 6)))
    if kind == "junk":
        return draw(st.sampled_from([C2S, S2C])), draw(st.binary(min_size=1, max_size=24))
    events = draw(st.lists(event_bytes, max_size=5))
    msg = enc.payload(nonce, events, draw(st.sampled_from(["ruby", "go"])), streamed=kind == "evnt")
    if draw(st.integers(0, 9)) == 0:  # a damaged byte inside the zlib stream
        i = draw(st.integers(24, len(msg) - 1))
        msg = msg[:i] + bytes([msg[i] ^ 0x55]) + msg[i + 1 :]
    return C2S, msg


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(message(), max_size=10), st.booleans())
def test_generated_conversations_with_random_chunks_and_gaps(data, msgs, midstream):
    s = Stream(midstream=midstream)
    limits = Limits(  # small caps now and then, so the inflate cap, frame cap and overflow run
        max_frame=data.draw(st.sampled_from([64 << 20, 64 << 20, 300])),
        max_inflated=data.draw(st.sampled_from([64 << 20, 64 << 20, 150])),
        max_pending_events=data.draw(st.sampled_from([100_000, 100_000, 2])),
    )
    rep = Replay(steps=[Step(s, "open")], limits=limits)
    offsets = {C2S: 0, S2C: 0}
    for frame, (d, msg) in enumerate(msgs, 1):
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(msg) - 1)), max_size=3)))
        for a, b in zip([0, *cuts], [*cuts, len(msg)], strict=False):
            part = msg[a:b]
            if not part:
                continue
            ts = frame * 1_000_000_000 + a
            if data.draw(st.integers(0, 15)) == 0:  # the capture lost this piece
                rep.steps.append(Step(s, "gap", Gap(0, d, offsets[d], len(part), frame, ts)))
            else:
                rep.steps.append(Step(s, "feed", Chunk(0, d, offsets[d], part, frame, ts)))
            offsets[d] += len(part)
    rep.steps.append(Step(s, "close"))
    assert_same([rep], "generated")


def test_resend_on_another_connection_quotes_its_live_ack_count():
    """Two connections of one capture interleaved: the second resends while the first still
    receives ACKNs (the Python Sighting held the live payload)."""
    evs = [enc.event_json({"i": i}) for i in range(4)]
    a, b = Stream(0), Stream(1, client="127.0.0.1:40001", client_port=40001)
    n = NONCES[0]
    rep = Replay()
    rep.steps += [Step(a, "open"), Step(b, "open")]
    rep.steps.append(Step(a, "feed", Chunk(0, C2S, 0, enc.payload(n, evs), 1, 1)))
    rep.steps.append(Step(a, "feed", Chunk(0, S2C, 0, enc.ackn(n, 1), 2, 2)))
    rep.steps.append(Step(b, "feed", Chunk(1, C2S, 0, enc.payload(n, evs[2:]), 3, 3)))
    rep.steps.append(Step(a, "feed", Chunk(0, S2C, 28, enc.ackn(n, 2), 4, 4)))
    rep.steps.append(
        Step(b, "feed", Chunk(1, C2S, 0 + len(enc.payload(n, evs[2:])), enc.payload(n, evs[3:]), 5, 5))
    )
    rep.steps += [Step(a, "close"), Step(b, "close")]
    assert_same([rep], "interleaved resend")


# deliberate differences --------------------------------------------------------------------------


def one_event(raw: bytes) -> Replay:
    s = Stream()
    jdat = enc.payload(NONCES[0], [raw])
    return Replay(steps=[Step(s, "open"), Step(s, "feed", Chunk(0, C2S, 0, jdat, 1, 1)), Step(s, "close")])


def event_lines(ndjson: bytes) -> list[dict]:
    return [json.loads(line) for line in ndjson.splitlines() if b'"kind":"event"' in line]


@pytest.mark.parametrize(
    ("raw", "python_event", "native_error"),
    [
        # Python's json.loads fallback accepts these non-standard tokens and orjson writes them as
        # null; serde_json refuses them: the core reports invalid JSON and keeps the text.
        (b'{"x":NaN}', {"x": None}, "expected value at line 1 column 6"),
        (b'{"x":1e400}', {"x": None}, "number out of range at line 1 column 10"),
        # A UTF-8 byte order mark: json.loads strips it, serde_json does not.
        (b'\xef\xbb\xbf{"a":1}', {"a": 1}, "expected value at line 1 column 1"),
        # Nesting between serde_json's 128 levels and Python's recursion limit.
        (b'{"a":' * 200 + b"1" + b"}" * 200, None, "recursion limit exceeded at line 1 column 636"),
    ],
    ids=["nan", "overflow", "bom", "deep"],
)
def test_deliberate_differences_in_event_documents(raw, python_event, native_error):
    rep = one_event(raw)
    (py,), (nat,) = event_lines(python_ndjson(rep)), event_lines(native_ndjson(rep))
    assert "json_error" not in py
    if python_event is not None:
        assert py["event"] == python_event
    assert nat["event"] == {"message": raw.decode("utf-8", "replace")}
    assert nat["json_error"] == native_error


def test_deliberate_difference_minus_zero():
    """orjson reads `-0` as the integer 0, serde_json as the float -0.0 (the Lumberjack port's
    orjson-exact parser, lumberjack/json.rs, is private to that module)."""
    rep = one_event(b'{"a":-0}')
    assert b'"event":{"a":0}' in python_ndjson(rep)
    assert b'"event":{"a":-0.0}' in native_ndjson(rep)


def test_deliberate_difference_lone_surrogate():
    """json.loads accepts a lone surrogate escape and the Python writer then fails on the line
    (UnicodeEncodeError); the core reports invalid JSON."""
    rep = one_event(b'{"s":"\\ud800"}')
    with pytest.raises(UnicodeEncodeError):
        python_ndjson(rep)
    (nat,) = event_lines(native_ndjson(rep))
    assert nat["json_error"].startswith("unexpected end of hex escape")
