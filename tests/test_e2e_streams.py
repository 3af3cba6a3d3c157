"""End to end: captures through `wirelog streams` / `convert`, with answers known from elsewhere."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.capture_tools import ndjson, run_cli, tcpdump
from tests.conftest import shared_capture

SV = "public/reassembly/sv_"


def follow(path, stream: int, direction: str, *extra: str) -> bytes:
    code, out, err = run_cli("streams", str(path), "--dump", str(stream), "--direction", direction, *extra)
    assert code == 0, err
    return out


def streams_json(*args: str) -> list[dict]:
    code, out, err = run_cli("streams", "--json", *args)
    assert code == 0, err
    return ndjson(out)


def findings(*args: str) -> list[dict]:
    code, out, err = run_cli("convert", *args, "--to", "json")
    assert code == 0, err
    return [r for r in ndjson(out) if r["record"] == "finding"]


@pytest.mark.parametrize(("policy", "expected"), [("first", b"GOOD"), ("last", b"EVIL")])
def test_suricata_exact_overlap(policy, expected):
    path = shared_capture(SV + "eve-payload-01-tcp-exact-overlap__tcp-overlap.pcap")
    assert follow(path, 0, "c2s", "--overlap", policy) == expected
    codes = [f["code"] for f in findings(str(path), "--overlap", policy)]
    assert "tcp.overlap-conflict" in codes


@pytest.mark.parametrize(("policy", "expected"), [("first", b"GOOD"), ("last", b"GXXX")])
def test_suricata_partial_overlap(policy, expected):
    path = shared_capture(SV + "eve-payload-04-partial-overlap__tcp-overlap2.pcap")
    assert follow(path, 0, "c2s", "--overlap", policy) == expected
    conflict = [f for f in findings(str(path), "--overlap", policy) if f["code"] == "tcp.overlap-conflict"]
    assert conflict and conflict[0]["first_frame"] < conflict[0]["frame"]


def test_suricata_gap_in_the_middle():
    path = shared_capture(SV + "eve-payload-05-tcp-data-gap__tcp-simple-gap2.pcap")
    assert follow(path, 0, "c2s") == b"VERYDATA"
    gaps = [f for f in findings(str(path)) if f["code"] == "tcp.gap"]
    assert [(g["offset"], g["length"], g["seq"], g["direction"]) for g in gaps] == [(4, 4, 6, "c2s")]
    (s,) = streams_json(str(path))
    assert (s["gaps"], s["gap_bytes"], s["handshake"], s["midstream"]) == (1, 4, True, False)


def test_suricata_leading_gap():
    path = shared_capture(SV + "eve-payload-06-tcp-data-leading-gap__tcp-leading-gap.pcap")
    assert follow(path, 0, "c2s") == b"GOODDATA"
    gaps = [f for f in findings(str(path)) if f["code"] == "tcp.gap"]
    assert [(g["offset"], g["length"], g["seq"]) for g in gaps] == [(0, 4, 2)]


@pytest.mark.parametrize(
    ("name", "c2s_len"),
    [
        ("bug-3286-02-linux-evasion__with_evasion_linux.pcap", 338),
        ("bug-3286-03-windows-evasion__with_evasion_windows.pcap", 343),
    ],
)
def test_suricata_rst_then_port_reuse(name, c2s_len):
    path = shared_capture(SV + name)
    rows = streams_json(str(path))
    assert len(rows) == 2
    first, second = rows
    assert (
        first["reset"]
        and second["port_reuse"]
        and second["client"].endswith(":" + first["client"].split(":")[1])
    )
    assert (second["bytes_c2s"], second["bytes_s2c"], second["gaps"]) == (c2s_len, 79, 0)
    request = follow(path, 1, "c2s")
    response = follow(path, 1, "s2c")
    assert request.startswith(b"GET / HTTP/1.1") and len(request) == c2s_len
    assert response.startswith(b"HTTP/1.1 200 OK") and response.endswith(b"THIS_IS_A_TEST")
    assert "tcp.port-reuse" in [f["code"] for f in findings(str(path))]


def test_suricata_one_sided_no_syn():
    path = shared_capture(SV + "bug-2491-02__simple_http_download.onesided.nosyn.pcap")
    (s,) = streams_json(str(path))
    assert s["midstream"] and s["client_by"] == "port" and s["server"].endswith(":80")
    assert (s["bytes_c2s"], s["bytes_s2c"], s["gaps"]) == (1193, 0, 0)
    data = follow(path, 0, "c2s")
    assert data.count(b"GET /i/") == 3 and len(data) == 1193
    unseen = [f for f in findings(str(path)) if f["code"] == "tcp.unseen-data"]
    assert unseen and unseen[0]["direction"] == "s2c" and unseen[0]["length"] >= 12000


def test_vlan_ids_differ_per_direction_but_one_connection():
    path = shared_capture("public/arkime_cassandra1.pcap")
    (s,) = streams_json(str(path))
    assert s["server"] == "10.176.171.11:9160" and s["handshake"] and s["bytes_c2s"] == 41


@pytest.mark.parametrize(
    ("name", "streams"),
    [
        ("public/cql-packetbeat/cassandra_compressed.pcap", 2),
        ("public/cql-packetbeat/cassandra_insert.pcap", 1),
        ("public/cql-packetbeat/cassandra_mixed_frame.pcap", 21),
        ("public/ndpi_cassandra.pcap", 3),
    ],
)
def test_real_cql_captures_read_cleanly(name, streams):
    path = shared_capture(name)
    rows = streams_json(str(path))
    assert len(rows) == streams
    assert all(r["gaps"] == 0 and r["conflicts"] == 0 for r in rows)
    codes = {f["code"] for f in findings(str(path))}
    assert not {c for c in codes if c.startswith(("tcp.", "decoder."))}


def test_backwards_timestamps_are_reported_not_fatal():
    path = shared_capture("public/ndpi_cassandra.pcap")
    codes = [f["code"] for f in findings(str(path))]
    assert codes.count("pcap.time-backwards") == 2


def test_several_inputs_and_a_bad_one(tmp_path):
    good = shared_capture("public/cql-packetbeat/cassandra_insert.pcap")
    bad = tmp_path / "notes.txt"
    bad.write_bytes(b"hello, this is not a capture\n")
    code, out, err = run_cli("streams", "--json", str(good), str(bad))
    assert code == 0
    assert len(ndjson(out)) == 1
    assert "not a pcap" in err and "Traceback" not in err
    code, out, err = run_cli("streams", "--json", str(bad))
    assert code == 2 and out == b""


def test_missing_file_is_one_clear_line(tmp_path):
    code, _, err = run_cli("convert", str(tmp_path / "nope.pcap"))
    assert code == 2 and "nope.pcap" in err and len(err.strip().splitlines()) == 1


def test_json_output_is_deterministic():
    path = shared_capture("public/cql-packetbeat/cassandra_mixed_frame.pcap")
    a = run_cli("convert", str(path), "--to", "json")[1]
    b = run_cli("convert", str(path), "--to", "json")[1]
    assert a == b and a


def test_raw_dumps_tcpflow_pair(tmp_path):
    c2s = tmp_path / "010.000.000.001.41000-010.000.000.002.05044"
    s2c = tmp_path / "010.000.000.002.05044-010.000.000.001.41000"
    c2s.write_bytes(b"client bytes")
    s2c.write_bytes(b"server reply")
    rows = streams_json("--raw", str(s2c), "--raw", str(c2s))
    assert len(rows) == 1
    assert (rows[0]["client"], rows[0]["server"]) == ("10.0.0.1:41000", "10.0.0.2:5044")
    assert (rows[0]["bytes_c2s"], rows[0]["bytes_s2c"]) == (12, 12)
    _, out, _ = run_cli("streams", "--raw", str(s2c), "--raw", str(c2s), "--dump", "0", "--direction", "s2c")
    assert out == b"server reply"


def test_real_loopback_capture_with_tcpdump(tmp_path):
    """A real TCP exchange on lo, captured by tcpdump: reassembled bytes equal what was sent."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    request = bytes(range(256)) * 400  # 100 KiB: many segments
    reply = b"pong" * 5000
    received = bytearray()

    def serve():
        conn, _ = srv.accept()
        with conn:
            while len(received) < len(request):
                received.extend(conn.recv(65536))
            conn.sendall(reply)

    pcap = tmp_path / "lo.pcap"
    try:
        ctx = tcpdump(pcap, port)
        ctx.__enter__()
    except (RuntimeError, OSError) as e:
        srv.close()
        pytest.skip(f"cannot capture on lo: {e}")
    try:
        t = threading.Thread(target=serve)
        t.start()
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.sendall(request)
            got = bytearray()
            while len(got) < len(reply):
                chunk = c.recv(65536)
                if not chunk:
                    break
                got.extend(chunk)
        t.join(5)
    finally:
        ctx.__exit__(None, None, None)
        srv.close()
    (s,) = streams_json(str(pcap))
    assert s["handshake"] and (s["bytes_c2s"], s["bytes_s2c"]) == (len(request), len(reply))
    assert s["client_by"] == "syn" and s["server"] == f"127.0.0.1:{port}"
    assert follow(pcap, 0, "c2s") == request
    assert follow(pcap, 0, "s2c") == reply
