"""Captures named by URI (s3://, s3a://) on a real S3 server (moto, loopback): listing, globs,
reading through the same pipeline as local files, and one clear line for every failure."""

from __future__ import annotations

import glob
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO
from tests.s3_helpers import BUCKET, s3_server
from wirelog.inputs import remote
from wirelog.inputs.errors import CaptureError

EXAMPLE = (REPO / "examples" / "lumberjack-pylogbeat.pcap").read_bytes()
KEYS = ("a/one.pcap", "a/sub/two.pcap", "a/_SUCCESS", "a/.hidden.pcap", "a/three.cap", "b.pcap", "c.pcap.gz")


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        for key in KEYS:
            server.put(key, gzip.compress(EXAMPLE, mtime=0) if key.endswith(".gz") else EXAMPLE)
        server.put("cut/truncated.pcap", EXAMPLE[:2000])
        yield server


def names(pattern: str, directories: bool = True) -> list[str]:
    found = remote.expand(pattern, directories)
    assert all(f.size > 0 for f in found)
    return [f.uri for f in found]


def u(key: str, scheme: str = "s3") -> str:
    return f"{scheme}://{BUCKET}/{key}"


def test_files_directories_and_globs_are_listed_like_local_ones(s3):
    assert names(u("a/one.pcap")) == [u("a/one.pcap")]
    # a directory: every file below it, except Spark's hidden `_` and `.` names
    assert names(u("a")) == names(u("a/")) == [u("a/one.pcap"), u("a/sub/two.pcap"), u("a/three.cap")]
    # `*` and `?` stay within one path segment, `**` spans any number (zero included), `[..]` is a set
    assert names(u("a/*.pcap")) == [u("a/one.pcap")]
    assert names(u("**/*.pcap")) == [
        u("a/one.pcap"),
        u("a/sub/two.pcap"),
        u("b.pcap"),
        u("cut/truncated.pcap"),
    ]
    assert names(u("a/**/t*")) == [u("a/sub/two.pcap"), u("a/three.cap")]
    assert names(u("a/?ne.pcap")) == names(u("a/[ox]ne.pcap")) == [u("a/one.pcap")]
    assert names(u("a/[!o]*"), directories=False) == [u("a/_SUCCESS"), u("a/three.cap")]  # as glob.glob
    # a glob matching a directory takes its files when directories are wanted (Spark), else not
    assert names(u("a/s*")) == [u("a/sub/two.pcap")]
    with pytest.raises(CaptureError, match="no file matches"):
        names(u("a/s*"), directories=False)


def test_names_keep_the_scheme_and_options_the_user_wrote(s3):
    # s3a:// (Hadoop's name) reads through pyarrow's s3, and stays s3a:// in every name
    assert names(u("a/*.pcap", "s3a")) == [u("a/one.pcap", "s3a")]
    # endpoint options in the query go with every listed name, so a worker can open it as is
    listed = names(u("a/[ot]*") + s3.query, directories=False)
    assert listed == [u("a/one.pcap") + s3.query, u("a/three.cap") + s3.query]
    assert remote.open_stream(listed[0]).read() == EXAMPLE
    # `?` before options is the query; `?` elsewhere is a glob character
    assert names(u("a/?ne.pcap") + s3.query) == [u("a/one.pcap") + s3.query]


@pytest.mark.parametrize(
    "uri, message",
    [
        (u("a/nope.pcap"), "no such file or directory"),
        ("s3://no-such-bucket/x.pcap", "no such file or directory"),
        (u("zz*.pcap"), "no file matches this pattern"),
        ("s3://capt*/x.pcap", "put the pattern after the bucket"),
        ("nosuchscheme://host/x.pcap", "cannot reach its file system"),
    ],
)
def test_bad_uris_are_one_clear_line(s3, uri, message):
    with pytest.raises(CaptureError) as e:
        remote.expand(uri, directories=True)
    assert str(e.value).startswith(f"{uri}: ") and message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_directory_is_not_a_capture_file_for_the_cli(s3):
    with pytest.raises(CaptureError, match="is a directory"):
        remote.expand(u("a"), directories=False)


def without_capture(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "capture"} for r in records]


def test_convert_reads_s3_objects_like_local_files(s3, tmp_path):
    local = tmp_path / "one.pcap"
    local.write_bytes(EXAMPLE)
    code, out, err = run_cli("convert", str(local), "--to", "json")
    assert code == 0, err
    expected = ndjson(out)
    assert sum(r.get("kind") == "event" for r in expected) == 9
    code, out, err = run_cli("convert", u("a/*.pcap", "s3a"), u("c.pcap.gz"), "--to", "json")
    assert code == 0, err
    got = ndjson(out)
    assert [r["capture"] for r in got] == [u("a/one.pcap", "s3a")] * len(expected) + [u("c.pcap.gz")] * len(
        expected
    )
    # byte for byte the same records, gzip undone by its magic as for local files
    assert without_capture(got) == without_capture(expected) * 2


def test_a_truncated_object_keeps_what_came_before_the_cut(s3, tmp_path):
    local = tmp_path / "truncated.pcap"
    local.write_bytes(EXAMPLE[:2000])
    code, out_local, _ = run_cli("convert", str(local), "--to", "json")
    code_s3, out_s3, _ = run_cli("convert", u("cut/truncated.pcap"), "--to", "json")
    assert code == code_s3 == 0
    records = ndjson(out_s3)
    assert without_capture(records) == without_capture(ndjson(out_local))
    assert "pcap.truncated" in {r.get("code") for r in records}
    assert any(r.get("kind") == "event" for r in records)


def test_one_output_file_per_object_named_after_it(s3, tmp_path):
    code, _, err = run_cli("convert", u("a/[ot]*") + s3.query, "--to", "json", "-o", f"{tmp_path}/out/")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["one.ndjson", "three.ndjson"]
    first = json.loads((tmp_path / "out" / "one.ndjson").read_text().splitlines()[0])
    assert first["capture"] == u("a/one.pcap") + s3.query


def test_inspect_and_validate_take_uris(s3):
    code, out, err = run_cli("inspect", "--json", u("b.pcap"))
    assert code == 0, err
    (cap,) = json.loads(out)["captures"]
    assert cap["capture"] == u("b.pcap") and cap["packets"] > 0
    code, _, _ = run_cli("validate", u("b.pcap"))
    assert code == 0


def test_unusable_remote_inputs_exit_2_with_one_line(s3):
    code, out, err = run_cli("convert", u("a/nope.pcap"), "--to", "json")
    assert code == 2 and out == b""
    assert err.strip() == f"wirelog: {u('a/nope.pcap')}: no such file or directory"
    code, _, err = run_cli("convert", u("b.pcap"), "--to", "parquet", "-o", u("out.parquet"))
    assert code == 2 and "the local engine writes local files" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "pattern",
    [
        "*",
        "*.pcap",
        "a/*",
        "a/*.*",
        "**/*.pcap",
        "**/*",
        "a/**",
        "a/**/*.pcap",
        "*/s*/*",
        "?.pcap",
        "a/?n?.pcap",
        "a/[a-o]*",
        "a/[!a-o]*",
        "**/t*",
        "cut/*.pcap",
        "a/sub/**/two.pcap",
        "*/*/*",
    ],
)
def test_globs_match_what_glob_glob_matches_on_the_same_tree(s3, local_tree, pattern):
    assert remote_matches(pattern) == local_matches(local_tree, pattern)


@pytest.fixture(scope="module")
def local_tree(tmp_path_factory) -> Path:
    """The bucket's keys as a local directory tree, for glob.glob to answer the same patterns."""
    root = tmp_path_factory.mktemp("tree")
    for key in (*KEYS, "cut/truncated.pcap"):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(b"x")
    return root


def local_matches(root: Path, pattern: str) -> list[str]:
    hits = map(Path, glob.glob(str(root / pattern), recursive=True))
    return sorted({str(p.relative_to(root)) for p in hits if p.is_file()})  # `**/**` lists files twice


def remote_matches(pattern: str) -> list[str]:
    try:
        found = remote.expand(u(pattern), directories=False)
    except CaptureError:
        found = []
    return [f.uri.removeprefix(u("")) for f in found]


SEGMENT = st.lists(
    st.sampled_from(["*", "?", "a", "b", "o", "t", "n", "e", ".", "p", "c", "_", "[ot]", "[!a]", "[a-o]"]),
    min_size=1,
    max_size=5,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    segments=st.lists(
        st.one_of(SEGMENT, st.just("**"), st.sampled_from(["a", "sub", "cut"])), min_size=1, max_size=4
    )
)
def test_generated_globs_match_what_glob_glob_matches(s3, local_tree, segments):
    pattern = "/".join(segments)
    # literal names are not globs; `.` and `..` are path steps on disk, plain key text in a bucket
    assume(glob.has_magic(pattern) and not {".", ".."} & set(segments))
    assert remote_matches(pattern) == local_matches(local_tree, pattern), pattern


def test_an_unreachable_google_store_fails_within_the_retry_limit(monkeypatch):
    # offline (or without credentials) Google's client would retry for 15 minutes by default
    monkeypatch.setattr(remote, "GCS_RETRY_SECONDS", 1)
    with pytest.raises(CaptureError) as e:
        remote.expand("gs://wirelog-test-bucket/x.pcap", directories=False)
    assert str(e.value).startswith("gs://wirelog-test-bucket/x.pcap: ") and "\n" not in str(e.value)
