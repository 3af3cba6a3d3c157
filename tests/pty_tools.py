"""A command run on a pseudo-terminal, as a person sees it: what reaches the terminal, escapes and all."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import termios
from pathlib import Path

# colours, cursor moves and erases (what a terminal interprets rather than shows)
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
PLACES = {"terminal", "null", "pipe"}


def on_terminal(
    cmd: list[str],
    width: int = 120,
    env: dict[str, str] | None = None,
    stdout: str = "terminal",
    stderr: str = "terminal",
    cwd: Path | None = None,
) -> tuple[int, bytes, bytes]:
    """Run `cmd` with `stdout` and `stderr` each on a pseudo-terminal of `width` columns, discarded
    or piped: (status, what the terminal got, what the pipe got)."""
    assert {stdout, stderr} <= PLACES
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    where = {"terminal": follower, "null": subprocess.DEVNULL, "pipe": subprocess.PIPE}
    proc = subprocess.Popen(cmd, stdout=where[stdout], stderr=where[stderr], env=env, cwd=cwd)
    os.close(follower)
    shown = bytearray()  # not bytes +=: a run writing megabytes comes in 4 KB reads
    while chunk := _read(leader):
        shown += chunk
    os.close(leader)
    piped = b"".join(p.read() for p in (proc.stdout, proc.stderr) if p is not None)
    return proc.wait(timeout=60), bytes(shown), piped


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the terminal's other end is closed
        return b""
