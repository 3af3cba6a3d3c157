"""Helpers for the `wirelog replay` tests: the CLI as a subprocess (so it can be SIGKILLed), a
go-lumber server on a chosen port that a test can kill, and the never-acknowledged records of a
capture as wirelog itself reports them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from capture_tools import ndjson, run_cli
from go_peer_helpers import GOLUMBER

REPO = Path(__file__).resolve().parents[1]


def replay_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "wirelog.cli", "replay", *args]


def replay_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def run_replay(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """(status, stdout, stderr) of `wirelog replay ARGS` in its own process."""
    proc = subprocess.run(
        replay_cmd(*args), capture_output=True, text=True, timeout=timeout, env=replay_env()
    )
    return proc.returncode, proc.stdout, proc.stderr


def summary(stdout: str) -> dict[str, Any]:
    """The --json summary (the last line of stdout)."""
    return json.loads(stdout.strip().splitlines()[-1])


def lost_records(pcap: Path, classes: tuple[str, ...] = ("never_acknowledged",)) -> list[dict[str, Any]]:
    """First copies of the events `wirelog convert` classes so, in record order."""
    code, out, err = run_cli("convert", str(pcap), "--events", "--to", "json")
    assert code == 0, err
    return [r for r in ndjson(out) if r.get("delivery") in classes and not r.get("resend_of")]


def sent_id(r: dict[str, Any]) -> str:
    """The id replay gives the event of record `r`: a Lumberjack `event_id` names a place in its
    capture only, so the first copy's capture time goes with it."""
    return f"{r['event_id']}@{r['ts']}" if r["protocol"] == "lumberjack" else r["event_id"]


def with_id(doc: dict[str, Any], event_id: str) -> dict[str, Any]:
    """`doc` as replay sends it: `@metadata._id` = its event_id (unless it has one)."""
    out = json.loads(json.dumps(doc))
    out.setdefault("@metadata", {}).setdefault("_id", event_id)
    return out


class KillableGoServer:
    """`golumber server` on 127.0.0.1:`port` (0: a free one), its batches and ACKs collected;
    `kill()` sends SIGKILL (the kernel resets its connections: a receiver that died).
    `keep=False`: its reports are read and dropped (a test of many events that counts ACKs only,
    whose own parsing would take the CPU the replay is measured on)."""

    def __init__(self, port: int = 0, *args: str, keep: bool = True) -> None:
        self.proc = subprocess.Popen(
            [str(GOLUMBER), "server", "-addr", f"127.0.0.1:{port}", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        first = json.loads(self.proc.stdout.readline() or "{}")
        if first.get("kind") != "listening":
            self.proc.kill()
            raise RuntimeError("golumber server did not start")
        self.port = first["port"]
        self.batches: list[list[dict[str, Any]]] = []
        self.acks: list[int] = []
        self.seen = threading.Condition()
        self._reader = threading.Thread(target=self._read if keep else self._drain, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.seen:
                if msg["kind"] == "batch":
                    self.batches.append(msg["events"])
                elif msg["kind"] == "ack":
                    self.acks.append(msg["value"])
                self.seen.notify_all()

    def _drain(self) -> None:
        for _ in self.proc.stdout:
            pass

    def wait_batches(self, n: int, timeout: float = 20) -> None:
        with self.seen:
            if not self.seen.wait_for(lambda: len(self.batches) >= n, timeout):
                raise AssertionError(f"golumber server: {len(self.batches)} batches, not {n}")

    def events(self) -> list[dict[str, Any]]:
        with self.seen:
            return [e for b in self.batches for e in b]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._reader.join(timeout=5)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(timeout=5)

    def __enter__(self) -> KillableGoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
