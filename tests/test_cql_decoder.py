"""The CQL decoder on reference vectors and on envelopes/frames produced by the real cassandra-driver."""

from __future__ import annotations

import uuid

import cramjam
from cassandra import ConsistencyLevel
from cassandra.protocol import (
    AuthResponseMessage,
    BatchMessage,
    ExecuteMessage,
    OptionsMessage,
    PrepareMessage,
    QueryMessage,
    RegisterMessage,
    StartupMessage,
)
from cassandra.query import BatchType
from cql_helpers import (
    C2S,
    S2C,
    codes,
    ctx,
    driver_envelope,
    driver_frames,
    findings,
    messages,
    run,
    run_with_gap,
    s_bytes,
    s_int,
    s_string,
)

from tests import cql_wire as wire
from wirelog.engine.protocols import Limits
from wirelog.model import Severity

H = bytes.fromhex
ONE = ConsistencyLevel.ONE

# Reference vectors F, G, H, I (reference/cql.md §7).
VEC_F = H(
    "2700027a6d6b" "050000020700 00001e".replace(" ", "")
    + "0000001453454c45435420762046524f4d206b732e74626c000100000000" + "d9a5dca4"
)  # fmt: skip
VEC_G = H(
    "300002953f3e" "850000020800000027"
    "00000002000000010000000100026b73000374626c0001760003000000010000000568656c6c6f" "b8bf6f5a"
)  # fmt: skip
VEC_H = H("170002856491050000020f0000000e0000000a00757365720070617373dfbfdbe4")
VEC_I = H("0401000207000000210000001bf00c0000001453454c45435420762046524f4d206b732e74626c000100")


def resp(version: int, stream: int, opcode: int, body: bytes, flags: int = 0) -> bytes:
    return wire.envelope(version, True, flags, stream, opcode, body)


def supported() -> bytes:
    body = (
        b"\x00\x02"
        + s_string("CQL_VERSION") + b"\x00\x01" + s_string("3.4.7")
        + s_string("COMPRESSION") + b"\x00\x02" + s_string("lz4") + s_string("snappy")
    )  # fmt: skip
    return resp(5, 0, 0x06, body)


def rows_body(ks: str, table: str, cols: list[tuple[str, bytes]], rows: list[list[bytes | None]]) -> bytes:
    """RESULT Rows with global table spec; cols = (name, [option] bytes)."""
    out = s_int(2) + s_int(1) + s_int(len(cols)) + s_string(ks) + s_string(table)
    for name, opt in cols:
        out += s_string(name) + opt
    out += s_int(len(rows))
    for row in rows:
        out += b"".join(s_bytes(c) for c in row)
    return out


def v5_handshake(lz4: bool) -> list:
    options = {"COMPRESSION": "lz4"} if lz4 else {}
    return [
        (C2S, driver_envelope(OptionsMessage(), 0, 5)),
        (S2C, supported()),
        (C2S, driver_envelope(StartupMessage("3.4.7", options), 1, 5)),
        (S2C, resp(5, 1, 0x02, b"")),
    ]


def test_vector_f_g_query_and_rows_midstream() -> None:
    recs = run([(C2S, VEC_F), (S2C, VEC_G)])
    q, r = messages(recs)
    assert (q.kind, q.version, q.offset, q.length) == ("query", "v5", 6, 39)
    assert q.fields["query"] == "SELECT v FROM ks.tbl"
    assert q.fields["consistency"] == "ONE" and q.fields["query_flags"] == 0
    assert q.fields["framing"] == "crc"
    assert r.fields["result_kind"] == "rows"
    assert r.fields["columns"] == [{"keyspace": "ks", "table": "tbl", "name": "v", "type": "blob"}]
    assert r.fields["rows"] == [["68656c6c6f"]]
    assert r.fields["latency_ns"] == 1000 and r.fields["request_opcode"] == "query"
    assert findings(recs) == []


def test_vector_h_auth_response_redacted_by_default() -> None:
    (m,) = messages(run([(C2S, VEC_H)]))
    assert m.fields["token"] == "<redacted>"
    assert m.fields["auth_user"] == "user"
    assert "pass" not in repr(m.fields) and "70617373" not in repr(m.fields)
    (m,) = messages(run([(C2S, VEC_H)], ctx(show_secrets=True)))
    assert m.fields["token"] == "00757365720070617373"
    assert m.fields["auth_password"] == "pass"


def test_vector_i_v4_lz4_body() -> None:
    (m,) = messages(run([(C2S, VEC_I)]))
    assert m.version == "v4" and m.fields["flag_names"] == ["compression"]
    assert m.fields["query"] == "SELECT v FROM ks.tbl"


def test_v5_crc_handshake_then_frames() -> None:
    q = driver_envelope(QueryMessage("SELECT * FROM system.local", ONE), 2, 5)
    result = resp(5, 2, 0x08, rows_body("system", "local", [("key", b"\x00\x0d")], [[b"local"]]))
    recs = run([*v5_handshake(False), (C2S, driver_frames(q, False)), (S2C, driver_frames(result, False))])
    kinds = [(m.direction, m.kind, m.fields.get("framing")) for m in messages(recs)]
    assert kinds == [
        (C2S, "options", None),
        (S2C, "supported", None),
        (C2S, "startup", None),
        (S2C, "ready", None),
        (C2S, "query", "crc"),
        (S2C, "result", "crc"),
    ]
    assert messages(recs, "supported")[0].fields["options"]["COMPRESSION"] == ["lz4", "snappy"]
    assert messages(recs, "result")[0].fields["rows"] == [["local"]]
    assert findings(recs) == []


def test_v5_lz4_large_query_over_two_frames() -> None:
    text = "SELECT * FROM t WHERE k IN (" + ",".join(str(i) for i in range(40000)) + ")"
    q = driver_envelope(QueryMessage(text, ONE), 5, 5)
    frames = driver_frames(q, True)
    small = driver_envelope(QueryMessage("SELECT 1", ONE), 6, 5)
    recs = run([*v5_handshake(True), (C2S, frames + driver_frames(small, True))])
    big, little = messages(recs, "query")
    assert big.fields["query"] == text and big.fields["frames"] == 2 and big.fields["framing"] == "lz4"
    assert big.length == len(q)
    assert little.fields["query"] == "SELECT 1"
    assert [c for c in codes(recs) if c != "cql.unanswered-request"] == []


def test_server_style_split_131060_rows() -> None:
    blob = bytes(range(256)) * 1172  # 300032 bytes
    result = resp(5, 3, 0x08, rows_body("ks", "t", [("b", b"\x00\x03")], [[blob]]))
    q = driver_envelope(QueryMessage("SELECT b FROM ks.t", ONE), 3, 5)
    frames = wire.frames(result, False, chunk=131060)
    assert len(frames) == len(result) + 3 * 10
    recs = run([*v5_handshake(False), (C2S, driver_frames(q, False)), (S2C, frames)])
    (r,) = messages(recs, "result")
    assert r.fields["frames"] == 3 and r.fields["rows"][0][0] == blob.hex()
    assert findings(recs) == []


def test_prepare_execute_decodes_values_and_no_metadata_rows() -> None:
    pid, rmid = b"\x01\x02\x03\x04", b"\xaa\xbb"
    prepared = (
        s_int(4) + b"\x00\x04" + pid + b"\x00\x02" + rmid
        # bind metadata: global spec, 2 columns, 1 pk (index 0)
        + s_int(1) + s_int(2) + s_int(1) + b"\x00\x00" + s_string("ks") + s_string("t")
        + s_string("k") + b"\x00\x09" + s_string("name") + b"\x00\x0d"
        # result metadata: 1 column
        + s_int(1) + s_int(1) + s_string("ks") + s_string("t") + s_string("v") + b"\x00\x0d"
    )  # fmt: skip
    execute = ExecuteMessage(pid, [s_int(42)[0:4], b"hi"], ONE, skip_meta=True, result_metadata_id=rmid)
    no_meta_rows = s_int(2) + s_int(4) + s_int(1) + s_int(1) + s_bytes(b"hello")
    recs = run(
        [
            *v5_handshake(False),
            (
                C2S,
                driver_frames(
                    driver_envelope(PrepareMessage("SELECT v FROM ks.t WHERE k=? AND name=?"), 7, 5), False
                ),
            ),
            (S2C, driver_frames(resp(5, 7, 0x08, prepared), False)),
            (C2S, driver_frames(driver_envelope(execute, 8, 5), False)),
            (S2C, driver_frames(resp(5, 8, 0x08, no_meta_rows), False)),
        ]
    )
    prep = messages(recs, "result")[0].fields
    assert prep["result_kind"] == "prepared" and prep["prepared_id"] == "01020304"
    assert prep["result_metadata_id"] == "aabb" and prep["pk_indexes"] == [0]
    assert [c["type"] for c in prep["bind_columns"]] == ["int", "varchar"]
    assert prep["query"] == "SELECT v FROM ks.t WHERE k=? AND name=?"
    ex = messages(recs, "execute")[0].fields
    assert ex["query"] == "SELECT v FROM ks.t WHERE k=? AND name=?"
    assert ex["values"] == ["0000002a", "6869"] and ex["values_decoded"] == [42, "hi"]
    assert ex["result_metadata_id"] == "aabb"
    rows = messages(recs, "result")[1].fields
    assert rows["metadata_flags"] == 4 and rows["rows"] == [["hello"]]
    assert findings(recs) == []


def test_batch_v4_and_v5() -> None:
    for version in (4, 5):
        batch = BatchMessage(
            BatchType.UNLOGGED,
            [(False, "INSERT INTO t (k) VALUES (?)", [s_int(1)]), (True, b"\x09\x09", [b"x", None])],
            ConsistencyLevel.QUORUM,
            timestamp=1234567,
        )
        data = driver_envelope(batch, 1, version)
        (m,) = messages(run([(C2S, wire.frame(data) if version == 5 else data)]))
        f = m.fields
        assert f["batch_type"] == "UNLOGGED" and f["consistency"] == "QUORUM" and f["timestamp"] == 1234567
        assert f["statements"][0] == {"query": "INSERT INTO t (k) VALUES (?)", "values": ["00000001"]}
        assert f["statements"][1] == {"prepared_id": "0909", "values": ["78", None]}


def test_query_parameters_all_flags_v4_and_v5() -> None:
    for version in (4, 5):
        msg = QueryMessage(
            "SELECT * FROM t",
            ConsistencyLevel.LOCAL_QUORUM,
            serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
            fetch_size=100,
            paging_state=b"\x01\x02",
            timestamp=99,
            keyspace="ks" if version == 5 else None,
        )
        data = driver_envelope(msg, 1, version)
        (m,) = messages(run([(C2S, wire.frame(data) if version == 5 else data)]))
        f = m.fields
        assert (f["consistency"], f["serial_consistency"], f["page_size"]) == (
            "LOCAL_QUORUM",
            "LOCAL_SERIAL",
            100,
        )
        assert f["paging_state"] == "0102" and f["timestamp"] == 99
        assert f.get("keyspace") == ("ks" if version == 5 else None)


def test_register_event_and_no_orphan_for_events() -> None:
    event = resp(
        4, -1, 0x0C, s_string("STATUS_CHANGE") + s_string("UP") + b"\x04\x0a\x00\x00\x02" + s_int(9042)
    )
    schema = resp(
        4,
        -1,
        0x0C,
        s_string("SCHEMA_CHANGE") + s_string("CREATED") + s_string("TABLE") + s_string("ks") + s_string("t"),
    )
    recs = run(
        [
            (C2S, driver_envelope(RegisterMessage(["STATUS_CHANGE"]), 0, 4)),
            (S2C, resp(4, 0, 0x02, b"") + event + schema),
        ]
    )
    reg, ready, ev, sc = messages(recs)
    assert reg.fields["event_types"] == ["STATUS_CHANGE"] and ready.fields["request_opcode"] == "register"
    assert ev.fields == {
        **ev.fields,
        "event_type": "STATUS_CHANGE",
        "change": "UP",
        "address": "10.0.0.2:9042",
    }
    assert (sc.fields["change"], sc.fields["target"], sc.fields["keyspace"], sc.fields["name"]) == (
        "CREATED",
        "TABLE",
        "ks",
        "t",
    )
    assert findings(recs) == []


def test_error_tails_per_version() -> None:
    cl, two = b"\x00\x01", s_int(1) + s_int(2)
    v4 = resp(4, 1, 0x00, s_int(0x1300) + s_string("rf") + cl + two + s_int(3) + b"\x01")
    v5 = resp(
        5,
        1,
        0x00,
        s_int(0x1300) + s_string("rf") + cl + two + s_int(1) + b"\x04\x0a\x00\x00\x01\x00\x05" + b"\x00",
    )
    cas = resp(5, 2, 0x00, s_int(0x1100) + s_string("wt") + cl + two + s_string("CAS") + b"\x00\x07")
    (e4,) = messages(run([(S2C, v4)]))
    assert (
        e4.fields["error_name"] == "read_failure" and e4.fields["failures"] == 3 and e4.fields["data_present"]
    )
    e5, ec = messages(run([(S2C, wire.frame(v5 + cas))]))
    assert e5.fields["reasons"] == {"10.0.0.1": 5} and e5.fields["data_present"] is False
    assert ec.fields["write_type"] == "CAS" and ec.fields["contentions"] == 7
    assert ec.fields["error_message"] == "wt" and ec.fields["received"] == 1 and ec.fields["block_for"] == 2


def test_v4_snappy_negotiated() -> None:
    q = driver_envelope(QueryMessage("SELECT now() FROM system.local", ONE), 1, 4)
    body = bytes(cramjam.snappy.compress_raw(q[9:]))
    compressed = wire.envelope(4, False, 0x01, 1, 0x07, body)
    ready = resp(4, 0, 0x02, b"\x00", flags=0x01)  # Packetbeat's Snappy READY: 1-byte buffer of zero bytes
    recs = run(
        [
            (C2S, driver_envelope(StartupMessage("3.0.0", {"COMPRESSION": "snappy"}), 0, 4)),
            (S2C, ready),
            (C2S, compressed),
        ]
    )
    assert messages(recs, "query")[0].fields["query"] == "SELECT now() FROM system.local"
    assert [c for c in codes(recs) if c != "cql.unanswered-request"] == []


def test_redaction_in_v4_auth_response() -> None:
    data = driver_envelope(AuthResponseMessage(b"\x00alice\x00s3cret"), 3, 4)
    (m,) = messages(run([(C2S, data)]))
    assert m.fields["token"] == "<redacted>" and m.fields["auth_user"] == "alice"
    assert "s3cret" not in repr(m.fields)


# ---- findings ---------------------------------------------------------------------------------------


def _framed_queries(n: int, lz4: bool = False) -> bytes:
    return b"".join(
        driver_frames(driver_envelope(QueryMessage(f"SELECT {i} FROM t", ONE), i, 5), lz4) for i in range(n)
    )


def test_crc32_mismatch_reported_and_envelope_kept() -> None:
    data = bytearray(_framed_queries(2))
    data[6 + 9 + 4] ^= 0x20  # flip a bit in the first query text: "SELECT" -> "sELECT"
    recs = run([(C2S, bytes(data))])
    (f,) = [f for f in findings(recs) if f.code == "cql.crc32-mismatch"]
    assert f.severity is Severity.ERROR and f.offset == 0
    assert f.fields["stored"] != f.fields["computed"] and len(f.fields["stored"]) == 8
    assert [m.fields["query"] for m in messages(recs)] == ["sELECT 0 FROM t", "SELECT 1 FROM t"]


def test_crc24_mismatch_resyncs_to_next_frame() -> None:
    data = bytearray(_framed_queries(3))
    first_len = (
        int.from_bytes(data[:3], "little") & wire.MAX_PAYLOAD
    ) + 10  # CRC frame: header + payload + CRC32
    data[0] ^= 0x04  # corrupt the first header's length
    recs = run([*v5_handshake(False), (C2S, bytes(data))])
    assert codes(recs)[:2] == ["cql.crc24-mismatch", "cql.resync"]
    resync = findings(recs)[1]
    assert resync.fields["bytes"] == first_len
    assert [m.fields["query"] for m in messages(recs, "query")] == ["SELECT 1 FROM t", "SELECT 2 FROM t"]


def test_midstream_v5_lz4_found_by_crc_search() -> None:
    data = _framed_queries(4, lz4=True)
    cut = 13
    recs = run([(C2S, data[cut:])])
    assert codes(recs)[0] == "cql.resync"
    assert [m.fields["query"] for m in messages(recs)] == [f"SELECT {i} FROM t" for i in (1, 2, 3)]
    assert all(m.fields["framing"] == "lz4" for m in messages(recs))


def test_frame_kind_contradicting_negotiation() -> None:
    crc_frame = driver_frames(driver_envelope(QueryMessage("SELECT 1", ONE), 2, 5), False)
    recs = run([*v5_handshake(True), (C2S, crc_frame)])
    assert "cql.frame-kind-mismatch" in codes(recs)
    assert messages(recs, "query")[0].fields["query"] == "SELECT 1"


def test_envelope_overrun_in_self_contained_frame() -> None:
    q = driver_envelope(QueryMessage("SELECT 1", ONE), 2, 5)
    bad = q[:5] + (len(q) + 50).to_bytes(4, "big") + q[9:]
    recs = run([(C2S, wire.frame(bad))])
    assert codes(recs) == ["cql.envelope-overrun"]


def test_lz4_frame_decompression_failure() -> None:
    payload = b"\xff" * 20
    frame = wire.header(len(payload), 100, True, True) + payload
    frame += wire.crc32(payload).to_bytes(4, "little")
    recs = run([(C2S, frame)])
    assert codes(recs) == ["cql.decompression-failed"]


def test_v4_compressed_body_garbage() -> None:
    recs = run([(C2S, wire.envelope(4, False, 0x01, 1, 0x07, b"\x00\x00\x10\x00garbage"))])
    assert "cql.decompression-failed" in codes(recs)
    assert messages(recs, "query")


def test_pairing_findings() -> None:
    q1 = driver_envelope(QueryMessage("SELECT 1", ONE), 1, 4)
    q1b = driver_envelope(QueryMessage("SELECT 2", ONE), 1, 4)
    recs = run([(C2S, q1 + q1b), (S2C, resp(4, 1, 0x08, s_int(1)) + resp(4, 9, 0x08, s_int(1)))])
    assert codes(recs) == ["cql.stream-id-reused", "cql.response-without-request"]
    assert findings(recs)[1].fields["stream_id"] == 9


def test_trailing_bytes_and_malformed_body() -> None:
    recs = run(
        [
            (
                S2C,
                resp(
                    4,
                    -1,
                    0x0C,
                    s_string("STATUS_CHANGE") + s_string("UP") + b"\x04\x0a\x00\x00\x02" + s_int(1) + b"zz",
                ),
            )
        ]
    )
    assert codes(recs) == ["cql.trailing-bytes"] and findings(recs)[0].fields["bytes"] == 2
    recs = run([(C2S, wire.envelope(4, False, 0, 1, 0x07, b"\x00\x00\x00\x50abc"))])
    assert codes(recs)[0] == "cql.malformed-body"
    assert messages(recs, "query")


def test_version_change_and_beta_flag() -> None:
    startup = driver_envelope(StartupMessage("3.0.0", {}), 0, 4)
    q5 = wire.envelope(5, False, 0x10, 2, 0x07, driver_envelope(QueryMessage("SELECT 1", ONE), 2, 5)[9:])
    recs = run([(C2S, startup + q5)])
    assert "cql.version-changed" in codes(recs) and "cql.v5-beta" in codes(recs)


def test_unknown_opcode_in_unframed_stream_resyncs() -> None:
    bogus = wire.envelope(4, False, 0, 1, 0x04, b"abcd")
    good = driver_envelope(QueryMessage("SELECT 1", ONE), 2, 4)
    recs = run([(C2S, bogus + good)])
    assert codes(recs)[:2] == ["cql.unknown-opcode", "cql.resync"]
    assert messages(recs, "query")[0].fields["query"] == "SELECT 1"


def test_envelope_too_large_against_limits() -> None:
    q = driver_envelope(QueryMessage("SELECT 1", ONE), 2, 4)
    recs = run([(C2S, q[:5] + (10**6).to_bytes(4, "big") + q[9:])], ctx(limits=Limits(max_frame=1000)))
    assert codes(recs)[0] == "cql.envelope-too-large"


def test_gap_then_resync_on_envelopes() -> None:
    qs = [driver_envelope(QueryMessage(f"SELECT {i}", ONE), i, 4) for i in range(3)]
    recs = run_with_gap(C2S, qs[0] + qs[1][:5], len(qs[1]) - 5, qs[2])
    assert [m.fields["query"] for m in messages(recs)] == ["SELECT 0", "SELECT 2"]
    assert "cql.truncated" in codes(recs)


def test_truncated_stream_end() -> None:
    q = driver_envelope(QueryMessage("SELECT 1", ONE), 2, 4)
    recs = run([(C2S, q + q[:12])])
    assert codes(recs)[0] == "cql.truncated" and findings(recs)[0].fields["bytes"] == 12


def test_uuid_tracing_prefix_on_response() -> None:
    tid = uuid.uuid4()
    recs = run([(S2C, resp(4, 1, 0x08, tid.bytes + s_int(1), flags=0x02))])
    assert messages(recs)[0].fields["tracing_id"] == str(tid)


def test_v5_startup_refused_by_v4_server_stays_unframed() -> None:
    refusal = resp(4, 1, 0x00, s_int(0x000A) + s_string("Invalid or unsupported protocol version (5)"))
    recs = run(
        [
            (C2S, driver_envelope(StartupMessage("3.4.7", {}), 1, 5)),
            (S2C, refusal),
            (C2S, driver_envelope(OptionsMessage(), 2, 5)),  # a late unframed request on the dying connection
        ]
    )
    assert [m.kind for m in messages(recs)] == ["startup", "error", "options"]
    assert messages(recs, "error")[0].fields["error_name"] == "protocol_error"
    assert codes(recs) == ["cql.unanswered-request"]


def test_dse_downgrade_options_then_error() -> None:
    options = wire.envelope(0x42, False, 0, 0, 0x05, b"")
    refusal = resp(4, 0, 0x00, s_int(0x000A) + s_string("Beta version of the protocol used (66/v66)"))
    recs = run([(C2S, options), (S2C, refusal)])
    assert [(m.kind, m.version) for m in messages(recs)] == [("options", "dse-v2"), ("error", "v4")]
    assert codes(recs) == []


def test_self_contained_frame_between_parts_of_a_large_envelope() -> None:
    blob = b"\x07" * 200_000
    big = resp(5, 3, 0x08, rows_body("ks", "t", [("b", b"\x00\x03")], [[blob]]))
    parts = [big[:131060], big[131060:]]
    small = resp(5, 4, 0x08, s_int(1))
    data = wire.frame(parts[0], False) + wire.frame(small, True) + wire.frame(parts[1], False)
    recs = run([(S2C, data)])
    void, rows = messages(recs)
    assert void.fields["result_kind"] == "void" and void.fields["stream_id"] == 4
    assert rows.fields["frames"] == 2 and rows.fields["rows"][0][0] == blob.hex()
    assert set(codes(recs)) == {"cql.response-without-request"}
