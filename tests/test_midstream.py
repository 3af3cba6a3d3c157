"""Captures that begin inside a frame, on a port no protocol owns: the engine finds the first frame
start (the core's find_start, native/src/pipeline/hunt.rs) and decodes from there, instead of calling the stream unknown."""

from __future__ import annotations

import json
import random
import zlib

from courier_helpers import ackn_frame, jdat_frame
from hypothesis import given, settings
from hypothesis import strategies as st
from lumberjack_helpers import ack, cframe, jframe, window
from pcap_helpers import tcp_conversation, write_pcap

from wirelog import _core
from wirelog.engine.local import run
from wirelog.engine.protocols import find_start as first_start
from wirelog.model import Finding, Message

HUNT_LIMIT = _core.HUNT_LIMIT


def find_start(data: bytes) -> int | None:
    """Where the first Lumberjack window starts in `data` (None: nowhere, or another protocol first)."""
    found = first_start(data)
    return found[1] if found and found[0] == "lumberjack" else None


CLIENT, SERVER, PORT = ("10.1.0.5", 41000), ("10.1.0.9", 6000), 6000


def docs(first: int, n: int, rng: random.Random) -> list[dict]:
    return [{"message": f"{rng.randbytes(40).hex()} line {first + i}", "host": "web-1"} for i in range(n)]


def lj_window(first: int, n: int, rng: random.Random) -> bytes:
    return window(n) + cframe(b"".join(jframe(first + i, d) for i, d in enumerate(docs(first, n, rng))))


def midstream_capture(path, turns: list[tuple[str, bytes]], mss: int = 1400, syn: bool = False):
    """A capture of `turns` ('c' or 's', bytes) in `mss`-byte segments, without a handshake unless
    `syn` (then the capture holds the connection's start)."""
    frames = tcp_conversation(
        turns, client=CLIENT, server=SERVER, handshake=syn, fin=False, mss=mss, seqs=(7000, 90000)
    )
    return write_pcap(path, frames)


def records(path) -> tuple[list[Message], list[Finding]]:
    items = list(run([str(path)]))
    return [i for i in items if isinstance(i, Message)], [i for i in items if isinstance(i, Finding)]


def test_a_capture_starting_inside_a_compressed_window_decodes_from_the_next_window(tmp_path):
    rng = random.Random(1)
    w1, w2, w3 = lj_window(1, 200, rng), lj_window(201, 200, rng), lj_window(401, 200, rng)
    cut = len(w1) // 3
    path = midstream_capture(
        tmp_path / "mid.pcap",
        [("c", w1[cut:]), ("s", ack(200)), ("c", w2), ("s", ack(400)), ("c", w3), ("s", ack(600))],
    )
    messages, findings = records(path)
    events = [m for m in messages if m.kind == "event"]
    assert [e.fields["seq"] for e in events] == list(range(201, 601))
    assert all(e.acked for e in events)
    assert {m.protocol for m in messages} == {"lumberjack"}
    (start,) = [f for f in findings if f.code == "stream.midstream-start"]
    # the stream's first captured byte is offset 0: window 2 starts where window 1's rest ends
    assert start.offset == len(w1) - cut and start.direction.value == "c2s"
    assert start.frame == 1 + -(-(len(w1) - cut) // 1400) + 1  # w1's rest, the ACK, then w2's first packet
    assert "stream.unknown-protocol" not in {f.code for f in findings}


def test_a_window_start_split_across_two_packets_is_found(tmp_path):
    rng = random.Random(2)
    tail = zlib.compress(rng.randbytes(3000))[500:]  # the inside of a compressed frame
    w2 = lj_window(7, 5, rng)
    data = tail + w2
    for split in range(len(tail) + 1, len(tail) + 12):  # every cut through the 12-byte signature
        path = midstream_capture(
            tmp_path / f"split{split}.pcap",
            [("c", data[:split]), ("c", data[split:]), ("s", ack(11))],
            mss=1 << 16,
        )
        messages, findings = records(path)
        assert [m.fields["seq"] for m in messages if m.kind == "event"] == list(range(7, 12)), split
        (start,) = [f for f in findings if f.code == "stream.midstream-start"]
        assert start.offset == len(tail) and start.frame == (1 if split > len(tail) else 2)


def test_unknown_bytes_stay_unknown_and_a_connection_start_is_not_searched(tmp_path):
    rng = random.Random(3)
    noise = rng.randbytes(20_000)
    _, findings = records(midstream_capture(tmp_path / "noise.pcap", [("c", noise), ("s", noise[:500])]))
    (unknown,) = [f for f in findings if f.code == "stream.unknown-protocol"]
    assert "no frame start was found" in unknown.message and unknown.offset == 0
    # with the handshake captured, the first bytes are the stream's first bytes: no search
    w = lj_window(1, 3, rng)
    _, findings = records(midstream_capture(tmp_path / "syn.pcap", [("c", noise[:600] + w)], syn=True))
    assert [f.code for f in findings if f.code.startswith("stream.")] == ["stream.unknown-protocol"]


def test_the_search_gives_up_after_its_limit(tmp_path):
    rng = random.Random(4)
    w = lj_window(1, 3, rng)
    noise = rng.randbytes(HUNT_LIMIT + 100_000)
    messages, findings = records(midstream_capture(tmp_path / "late.pcap", [("c", noise + w)], mss=60_000))
    assert not messages
    assert [f.code for f in findings if f.code.startswith("stream.")] == ["stream.unknown-protocol"]


def test_find_start_is_not_fooled_by_headers_spelled_in_json_text():
    rng = random.Random(5)
    tricky = [{"message": 'says "2W\\u0000\\u0000\\u0000\\u00052J" and 2W2J2C', "n": i} for i in range(3)]
    frames = b"".join(jframe(10 + i, d) for i, d in enumerate(tricky))
    real = window(2) + jframe(20, {"message": "real"}) + jframe(21, {"message": "real"})
    assert find_start(frames[5:] + real) == len(frames) - 5
    assert find_start(frames[5:]) is None
    assert find_start(zlib.compress(rng.randbytes(50_000))) is None


@settings(max_examples=200, deadline=None)
@given(prefix=st.binary(max_size=300), cut=st.integers(0, 11))
def test_find_start_finds_the_window_after_any_prefix_without_one(prefix, cut):
    w = window(2) + jframe(1, {"message": "a"}) + jframe(2, {"message": "b"})
    hit = find_start(prefix)
    if hit is None:  # the prefix spells no window start itself: the real one is found, whole or not at all
        assert find_start(prefix + w) == len(prefix)
        assert find_start(prefix + w[:cut]) is None


def test_log_courier_picked_up_inside_a_payload_decodes_from_the_next_one(tmp_path):
    rng = random.Random(6)
    batches = [[json.dumps(d).encode() for d in docs(100 * b, 100, rng)] for b in range(3)]
    nonces = [rng.randbytes(16) for _ in batches]
    first = jdat_frame(nonces[0], batches[0])
    cut = len(first) // 2
    turns = [("c", first[cut:]), ("s", ackn_frame(nonces[0], 100))]
    for nonce, batch in zip(nonces[1:], batches[1:], strict=True):
        turns += [("c", jdat_frame(nonce, batch)), ("s", ackn_frame(nonce, 100))]
    messages, findings = records(midstream_capture(tmp_path / "courier.pcap", turns))
    events = [m for m in messages if m.kind == "event"]
    assert {m.protocol for m in messages} == {"courier"}
    assert [e.event["message"] for e in events] == [
        d["message"] for b in batches[1:] for d in map(json.loads, b)
    ]
    assert all(e.acked for e in events)
    (start,) = [f for f in findings if f.code == "stream.midstream-start"]
    assert start.offset == len(first) - cut


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(0, 4000), sizes=st.lists(st.integers(5, 3000), min_size=1, max_size=8))
def test_any_cut_and_segmentation_decodes_every_later_window(tmp_path_factory, cut, sizes):
    rng = random.Random(7)
    windows = [lj_window(1, 40, rng), lj_window(41, 40, rng), lj_window(81, 40, rng)]
    cut %= len(windows[0])
    windows[0] = windows[0][cut:]
    turns: list[tuple[str, bytes]] = []
    for n, w in enumerate(windows, 1):  # each window's bytes in the given packet sizes, cycled, then its ACK
        at = 0
        while at < len(w):
            size = sizes[len(turns) % len(sizes)]
            turns.append(("c", w[at : at + size]))
            at += size
        turns.append(("s", ack(40 * n)))
    path = midstream_capture(tmp_path_factory.mktemp("seg") / "m.pcap", turns, mss=1 << 16)
    messages, _ = records(path)
    events = [m for m in messages if m.kind == "event"]
    # every event of the windows whose data frame was captured whole (a cut of exactly the 6-byte
    # window header keeps the first one), each once and acknowledged
    first = 1 if cut in (0, len(window(40))) else 41
    assert [m.fields["seq"] for m in events] == list(range(first, 121))
    assert all(m.acked for m in events)
