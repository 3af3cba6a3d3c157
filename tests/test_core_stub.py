"""wirelog/_core.pyi against the built core (native/src/python/): the Rust API's contract to Python.

mypy's stubtest imports the core and compares it with the stub: every public name, each parameter's
name, kind and default (PyO3 publishes them as `__text_signature__`, constructors' on the class), the
constants' types, which classes can be subclassed. What it cannot see are the names a constructor reads
from `**options`, so those are checked here by asking the core; and mypy checks that calls shaped like
the engine's pass through the stub and calls the core refuses do not (tests/core_stub_usage.py).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.core_stub_usage import REFUSED
from wirelog import _core

STUB = REPO / "wirelog" / "_core.pyi"


def mypy(tmp_path: Path, *args: str) -> None:
    """Run mypy (a module of it: `-m mypy.stubtest`) on this checkout; fail with what it says."""
    # From a directory of its own (mypy writes its cache into the working directory), with
    # MYPYPATH naming this checkout: an editable install may point at another one, whose stub
    # would be the one read.
    env = {**os.environ, "PYTHONPATH": str(REPO), "MYPYPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_stub_matches_the_core(tmp_path):
    mypy(tmp_path, "mypy.stubtest", "wirelog._core")


def test_engine_calls_type_check_and_refused_calls_do_not(tmp_path):
    # --follow-imports=silent: wirelog.model is read for its types, not checked
    usage = str(REPO / "tests" / "core_stub_usage.py")
    mypy(tmp_path, "mypy", "--follow-imports=silent", "--warn-unused-ignores", usage)


@pytest.mark.parametrize("call", REFUSED)
def test_calls_the_stub_refuses_the_core_refuses(call):
    with pytest.raises((TypeError, ValueError)):
        call()


def option_names(typed_dict: str) -> list[str]:
    """The keys a TypedDict of the stub declares itself (not those of its bases)."""
    [node] = [n for n in ast.parse(STUB.read_text()).body if getattr(n, "name", None) == typed_dict]
    return [item.target.id for item in node.body if isinstance(item, ast.AnnAssign)]


def refusal(make: Callable[..., object], name: str) -> str:
    """Why the core refuses the option `name` given a value no option takes."""
    with pytest.raises((TypeError, ValueError)) as refused:
        make(**{name: object()})
    return str(refused.value)


@pytest.mark.parametrize(
    ("make", "typed_dicts"),
    [
        (lambda **o: _core.Pipeline("t", **o), ["_TcpOptions", "_ReassemblyOptions"]),
        (lambda **o: _core.Reassembler("t", **o), ["_TcpOptions"]),
        (lambda **o: _core.Decoding("t", **o), ["_DecodingOptions"]),
        (lambda **o: _core.Pipeline("t", decoding=o), ["_DecodingOptions"]),
    ],
    ids=["Pipeline", "Reassembler", "Decoding", "Pipeline-decoding"],
)
def test_stub_option_names_are_the_cores(make, typed_dicts):
    names = [name for typed_dict in typed_dicts for name in option_names(typed_dict)]
    assert len(names) > 1
    # the core tells an option it does not know from a value of the wrong type
    assert "unexpected" in refusal(make, "no_such_option")
    assert [name for name in names if "unexpected" in refusal(make, name)] == []
