"""End to end on real CQL captures (../shared/captures/README.md gives every expected number)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import pytest

from tests.capture_tools import ndjson, run_cli
from tests.conftest import shared_capture

PB = "public/cql-packetbeat/cassandra_"
OPCODES = {
    0: "error", 1: "startup", 2: "ready", 5: "options", 6: "supported", 7: "query", 8: "result", 11: "register",
}  # fmt: skip


def convert(path) -> list[dict]:
    code, out, err = run_cli("convert", str(path), "--to", "json")
    assert code == 0, err
    return ndjson(out)


def cql(records: list[dict]) -> list[dict]:
    return [r for r in records if r["record"] == "message" and r["protocol"] == "cql"]


def cql_findings(records: list[dict]) -> list[str]:
    return [r["code"] for r in records if r["record"] == "finding" and r["code"].startswith("cql.")]


def kinds(records: list[dict]) -> Counter:
    return Counter((r["direction"], r["kind"]) for r in cql(records))


# (file, envelopes, {(direction, kind): count}) from the README table
PACKETBEAT = [
    ("compressed", 40, {("c2s", "startup"): 2, ("c2s", "register"): 1, ("c2s", "query"): 17, ("s2c", "ready"): 3, ("s2c", "result"): 17}),
    ("create_index", 16, {("c2s", "query"): 8, ("s2c", "result"): 8}),
    ("create_keyspace", 8, {("c2s", "query"): 4, ("s2c", "result"): 4}),
    ("create_table", 16, {("c2s", "query"): 8, ("s2c", "result"): 8}),
    ("insert", 2, {("c2s", "query"): 1, ("s2c", "result"): 1}),
    ("mixed_frame", 34, {("c2s", "options"): 2, ("c2s", "startup"): 2, ("c2s", "register"): 1, ("c2s", "query"): 12,
                         ("s2c", "supported"): 2, ("s2c", "ready"): 3, ("s2c", "result"): 12}),
    ("select", 2, {("c2s", "query"): 1, ("s2c", "result"): 1}),
    ("select_via_index", 2, {("c2s", "query"): 1, ("s2c", "result"): 1}),
    ("trace_err", 2, {("c2s", "query"): 1, ("s2c", "error"): 1}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "total", "expected"), PACKETBEAT, ids=[p[0] for p in PACKETBEAT])
def test_packetbeat_counts_and_no_findings(name: str, total: int, expected: dict) -> None:
    records = convert(shared_capture(f"{PB}{name}.pcap"))
    assert len(cql(records)) == total
    assert kinds(records) == Counter(expected)
    assert cql_findings(records) == []
    for r in cql(records):  # every response found its request, with a latency
        if r["direction"] == "s2c" and r["kind"] != "event":
            assert r["request_opcode"] and r["latency_ns"] >= 0
        assert r["version"] == "v4"


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("name", [p[0] for p in PACKETBEAT])
def test_packetbeat_matches_tshark_opcodes_and_streams(name: str) -> None:
    path = shared_capture(f"{PB}{name}.pcap")
    out = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "cql", "-T", "fields", "-e", "cql.opcode", "-e", "cql.stream"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    theirs: Counter = Counter()
    for line in out.splitlines():
        ops, streams = line.split("\t")
        for op, stream in zip(ops.split(","), streams.split(","), strict=True):
            theirs[(OPCODES[int(op)], int(stream))] += 1
    ours = Counter((r["kind"], r["stream_id"]) for r in cql(convert(path)))
    assert ours == theirs


def test_packetbeat_compressed_snappy_details() -> None:
    records = cql(convert(shared_capture(f"{PB}compressed.pcap")))
    startups = [r for r in records if r["kind"] == "startup"]
    assert [s["options"] for s in startups] == [{"CQL_VERSION": "3.0.0", "COMPRESSION": "snappy"}] * 2
    assert sum(1 for r in records if r["flags"] & 0x01) == 38
    assert {r["length"] for r in records if r["kind"] == "ready"} == {10}
    reg = next(r for r in records if r["kind"] == "register")
    assert reg["event_types"] == ["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"]
    rows = [r for r in records if r.get("result_kind") == "rows"]
    assert rows and all(len(r["rows"]) == r["rows_count"] for r in rows)
    assert all(len(row) == r["columns_count"] for r in rows for row in r["rows"])


def test_packetbeat_statements_and_results() -> None:
    (ins, void) = cql(convert(shared_capture(f"{PB}insert.pcap")))
    assert ins["stream_id"] == 252 and void["result_kind"] == "void"
    assert ins["query"] == "INSERT INTO users (user_id,  fname, lname)\n  VALUES (1745, 'john', 'smith');"
    (sel, rows) = cql(convert(shared_capture(f"{PB}select.pcap")))
    assert (sel["stream_id"], sel["query"]) == (253, "SELECT * FROM users;")
    assert [c["name"] for c in rows["columns"]] == ["user_id", "fname", "lname"]
    assert rows["rows"] == [[1745, "john", "smith"]]
    (q, err) = cql(convert(shared_capture(f"{PB}trace_err.pcap")))
    assert (q["stream_id"], q["flag_names"], q["query"]) == (275, ["tracing"], "DROP KEYSPACE mykeyspace;")
    assert (err["error_code"], err["error_name"]) == (0x2300, "config_error")
    assert err["error_message"] == "Cannot drop non existing keyspace 'mykeyspace'."


def test_packetbeat_out_of_order_responses_paired_by_stream() -> None:
    records = cql(convert(shared_capture(f"{PB}create_index.pcap")))
    ddl = records[0]
    assert ddl["query"] == "CREATE INDEX ON users (lname);"
    change = next(r for r in records if r["kind"] == "result" and r["stream_id"] == ddl["stream_id"])
    assert change["result_kind"] == "schema_change" and change["target"] == "TABLE"
    last = [r["stream_id"] for r in records if r["kind"] == "result" and r["frame"] == 10]
    assert last == [99, 95, 98, 96, 97]
    by_stream = {r["stream_id"]: r for r in records if r["kind"] == "query"}
    for r in records:
        if r["kind"] == "result":
            assert r["request_frame"] == by_stream[r["stream_id"]]["frame"]


def test_packetbeat_mixed_frame_spanning_results_and_http_not_cql() -> None:
    records = convert(shared_capture(f"{PB}mixed_frame.pcap"))
    spanning = [r for r in cql(records) if r["kind"] == "result" and r["length"] in (18262, 23749)]
    assert sorted(r["frame"] for r in spanning) == [253, 256]
    http = {r["stream"] for r in records if r.get("code") == "stream.unknown-protocol"}
    assert len(http) == 19 and not http & {r["stream"] for r in cql(records)}


def test_ndpi_v4_and_unframed_v5_handshake() -> None:
    records = convert(shared_capture("public/ndpi_cassandra.pcap"))
    # (each STARTUP is unanswered, the connection open at the capture's end: it comes at the end)
    msgs = sorted(cql(records), key=lambda r: (r["stream"], r["frame"]))
    assert [r["delivery"] for r in msgs] == ["answered", "answered", "unknown"] * 2
    assert [(r["version"], r["kind"]) for r in msgs] == [
        ("v4", "options"), ("v4", "supported"), ("v4", "startup"),
        ("v5", "options"), ("v5", "supported"), ("v5", "startup"),
    ]  # fmt: skip
    assert all("framing" not in r for r in msgs)
    sup5 = msgs[4]["options"]
    assert sup5["PROTOCOL_VERSIONS"] == ["3/v3", "4/v4", "5/v5", "6/v6-beta"]
    assert msgs[5]["options"]["DRIVER_NAME"] == "DataStax Python Driver"
    assert "COMPRESSION" not in msgs[5]["options"]
    assert sorted(cql_findings(records)) == ["cql.unanswered-request"] * 2  # no READY in the capture
    internode = {r["stream"] for r in records if (r.get("server") or "").endswith(":7000")}
    assert internode and not internode & {r["stream"] for r in msgs}


def test_arkime_thrift_is_not_cql() -> None:
    records = convert(shared_capture("public/arkime_cassandra1.pcap"))
    assert cql(records) == [] and cql_findings(records) == []
