"""CQL requests carry their outcome (docs/records.md, "Delivery"): the real cassandra-driver against a
CQL server that answers some queries with an ERROR and never answers others, captured with tcpdump;
the connection closed, or still open when the capture ended; and copies of the capture that missed
packets, where a response the capture lost makes the outcome unknown, never unanswered."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from pathlib import Path

import pytest
from cassandra import ConsistencyLevel
from cassandra.connection import DefaultEndPoint
from cassandra.protocol import ErrorMessage, QueryMessage
from cql_helpers import Responder

from tests.capture_tools import ndjson, run_cli, tcpdump
from tests.delivery_helpers import assert_cql_agrees, cql_outcomes

LibevConnection = pytest.importorskip("cassandra.io.libevreactor").LibevConnection

ONE = ConsistencyLevel.ONE
ANSWERED, INVALID, HANGING = 6, 2, 3
_TEXTS = [
    *(f"SELECT v FROM ks.t -- {i}" for i in range(ANSWERED)),
    *(f"SELECT invalid -- {i}" for i in range(INVALID)),
    *(f"SELECT hang -- {i}" for i in range(HANGING)),
]
QUERIES = _TEXTS[::2] + _TEXTS[1::2]  # sent in this order: answered, refused and hanging ones mixed


def _talk(conn) -> None:
    """Queries pipelined on one connection: answered, refused (ERROR) and never answered, mixed."""
    answered = threading.Semaphore(0)
    replies: list = []

    def got(response) -> None:
        replies.append(response)
        answered.release()

    for text in QUERIES:
        with conn.lock:
            request_id = conn.get_request_id()
        conn.send_msg(QueryMessage(text, ONE), request_id, cb=got)
    for _ in range(ANSWERED + INVALID):
        assert answered.acquire(timeout=10)
    assert sum(isinstance(r, ErrorMessage) for r in replies) == INVALID
    time.sleep(0.3)  # the queries left hanging are on the wire


def _capture(path: Path, responder: Responder, close_inside: bool) -> None:
    """One connection captured; `close_inside`: closed (FIN) before the capture ends, else after."""
    with contextlib.ExitStack() as after, tcpdump(path, responder.port):
        conn = LibevConnection.factory(DefaultEndPoint("127.0.0.1", responder.port), 10, protocol_version=4)
        try:
            _talk(conn)
        finally:
            if close_inside:
                conn.close()
                time.sleep(0.3)
            else:
                after.callback(conn.close)


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list]]:
    LibevConnection.initialize_reactor()
    out = {}
    for name, close_inside in (("closed", True), ("open", False)):
        responder = Responder()
        path = tmp_path_factory.mktemp("cql-outcomes") / f"{name}.pcap"
        try:
            _capture(path, responder, close_inside)
        except (RuntimeError, OSError) as exc:
            pytest.skip(f"cannot capture on lo: {exc}")
        finally:
            responder.close()
        out[name] = (path, list(responder.requests))
    return out


def _expected(requests: list, unanswered_as: str) -> dict[str, int]:
    """The outcomes the server's own log of what it received gives."""
    hanging = sum(b"hang" in body for _, op, body in requests if op == 0x07)
    invalid = sum(b"invalid" in body for _, op, body in requests if op == 0x07)
    want = {"requests": len(requests), "answered": len(requests) - hanging - invalid, "error": invalid}
    want.update(unanswered=0, unknown=0)
    want[unanswered_as] = hanging
    return want


@pytest.mark.parametrize(("name", "unanswered_as"), [("closed", "unanswered"), ("open", "unknown")])
def test_every_surface_gives_the_outcomes_the_server_saw(captures, tmp_path, name, unanswered_as):
    """Closed by FIN, the queries the server sat on are unanswered; still open when the capture ended,
    their answer may have come after it: unknown. `inspect --json`, the records and DuckDB over the
    Parquet agree, and with what the server received."""
    path, requests = captures[name]
    want = _expected(requests, unanswered_as)
    assert want["requests"] == 2 + ANSWERED + INVALID + HANGING  # OPTIONS and STARTUP too
    parquet = tmp_path / "records.parquet"
    code, _, err = run_cli("convert", str(path), "--to", "parquet", "-o", str(parquet))
    assert code == 0, err
    assert assert_cql_agrees(path, parquet) == want
    code, out, err = run_cli("inspect", str(path))
    assert code == 0, err
    line = next(x for x in out.decode().splitlines() if x.startswith("requests (cql)"))
    assert (
        f"{want['requests']} requests, {want['answered']} answered, {INVALID} answered with an error" in line
    )
    assert ("never answered" in line) == (unanswered_as == "unanswered")


def test_a_request_waits_for_its_response_and_is_written_just_before_it(captures):
    path, _ = captures["closed"]
    code, out, err = run_cli("convert", str(path), "--to", "json")
    assert code == 0, err
    cql = [r for r in ndjson(out) if r["record"] == "message" and r["protocol"] == "cql"]
    for request, response in itertools.pairwise(cql):
        if response["direction"] == "s2c" and response["kind"] != "event":
            assert request["direction"] == "c2s" and request["event_id"] == response["event_id"]
            assert request["stream_id"] == response["stream_id"]
            assert (
                request["delivery"]
                == response["delivery"]
                == ("error" if response["kind"] == "error" else "answered")
            )
    # the queries never answered come at the connection's end, in the order they were sent
    hanging = [r["query"] for r in cql if r["delivery"] == "unanswered"]
    assert hanging == [q for q in QUERIES if "hang" in q] and cql[-len(hanging) :] == [
        r for r in cql if r["delivery"] == "unanswered"
    ]
    requests = [r["event_id"] for r in cql if r["direction"] == "c2s"]
    assert len(set(requests)) == len(requests) == 2 + len(QUERIES)


def _answer_packets(path: Path) -> list[int]:
    """Indexes of the capture's packets that carry the server's bytes (after its first: the SUPPORTED
    a driver waits for before anything else)."""
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap

    packets = [p for p in rdpcap(str(path)) if TCP in p]
    server = packets[0][TCP].dport  # the SYN's
    carrying = [i for i, p in enumerate(packets) if p[TCP].sport == server and len(p[TCP].payload)]
    return carrying[1:]


def test_a_capture_that_missed_the_responses_never_blames_the_server(captures, tmp_path):
    """Copies of the closed connection's capture with packets dropped (at random, in bursts, and each
    packet of the server's answers in turn): a request whose response the capture lost is unknown;
    only the queries the server really sat on can be unanswered, and the records still agree with
    `inspect`."""
    from tests.impair import impaired_copy, losses, read_pcap

    path, _ = captures["closed"]
    code, out, err = run_cli("convert", str(path), "--to", "json")
    complete = {
        r["event_id"]: r["delivery"] for r in ndjson(out) if r.get("direction") == "c2s" and r.get("event_id")
    }
    n = len(read_pcap(path)[1])
    answers = _answer_packets(path)
    assert answers
    copies = losses(n) + [(f"without-answer-{i}", [j for j in range(n) if j != i]) for i in answers]
    for name, order in copies:
        copy = tmp_path / f"{name}.pcap"
        impaired_copy(path, copy, order)
        code, out, err = run_cli("convert", str(copy), "--to", "json")
        assert code == 0, err
        records = ndjson(out)
        outcomes = {
            r["event_id"]: r["delivery"]
            for r in records
            if r["record"] == "message" and r["direction"] == "c2s"
        }
        for event_id, outcome in outcomes.items():
            if event_id in complete and outcome == "unanswered":
                assert complete[event_id] == "unanswered", name
        if name.startswith("without-answer"):
            # the requests it answered, and those waiting across the hole, are unknown; none unanswered more
            assert "unknown" in outcomes.values(), name
            assert sum(o == "unanswered" for o in outcomes.values()) <= HANGING, name
        code, out, err = run_cli("inspect", "--json", str(copy))
        want = cql_outcomes(records)
        assert json.loads(out)["delivery"].get("cql") == (want if want["requests"] else None), name


@pytest.mark.parametrize("name", ["closed", "open"])
def test_reordered_and_duplicated_copies_give_the_same_outcomes(captures, tmp_path, name):
    """Packets moved later or written twice: every request keeps its outcome, on every surface."""
    from tests.impair import impaired_copy, impairments, read_pcap

    path, _ = captures[name]
    code, out, err = run_cli("inspect", "--json", str(path))
    want = json.loads(out)["delivery"]["cql"]
    for copy_name, order in impairments(len(read_pcap(path)[1])):
        copy = tmp_path / f"{copy_name}.pcap"
        impaired_copy(path, copy, order)
        parquet = tmp_path / f"{copy_name}.parquet"
        code, _, err = run_cli("convert", str(copy), "--to", "parquet", "-o", str(parquet))
        assert code == 0, err
        assert assert_cql_agrees(copy, parquet) == want, copy_name
