"""Outputs that are not regular files (issue 15): a device, a FIFO or a descriptor's name is written
in place in every format, never replaced by a renamed file; a symlink is written through to its
target; a failure while publishing leaves the previous output and no temporary file."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.fault_helpers import EXAMPLE, FORMATS, PREVIOUS, leftovers, wirelog
from wirelog.cli.output import open_output
from wirelog.export.atomic import destination
from wirelog.export.parquet import ParquetWriter


def example_rows() -> int:
    return len(wirelog("convert", str(EXAMPLE)).stdout.splitlines())


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_device_node_is_written_through_not_replaced(tmp_path, fmt):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a private /dev/null
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    proc = wirelog("convert", str(EXAMPLE), "--to", fmt, "-o", str(node))
    assert proc.returncode == 0, proc.stderr
    st = node.lstat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert os.listdir(tmp_path) == ["null"]


def _read_fifo(fifo: Path, into: list[bytes]) -> None:
    with open(fifo, "rb") as f:
        into.append(f.read())


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_fifo_gets_the_whole_output(tmp_path, fmt):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
    reader.start()
    proc = wirelog("convert", str(EXAMPLE), "--to", fmt, "-o", str(fifo))
    reader.join(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert got, "nothing was written into the FIFO"
    if fmt == "parquet":
        assert pq.read_table(pa.BufferReader(got[0])).num_rows == example_rows()
    else:
        assert got[0] == wirelog("convert", str(EXAMPLE)).stdout
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and os.listdir(tmp_path) == ["pipe"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_symlink_is_written_through_to_its_target(tmp_path, fmt):
    target = tmp_path / "data" / f"real{FORMATS[fmt]}"
    target.parent.mkdir()
    target.write_bytes(PREVIOUS)
    link = tmp_path / f"link{FORMATS[fmt]}"
    link.symlink_to(target)
    proc = wirelog("convert", str(EXAMPLE), "--to", fmt, "-o", str(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    if fmt == "parquet":
        assert pq.read_table(target).num_rows == example_rows()
    else:
        assert target.read_bytes() != PREVIOUS and target.stat().st_size > 0
    assert leftovers(tmp_path) == []


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "out.parquet"
    link.symlink_to("made.parquet")
    assert wirelog("convert", str(EXAMPLE), "--to", "parquet", "-o", str(link)).returncode == 0
    assert link.is_symlink() and pq.read_table(tmp_path / "made.parquet").num_rows == example_rows()


def test_names_of_open_descriptors_are_written_in_place(tmp_path):
    """/dev/stdout may point to a regular file a shell opened: still "this descriptor", never renamed
    over (as root, a rename over /dev/stdout replaces it for the whole machine)."""
    for name in ("/dev/stdout", "/dev/fd/1", f"/proc/{os.getpid()}/fd/1"):
        assert destination(name) is None, name
    regular = tmp_path / "x.parquet"
    regular.write_bytes(b"")
    (tmp_path / "link").symlink_to(regular)
    assert destination(str(regular)) == str(regular)
    assert destination(str(tmp_path / "link")) == str(regular)
    assert destination(str(tmp_path / "new.parquet")) == str(tmp_path / "new.parquet")


def test_a_socket_is_refused_with_a_usage_error(tmp_path):
    path = tmp_path / "wirelog.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        proc = wirelog("convert", str(EXAMPLE), "-o", str(path))
    assert proc.returncode == 2 and b"is a socket" in proc.stderr and b"Traceback" not in proc.stderr
    assert stat.S_ISSOCK(path.lstat().st_mode)


def _failing_replace(*_args, **_kw):
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_an_io_error_when_publishing_leaves_the_previous_output(tmp_path, monkeypatch):
    out = tmp_path / "out.parquet"
    out.write_bytes(PREVIOUS)
    writer = ParquetWriter(str(out))
    monkeypatch.setattr(os, "replace", _failing_replace)
    with pytest.raises(OSError) as e:
        writer.close()
    assert e.value.errno == errno.EIO and e.value.filename == str(out)
    path = tmp_path / "out.ndjson"
    path.write_bytes(PREVIOUS)
    with pytest.raises(OSError) as e, open_output(str(path)) as f:
        f.write(b"new\n")
    assert e.value.errno == errno.EIO and e.value.filename == str(path)
    monkeypatch.undo()
    assert out.read_bytes() == PREVIOUS == path.read_bytes()
    assert leftovers(tmp_path) == []
