"""Drive elastic/go-lumber (client and server) through the harness in tests/peers/go.

`make peers` builds tests/peers/go/bin/golumber. Both of its commands print JSON lines saying what
went over the wire from their side: the client every event exactly as the library framed it (batch,
seq, document) and the fate of each window, the server every batch it received and every ACK frame
go-lumber wrote (keep-alives included). Tests compare a capture's decoding with those lines.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

GO_PEERS = Path(__file__).resolve().parent / "peers" / "go"
GOLUMBER = GO_PEERS / "bin" / "golumber"


def require_golumber() -> Path:
    """The harness binary, or skip the test saying what is missing."""
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not installed")
    if not GOLUMBER.is_file():
        missing = "go not installed" if shutil.which("go") is None else "go-lumber harness not built"
        pytest.skip(f"{missing}: run `make peers` (builds {GOLUMBER.relative_to(GO_PEERS.parents[2])})")
    return GOLUMBER


@dataclass(frozen=True)
class SentEvent:
    batch: int  # 1-based window number on the connection
    seq: int
    doc: dict[str, Any]


@dataclass
class ClientRun:
    """What go-lumber's client did: its local address, the events it framed, each window's outcome
    (`acked` = the library's ACK count, `error` its error text) and the ACK values it read."""

    local: str
    events: list[SentEvent]
    results: dict[int, dict[str, Any]]
    acks_read: list[int]

    def acked(self, batch: int) -> bool:
        """Whether the library saw window `batch` fully ACKed (False when it was never sent)."""
        r = self.results.get(batch)
        return r is not None and r["error"] is None and r["acked"] == r["count"]


def run_client(
    port: int,
    mode: str = "sync",
    level: int = 3,
    batches: int = 2,
    batch: int = 3,
    size: int = 0,
    events_file: Path | None = None,
    inflight: int = 2,
    timeout: str = "5s",
    tls_keylog: Path | None = None,
) -> ClientRun:
    """Run `golumber client` against 127.0.0.1:port until every window is ACKed or failed (over
    TLS, writing crypto/tls's key log, when `tls_keylog` is given)."""
    args = [str(GOLUMBER), "client", "-addr", f"127.0.0.1:{port}", "-mode", mode, "-level", str(level),
            "-batches", str(batches), "-batch", str(batch), "-size", str(size), "-inflight", str(inflight),
            "-timeout", timeout]  # fmt: skip
    if events_file is not None:
        args += ["-events", str(events_file)]
    if tls_keylog is not None:
        args += ["-tls-keylog", str(tls_keylog)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if proc.returncode:
        raise RuntimeError(f"golumber client failed: {proc.stderr.strip()}")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    by_kind = {k: [x for x in lines if x["kind"] == k] for k in ("connected", "event", "result", "done")}
    return ClientRun(
        local=by_kind["connected"][0]["local"],
        events=[SentEvent(e["batch"], e["seq"], e["doc"]) for e in by_kind["event"]],
        results={r["batch"]: r for r in by_kind["result"]},
        acks_read=by_kind["done"][0]["acks"],
    )


@dataclass
class GoServer:
    """`golumber server` (go-lumber's v2 server) as a context manager on a free loopback port.

    `keepalive` / `ack_delay` are Go durations ("100ms"); `ack_batches` N ACKs only the first N
    batches (later ones never: the client times out when keep-alives are off).
    """

    keepalive: str = "3s"
    ack_delay: str = "0s"
    ack_batches: int = -1
    port: int = 0
    batches: list[list[dict[str, Any]]] = field(default_factory=list)
    acks: list[int] = field(default_factory=list)  # every ACK frame written, keep-alives (0) included
    remotes: set[str] = field(default_factory=set)

    def __enter__(self) -> GoServer:
        self._proc = subprocess.Popen(
            [str(GOLUMBER), "server", "-addr", "127.0.0.1:0", "-keepalive", self.keepalive,
             "-ack-delay", self.ack_delay, "-ack-batches", str(self.ack_batches)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        first = json.loads(self._proc.stdout.readline() or "{}")
        if first.get("kind") != "listening":
            self._proc.kill()
            raise RuntimeError("golumber server did not start")
        self.port = first["port"]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            msg = json.loads(line)
            if msg["kind"] == "batch":
                self.batches.append(msg["events"])
            elif msg["kind"] == "ack":
                self.acks.append(msg["value"])
                self.remotes.add(msg["remote"])

    def __exit__(self, *exc: object) -> None:
        self._proc.stdin.close()  # the server stops when its stdin closes
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=5)


def beats_file(path: Path) -> Path:
    """A JSON array of events for `run_client(events_file=...)`: Filebeat-shaped documents plus the
    awkward JSON a decoder must keep intact (big integers, exponents, escapes, nesting, empty values)."""
    docs: list[dict[str, Any]] = [
        {
            "@timestamp": f"2026-11-23T11:00:{n:02d}.000Z",
            "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
            "message": f"line {n}",
            "log": {"offset": n * 80, "file": {"path": "/var/log/syslog"}},
            "host": {"name": "web-2"},
        }
        for n in range(5)
    ]
    docs += [
        {"message": "big numbers", "id": 2**63 - 1, "neg": -(2**53) - 1, "ratio": 1.5e300, "tiny": 5e-324},
        {"message": 'escapes \u2028 \t \\ " / \u0000 😀 <&>', "path": "C:\\logs\\app.log"},
        {"message": "nested", "tags": [], "labels": {}, "deep": [[[{"a": [None, True, False]}]]]},
    ]
    path.write_text(json.dumps(docs, ensure_ascii=False))
    return path
