"""The console script's entry point, and `python -m wirelog.cli`'s: start-up too (importing click,
the native core and the command line, setting the process up) ends as a failed run does. Under a
tight address-space limit (ulimit -v) memory can run out before cli/main.py's handler is in place:
that is the one line and status 4, not a traceback (with --debug, both)."""

from __future__ import annotations

import contextlib
import os
import sys

from wirelog.cli import exits  # errno and os only: imported while there is room


def main() -> None:
    try:
        from wirelog.cli.main import main as run

        run()  # ends the process with the run's status (SystemExit passes here)
    except Exception as e:
        if "--debug" in sys.argv[1:]:
            import traceback

            traceback.print_exc()
        code, message = exits.outcome(e)
    # the failed start's frames are gone by now: the line may need the memory they held
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed, or no memory for it
            stream.flush()
    os.write(2, f"wirelog: {message}\n".encode())
    # Without the interpreter's and the C library's exit handlers: nothing this run did needs them
    # (no output was opened; the run's own failures end in cli/main.py), and when the address space
    # ran out as the core was loaded, its allocator's handler fails (mimalloc without its page map
    # frees through it: a segfault instead of this status).
    os._exit(code)
