"""How a run ends when something stops it: the exit status and the one line that says why.

Exit statuses (README, docs/commands/*.md):
  0  done; also when the reader of stdout went away (EPIPE: `wirelog convert x | head` is not an error)
  1  `validate`: a finding at or above --fail-on
     `replay`: some selected events were not acknowledged (the receiver refused, reset, stalled)
  2  no input could be read, an output could not be written (stdout closed from the start too), or a
     usage error
  3  internal error: a bug to report
  4  out of memory, or a --jobs worker process killed (usually by the kernel's out-of-memory killer)
  a stop signal (SIGINT, SIGTERM, SIGHUP) ends the process by that signal: 128 + its number in a shell
"""

from __future__ import annotations

import errno
import os

OK = 0
UNUSABLE = 2
INTERNAL = 3
OUT_OF_MEMORY = 4


class WorkerLost(Exception):
    """A --jobs worker process ended without a result (killed by a signal or the system); `failed`:
    the allocation the machine refused to the native core, which ended the worker, if it did."""

    def __init__(self, failed: str | None = None) -> None:
        super().__init__(failed or "a --jobs worker process ended without a result")
        self.failed = failed


class CorePanic(Exception):
    """A panic of the core in a --jobs worker, as it reaches this process: PyO3's PanicException
    cannot be pickled (its module, pyo3_runtime, cannot be imported)."""


# glibc's loader, when mapping an extension module imported late (pyarrow for Parquet) is refused
_LOADER_OUT_OF_MEMORY = "failed to map segment from shared object"
# Our own modules, which the tests import whole: a SyntaxError in one of them while it is imported
# late is CPython's parser failing to allocate (seen under a 32 MB address-space limit: "expected ':'")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What to do about an OSError, after its file name and its strerror.
_HINTS = {
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EDQUOT: "free some space or write elsewhere",
    errno.EFBIG: "the file size limit was reached (ulimit -f); lift it or write elsewhere",
    errno.EACCES: "check the permissions",
    errno.EPERM: "check the permissions",
    errno.EROFS: "write elsewhere",
    errno.EIO: "the device failed; check it (dmesg) before trying again",
    errno.ENOENT: "check the name and that its directory exists",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.ENXIO: "nothing is there to write to (a socket?); give a file, a device or a FIFO",
    errno.EBADF: "it was closed: redirect it to a file or /dev/null",
}

OUT_OF_MEMORY_MESSAGE = (
    "out of memory: the run stopped and removed its unfinished output files; "
    "raise the memory limit (ulimit -v, the container's) or use fewer --jobs"
)
WORKER_LOST_MESSAGE = (
    "a --jobs worker process was killed (usually by the out-of-memory killer): the run stopped and "
    "removed its unfinished output files; use fewer --jobs or give it more memory"
)

WORKER_OUT_OF_MEMORY_MESSAGE = (
    "a --jobs worker process ran out of memory ({failed}): the run stopped and removed its "
    "unfinished output files; use fewer --jobs or give it more memory"
)


def oserror_message(e: OSError) -> str:
    """`name: what went wrong (what to do)`."""
    where = f"{e.filename}: " if e.filename else ""
    hint = _HINTS.get(e.errno) if e.errno is not None else None
    return f"{where}{e.strerror or e}" + (f" ({hint})" if hint else "")


# PyO3's panic when a Python object the core makes comes back NULL: the Python API call failed (its
# MemoryError goes to sys.unraisablehook first), which in the core's conversions is memory running out
_CORE_NULL_OBJECT = "PyObject pointer is null"


def is_core_panic(e: BaseException) -> bool:
    """PyO3's PanicException (pyo3_runtime, not importable): a BaseException, like SystemExit."""
    return type(e).__name__ == "PanicException" and type(e).__module__ == "pyo3_runtime"


def quiet(*_: object) -> None:
    """Errors Python prints by itself, outside any handler (a generator closed while memory runs
    out, a destructor at exit, a C extension's PyErr_Print, PyO3's unraisable error before its panic
    on a NULL object): without --debug, the one line about what stopped the run is the message.
    Installed as sys.excepthook and sys.unraisablehook, in --jobs workers too."""


def sendable(e: BaseException) -> BaseException:
    """What a --jobs worker sends its parent for `e`: a core panic as an error that pickles, one
    from memory running out as the MemoryError it is."""
    if not is_core_panic(e):
        return e
    if str(e) == _CORE_NULL_OBJECT:
        return MemoryError()
    return CorePanic(str(e))


def _ours(filename: str | None) -> bool:
    return filename is not None and os.path.abspath(filename).startswith(_PACKAGE + os.sep)


def outcome(e: BaseException) -> tuple[int, str]:
    """Exit status and message for an error that ended the run (not EPIPE nor a signal)."""
    if (
        isinstance(e, MemoryError)
        or (isinstance(e, ImportError) and _LOADER_OUT_OF_MEMORY in str(e))
        or (isinstance(e, SyntaxError) and _ours(e.filename))
        or (is_core_panic(e) and str(e) == _CORE_NULL_OBJECT)
    ):
        return OUT_OF_MEMORY, OUT_OF_MEMORY_MESSAGE
    if isinstance(e, WorkerLost):
        if e.failed:
            return OUT_OF_MEMORY, WORKER_OUT_OF_MEMORY_MESSAGE.format(failed=e.failed)
        return OUT_OF_MEMORY, WORKER_LOST_MESSAGE
    if isinstance(e, OSError):
        return UNUSABLE, oserror_message(e)
    return INTERNAL, (
        f"internal error: {type(e).__name__}: {e} (run with --debug for the traceback and report it)"
    )
