"""The real cassandra-driver against a scripted CQL server on loopback, captured with tcpdump.

Covers what no public capture has: framed v5 (CRC and LZ4), v5 with PlainText auth, v4 with LZ4 body
compression, multi-frame envelopes both ways (a 200 KB QUERY split by the driver, a 300 KB RESULT split
Cassandra-style in 131060-byte frames). Then single bit flips in the capture must produce CRC findings
on the right packet numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthenticator
from cassandra.connection import DefaultEndPoint
from cassandra.protocol import ExecuteMessage, PrepareMessage, QueryMessage
from cql_helpers import Responder
from scapy.layers.inet import TCP
from scapy.utils import rdpcap

from tests.capture_tools import ndjson, run_cli, tcpdump

LibevConnection = pytest.importorskip("cassandra.io.libevreactor").LibevConnection

BIG_QUERY = "SELECT v FROM ks.t WHERE k IN (" + ",".join(map(str, range(40000))) + ")"
CONFIGS = {
    "v5-crc": (5, False, False),
    "v5-lz4": (5, "lz4", False),
    "v5-auth": (5, False, True),
    "v4-lz4": (4, "lz4", False),
}


def _talk(port: int, version: int, compression: str | bool, auth: bool) -> None:
    kw: dict = {"protocol_version": version, "compression": compression}
    if auth:
        kw["authenticator"] = PlainTextAuthenticator("user", "pass")
    conn = LibevConnection.factory(DefaultEndPoint("127.0.0.1", port), 10, **kw)
    try:
        one = ConsistencyLevel.ONE
        conn.wait_for_response(QueryMessage("SELECT v FROM ks.t", one))
        assert (
            len(conn.wait_for_response(QueryMessage("SELECT big FROM ks.t", one)).parsed_rows[0][0])
            == 300_000
        )
        conn.wait_for_response(QueryMessage(BIG_QUERY, one))
        prepared = conn.wait_for_response(PrepareMessage("SELECT v FROM ks.t WHERE k=?"))
        execute = ExecuteMessage(
            prepared.query_id,
            [b"\x00\x00\x00\x07"],
            one,
            result_metadata_id=getattr(prepared, "result_metadata_id", None),
        )
        assert conn.wait_for_response(execute).parsed_rows == [(b"executed",)]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    LibevConnection.initialize_reactor()
    out = {}
    for name, (version, compression, auth) in CONFIGS.items():
        responder = Responder(auth=auth)
        pcap = tmp_path_factory.mktemp("cql") / f"{name}.pcap"
        try:
            with tcpdump(pcap, responder.port):
                _talk(responder.port, version, compression, auth)
        except (RuntimeError, OSError) as exc:
            pytest.skip(f"cannot capture on lo: {exc}")
        finally:
            responder.close()
        assert responder.crc_errors == []
        out[name] = pcap
    return out


def convert(path: Path, *extra: str) -> tuple[list[dict], bytes]:
    code, out, err = run_cli("convert", str(path), "--to", "json", *extra)
    assert code == 0, err
    return ndjson(out), out


def cql(records: list[dict], kind: str | None = None) -> list[dict]:
    return [
        r
        for r in records
        if r["record"] == "message" and r["protocol"] == "cql" and kind in (None, r["kind"])
    ]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_driver_statements_decoded_and_crcs_verify(captures: dict[str, Path], name: str) -> None:
    version, compression, auth = CONFIGS[name]
    records, _ = convert(captures[name])
    assert [r for r in records if r["record"] == "finding" and r["protocol"] == "cql"] == []
    queries = [r["query"] for r in cql(records, "query")]
    assert queries == ["SELECT v FROM ks.t", "SELECT big FROM ks.t", BIG_QUERY]
    assert cql(records, "prepare")[0]["query"] == "SELECT v FROM ks.t WHERE k=?"
    ex = cql(records, "execute")[0]
    assert ex["query"] == "SELECT v FROM ks.t WHERE k=?" and ex["values_decoded"] == [7]
    results = cql(records, "result")
    assert len(results) == 5 and all(r["latency_ns"] >= 0 for r in results)
    assert results[0]["rows"] == [["53454c45435420762046524f4d206b732e74"]]
    assert len(results[1]["rows"][0][0]) == 600_000
    assert results[4]["rows"] == [["6578656375746564"]]
    startup = cql(records, "startup")[0]
    assert startup["version"] == f"v{version}" and "framing" not in startup
    framed = [
        r for r in cql(records) if r["kind"] in ("query", "result", "prepare", "execute", "auth_response")
    ]
    if version == 5:
        assert {r["framing"] for r in framed} == {"lz4" if compression else "crc"}
        assert cql(records, "query")[2]["frames"] == 2  # the driver's 131071-byte split
        assert results[1]["frames"] == 3  # Cassandra-style 131060-byte split
    else:
        assert all("compression" in r["flag_names"] for r in cql(records, "query"))
    if auth:
        assert cql(records, "authenticate")[0]["authenticator"].endswith("PasswordAuthenticator")
        assert cql(records, "auth_response")[0]["framing"] == "crc"


def test_auth_secret_redacted_unless_asked(captures: dict[str, Path]) -> None:
    records, raw = convert(captures["v5-auth"])
    resp = cql(records, "auth_response")[0]
    assert resp["token"] == "<redacted>" and resp["auth_user"] == "user"
    assert b"70617373" not in raw and b'"pass"' not in raw
    records, _ = convert(captures["v5-auth"], "--show-secrets")
    resp = cql(records, "auth_response")[0]
    assert resp["auth_password"] == "pass" and resp["token"] == "00757365720070617373"


def test_inspect_hex_dump_masks_the_redacted_credential(captures: dict[str, Path]) -> None:
    records, _ = convert(captures["v5-auth"])
    frame = cql(records, "auth_response")[0]["frame"]
    code, out, _ = run_cli("inspect", str(captures["v5-auth"]), "--frame", str(frame))
    assert code == 0 and b"auth_response" in out and b"**" in out
    assert b"70 61 73 73" not in out and b"pass" not in out
    code, out, _ = run_cli("inspect", str(captures["v5-auth"]), "--frame", str(frame), "--show-secrets")
    assert code == 0 and b"70 61 73 73" in out


def _first_packet_with(path: Path, needle: bytes) -> tuple[int, int]:
    """(1-based packet number, file offset of `needle`) of the first packet whose TCP payload holds it."""
    data = path.read_bytes()
    for number, pkt in enumerate(rdpcap(str(path)), 1):
        if TCP in pkt and needle in bytes(pkt[TCP].payload):
            return number, data.index(needle)
    raise AssertionError(f"{needle!r} not in {path}")


@pytest.mark.parametrize(
    ("name", "where", "code"),
    [
        ("v5-crc", "payload", "cql.crc32-mismatch"),
        ("v5-crc", "header", "cql.crc24-mismatch"),
        ("v5-lz4", "header", "cql.crc24-mismatch"),
    ],
)
def test_bit_flip_names_the_right_packet(
    captures: dict[str, Path], tmp_path: Path, name: str, where: str, code: str
) -> None:
    needle = b"SELECT v FROM ks.t"  # the first framed QUERY (sent raw in LZ4 frames: too small to compress)
    number, pos = _first_packet_with(captures[name], needle)
    header = 8 if name.endswith("lz4") else 6
    flip = pos if where == "payload" else pos - 4 - 9 - header
    data = bytearray(captures[name].read_bytes())
    data[flip] ^= 0x01
    bad = tmp_path / "flipped.pcap"
    bad.write_bytes(bytes(data))
    records, _ = convert(bad)
    hits = [r for r in records if r["record"] == "finding" and r["code"] == code]
    assert len(hits) == 1 and hits[0]["frame"] == number and hits[0]["direction"] == "c2s"
    queries = [r["query"] for r in cql(records, "query")]
    if where == "payload":
        assert queries[0] == "RELECT v FROM ks.t"  # 'S' ^ 1: still decoded, flagged by the CRC32
    else:
        assert queries[-2:] == ["SELECT big FROM ks.t", BIG_QUERY]  # resynchronised after the bad header


@pytest.mark.parametrize("name", list(CONFIGS))
def test_driver_captures_decode_the_same_when_impaired(
    captures: dict[str, Path], name: str, tmp_path: Path
) -> None:
    """Packets moved later or written twice: the same requests, responses (paired by stream id),
    CRC checks and findings (impair.assert_same_when_impaired)."""
    from impair import assert_same_when_impaired

    records = assert_same_when_impaired(captures[name], tmp_path)
    assert any(r.get("kind") == "result" for r in records)


@pytest.mark.parametrize("name", ["v5-crc", "v5-lz4"])
def test_ready_written_before_startup_changes_nothing(
    captures: dict[str, Path], name: str, tmp_path: Path
) -> None:
    """The server's READY one packet before the client's STARTUP (timestamps still in order): the
    v5 framing the STARTUP switches on is applied to the bytes after it, not before."""
    from impair import convert_json, impaired_copy, normalise, read_pcap

    records = convert_json(captures[name])
    (startup,) = [r["frame"] for r in records if r.get("kind") == "startup"]
    (ready,) = [r["frame"] for r in records if r.get("kind") == "ready"]
    order = list(range(len(read_pcap(captures[name])[1])))
    order.insert(startup - 1, order.pop(ready - 1))
    copy = tmp_path / "ready-first.pcap"
    frames = impaired_copy(captures[name], copy, order)
    assert normalise(convert_json(copy), frames) == normalise(records)
