"""`wirelog replay --to hercules+http(s)://` against the Hercules Gate's documented HTTP contract
(../shared/reference/hercules.md §2; a real Gate needs Kafka, so it cannot run here).

The Gate is a Python HTTP(S) server in this file that checks every request as the Gate does —
`POST /stream/send?stream=NAME`, `apiKey`, `Content-Type: application/octet-stream`,
`Content-Length` (present and exact, at most the Gate's limit), a body of `Count:i32` + exactly
Count events that the core's Hercules reader (`_core.hercules_documents`) parses — and answers
200/400/401/413/429/503 as scripted. The input is a capture crafted here: a client whose first
request the Gate throttled (503) and never retried, whose second request was never answered
(the connection ended), and whose third was accepted (200): three events never acknowledged.
"""

from __future__ import annotations

import http.server
import json
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from capture_tools import ndjson, run_cli
from pcap_helpers import tcp_conversation, write_pcap
from replay_helpers import lost_records, replay_cmd, replay_env, run_replay, summary

from tests.hercules_codec import Event, Type, Variant, Vector, encode_event
from tests.hercules_helpers import answer, serving
from wirelog import _core

KEY = "s3cret-key"
STREAM = "logs_replayed"
GATE_LIMIT = 8 * 1024 * 1024  # http.server.maxContentLength's default


def _event(n: int, **extra: Variant) -> Event:
    """An event whose payload types are those the JSON records map back to (Long, Double,
    String, Flag, Null, Container, Vector): its re-encoding is byte for byte the captured one."""
    tags = {
        "message": Variant(Type.STRING, f"line {n} \u00e9"),
        "level": Variant(Type.LONG, n),
        "ratio": Variant(Type.DOUBLE, n / 4),
        "ok": Variant(Type.FLAG, n % 2 == 0),
        "none": Variant(Type.NULL, None),
        "labels": Variant(Type.VECTOR, Vector(Type.STRING, ("a", "b"))),
        "ctx": Variant(Type.CONTAINER, (("host", Variant(Type.STRING, "web-1")),)),
        **extra,
    }
    return Event(1, 17_000_000_000_000_000 + n, uuid.UUID(int=0x1000 + n).bytes, tuple(tags.items()))


def _request(events: list[Event], path: str = f"/stream/send?stream={STREAM}") -> bytes:
    body = struct.pack(">i", len(events)) + b"".join(encode_event(e) for e in events)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: gate:6306\r\napiKey: k\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _answer(status: int, reason: str, text: bytes = b"") -> bytes:
    return f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(text)}\r\n\r\n".encode() + text


LOST = [_event(1), _event(2), _event(3, big=Variant(Type.STRING, "x" * 3000))]
DELIVERED = [_event(4)]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """503 for the first two events (never retried), no answer for the third (the connection
    ends), 200 for the fourth on a second connection."""
    first = tcp_conversation(
        [("c", _request(LOST[:2])), ("s", _answer(503, "Service Unavailable", b"throttled")),
         ("c", _request(LOST[2:]))],
        server=("10.1.0.9", 6306),
    )  # fmt: skip
    second = tcp_conversation(
        [("c", _request(DELIVERED)), ("s", _answer(200, "OK"))],
        client=("10.1.0.5", 41001),
        server=("10.1.0.9", 6306),
    )
    return write_pcap(tmp_path_factory.mktemp("hercules") / "gate.pcap", first + second)


# --- a Gate as documented ---------------------------------------------------------------------


class _Gate(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        server = self.server
        length = self.headers.get("Content-Length")
        body = self.rfile.read(int(length)) if length is not None else b""
        checks = {
            "path": self.path == f"/stream/send?stream={STREAM}",
            "apiKey": self.headers.get("apiKey") == KEY,
            "content-type": self.headers.get("Content-Type") == "application/octet-stream",
            "content-length": length is not None and int(length) == len(body) <= GATE_LIMIT,
            "no encoding": self.headers.get("Content-Encoding") is None,
        }
        count = struct.unpack_from(">i", body)[0] if len(body) >= 4 else -1
        docs = _core.hercules_documents(body[4:]) if count >= 0 else []
        checks["count"] = count == len(docs) and sum(len(_raw(d)) for d in docs) == len(body) - 4
        server.requests.append({"checks": checks, "body": body, "docs": docs})  # type: ignore[attr-defined]
        time.sleep(server.delay)  # type: ignore[attr-defined]
        status = server.script.pop(0) if server.script else 200  # type: ignore[attr-defined]
        if not all(checks.values()):
            status = 400
        if status == 200:
            server.accepted += docs  # type: ignore[attr-defined]
        text = b"" if status == 200 else f"scripted {status}".encode()
        answer(self, status, text)

    def log_message(self, *args: object) -> None:
        pass


def _every_type(n: int) -> Event:
    """An event with a tag of every type, and vectors of each: Byte, Short, Integer and Float
    (widths the JSON record does not keep), UUID (text in the JSON), and the rest."""
    scalars = {
        Type.BYTE: 200, Type.SHORT: -1234, Type.INTEGER: 70_000 + n, Type.LONG: 2**40 + n,
        Type.FLAG: True, Type.FLOAT: 0.1, Type.DOUBLE: n / 3, Type.STRING: f"line {n}",
        Type.UUID: uuid.UUID(int=0xABC + n).bytes, Type.NULL: None,
    }  # fmt: skip
    tags = [(t.name.lower(), Variant(t, v)) for t, v in scalars.items()]
    tags += [
        ("bytes", Variant(Type.VECTOR, Vector(Type.BYTE, b"\x00\x7f\xff"))),
        ("shorts", Variant(Type.VECTOR, Vector(Type.SHORT, (1, -2)))),
        ("floats", Variant(Type.VECTOR, Vector(Type.FLOAT, (0.5, 0.1)))),
        ("uuids", Variant(Type.VECTOR, Vector(Type.UUID, (uuid.UUID(int=1).bytes,)))),
        ("ctx", Variant(Type.CONTAINER, (("port", Variant(Type.INTEGER, 6306)), ("id", Variant(Type.UUID, bytes(16)))))),
    ]  # fmt: skip
    return Event(1, 17_000_000_000_000_000 + n, uuid.UUID(int=0x2000 + n).bytes, tuple(tags))


TYPED = [_every_type(1), _every_type(2)]
_BY_UUID = {str(uuid.UUID(bytes=e.uuid)): encode_event(e) for e in LOST + DELIVERED + TYPED}


def _raw(doc: dict[str, Any]) -> bytes:
    """The captured bytes of the event the core's reader returned (for the count/length check)."""
    return _BY_UUID.get(doc["uuid"], b"")


@contextmanager
def gate(
    script: list[int] | None = None, tls: tuple[str, str] | None = None, delay: float = 0
) -> Iterator[Any]:
    """A Gate on 127.0.0.1 answering `script`'s statuses in turn (then 200), each after `delay` s."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gate)
    server.delay = delay  # type: ignore[attr-defined]
    server.script, server.requests, server.accepted = list(script or []), [], []  # type: ignore[attr-defined]
    if tls:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(*tls)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with serving(server):
        yield server


def _url(server: Any, scheme: str = "hercules+http", host: str = "127.0.0.1") -> str:
    return f"{scheme}://{host}:{server.server_address[1]}/?stream={STREAM}"


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "gate.key"
    path.write_text(KEY + "\n")
    return path


def _replay(capture: Path, url: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    cmd = [
        "--to",
        url,
        "--journal",
        str(tmp_path / "j"),
        "--backoff",
        "0",
        "--timeout",
        "10",
        "--json",
        *args,
    ]
    proc = subprocess.run(
        replay_cmd(str(capture), *cmd), capture_output=True, text=True, timeout=120, env=env or replay_env()
    )
    return proc.returncode, proc.stdout, proc.stderr


def _journal(tmp_path: Path) -> list[str]:
    return [line for line in (tmp_path / "j").read_text().splitlines() if not line.startswith("#")]


# --- the tests --------------------------------------------------------------------------------


def test_the_capture_has_three_never_acknowledged_events(capture: Path) -> None:
    lost = lost_records(capture)
    assert [r["uuid"] for r in lost] == [str(uuid.UUID(bytes=e.uuid)) for e in LOST]
    assert all(r["event_id"] == r["uuid"] for r in lost)


def test_replay_sends_the_never_acknowledged_events_byte_for_byte(
    capture: Path, tmp_path: Path, key_file
) -> None:
    with gate() as server:
        code, out, err = _replay(capture, _url(server), tmp_path, "--api-key-file", str(key_file))
    assert code == 0, err
    s = summary(out)
    assert (s["selected"], s["sent"], s["acknowledged"], s["failed"]) == (3, 3, 3, 0)
    assert len(server.requests) == 1 and all(server.requests[0]["checks"].values())
    body = server.requests[0]["body"]
    # the events as captured: version, timestamp, UUID, every tag and its type, byte for byte
    assert body == struct.pack(">i", 3) + b"".join(encode_event(e) for e in LOST)
    assert _journal(tmp_path) == [str(uuid.UUID(bytes=e.uuid)) for e in LOST]
    # and a rerun sends nothing: every event is in the journal
    with gate() as server:
        code, out, err = _replay(capture, _url(server), tmp_path, "--api-key-file", str(key_file))
    assert code == 0, err
    assert summary(out)["already_in_journal"] == 3 and server.requests == []


def test_every_tag_type_arrives_byte_for_byte(tmp_path: Path, key_file: Path) -> None:
    """A request of events with every tag type, never answered (the connection ended): the
    Gate gets each event's bytes as captured — not rebuilt from the record's JSON, which would
    turn Byte/Short/Integer into Long, Float into Double and UUIDs into Strings."""
    lost = TYPED
    pcap = write_pcap(
        tmp_path / "types.pcap", tcp_conversation([("c", _request(lost))], server=("10.1.0.9", 6306))
    )
    records = lost_records(pcap)
    assert [r["uuid"] for r in records] == [str(uuid.UUID(bytes=e.uuid)) for e in lost]
    assert not any("bytes_base64" in r for r in records)  # only replay asks the core for the bytes
    with gate() as server:
        code, out, err = _replay(pcap, _url(server), tmp_path, "--api-key-file", str(key_file))
    assert code == 0, err
    assert summary(out)["acknowledged"] == 2 and all(server.requests[0]["checks"].values())
    assert server.requests[0]["body"] == struct.pack(">i", 2) + b"".join(encode_event(e) for e in lost)


def test_api_key_from_the_environment_never_from_an_argument(capture: Path, tmp_path: Path) -> None:
    with gate() as server:
        code, _, err = _replay(
            capture, _url(server), tmp_path, env=replay_env() | {"WIRELOG_HERCULES_API_KEY": KEY}
        )
        assert code == 0, err
        assert server.requests[0]["checks"]["apiKey"]
        env = {k: v for k, v in replay_env().items() if k != "WIRELOG_HERCULES_API_KEY"}
        code, _, err = _replay(capture, _url(server), tmp_path, env=env)
    assert code == 2 and "--api-key-file FILE, or $WIRELOG_HERCULES_API_KEY" in err
    code, _, err = run_replay(str(capture), "--to", _url(server), "--api-key", KEY)
    assert code == 2 and "No such option" in err


def test_batches_stay_within_events_per_request(capture: Path, tmp_path: Path, key_file) -> None:
    with gate() as server:
        code, out, err = _replay(
            capture, _url(server), tmp_path, "--api-key-file", str(key_file), "--window", "2"
        )
    assert code == 0, err
    assert [r["body"][:4] for r in server.requests] == [struct.pack(">i", 2), struct.pack(">i", 1)]
    assert summary(out)["connections"] == 1  # one keep-alive connection for both requests


def test_bytes_per_request_cap_splits_batches() -> None:
    from wirelog.replay.driver import _Source

    items = iter([(str(i), b"x" * 100) for i in range(10)])
    source = _Source(items)
    sizes = []
    while source.more():
        sizes.append(len(source.take(2048, 350)))
    assert sizes == [3, 3, 3, 1]


@pytest.mark.parametrize(
    ("status", "hint"), [(400, "scripted 400"), (401, "--api-key-file"), (404, "?stream=")]
)
def test_a_4xx_stops_the_run_with_one_line_and_the_journal_intact(
    capture, tmp_path, key_file, status, hint
) -> None:
    with gate([200, status]) as server:
        code, out, err = _replay(
            capture, _url(server), tmp_path, "--api-key-file", str(key_file), "--window", "2"
        )
    assert code == 1
    s = summary(out)
    assert (s["acknowledged"], s["failed"]) == (2, 1)
    assert f"the Gate refused a request of 1 events: {status}" in s["error"] and hint in s["error"]
    assert len(server.requests) == 2  # no retry
    assert _journal(tmp_path) == [str(uuid.UUID(bytes=e.uuid)) for e in LOST[:2]]
    lines = [line for line in err.splitlines() if line.startswith("wirelog:")]
    assert len(lines) == 1 and "stopped" in lines[0]


@pytest.mark.parametrize("status", [429, 503, 500])
def test_429_and_5xx_are_retried_with_backoff(capture, tmp_path, key_file, status) -> None:
    with gate([status, status]) as server:
        code, out, err = _replay(capture, _url(server), tmp_path, "--api-key-file", str(key_file))
    assert code == 0, err
    s = summary(out)
    assert (s["acknowledged"], s["connections"], s["resent"]) == (3, 3, 6)
    assert len(s["problems"]) == 2 and f"the Gate answered {status}" in s["problems"][0]
    assert len(server.accepted) == 3 and len(server.requests) == 3
    assert f"answered {status}" in err and "connecting again in 0 s" in err


def test_a_gate_that_keeps_throttling_makes_the_run_give_up(capture, tmp_path, key_file) -> None:
    with gate([503] * 10) as server:
        code, out, _ = _replay(
            capture, _url(server), tmp_path, "--api-key-file", str(key_file), "--retries", "1"
        )
    assert code == 1
    s = summary(out)
    assert s["failed"] == 3 and "gave up after 2 failed connections" in s["error"]
    assert not (tmp_path / "j").exists() or _journal(tmp_path) == []


def test_413_splits_the_request(capture, tmp_path, key_file) -> None:
    with gate([413]) as server:
        code, out, err = _replay(capture, _url(server), tmp_path, "--api-key-file", str(key_file))
    assert code == 0, err
    assert [len(r["docs"]) for r in server.requests] == [3, 1, 2]
    assert summary(out)["acknowledged"] == 3


def test_https_checks_the_gate_certificate(capture, tmp_path, key_file) -> None:
    from lumberjack_helpers import self_signed

    cert, key = self_signed(tmp_path)
    with gate(tls=(str(cert), str(key))) as server:
        code, out, err = _replay(capture, _url(server, "hercules+https", "localhost"), tmp_path,
                                 "--api-key-file", str(key_file), "--ca", str(cert))  # fmt: skip
        assert code == 0, err
        assert summary(out)["acknowledged"] == 3 and all(server.requests[0]["checks"].values())
        (tmp_path / "j").unlink()
        code, out, err = _replay(capture, _url(server, "hercules+https", "localhost"), tmp_path,
                                 "--api-key-file", str(key_file), "--retries", "0")  # fmt: skip
    assert code == 1 and "certificate was refused" in err and len(server.requests) == 1


def test_dry_run_and_usage(capture, tmp_path) -> None:
    code, out, err = run_replay(str(capture), "--to", f"hercules+http://gate:6306/?stream={STREAM}", "--dry-run",
                                "--journal", str(tmp_path / "j"), "--json")  # fmt: skip
    assert code == 0, err
    s = summary(out)
    assert s["would_send"] == 3 and s["bytes"] == sum(len(encode_event(e)) for e in LOST)
    assert "@metadata" not in json.dumps(s["first_events"])  # the UUID is the id: nothing added
    code, _, err = run_replay(str(capture), "--to", f"hercules+http://gate/?stream={STREAM}", "--id-field", "x",
                              "--dry-run")  # fmt: skip
    assert code == 2 and "UUID" in err


def test_records_from_ndjson_are_sent_too(capture, tmp_path, key_file) -> None:
    code, out, err = run_cli("convert", str(capture), "--events", "--to", "json")
    assert code == 0, err
    review = tmp_path / "review.ndjson"
    review.write_text("".join(json.dumps(r) + "\n" for r in ndjson(out)))
    with gate() as server:
        code, out, err = _replay(review, _url(server), tmp_path, "--api-key-file", str(key_file))
    assert code == 0, err
    assert server.requests[0]["body"] == struct.pack(">i", 3) + b"".join(encode_event(e) for e in LOST)


def test_encoder_types() -> None:
    from wirelog.replay.hercules import EncodeError
    from wirelog.replay.hercules import encode_event as enc

    u = str(uuid.UUID(int=7))
    raw = enc("1", 5, u, {"v": [1, 2.5], "n": [[1], ["x"]], "e": [], "o": [{"a": None}]})
    (doc,) = _core.hercules_documents(raw)
    assert doc["uuid"] == u and doc["timestamp"] == 5
    with pytest.raises(EncodeError, match="mixed types"):
        enc(1, 5, u, {"m": [1, "x"]})
    with pytest.raises(EncodeError):
        enc(1, 5, "not-a-uuid", {})


def test_api_key_is_not_in_the_process_list(capture, tmp_path, key_file) -> None:
    with gate() as server:
        proc = subprocess.Popen(replay_cmd(str(capture), "--to", _url(server), "--api-key-file", str(key_file),
                                           "--journal", str(tmp_path / "j")),
                                env=replay_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        proc.communicate(timeout=120)
    assert KEY.encode() not in cmdline and proc.returncode == 0


def test_event_bytes_are_an_option_of_one_run_not_of_the_process(tmp_path: Path) -> None:
    """A run asked for the events' bytes (replay to a Gate) gets them; a run after it in the same
    process, asked for nothing, gets records without them (was: a process-wide switch that stayed
    on for every later decoding)."""
    from wirelog.engine.local import Options, run

    pcap = write_pcap(
        tmp_path / "types.pcap", tcp_conversation([("c", _request(TYPED))], server=("10.1.0.9", 6306))
    )

    def events(**options: Any) -> list[dict]:
        lines = b"".join(
            i.data
            for i in run([str(pcap)], options=Options(records="ndjson", **options))
            if hasattr(i, "data")
        )
        return [r for r in map(json.loads, lines.splitlines()) if r.get("kind") == "event"]

    asked, after = events(event_bytes=True), events()
    assert len(asked) == len(after) == len(TYPED)
    assert all(r["bytes_base64"] for r in asked)
    assert not any("bytes_base64" in r for r in after)
