"""`convert --jobs N`: capture files converted side by side, one worker process per file at a time.

Each worker runs the same pipeline on one input and writes its own output: the final file when the
output is a directory (one file per input), else a part file that this process appends, in input
order, to the single output. The result equals the serial run's: byte for byte for JSON, the same rows
in the same order for Parquet (row groups are re-cut). Input errors are reported in input order.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
from concurrent.futures import Future, ProcessPoolExecutor

from wirelog.cli.common import Session
from wirelog.cli.output import open_output
from wirelog.cli.writing import SUFFIX, write_records
from wirelog.engine.gc_tuning import tune_gc
from wirelog.engine.local import Options, run
from wirelog.export.atomic import temporary_dir_beside
from wirelog.model import CaptureInfo


def _convert_one(fmt: str, path: str, output: str, options: Options) -> list[CaptureInfo]:
    """In a worker: one input to `output`; returns the input's CaptureInfo for the main process."""
    tune_gc()
    infos: list[CaptureInfo] = []

    def items():
        for item in run([path], (), options):
            if isinstance(item, CaptureInfo):
                infos.append(item)
            yield item

    write_records(fmt, output, items())
    return infos


def convert_parallel(session: Session, fmt: str, outputs: list[str] | str, jobs: int) -> None:
    """`outputs`: one output per input (a directory's files), or the single output to join parts into."""
    with contextlib.ExitStack() as stack:  # the parts directory outlives the pool: workers write into it
        if isinstance(outputs, list):
            targets = outputs
        else:
            parts = stack.enter_context(temporary_dir_beside(outputs))
            targets = [os.path.join(parts, f"{i}{SUFFIX[fmt]}") for i in range(len(session.paths))]
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(session.paths)), mp_context=spawn) as pool:
            futures = [
                pool.submit(_convert_one, fmt, p, t, session.options)
                for p, t in zip(session.paths, targets, strict=True)
            ]
            try:
                if isinstance(outputs, list):
                    for future in futures:
                        for info in future.result():
                            session.account(info)
                else:
                    _join(session, fmt, outputs, futures, targets)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def _join(session: Session, fmt: str, output: str, futures: list[Future], parts: list[str]) -> None:
    """Append each part, as soon as it is complete and in input order, to the one output."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        from wirelog.export.parquet import ParquetWriter

        with ParquetWriter(output) as writer:
            for future, part in zip(futures, parts, strict=True):
                for info in future.result():
                    session.account(info)
                for batch in pq.ParquetFile(part).iter_batches(batch_size=ParquetWriter.BATCH_ROWS):
                    writer.write_batch(batch)
                os.unlink(part)
        return
    with open_output(output) as out:
        for future, part in zip(futures, parts, strict=True):
            for info in future.result():
                session.account(info)
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
            os.unlink(part)
