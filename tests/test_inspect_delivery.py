"""`inspect`'s delivery verdict: distinct events delivered, recovered by a resend, delivered twice,
never acknowledged — across connections, for Lumberjack, Log Courier and Hercules."""

from __future__ import annotations

import json

from courier_helpers import ackn_frame, jdat_frame
from hypothesis import given, settings
from hypothesis import strategies as st
from lumberjack_helpers import ack, jframe, window
from pcap_helpers import tcp_conversation, write_pcap

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO
from tests.delivery_helpers import verdict_numbers, verdict_of_records

SERVER = ("10.1.0.9", 5044)


def connections(path, conns: list[list[tuple[str, bytes]]], port: int = 5044, last_open: bool = False):
    """One pcap holding each connection (handshake, turns, FIN) in turn, from client ports 41000, 41001, ...;
    `last_open`: the capture ends before the last connection closes."""
    frames = []
    for n, turns in enumerate(conns):
        fin = not (last_open and n == len(conns) - 1)
        frames += tcp_conversation(turns, client=("10.1.0.5", 41000 + n), server=(SERVER[0], port), fin=fin)
    return write_pcap(path, frames)


def verdict_findings(path) -> tuple[int, list[dict]]:
    """`validate --json`'s exit code and the delivery findings it lists."""
    code, out, err = run_cli("validate", "--json", str(path))
    assert code in (0, 1), err
    return code, [f for f in ndjson(out) if f["code"].endswith(("never-acknowledged", "delivered-twice"))]


def delivery(path) -> tuple[dict, str]:
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    code, screen, err = run_cli("inspect", str(path))
    assert code == 0, err
    return json.loads(out)["delivery"], screen.decode()


def batch(first: int, n: int) -> bytes:
    return window(n) + b"".join(jframe(first + i, {"message": f"line {first + i}"}) for i in range(n))


def test_an_unacknowledged_window_never_resent_is_lost(tmp_path):
    path = connections(tmp_path / "lost.pcap", [[("c", batch(1, 3)), ("s", ack(3)), ("c", batch(4, 2))]])
    d, screen = delivery(path)
    lj = d["lumberjack"]
    assert (lj["distinct_events"], lj["delivered"], lj["never_acknowledged"]) == (5, 3, 2)
    assert lj["never_acknowledged_at"] == [
        {"capture": str(path), "stream": 0, "frame": 5, "seq": 4},
        {"capture": str(path), "stream": 0, "frame": 5, "seq": 5},
    ]
    assert "2 never acknowledged (stream 0 frame 5 seq 4, stream 0 frame 5 seq 5)" in screen


def test_a_resend_acknowledged_on_a_new_connection_recovers_and_an_acked_one_is_delivered_twice(tmp_path):
    first = [("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 2))]  # events 3 and 4 get no ACK
    second = [("c", batch(1, 4)), ("s", ack(4))]  # the client resends all four: 1, 2 twice, 3, 4 recovered
    d, screen = delivery(connections(tmp_path / "resend.pcap", [first, second]))
    lj = d["lumberjack"]
    assert lj["events"] == 8 and lj["resent"] == 4 and lj["distinct_events"] == 4
    assert (lj["delivered"], lj["recovered_by_resend"], lj["delivered_twice"], lj["never_acknowledged"]) == (
        4,
        2,
        2,
        0,
    )
    assert "4 delivered (2 only by a resend, 2 twice); every event acknowledged" in screen


def test_the_real_pylogbeat_stall_loses_nothing():
    d, _ = delivery(REPO / "tests" / "data" / "lumberjack" / "pylogbeat-stalled-resend.pcap")
    lj = d["lumberjack"]
    # 3 events unacknowledged on the stalled connection, resent and acknowledged on the next one
    assert (lj["events"], lj["distinct_events"], lj["recovered_by_resend"], lj["never_acknowledged"]) == (
        12,
        9,
        3,
        0,
    )


def test_courier_payloads_by_nonce(tmp_path):
    a, b, c = (bytes([i]) * 16 for i in (1, 2, 3))
    ev = [b'{"message":"x"}'] * 3
    first = [
        ("c", jdat_frame(a, ev)),
        ("s", ackn_frame(a, 3)),
        ("c", jdat_frame(b, ev)),
        ("s", ackn_frame(b, 1)),
    ]
    second = [("c", jdat_frame(b, ev)), ("s", ackn_frame(b, 3)), ("c", jdat_frame(c, ev))]
    d, screen = delivery(connections(tmp_path / "courier.pcap", [first, second], port=12345))
    co = d["courier"]
    assert (co["payloads"], co["distinct_events"], co["resent_payloads"]) == (3, 9, 1)
    assert (co["delivered"], co["payloads_recovered_by_resend"], co["never_acknowledged"]) == (6, 1, 3)
    assert co["never_acknowledged_at"][0]["stream"] == 1
    assert "3 never acknowledged" in screen
    _, found = verdict_findings(tmp_path / "courier.pcap")
    assert [(f["code"], f["events"]) for f in found] == [("courier.never-acknowledged", 3)]


def test_loss_is_an_error_finding_that_fails_validate(tmp_path):
    path = connections(tmp_path / "lost.pcap", [[("c", batch(1, 3)), ("s", ack(3)), ("c", batch(4, 2))]])
    code, found = verdict_findings(path)
    assert code == 1
    (lost,) = found
    assert (lost["code"], lost["severity"], lost["stream"], lost["frame"]) == (
        "lumberjack.never-acknowledged",
        "error",
        0,
        5,
    )
    assert lost["events"] == 2 and "2 of 5 distinct events" in lost["message"]


def test_a_capture_that_ends_before_the_ack_is_not_a_loss(tmp_path):
    path = connections(
        tmp_path / "cut.pcap", [[("c", batch(1, 3)), ("s", ack(3)), ("c", batch(4, 2))]], last_open=True
    )
    code, found = verdict_findings(path)
    assert code == 0 and found == []
    d, screen = delivery(path)
    assert (d["lumberjack"]["never_acknowledged"], d["lumberjack"]["ack_unknown"]) == (0, 2)
    assert "2 with no ACK in the capture" in screen


def test_duplicates_are_a_warning(tmp_path):
    first = [("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 2))]
    second = [("c", batch(1, 4)), ("s", ack(4))]
    code, found = verdict_findings(connections(tmp_path / "twice.pcap", [first, second]))
    assert code == 0
    (twice,) = found
    assert (twice["code"], twice["severity"], twice["events"]) == ("lumberjack.delivered-twice", "warning", 2)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    acked_first=st.integers(0, 4),
    first_closed=st.booleans(),
    resent=st.lists(st.booleans(), min_size=4, max_size=4),
    acked_again=st.integers(0, 4),
)
def test_the_verdict_matches_a_model_of_stalls_and_resends(
    tmp_path_factory, sizes, acked_first, first_closed, resent, acked_again
):
    """Connection A sends windows and gets ACKs for the first `acked_first`; connection B resends some
    of them (same bytes) and gets ACKs for the first `acked_again` of those. A may still be open when
    the capture ends (then it comes last in the file, so B's copies are the first ones)."""
    windows, seq = [], 1
    for n in sizes:
        windows.append((batch(seq, n), n, seq + n - 1))
        seq += n
    again = [i for i, r in zip(range(len(windows)), resent, strict=False) if r]
    # per window, its copies in capture order: True acked, False never (closed), None unknown (open)
    a_state = {
        i: (True if i < acked_first else (False if first_closed else None)) for i in range(len(windows))
    }
    b_state = {i: k < acked_again or False for k, i in enumerate(again)}

    def turns(indices, acked_count):
        out = []
        for k, i in enumerate(indices):
            out.append(("c", windows[i][0]))
            if k < acked_count:
                out.append(("s", ack(windows[i][2])))
        return out

    a, b = turns(range(len(windows)), acked_first), turns(again, acked_again)
    conns, copies = ([a, b], [a_state, b_state]) if first_closed else ([b, a], [b_state, a_state])
    conns, copies = (conns, copies) if again else ([a], [a_state])
    path = connections(tmp_path_factory.mktemp("model") / "m.pcap", conns, last_open=not first_closed)
    expected = dict.fromkeys(
        ("delivered", "recovered_by_resend", "delivered_twice", "never_acknowledged", "ack_unknown"), 0
    )
    for i, (_, n, _) in enumerate(windows):
        states = [c[i] for c in copies if i in c]
        if any(states):
            expected["delivered"] += n
            expected["recovered_by_resend"] += n if not states[0] else 0
            expected["delivered_twice"] += n if states[0] and len(states) > 1 and states[1] else 0
        elif None in states:
            expected["ack_unknown"] += n
        else:
            expected["never_acknowledged"] += n
    d, _ = delivery(path)
    got = d["lumberjack"]
    assert {k: got[k] for k in expected} == expected
    assert got["distinct_events"] == sum(sizes)
    # every copy's record says its fate, and counting them gives the verdict (docs/records.md)
    code, out, err = run_cli("convert", str(path), "--events", "--to", "json")
    assert code == 0, err
    assert verdict_of_records(ndjson(out)) == verdict_numbers(d)


def herc_event(uuid: int) -> bytes:
    """A Hercules event without tags whose UUID is `uuid` (RFC order: big-endian)."""
    return b"\x01" + (17_000_000_000_000_000).to_bytes(8, "big") + uuid.to_bytes(16, "big") + b"\x00\x00"


def gate_post(*uuids: int) -> bytes:
    body = len(uuids).to_bytes(4, "big") + b"".join(herc_event(u) for u in uuids)
    head = (
        "POST /stream/send?stream=logs HTTP/1.1\r\nHost: gate\r\nContent-Type: application/octet-stream\r\n"
    )
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def gate_answer(status: int) -> bytes:
    return f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n".encode()


def hercules_uuid(n: int) -> str:
    return f"00000000-0000-0000-0000-{n:012x}"


def gate_retries(path):
    """Gate requests retried on other connections, refused, accepted twice, unanswered."""
    first = [  # 1-3 throttled; 4 accepted; 5 unanswered when the connection closed
        ("c", gate_post(1, 2, 3)), ("s", gate_answer(503)), ("c", gate_post(4)), ("s", gate_answer(200)),
        ("c", gate_post(5)),
    ]  # fmt: skip
    second = [  # 1 and 2 retried and accepted, 3 never again; 4 accepted a second time; 6 rejected
        ("c", gate_post(1, 2)), ("s", gate_answer(200)), ("c", gate_post(4)), ("s", gate_answer(200)),
        ("c", gate_post(6)), ("s", gate_answer(400)),
    ]  # fmt: skip
    third = [("c", gate_post(7))]  # the capture ends before the Gate answers
    return connections(path, [first, second, third], port=6306, last_open=True)


def test_hercules_events_by_uuid_across_retries_and_rejections(tmp_path):
    path = gate_retries(tmp_path / "gate.pcap")
    d, screen = delivery(path)
    h = d["hercules"]
    assert (h["events"], h["distinct_events"], h["resent"]) == (10, 7, 3)
    assert (h["delivered"], h["recovered_by_resend"], h["delivered_twice"]) == (3, 2, 1)
    assert (h["never_acknowledged"], h["ack_unknown"], h["lower_bounds"]) == (3, 1, False)
    assert [(w["stream"], w["uuid"]) for w in h["never_acknowledged_at"]] == [
        (0, hercules_uuid(3)), (0, hercules_uuid(5)), (1, hercules_uuid(6)),
    ]  # fmt: skip
    assert "delivery (hercules): 7 distinct events, 3 delivered (2 only by a resend, 1 twice)" in screen
    assert f"uuid {hercules_uuid(3)}" in screen
    code, found = verdict_findings(path)
    assert code == 1
    assert [(f["code"], f["severity"], f["events"]) for f in found] == [
        ("hercules.never-acknowledged", "error", 3),
        ("hercules.delivered-twice", "warning", 1),
    ]
    assert found[0]["first"]["uuid"] == hercules_uuid(3) and "3 of 7 distinct events" in found[0]["message"]


def test_hercules_events_all_accepted_once(tmp_path):
    conn = [("c", gate_post(1, 2)), ("s", gate_answer(200)), ("c", gate_post(3)), ("s", gate_answer(204))]
    path = connections(tmp_path / "ok.pcap", [conn], port=6306)
    d, screen = delivery(path)
    assert (d["hercules"]["distinct_events"], d["hercules"]["delivered"]) == (3, 3)
    assert "every event acknowledged" in screen
    assert verdict_findings(path) == (0, [])
