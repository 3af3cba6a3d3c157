"""Output targets that are not regular files are written through, never replaced by a renamed file;
regular files appear complete, with the mode a new file gets."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from wirelog.cli.output import open_output
from wirelog.export.parquet import ParquetWriter


def test_dev_null_stays_a_character_device():
    with open_output(os.devnull) as out:
        out.write(b"x\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with open_output(str(fifo)) as out:
            out.write(b"line\n")
        assert os.read(reader, 100) == b"line\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["pipe"]


def test_symlinked_output_keeps_the_link(tmp_path):
    target = tmp_path / "real.ndjson"
    target.write_bytes(b"old")
    link = tmp_path / "link.ndjson"
    link.symlink_to(target)
    with open_output(str(link)) as out:
        out.write(b"new\n")
    assert link.is_symlink() and target.read_bytes() == b"new\n"


def test_regular_file_appears_only_when_complete(tmp_path):
    path = tmp_path / "out.ndjson"
    with open_output(str(path)) as out:
        out.write(b"a\n")
        assert not path.exists()
    assert path.read_bytes() == b"a\n" and sorted(os.listdir(tmp_path)) == ["out.ndjson"]


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_a_new_output_gets_the_mode_of_any_new_file_not_the_temporary_files(tmp_path, umask_027):
    path = tmp_path / "out.ndjson"
    with open_output(str(path)) as out:
        out.write(b"x\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # 0666 minus the umask, not mkstemp's 0600
    writer = ParquetWriter(str(tmp_path / "out.parquet"))
    writer.close()
    assert stat.S_IMODE((tmp_path / "out.parquet").stat().st_mode) == 0o640


def test_a_replaced_output_keeps_its_mode(tmp_path, umask_027):
    path = tmp_path / "shared.ndjson"
    path.write_bytes(b"old")
    path.chmod(0o664)
    with open_output(str(path)) as out:
        out.write(b"new\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o664 and path.read_bytes() == b"new\n"


@pytest.fixture
def no_tmpfile(monkeypatch):
    """A file system without O_TMPFILE (some network and FUSE file systems refuse it)."""
    real_open = os.open

    def refusing(path, flags, *args, **kw):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP), path)
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", refusing)


@pytest.mark.parametrize("previous", [None, b"old"])
def test_without_unnamed_files_a_temporary_name_is_used_and_removed(tmp_path, no_tmpfile, previous):
    path = tmp_path / "out.ndjson"
    if previous is not None:
        path.write_bytes(previous)
    with open_output(str(path)) as out:
        out.write(b"new\n")
        assert [n for n in os.listdir(tmp_path) if n.startswith(".wirelog-")]  # the fallback's name
        assert path.read_bytes() == previous if previous else not path.exists()  # not yet replaced
    assert path.read_bytes() == b"new\n" and os.listdir(tmp_path) == ["out.ndjson"]


def test_an_unnamed_file_is_written_beside_the_output(tmp_path):
    """No name appears in the directory while the output is written (a SIGKILL leaves none)."""
    path = tmp_path / "out.ndjson"
    with open_output(str(path)) as out:
        out.write(b"x\n")
        out.flush()
        assert os.listdir(tmp_path) == []
        assert os.readlink(f"/proc/self/fd/{out.fileno()}").startswith(f"{os.path.realpath(tmp_path)}/")
    assert path.read_bytes() == b"x\n"
