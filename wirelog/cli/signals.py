"""SIGINT, SIGTERM and SIGHUP stop a run the way an error does, then end it by that signal.

Python's default for SIGTERM and SIGHUP is to die on the spot, leaving the temporary file of an
output behind. Raised as `Stopped` instead, the signal unwinds the run: every writer removes its
temporary file and a `--jobs` run stops its workers. Then the process kills itself with the same
signal (`die_by`), so that its parent sees what happened: a shell reports 128 + the signal number
(130 for Ctrl-C, 143 for SIGTERM) and a script's loop stops at Ctrl-C as it should.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """A stop signal arrived (a BaseException: `except Exception` handlers must let it through)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum: int, _frame: FrameType | None) -> None:
    for sig in STOP_SIGNALS:  # a second Ctrl-C must not interrupt the cleanup the first one started
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signum)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Stop signals raise `Stopped` in the block, except one ignored on purpose (`nohup`, `cmd &` in a
    script); the previous handlers are back after it (main() may run inside a test)."""
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig, handler in handlers.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, _stop)
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def ignored_by_children() -> Iterator[None]:
    """Child processes started in the block (`--jobs` workers) ignore stop signals from their first
    instruction: Ctrl-C reaches the whole process group, but this process decides and kills its
    workers itself (parallel.py), and a worker still importing prints no KeyboardInterrupt.

    Here the signals are blocked meanwhile, so one arriving in the block is delivered after it, not
    lost (Linux never discards a blocked signal, even while it is ignored). Children inherit what is
    ignored, not what is blocked: spawn resets the mask.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def die_by(signum: int) -> None:
    """End the process by `signum`, after the cleanup (without flushing stdout: its reader may be
    what is stuck)."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
