"""`convert --jobs N`: capture files converted side by side, one worker process per file at a time.

Each worker runs the same pipeline on one input and writes its own part file into a temporary
directory beside the output; this process moves each part, in input order, to its final name when
the output is a directory (one file per input), else appends it to the single output. The result
equals the serial run's: byte for byte for JSON, the same rows in the same order for Parquet (row
groups are re-cut). Input errors are reported in input order.

Whatever stops the run (an error, a full disk, EPIPE, a signal, a worker killed by the system), this
process kills its workers and removes the parts directory: no unfinished file is left, and no final
name is touched by an input that was not converted completely. When this process is killed where it
cannot clean up (SIGKILL, an abort), its workers see their parent change, remove the parts directory
and end.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import shutil
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from wirelog import _core
from wirelog.cli import exits
from wirelog.cli.address_space import reserve_less
from wirelog.cli.common import Session
from wirelog.cli.output import open_output
from wirelog.cli.signals import ignored_by_children
from wirelog.cli.writing import SUFFIX, write_records
from wirelog.engine.gc_tuning import tune_gc
from wirelog.engine.local import Options, run
from wirelog.export.atomic import install, temporary_dir_beside
from wirelog.model import CaptureInfo


def _convert_one(fmt: str, path: str, output: str, options: Options) -> tuple[list[CaptureInfo], int]:
    """In a worker: one input to `output`; returns the input's CaptureInfo for the main process, and
    the number of records written."""
    tune_gc()
    infos: list[CaptureInfo] = []

    def items():
        for item in run([path], (), options):
            if isinstance(item, CaptureInfo):
                infos.append(item)
            yield item

    try:
        written = write_records(fmt, output, items())
    except BaseException as e:
        sent = exits.sendable(e)
        if sent is e:
            raise
        raise sent from None
    return infos, written


_WATCH = 0.1  # seconds between a worker's looks at its parent
_NATIVE = "native-stderr-"  # + a worker's pid: what native code wrote to its descriptor 2
# what the core writes when the machine refuses it memory (see _start_worker; Rust's own line too)
_ALLOCATION_FAILED = re.compile(r"memory allocation of \d+ bytes failed")


def _start_worker(parts_dir: str, parent: int, quiet: bool) -> None:
    """First thing in each worker: what native code writes straight to descriptor 2 goes to a file
    in the parts directory (`memory allocation of N bytes failed` when the machine refuses the core
    memory, before the worker ends), for this process to make one line of; Python's
    own lines (sys.stderr: Hercules notes) still reach stderr as they come. And a watch for the
    end of `parent`, this process, which may already have ended while the worker started. `quiet`:
    Python's own error printing is silenced as in this process (without --debug)."""
    reserve_less()
    if quiet:
        sys.unraisablehook = sys.excepthook = exits.quiet
        # the line this process looks for (_ALLOCATION_FAILED) instead of Rust's abort
        _core.on_out_of_memory("memory allocation of {size} bytes failed", exits.OUT_OF_MEMORY)
    sys.stderr = open(os.dup(2), "w", encoding="utf-8", errors="backslashreplace", buffering=1)  # noqa: SIM115
    fd = os.open(os.path.join(parts_dir, f"{_NATIVE}{os.getpid()}"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    threading.Thread(target=_orphaned, args=(parent, parts_dir), daemon=True).start()


def _orphaned(parent: int, parts_dir: str) -> None:
    """In a worker: when this process ended without its cleanup (SIGKILL, the out-of-memory killer,
    an abort), remove the parts directory in its place and end: nothing is left beside the output
    (the part being written has no name yet) and no orphan converts on for nobody."""
    while os.getppid() == parent:
        time.sleep(_WATCH)
    shutil.rmtree(parts_dir, ignore_errors=True)
    os._exit(1)


def _native_output(parts_dir: str) -> str:
    texts = []
    for name in sorted(os.listdir(parts_dir)):
        if name.startswith(_NATIVE):
            with open(os.path.join(parts_dir, name), encoding="utf-8", errors="backslashreplace") as f:
                texts.append(f.read())
    return "".join(texts)


def convert_parallel(session: Session, fmt: str, outputs: list[str] | str, jobs: int) -> int:
    """`outputs`: one output per input (a directory's files), or the single output to join parts into.
    Returns the number of records written."""
    with contextlib.ExitStack() as stack:  # the parts directory outlives the pool: workers write into it
        parts_dir = stack.enter_context(
            temporary_dir_beside(outputs if isinstance(outputs, str) else outputs[0])
        )
        parts = [os.path.join(parts_dir, f"{i}{SUFFIX[fmt]}") for i in range(len(session.paths))]
        spawn = multiprocessing.get_context("spawn")
        pool = stack.enter_context(
            ProcessPoolExecutor(
                min(jobs, len(session.paths)),
                mp_context=spawn,
                initializer=_start_worker,
                initargs=(parts_dir, os.getpid(), sys.excepthook is exits.quiet),
            )
        )
        futures: list[Future] = []
        try:
            with ignored_by_children():  # the pool starts its workers in submit()
                for path, part in zip(session.paths, parts, strict=True):
                    futures.append(pool.submit(_convert_one, fmt, path, part, session.options))
            if isinstance(outputs, str):
                written = _join(session, fmt, outputs, futures, parts)
            else:
                written = 0
                for future, part, output in zip(futures, parts, outputs, strict=True):
                    written += _account(session, future, part, output)
                    install(part, output)
        except BrokenProcessPool as e:
            _stop(pool)
            # the one line says it all: what a worker's native code said is left out of it, but
            # for the failed allocation that aborted it
            failed = _ALLOCATION_FAILED.search(_native_output(parts_dir))
            raise exits.WorkerLost(failed.group(0) if failed else None) from e
        except BaseException:
            _stop(pool)
            sys.stderr.write(_native_output(parts_dir))
            raise
        pool.shutdown(wait=True)  # the workers' descriptors 2 are closed: the files hold all they said
        sys.stderr.write(_native_output(parts_dir))
    return written


def _stop(pool: ProcessPoolExecutor) -> None:
    """Kill the workers (they ignore stop signals, and their files die with the parts directory).
    Inputs still queued fail with the pool: a future cancelled here would make Python 3.11's pool
    thread raise InvalidStateError when it fails them (a traceback on stderr)."""
    workers = multiprocessing.active_children()  # the pool's: this process starts no others
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.join()
    pool.shutdown(wait=True)


def _account(session: Session, future: Future, part: str, output: str) -> int:
    """Wait for one input's worker and keep its CaptureInfo (the progress bar moves on by that
    input); a write error names the output. Returns the number of records it wrote."""
    try:
        infos, written = future.result()
    except OSError as e:
        if e.filename != part:
            raise
        raise OSError(e.errno, e.strerror, output) from None
    meter = session.meter
    if meter is not None:
        meter.records += written
    for info in infos:
        session.account(info)
        if meter is not None:
            meter.tick(info)
    return written


def _join(session: Session, fmt: str, output: str, futures: list[Future], parts: list[str]) -> int:
    """Append each part, as soon as it is complete and in input order, to the one output; returns
    the number of records."""
    written = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        from wirelog.export.parquet import ParquetWriter

        with ParquetWriter(output) as writer:
            for future, part in zip(futures, parts, strict=True):
                written += _account(session, future, part, output)
                for batch in pq.ParquetFile(part).iter_batches(batch_size=ParquetWriter.BATCH_ROWS):
                    writer.write_batch(batch)
                os.unlink(part)
        return written
    with open_output(output) as out:
        for future, part in zip(futures, parts, strict=True):
            written += _account(session, future, part, output)
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
            os.unlink(part)
    return written
