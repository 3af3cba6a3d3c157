"""Helpers for tests that run the CLI or capture real loopback traffic with tcpdump."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner

from wirelog.cli.main import cli


def run_cli(*args: str, input: bytes | None = None) -> tuple[int, bytes, str]:
    """(exit code, stdout bytes, stderr text) of one wirelog invocation, in process."""
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    return result.exit_code, result.stdout_bytes, result.stderr


def ndjson(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


@contextlib.contextmanager
def tcpdump(path: Path, port: int) -> Iterator[None]:
    """Capture loopback traffic on `port` into `path` while the block runs (needs tcpdump + privileges)."""
    exe = shutil.which("tcpdump")
    if exe is None:
        raise RuntimeError("tcpdump not installed")
    keep_root = ["-Z", "root"] if os.geteuid() == 0 else []  # else it drops to a user that can't write tmp
    proc = subprocess.Popen(
        [exe, "-i", "lo", "-U", "-n", "-s", "0", *keep_root, "-w", str(path), f"tcp port {port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    line = proc.stderr.readline()  # "listening on lo ..." once the capture is armed
    if b"listening" not in line:
        proc.kill()
        raise RuntimeError(f"tcpdump did not start: {line.decode(errors='replace').strip()}")
    time.sleep(0.5)  # "listening" comes slightly before the kernel delivers packets to it
    try:
        yield
    finally:
        time.sleep(0.5)  # let the last packets reach the file
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
