"""TLS decryption against genuine peers over loopback: pylogbeat (Python `ssl`, OpenSSL) sends
Lumberjack to the test receiver wrapped in TLS 1.3 or TLS 1.2 with a forced suite, the receiver's
`SSLContext.keylog_filename` writes the key log, tcpdump captures. Decrypted, the capture must
decode to the same Lumberjack records as the same traffic sent in plaintext; tshark, given the
same key log, must see the same application bytes; without the key log the stream says
`tls.no-key`; a key log embedded with `editcap --inject-secrets` needs no option.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from capture_tools import ndjson, run_cli
from lumberjack_helpers import LumberjackServer, capture, jframe, node_peer, run_node, self_signed, window

from wirelog.model import Direction

pylogbeat = pytest.importorskip("pylogbeat")
pytestmark = pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")

# variant: (maximum TLS version, OpenSSL cipher string or None, expected suite name)
VARIANTS = {
    "tls13": (ssl.TLSVersion.TLSv1_3, None, "TLS_AES_256_GCM_SHA384"),
    "tls12-gcm": (
        ssl.TLSVersion.TLSv1_2,
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    "tls12-chacha20": (
        ssl.TLSVersion.TLSv1_2,
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    "tls12-cbc": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES256-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384"),
}
BATCHES = [
    [{"message": f"line {n}", "n": n, "host": {"name": "web-1"}} for n in range(3)],
    [{"message": "x" * 3000, "n": 3}],  # more than one TLS record for some suites
]


def session(tmp: Path, name: str, tls: tuple | None) -> tuple[Path, Path | None, LumberjackServer]:
    """One pylogbeat connection (TLS when `tls` is given) captured into `<name>.pcap`."""
    pcap, keylog = tmp / f"{name}.pcap", None
    ctx = None
    if tls is not None:
        version, ciphers, _ = tls
        cert, key = self_signed(tmp)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.maximum_version = version
        if ciphers:
            ctx.set_ciphers(ciphers)
        keylog = tmp / f"{name}.keys"
        ctx.keylog_filename = str(keylog)
    with LumberjackServer("highest-seq", tls=ctx) as server, capture(pcap, server.port):
        client = pylogbeat.PyLogBeatClient(
            "127.0.0.1", server.port, timeout=5, ssl_enable=tls is not None, ssl_verify=False
        )
        with client:
            for batch in BATCHES:
                client.send(batch)
    return pcap, keylog, server


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> dict[str, tuple[Path, Path | None, LumberjackServer]]:
    tmp = tmp_path_factory.mktemp("tls")
    out = {"plain": session(tmp, "plain", None)}
    for name, tls in VARIANTS.items():
        out[name] = session(tmp, name, tls)
    return out


def convert(pcap: Path, *extra: str) -> list[dict]:
    code, out, err = run_cli("convert", str(pcap), "--to", "json", *extra)
    assert code == 0, err
    return ndjson(out)


def lumberjack(rows: list[dict]) -> list[tuple]:
    """The Lumberjack messages, without what differs between two connections."""
    return [
        (r["kind"], r["direction"], r.get("event"), r.get("acked"))
        for r in rows
        if r["record"] == "message" and r["protocol"] == "lumberjack"
    ]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_decrypted_stream_decodes_as_the_plaintext_one(captured, variant):
    pcap, keylog, _ = captured[variant]
    rows = convert(pcap, "--tls-keylog", str(keylog))
    plain = lumberjack(convert(captured["plain"][0]))
    assert len([k for k in plain if k[0] == "event"]) == 4
    assert lumberjack(rows) == plain
    lj = [r for r in rows if r["protocol"] == "lumberjack" and r["record"] == "message"]
    expected = VARIANTS[variant]
    version = "TLS 1.3" if expected[0] is ssl.TLSVersion.TLSv1_3 else "TLS 1.2"
    assert {str(r["tls"]) for r in lj} == {
        str({"version": version, "cipher_suite": expected[2], "sni": None, "alpn": None, "decrypted": True})
    }
    assert not [r for r in rows if r["record"] == "finding" and r["severity"] != "info"]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("variant", ["tls13", "tls12-cbc"])
def test_tshark_sees_the_same_plaintext(captured, variant):
    pcap, keylog, server = captured[variant]
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}", "-q", "-z", "follow,tls,raw,0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # follow,raw: one node's lines at column 0, the other's indented by a tab, between the rulers
    # (which node comes first is tshark's choice: compare the two directions as a pair)
    lines = out.splitlines()
    rulers = [i for i, line in enumerate(lines) if line.startswith("====")]
    body = [ln for ln in lines[rulers[0] + 1 : rulers[-1]] if not ln.startswith(("Follow", "Filter", "Node"))]
    flat = b"".join(bytes.fromhex(ln) for ln in body if not ln.startswith("\t"))
    tabbed = b"".join(bytes.fromhex(ln.strip()) for ln in body if ln.startswith("\t"))
    turns = server.connections[0].turns
    c2s = b"".join(data for d, data in turns if d is Direction.C2S)
    s2c = b"".join(data for d, data in turns if d is Direction.S2C)
    assert sorted([flat, tabbed]) == sorted([c2s, s2c])
    # wirelog's decode of the same bytes, as a raw dump, is the decrypted capture's decode
    raw = pcap.with_suffix(".c2s")
    raw.write_bytes(c2s)
    from_raw = [r["event"] for r in convert(raw, "--format", "lumberjack") if r.get("kind") == "event"]
    decrypted = [r["event"] for r in convert(pcap, "--tls-keylog", str(keylog)) if r.get("kind") == "event"]
    assert from_raw == decrypted


def test_without_the_key_log_the_stream_says_no_key(captured):
    rows = convert(captured["tls13"][0])
    (f,) = [r for r in rows if r["record"] == "finding" and r["code"] == "tls.no-key"]
    assert f["severity"] == "warning" and "client random" in f["message"]
    assert not lumberjack(rows)
    hello = [r for r in rows if r.get("kind") == "client_hello"]
    assert hello and hello[0]["protocol"] == "tls"


@pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap not installed")
def test_key_log_embedded_with_editcap(captured, tmp_path):
    pcap, keylog, _ = captured["tls12-gcm"]
    embedded = tmp_path / "embedded.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{keylog}", str(pcap), str(embedded)], check=True)
    assert lumberjack(convert(embedded)) == lumberjack(convert(captured["plain"][0]))


def test_a_missing_key_log_is_a_usage_error(captured, tmp_path):
    code, _, err = run_cli("convert", str(captured["tls13"][0]), "--tls-keylog", str(tmp_path / "nope.keys"))
    assert code == 2
    assert "nope.keys" in err and "Traceback" not in err


def test_a_bad_key_log_line_is_a_warning_naming_it(captured, tmp_path):
    pcap, keylog, _ = captured["tls13"]
    bad = tmp_path / "bad.keys"
    bad.write_text("CLIENT_RANDOM not-hex\n" + keylog.read_text())
    rows = convert(pcap, "--tls-keylog", str(bad))
    (f,) = [r for r in rows if r["record"] == "finding" and r["code"] == "tls.bad-keylog-line"]
    assert "line 1" in f["message"]
    assert lumberjack(rows) == lumberjack(convert(captured["plain"][0]))


def test_a_flipped_byte_fails_its_record_and_decoding_goes_on(captured, tmp_path):
    """One byte of the client's last TLS record changed in the capture: that record is
    `tls.decrypt-failed` at its frame, the records before it still decode."""
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap, wrpcap

    pcap, keylog, server = captured["tls12-gcm"]
    packets = rdpcap(str(pcap))
    port = server.port
    c2s = [i for i, p in enumerate(packets) if TCP in p and p[TCP].dport == port and len(p[TCP].payload)]
    last = c2s[-1]  # the second batch's last segment
    payload = bytearray(bytes(packets[last][TCP].payload))
    payload[len(payload) // 2] ^= 0x20
    packets[last][TCP].remove_payload()
    packets[last][TCP].add_payload(bytes(payload))
    del packets[last][TCP].chksum
    damaged = tmp_path / "flipped.pcap"
    wrpcap(str(damaged), packets)
    rows = convert(damaged, "--tls-keylog", str(keylog))
    failed = [r for r in rows if r["record"] == "finding" and r["code"] == "tls.decrypt-failed"]
    assert [(f["severity"], f["frame"], f["direction"]) for f in failed] == [("error", last + 1, "c2s")]
    events = [r["event"]["n"] for r in rows if r.get("kind") == "event"]
    assert events[:3] == [0, 1, 2]  # the first window decoded before the damage


@pytest.mark.skipif(
    node_peer("lumberjack-protocol") is None, reason="node or npm lumberjack-protocol not installed"
)
def test_node_tls_keylog_decrypts_npm_lumberjack_protocol(tmp_path, monkeypatch):
    """Node's own key log (`--tls-keylog`, through NODE_OPTIONS) decrypts npm lumberjack-protocol's
    v1 traffic: every event the receiver got, with its ACK state and the stream's SNI."""
    cert, key = self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    keylog = tmp_path / "node.keys"
    monkeypatch.setenv("NODE_OPTIONS", f"--tls-keylog={keylog}")
    pcap = tmp_path / "node.pcap"
    with LumberjackServer("highest-seq", partial_every=1, tls=ctx) as server, capture(pcap, server.port):
        run_node("protocol.js", server.port, cert, 3)
    assert [s for s, _ in server.connections[0].events] == [1, 2, 3]
    rows = convert(pcap, "--tls-keylog", str(keylog))
    events = [r for r in rows if r["record"] == "message" and r["kind"] == "event"]
    assert [e["event"]["line"] for e in events] == ["hello v1 0", "hello v1 1", "hello v1 2"]
    assert all(e["acked"] is True and e["version"] == "1" for e in events)
    assert events[0]["tls"]["sni"] == "localhost" and events[0]["tls"]["decrypted"] is True
    assert not [r for r in rows if r["record"] == "finding" and r["severity"] == "error"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
@pytest.mark.parametrize(
    ("suite", "retry"), [("TLS_CHACHA20_POLY1305_SHA256", False), ("TLS_AES_128_GCM_SHA256", True)]
)
def test_openssl_s_client_and_s_server_key_logs(tmp_path, suite, retry):
    """OpenSSL's command-line peers, both writing `-keylogfile`: the Lumberjack window the client
    sent decodes from the capture as it does from the plaintext bytes themselves. With `retry` the
    server only accepts the group the client did not send a key share for: a HelloRetryRequest.
    `streams` shows the SNI, and the ALPN (in TLS 1.3's encrypted extensions) with the key log."""
    cert, key = self_signed(tmp_path)
    plain = (
        window(2) + jframe(1, {"message": "via openssl", "n": 1}) + jframe(2, {"message": "second", "n": 2})
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    keys = [tmp_path / "server.keys", tmp_path / "client.keys"]
    pcap = tmp_path / "openssl.pcap"
    common = ["-alpn", "lumberjack", "-ciphersuites", suite, "-keylogfile"]
    groups = ["-groups", "P-256"] if retry else []
    argv = ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", cert, "-key", key, *groups]
    # stdin stays open (at its end s_server would stop); it says ACCEPT once it listens
    server = subprocess.Popen(
        [*argv, *common, keys[0]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        for line in server.stdout:
            if line.startswith(b"ACCEPT"):
                break
        with capture(pcap, port):
            argv = [
                "openssl",
                "s_client",
                "-connect",
                f"127.0.0.1:{port}",
                "-servername",
                "collector",
                "-ign_eof",
            ]
            client = subprocess.Popen(
                [*argv, *common, keys[1]],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            # s_client drops stdin bytes read before its handshake ends: write once it printed the
            # handshake summary, then let it send and stop it (-ign_eof: it would wait for the server)
            for line in client.stdout:
                if line.startswith((b"Verify return code", b"    Verify return code")):
                    break
            client.stdin.write(plain)
            client.stdin.close()
            time.sleep(1.0)
            client.terminate()
            client.wait(timeout=10)
    finally:
        server.kill()
        server.communicate(timeout=10)
    raw = tmp_path / "plain.lj"
    raw.write_bytes(plain)
    expected = [r["event"] for r in convert(raw, "--format", "lumberjack") if r.get("kind") == "event"]
    assert [e["n"] for e in expected] == [1, 2]
    for log in keys:  # either side's key log decrypts the whole connection
        rows = convert(pcap, "--tls-keylog", str(log))
        events = [r for r in rows if r["record"] == "message" and r["kind"] == "event"]
        assert [e["event"] for e in events] == expected
        tls = {"version": "TLS 1.3", "cipher_suite": suite, "sni": "collector", "alpn": "lumberjack",
               "decrypted": True}  # fmt: skip
        assert events[0]["tls"] == tls
        hellos = [r.get("hello_retry_request") for r in rows if r.get("kind") == "server_hello"]
        assert hellos == ([True, False] if retry else [False])
        assert [s["tls"] for s in streams_json(pcap, "--tls-keylog", str(log))] == [tls]
    no_key = {**tls, "alpn": None, "decrypted": False, "not_decrypted": "tls.no-key"}
    assert [s["tls"] for s in streams_json(pcap)] == [no_key]


def test_go_crypto_tls_key_log_decrypts_go_lumber(tmp_path):
    """go-lumber's client over crypto/tls with `KeyLogWriter` (what Filebeat is built on) to a TLS
    receiver: every event it framed decodes from the capture, acknowledged."""
    from go_peer_helpers import require_golumber, run_client

    require_golumber()
    cert, key = self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    keylog, pcap = tmp_path / "go.keys", tmp_path / "go.pcap"
    with LumberjackServer("highest-seq", tls=ctx) as server, capture(pcap, server.port):
        run = run_client(server.port, level=3, batches=2, batch=3, tls_keylog=keylog)
    rows = convert(pcap, "--tls-keylog", str(keylog))
    events = [r for r in rows if r["record"] == "message" and r["kind"] == "event"]
    assert [e["event"] for e in events] == [e.doc for e in run.events]
    assert all(e["acked"] is True for e in events)
    assert events[0]["tls"]["version"] == "TLS 1.3" and events[0]["tls"]["sni"] == "logstash"


def test_inspect_shows_each_tls_stream_decrypted_or_not(captured):
    pcap, keylog, _ = captured["tls12-chacha20"]
    suite = VARIANTS["tls12-chacha20"][2]
    for extra, decrypted, protocol in (
        ((), False, "tls"),
        (("--tls-keylog", str(keylog)), True, "lumberjack"),
    ):
        code, out, err = run_cli("inspect", "--json", str(pcap), *extra)
        assert code == 0, err
        (s,) = json.loads(out)["streams"]
        assert s["protocol"] == protocol
        why = {} if decrypted else {"not_decrypted": "tls.no-key"}
        assert s["tls"] == {"version": "TLS 1.2", "cipher_suite": suite, "sni": None, "alpn": None,
                            "decrypted": decrypted, **why}  # fmt: skip
        code, out, _ = run_cli("inspect", str(pcap), *extra)
        state = "decrypted" if decrypted else "not decrypted: no key log line for its client random"
        assert f"stream 0: TLS 1.2 {suite} ({state})" in out.decode()


def streams_json(pcap: Path, *extra: str) -> list[dict]:
    code, out, err = run_cli("streams", "--json", str(pcap), *extra)
    assert code == 0, err
    return ndjson(out)


def test_streams_shows_each_tls_stream_decrypted_or_not(captured):
    """`streams` reads TLS handshakes only: version and suite with or without the key log, and with
    it `decrypted`; the core's NDJSON line and the one Python writes (a --stream filter) agree."""
    pcap, keylog, _ = captured["tls13"]
    suite = VARIANTS["tls13"][2]
    for extra, decrypted in (((), False), (("--tls-keylog", str(keylog)), True)):
        (s,) = streams_json(pcap, *extra)
        why = {} if decrypted else {"not_decrypted": "tls.no-key"}
        assert s["tls"] == {"version": "TLS 1.3", "cipher_suite": suite, "sni": None, "alpn": None,
                            "decrypted": decrypted, **why}  # fmt: skip
        assert streams_json(pcap, "--stream", "0", *extra) == [s]
        code, out, _ = run_cli("streams", "--stream", "0", str(pcap), *extra)
        assert code == 0
        state = "decrypted" if decrypted else "not decrypted: no key log line for its client random"
        assert f"TLS 1.3 {suite} ({state})" in " ".join(out.decode().split())
    (s,) = streams_json(captured["plain"][0])
    assert s["tls"] is None
    code, out, _ = run_cli("streams", str(captured["plain"][0]))
    assert code == 0
    assert "TLS" not in out.decode() and "tls" not in out.decode()


def test_parquet_rows_carry_the_tls_description_as_json_lines_do(captured, tmp_path):
    """Both writers add a decrypted stream's `tls` after each record's own fields (one value per
    stream, written per record): the Parquet `fields` column holds the JSON lines' fields."""
    import pyarrow.parquet as pq

    pcap, keylog, _ = captured["tls12-gcm"]
    out = tmp_path / "out.parquet"
    code, _, err = run_cli(
        "convert", str(pcap), "--tls-keylog", str(keylog), "--to", "parquet", "-o", str(out)
    )
    assert code == 0, err
    rows = [r for r in pq.read_table(out).to_pylist() if r["protocol"] == "lumberjack"]
    lines = [r for r in convert(pcap, "--tls-keylog", str(keylog)) if r["protocol"] == "lumberjack"]
    assert len(rows) == len(lines) > 4
    for row, line in zip(rows, lines, strict=True):
        fields = json.loads(row["fields"])
        assert list(fields)[-1] == "tls" and fields["tls"] == line["tls"]
        assert fields["tls"]["decrypted"] is True


@pytest.mark.parametrize("variant", ["plain", *VARIANTS])
def test_tls_captures_decode_the_same_when_impaired(captured, variant, tmp_path):
    """Handshakes and records with packets moved later or written twice: the same decrypted
    messages, TLS records and findings (impair.assert_same_when_impaired)."""
    from impair import assert_same_when_impaired

    pcap, keylog, _ = captured[variant]
    extra = ("--tls-keylog", str(keylog)) if keylog else ()
    rows = assert_same_when_impaired(pcap, tmp_path, *extra)
    assert len(lumberjack(rows)) > len(BATCHES)


def test_report_says_why_each_tls_stream_is_not_decrypted(captured, tmp_path):
    """The report's TLS table: a stream without its key says which key is missing; with the key log
    it is decrypted; with a key log whose secret is altered its records do not authenticate."""
    pytest.importorskip("vl_convert")
    pcap, keylog, _ = captured["tls12-gcm"]
    wrong = tmp_path / "wrong.keys"
    (line,) = [x.split() for x in keylog.read_text().splitlines() if x.startswith("CLIENT_RANDOM ")]
    line[2] = ("00" if line[2][:2] != "00" else "11") + line[2][2:]  # CLIENT_RANDOM <random> <master>
    wrong.write_text(" ".join(line) + "\n")
    for extra, state in (
        ((), "not decrypted: no key log line for its client random"),
        (("--tls-keylog", str(keylog)), "decrypted"),
        (("--tls-keylog", str(wrong)), "not decrypted: its records do not authenticate with the logged keys"),
    ):
        out = tmp_path / "report.html"
        code, _, err = run_cli("report", str(pcap), "-o", str(out), *extra)
        assert code == 0, err
        page = out.read_text(encoding="utf-8")
        table = page[page.index("<h3>TLS streams</h3>") :]
        assert f"<td>{state}</td>" in table, state
    # two inputs: each stream is named by its capture, as inspect names them
    other, _, _ = captured["tls13"]
    code, _, err = run_cli("report", str(pcap), str(other), "-o", str(out), "--tls-keylog", str(keylog))
    assert code == 0, err
    table = out.read_text(encoding="utf-8").split("<h3>TLS streams</h3>")[1].split("</table>")[0]
    assert f"<td>{pcap.name}:0</td>" in table and f"<td>{other.name}:0</td>" in table
    assert table.count("<td>decrypted</td>") == 1 and table.count("not decrypted: no key log line") == 1


def test_a_tls_client_to_a_plaintext_server_says_why_nothing_decrypts(tmp_path):
    """pylogbeat with TLS on, the receiver without: the handshake never gets a ServerHello, and the
    stream's `tls` says so once the connection has ended (the reason is known only then)."""
    pcap = tmp_path / "one-sided.pcap"
    with LumberjackServer("highest-seq") as server, capture(pcap, server.port):
        client = pylogbeat.PyLogBeatClient(
            "127.0.0.1", server.port, timeout=2, ssl_enable=True, ssl_verify=False
        )
        with pytest.raises((ssl.SSLError, OSError)), client:
            client.send(BATCHES[0])
    code, out, err = run_cli("inspect", "--json", str(pcap))
    assert code == 0, err
    (s,) = json.loads(out)["streams"]
    assert s["tls"]["decrypted"] is False and s["tls"]["not_decrypted"] == "tls.no-server-hello"
    assert "tls.no-server-hello" in {f["code"] for f in json.loads(out)["findings"]}
    code, out, _ = run_cli("inspect", str(pcap))
    assert "not decrypted: the server never answered in TLS" in " ".join(out.decode().split())


@pytest.mark.parametrize("keyed", [True, False], ids=["decrypted", "no-key"])
def test_the_connections_table_says_what_the_handshake_said(captured, tmp_path, keyed):
    """Issue 43 item 3: a TLS connection's row in `--tables`' connections table carries the
    handshake as `streams --json` describes it (version, cipher suite, SNI, ALPN), whether wirelog
    decrypted it, and the events of the Lumberjack inside when it did."""
    import pyarrow.parquet as pq

    pcap, keylog, _ = captured["tls12-gcm"]
    extra = ["--tls-keylog", str(keylog)] if keyed else []
    code, out, err = run_cli("streams", "--json", str(pcap), *extra)
    assert code == 0, err
    (tls,) = [s["tls"] for s in ndjson(out)]
    code, _, err = run_cli(
        "convert", str(pcap), "--to", "parquet", "--tables", "-o", str(tmp_path / "t"), *extra
    )
    assert code == 0, err
    (row,) = pq.read_table(tmp_path / "t" / "connections.parquet").to_pylist()
    assert row["tls_version"] == tls["version"] == "TLS 1.2"
    assert row["tls_cipher_suite"] == tls["cipher_suite"] == VARIANTS["tls12-gcm"][2]
    assert row["tls_sni"] == tls["sni"] and row["tls_alpn"] == (
        ",".join(tls["alpn"]) if tls["alpn"] else None
    )
    assert row["tls_decrypted"] is keyed
    events = sum(len(b) for b in BATCHES)
    assert row["events_sent"] == (events if keyed else None), row
