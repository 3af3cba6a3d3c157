"""Less address space reserved and never used, for runs under a limit on it (`ulimit -v`, a batch
system's or a container's virtual-memory limit): such a limit refused runs that used a third of it.

What reserved it (convert --to parquet of a capture that peaks at 218 MB resident): Arrow's default
memory pool, jemalloc, about 1 GB (peak 1.5 GB of address space); OpenBLAS, which comes with numpy,
which comes with pyarrow, a buffer per thread; glibc's malloc, a 64 MB heap for each thread that
allocates (pyarrow's writer threads). With the system pool, one OpenBLAS thread and one malloc
arena the same run peaks at 374 MB of address space (docs/commands/convert.md, "Memory").
"""

from __future__ import annotations

import os

_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


def reserve_less() -> None:
    """Before pyarrow is imported, in each process of the run; settings in the environment win."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "MALLOC_ARENA_MAX" in os.environ or not os.confstr("CS_GNU_LIBC_VERSION"):
        return  # glibc read it at start; or not glibc
    import ctypes  # only here: ~2 ms of start-up

    ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)
