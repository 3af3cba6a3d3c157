"""Garbage-collector settings for a process that runs the pipeline (the CLI, a Spark Python worker).

The pipeline allocates millions of short-lived containers (records, event documents) and holds few
cycles: CPython's default thresholds make the collector rescan them constantly, which cost ~45 % of a
Lumberjack conversion (bench/bench_convert.py) and as much in Spark's Python workers (bench_spark.py).
"""

from __future__ import annotations

import gc

THRESHOLDS = (100_000, 50, 100)


def tune_gc() -> None:
    """Freeze what is alive now (imports, the worker's own state) and collect far less often."""
    if gc.get_threshold() != THRESHOLDS:
        gc.freeze()
        gc.set_threshold(*THRESHOLDS)
