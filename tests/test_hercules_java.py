"""The genuine Java reader (vostok/hercules EventReader) reads what wirelog writes, value for value.

Needs a JDK and a vostok/hercules source checkout named by HERCULES_JAVA_SRC (only the protocol,
util and uuid modules' sources are compiled, on demand); skipped otherwise.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hercules_codec import encode_event
from hercules_helpers import EVENTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog import _core
from wirelog.engine.hercules_events import decode_event_stream
from wirelog.engine.local import run
from wirelog.export.hercules import HerculesWriter
from wirelog.model import Message

SRC = os.environ.get("HERCULES_JAVA_SRC")
DUMP = Path(__file__).resolve().parent / "peers" / "hercules" / "Dump.java"
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(
    not SRC or shutil.which("javac") is None, reason="needs a JDK and HERCULES_JAVA_SRC (vostok/hercules)"
)


@pytest.fixture(scope="module")
def java_reader(tmp_path_factory):
    out = tmp_path_factory.mktemp("java")
    modules = ("hercules-protocol", "hercules-util", "hercules-uuid")
    sourcepath = os.pathsep.join(f"{SRC}/{m}/src/main/java" for m in modules)
    subprocess.run(["javac", "-d", str(out), "-sourcepath", sourcepath, str(DUMP)], check=True)

    def read(data: bytes) -> list[dict]:
        path = out / "events.bin"
        path.write_bytes(data)
        cmd = ["java", "-Dsun.stdout.encoding=UTF-8", "-cp", str(out), "Dump", str(path)]
        text = subprocess.run(cmd, check=True, capture_output=True).stdout.decode()
        return [json.loads(line) for line in text.split("\n") if line]

    return read


def ours(data: bytes) -> list[dict]:
    """wirelog's reading of the events (the core's), as plain documents like the Java dump's."""
    return _core.hercules_documents(data)


def same(a, b) -> bool:
    """Equal, with floats compared at Float precision (Java prints a Float's shortest form)."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float | dict | list):
        return a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return isinstance(b, int | float) and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-37)


def test_exported_captures_read_by_java(java_reader):
    for capture in (HERE / "data" / "lumberjack" / "pylogbeat-logstash.pcap", HERE / "data" / "hercules" / "gate-session.pcap"):  # fmt: skip
        out = io.BytesIO()
        writer = HerculesWriter(out)
        for rec in run([str(capture)]):
            if isinstance(rec, Message):
                writer.write(rec)
        data = out.getvalue()
        assert same(java_reader(data), ours(data))


_VALID_UTF8 = EVENTS.filter(
    lambda ev: (
        not any(
            getattr(r, "code", None) == "hercules.invalid-utf8" for r in decode_event_stream(encode_event(ev))
        )
    )
)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_VALID_UTF8, min_size=1, max_size=60))
def test_random_events_of_every_type_read_by_java(java_reader, events):
    data = b"".join(encode_event(ev) for ev in events)
    assert same(java_reader(data), ours(data))
