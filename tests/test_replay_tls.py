"""`wirelog replay` and TLS: a stream that was TLS in the capture is not sent in plaintext to a
host that is not this machine; `lumberjacks://` checks the receiver's certificate.

The capture is go-lumber's client (with crypto/tls's key log) talking TLS to the tests' Lumberjack
receiver; the replay's receiver is go-lumber's server speaking TLS (`golumber server -tls-cert`).
"""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import pytest
from capture_tools import run_cli
from go_peer_helpers import require_golumber, run_client
from lumberjack_helpers import LumberjackServer, capture, self_signed
from replay_helpers import KillableGoServer, lost_records, run_replay, sent_id, summary, with_id


@pytest.fixture(scope="module")
def tls_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(capture, key log, the receiver's certificate)."""
    require_golumber()
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(tmp)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    pcap, keys = tmp / "tls.pcap", tmp / "keys.log"
    with LumberjackServer("count", tls=ctx) as server, capture(pcap, server.port):
        run_client(server.port, batches=2, batch=3, tls_keylog=keys)
    return pcap, keys, cert


def test_a_tls_stream_is_not_replayed_in_plaintext_to_another_host(
    tls_capture: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pcap, keys, _ = tls_capture

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket, "create_connection", refuse)
    code, _, err = run_cli("replay", str(pcap), "--tls-keylog", str(keys), "--delivery", "delivered", "--to",
                           "lumberjack://192.0.2.1:5044", "--journal", "/dev/null")  # fmt: skip
    assert code == 2
    (line,) = err.strip().splitlines()
    assert (
        "was TLS; not sending its events in plaintext to 192.0.2.1:5044" in line
        and "--allow-plaintext" in line
    )


def test_lumberjacks_checks_the_certificate(tls_capture: tuple[Path, Path, Path], tmp_path: Path) -> None:
    pcap, keys, cert = tls_capture
    key = cert.with_name("key.pem")
    other = tmp_path / "other"
    other.mkdir()
    other_ca, _ = self_signed(other)
    chosen = lost_records_tls(pcap, keys)
    assert len(chosen) == 6
    args = (str(pcap), "--tls-keylog", str(keys), "--delivery", "delivered", "--retries", "0")
    with KillableGoServer(0, "-tls-cert", str(cert), "-tls-key", str(key)) as server:
        url = f"lumberjacks://127.0.0.1:{server.port}"
        for ca in ([], ["--ca", str(other_ca)]):  # the system's CAs, another CA: both refuse it
            code, out, err = run_replay(*args, "--to", url, *ca, "--journal", str(tmp_path / "j1"))
            assert code == 1
            assert "certificate was refused" in err and "--ca" in err
            assert len(err.strip().splitlines()) == 1, err  # one line: no retry, no traceback
        assert server.events() == []
        code, out, err = run_replay(*args, "--to", url, "--ca", str(cert), "--journal", str(tmp_path / "j2"),
                                    "--json")  # fmt: skip
        assert code == 0, err
        got = server.events()
    assert got == [with_id(r["event"], sent_id(r)) for r in chosen]
    assert summary(out)["acknowledged"] == 6
    assert (tmp_path / "j1").read_text().splitlines()[2:] == []  # the header lines only


def lost_records_tls(pcap: Path, keys: Path) -> list[dict]:
    code, out, err = run_cli("convert", str(pcap), "--tls-keylog", str(keys), "--events", "--to", "json")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert all(r.get("tls") for r in records)
    return [r for r in records if r["delivery"] == "delivered"]


assert lost_records  # the helper the other replay tests use; here the records need the key log
