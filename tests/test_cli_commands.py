"""inspect, validate, convert --to parquet/hercules, --version, errors: end to end on real captures."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO, shared_capture
from tests.parquet_helpers import assert_wirelog_encodings
from tests.pcap_helpers import tcp_frame, write_pcap
from wirelog.cli import main as main_module
from wirelog.cli import writing as writing_module
from wirelog.cli.main import main
from wirelog.engine import spark as spark_engine
from wirelog.export.json import rfc3339
from wirelog.export.parquet import ParquetWriter

EXAMPLE = REPO / "examples" / "lumberjack-pylogbeat.pcap"


def inspect_json(*args: str) -> dict:
    code, out, err = run_cli("inspect", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def test_inspect_summary_of_the_example():
    r = inspect_json(str(EXAMPLE))
    (cap,) = r["captures"]
    assert (
        cap["packets"] == cap["tcp_packets"] > 0 and cap["non_tcp_packets"] == 0 and cap["link_types"] == [1]
    )
    (s,) = r["streams"]
    assert s["protocol"] == "lumberjack" and s["server"].endswith(":5044")
    assert (s["events"], s["acked"], s["unacked"]) == (9, 9, 0)
    assert r["totals"]["events"] == 9
    lj = r["protocols"]["lumberjack"]
    assert lj["windows"] == 3 and lj["kinds"]["event"] == 9
    assert lj["ack_latency_ms_p50"] is not None


def test_inspect_cql_highlights():
    r = inspect_json(str(shared_capture("public/cql-packetbeat/cassandra_compressed.pcap")))
    cql = r["protocols"]["cql"]
    assert cql["statements"] == {"query": 17}
    assert cql["crc_verdict"] == "no v5 frames"
    assert len(cql["slowest"]) == 5
    latencies = [p["latency_ms"] for p in cql["slowest"]]
    assert latencies == sorted(latencies, reverse=True) and latencies[0] > 0


def test_inspect_courier_highlights_across_captures():
    paths = sorted(str(p) for p in shared_capture("peers").glob("*.pcap"))
    r = inspect_json(*paths)
    assert len(r["captures"]) == 3 and r["totals"]["streams"] == 3
    co = r["protocols"]["courier"]
    assert co["payload_sendings"] == co["sendings_fully_acked"] == 5 and co["resendings"] == 0
    assert r["delivery"]["courier"]["payloads"] == 5  # no resend: as many distinct payloads as sendings
    assert r["totals"]["events"] == r["totals"]["acked"] == 11


def test_inspect_findings_grouped_by_code(tmp_path):
    s = {"src": "10.0.0.2", "dst": "10.0.0.1", "sport": 8000, "dport": 40000}
    frames = [
        tcp_frame(1, b"hello", dport=8000),
        tcp_frame(20, b"world", dport=8000),  # 14 bytes missing
        tcp_frame(1, b"", flags="A", ack=25, **s),
    ]
    path = write_pcap(tmp_path / "gap.pcap", frames)
    r = inspect_json(str(path))
    (gap,) = [f for f in r["findings"] if f["code"] == "tcp.gap"]
    assert (gap["count"], gap["first_frames"], gap["severity"]) == (1, [3], "warning")
    assert r["streams"][0]["gaps"] == 1


def test_inspect_stream_and_frame_drill_down():
    code, out, _ = run_cli("inspect", str(EXAMPLE), "--stream", "0")
    text = out.decode()
    assert code == 0 and text.count(" event ") >= 9 and "window" in text
    frame = next(r["frame"] for r in ndjson(run_cli("convert", str(EXAMPLE), "--kind", "window")[1]))
    code, out, _ = run_cli("inspect", str(EXAMPLE), "--frame", str(frame))
    text = out.decode()
    assert code == 0 and "lumberjack window" in text
    assert "32 57" in text  # the hex dump shows the '2W' window frame header


def test_filters_select_records():
    events = ndjson(run_cli("convert", str(EXAMPLE), "--events")[1])
    assert len(events) == 9 and all(r["kind"] == "event" and r["event"] for r in events)
    windows = ndjson(run_cli("convert", str(EXAMPLE), "--kind", "window", "--kind", "ack")[1])
    assert {r["kind"] for r in windows} == {"window", "ack"}
    assert ndjson(run_cli("convert", str(EXAMPLE), "--protocol", "cql")[1]) == []
    first_ts = events[0]["ts"]
    later = ndjson(run_cli("convert", str(EXAMPLE), "--events", "--since", events[-1]["ts"])[1])
    assert 0 < len(later) < 9 and all(r["ts"] >= events[-1]["ts"] for r in later)
    assert ndjson(run_cli("convert", str(EXAMPLE), "--events", "--until", first_ts)[1]) == []
    code, _, err = run_cli("convert", str(EXAMPLE), "--since", "yesterday")
    assert code == 2 and "--since" in err


def test_validate_exit_status(tmp_path):
    code, out, _ = run_cli("validate", str(EXAMPLE))
    assert code == 0 and b"lumberjack.server-kind" in out  # info findings are printed, not failing
    assert run_cli("validate", str(EXAMPLE), "--fail-on", "info")[0] == 1
    garbage = write_pcap(tmp_path / "bad.pcap", [tcp_frame(1, b'{"json": "to a beats port"}\n', dport=5044)])
    code, out, _ = run_cli("validate", str(garbage), "--json")
    rows = ndjson(out)
    assert code == 1 and all(r["record"] == "finding" for r in rows)
    assert any(r["severity"] == "error" for r in rows)
    text = tmp_path / "x.txt"
    text.write_text("not a capture")
    assert run_cli("validate", str(text))[0] == 2


@pytest.mark.parametrize(
    "capture",
    [
        "public/cql-packetbeat/cassandra_mixed_frame.pcap",
        "public/ndpi_cassandra.pcap",
        "example",
        "lumberjack-resend",
    ],
)
def test_validate_prints_the_findings_convert_writes(capture):
    """validate asks the core for findings only; they are the finding records of a conversion."""
    repo = {
        "example": EXAMPLE,
        "lumberjack-resend": REPO / "tests/data/lumberjack/pylogbeat-stalled-resend.pcap",
    }
    path = repo[capture] if capture in repo else shared_capture(capture)
    records = ndjson(run_cli("convert", str(path), "--to", "json")[1])
    findings = [r for r in records if r["record"] == "finding"]
    assert findings and len(findings) < len(records)
    assert ndjson(run_cli("validate", str(path), "--json")[1]) == findings


def test_parquet_matches_json_row_for_row(tmp_path):
    path = shared_capture("public/cql-packetbeat/cassandra_mixed_frame.pcap")
    out = tmp_path / "mixed.parquet"
    code, _, err = run_cli("convert", str(path), "--to", "parquet", "-o", str(out))
    assert code == 0, err
    table = pq.read_table(out)
    rows = table.to_pylist()
    records = ndjson(run_cli("convert", str(path), "--to", "json")[1])
    assert len(rows) == len(records) > 30
    for row, rec in zip(rows, records, strict=True):
        assert (row["record"], row["stream"], row["frame"], row["offset"], row["protocol"]) == (
            rec["record"], rec["stream"], rec["frame"], rec["offset"], rec["protocol"],
        )  # fmt: skip
        assert row["kind"] == rec.get("kind") and row["code"] == rec.get("code")
        assert row["ts"].isoformat().replace("+00:00", "") == rec["ts"][:26].rstrip("Z")
        assert rfc3339(row["ts_ns"]) == rec["ts"]  # the exact time
        if row["fields"] is not None:
            fields = json.loads(row["fields"])
            assert all(rec.get(k, rec.get(f"cql_{k}")) == v for k, v in fields.items())
    assert str(table.schema.field("ts").type) == "timestamp[us, tz=UTC]"
    assert str(table.schema.field("ts_ns").type) == "int64"
    assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == "ZSTD"
    assert_wirelog_encodings(out)


def test_parquet_opens_in_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "ex.parquet"
    assert run_cli("convert", str(EXAMPLE), "--to", "parquet", "-o", str(out))[0] == 0
    con = duckdb.connect()
    n, acked = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE acked) FROM '{out}' WHERE kind = 'event'"
    ).fetchone()
    assert (n, acked) == (9, 9)
    (host,) = con.execute(f"SELECT DISTINCT json_extract_string(event, '$.message') IS NOT NULL FROM '{out}' "
                          "WHERE kind = 'event'").fetchone()  # fmt: skip
    con.close()
    assert host is True


def test_outputs_are_deterministic(tmp_path):
    for fmt in ("json", "hercules", "parquet"):
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        for out in (a, b):
            code, _, err = run_cli("convert", str(EXAMPLE), "--to", fmt, "-o", str(out))
            assert code == 0, err
        if fmt == "parquet":
            assert pq.read_table(a).equals(pq.read_table(b))
        else:
            assert a.read_bytes() == b.read_bytes() and a.stat().st_size > 0


def test_output_directory_gets_one_file_per_input(tmp_path):
    paths = sorted(str(p) for p in shared_capture("peers").glob("*.pcap"))
    outdir = tmp_path / "out"
    code, _, err = run_cli("convert", *paths, "--to", "parquet", "-o", str(outdir) + "/")
    assert code == 0, err
    names = sorted(p.name for p in outdir.iterdir())
    assert names == sorted(Path(p).name.removesuffix(".pcap") + ".parquet" for p in paths)


def test_interrupted_parquet_write_leaves_nothing(tmp_path, monkeypatch):
    """Interrupted after the first rows reached the writer (the core's Arrow rows or record objects)."""
    out = tmp_path / "half.parquet"
    calls = {"n": 0}

    def interrupting(real):
        def boom(self, rows):
            calls["n"] += 1
            real(self, rows)
            raise KeyboardInterrupt

        return boom

    monkeypatch.setattr(ParquetWriter, "write", interrupting(ParquetWriter.write))
    monkeypatch.setattr(ParquetWriter, "write_batch", interrupting(ParquetWriter.write_batch))
    code, _, _ = run_cli("convert", str(EXAMPLE), "--to", "parquet", "-o", str(out))  # click: "Aborted!"
    assert code != 0 and calls["n"] == 1
    assert list(tmp_path.iterdir()) == []


def test_version_lists_the_runtime_libraries(monkeypatch):
    code, out, _ = run_cli("--version")
    text = out.decode()
    assert code == 0 and text.startswith("wirelog ") and f"  pyarrow {version('pyarrow')}\n" in text
    assert not any(name in text for name in ("crcmod", "cramjam", "scapy"))  # the tests' libraries
    monkeypatch.setattr(main_module, "LIBRARIES", ("pyarrow", "no-such-library"))
    code, out, _ = run_cli("--version")
    lines = out.decode().splitlines()
    assert code == 0 and lines[1:] == [f"  pyarrow {version('pyarrow')}", "  no-such-library not installed"]


def test_unexpected_error_is_one_line_unless_debug(monkeypatch, capsys):
    def explode(*a, **k):
        raise ValueError("kaboom")

    monkeypatch.setattr(writing_module, "JsonWriter", explode)
    with pytest.raises(SystemExit) as e:
        main(["convert", str(EXAMPLE)])
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert "internal error: ValueError: kaboom" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(["--debug", "convert", str(EXAMPLE)])
    err = capsys.readouterr().err
    assert e.value.code == 3 and "Traceback" in err and "kaboom" in err  # same status, plus the traceback


def test_real_subprocess_pipeline_from_stdin():
    """The installed console script reading stdin, like `tcpdump -w - | wirelog convert -`."""
    proc = subprocess.run(
        [sys.executable, "-m", "wirelog.cli", "convert", "-", "--events"],
        input=EXAMPLE.read_bytes(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(ndjson(proc.stdout)) == 9


def test_bad_inputs_never_traceback(tmp_path):
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    for args in (["inspect", str(empty)], ["convert", str(tmp_path / "missing.pcap")], ["streams"]):
        proc = subprocess.run([sys.executable, "-m", "wirelog.cli", *args], capture_output=True, timeout=60)
        assert proc.returncode == 2 and b"Traceback" not in proc.stderr and proc.stderr.strip()


def test_raw_files_are_decoded_by_content_or_by_format(tmp_path):
    """A Hercules export read back by content; a dumped Lumberjack stream read with --format."""
    events = tmp_path / "events.bin"
    assert run_cli("convert", str(EXAMPLE), "--to", "hercules", "-o", str(events))[0] == 0
    back = ndjson(run_cli("convert", str(events), "--events")[1])
    assert len(back) == 9 and all(r["protocol"] == "hercules" and r["capture"] == str(events) for r in back)
    original = ndjson(run_cli("convert", str(EXAMPLE), "--events")[1])
    assert [r["event"] for r in back] == [r["event"] for r in original]
    dump = tmp_path / "c2s.bin"
    dump.write_bytes(run_cli("streams", str(EXAMPLE), "--dump", "0")[1])
    forced = ndjson(run_cli("convert", str(dump), "--format", "lumberjack", "--events")[1])
    assert [r["event"] for r in forced] == [r["event"] for r in original]
    assert all(r["frame"] is None and r["ts"] is None for r in forced)  # a raw dump has no packets


def test_spark_engine_usage_errors_need_no_jvm(tmp_path):
    assert run_cli("convert", "-", "--engine", "spark", "-o", str(tmp_path))[0] == 2
    assert run_cli("convert", str(EXAMPLE), "--engine", "spark")[0] == 2  # needs -o DIR
    code, _, err = run_cli(
        "convert", str(EXAMPLE), "--engine", "spark", "-o", str(tmp_path / "o"), "--conf", "x"
    )
    assert code == 2 and "KEY=VALUE" in err


@pytest.mark.parametrize(
    ("given", "size"),
    [
        ((), 128 << 20),
        (("134217728",), 128 << 20),
        (("64m",), 64 << 20),
        (("1g",), 1 << 30),
        (("1024k",), 1 << 20),
        (("64M",), 64 << 20),
        (("64MiB",), 64 << 20),
        (("64mb",), 64 << 20),
        (("2GB",), 2 << 30),
        (("1048576b",), 1 << 20),
    ],
)
def test_split_size_as_users_write_it(monkeypatch, tmp_path, given, size):
    asked = []
    monkeypatch.setattr(spark_engine, "convert_spark", lambda *args, **_: asked.append(args[-1]) or 0)
    split_size = [arg for value in given for arg in ("--split-size", value)]
    code, _, err = run_cli("convert", str(EXAMPLE), "--engine", "spark", "-o", str(tmp_path), *split_size)
    assert code == 0, err
    assert asked == [size]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("0", "is less than 1 MiB"),
        ("512k", "is less than 1 MiB"),  # a size, under the floor: thousands of tasks for a small file
        ("1048575", "is less than 1 MiB"),
        ("-1", "is not a size"),
        ("-64m", "is not a size"),
        ("4x", "is not a size"),
        ("1.5g", "is not a size"),
        ("64ib", "is not a size"),
        ("m", "is not a size"),
        ("", "is not a size"),
    ],
)
def test_split_size_refused_is_a_usage_error(monkeypatch, tmp_path, value, why):
    monkeypatch.setattr(spark_engine, "convert_spark", lambda *args: pytest.fail("ran with a bad size"))
    code, _, err = run_cli(
        "convert", str(EXAMPLE), "--engine", "spark", "-o", str(tmp_path), "--split-size", value
    )
    assert code == 2 and "Invalid value for '--split-size'" in err and why in err, err


def test_spark_engine_writes_the_same_rows(tmp_path):
    pytest.importorskip("pyspark")
    out = tmp_path / "dataset"
    code, _, err = run_cli("convert", str(EXAMPLE), "--engine", "spark", "--master", "local[2]", "--to", "parquet",
                           "-o", str(out))  # fmt: skip
    assert code == 0, err
    spark_rows = pq.read_table(out).num_rows
    local = tmp_path / "local.parquet"
    assert run_cli("convert", str(EXAMPLE), "--to", "parquet", "-o", str(local))[0] == 0
    assert spark_rows == pq.read_table(local).num_rows > 0
    for part in out.glob("protocol=*/*.parquet"):
        assert_wirelog_encodings(part)


@pytest.mark.parametrize("value", ["²=cql", "x=cql", "70000=cql", "5044=nope", "5044"])
def test_bad_decode_as_is_a_usage_error(value):
    code, _, err = run_cli("convert", str(EXAMPLE), "--decode-as", value, "--to", "json", "-o", "/dev/null")
    assert code == 2 and "--decode-as" in err and "internal error" not in err


def test_a_json_conversion_of_a_local_file_imports_no_heavy_library():
    """pyarrow (~45 ms), multiprocessing and pyspark are imported only when a run needs them."""
    code = (
        "import sys\n"
        "from wirelog.cli.main import main\n"
        f"try: main(['convert', {str(EXAMPLE)!r}, '-o', '/dev/null'])\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in ('pyarrow', 'multiprocessing', 'pyspark') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "capture",
    [
        "example",
        "lumberjack-resend",
        "peers/courier-go2.12-client-ruby2.12-server.pcap",
        "hercules",
    ],
)
def test_inspect_summary_from_event_counts_equals_the_one_from_event_objects(capture):
    """inspect has the core count event messages instead of making objects of them
    (records="summary"): its summary is the one made from every object."""
    from wirelog.cli.summary import Summary
    from wirelog.engine.local import Options, run
    from wirelog.model import EventCounts, Message

    repo = {
        "example": EXAMPLE,
        "lumberjack-resend": REPO / "tests/data/lumberjack/pylogbeat-stalled-resend.pcap",
        "hercules": REPO / "tests/data/hercules/gate-session.pcap",
    }
    path = str(repo[capture] if capture in repo else shared_capture(capture))
    results, kinds = [], []
    for records in ("objects", "summary"):
        summary = Summary()
        items = list(run([path], options=Options(records=records)))
        for item in items:
            summary.add(item)
        results.append(summary.result())
        kinds.append({type(i) for i in items})
    assert results[0] == results[1] and results[0]["totals"]["events"] > 0
    assert EventCounts not in kinds[0] and EventCounts in kinds[1]
    objects, left = (
        sum(1 for i in run([path], options=Options(records=r)) if isinstance(i, Message))
        for r in ("objects", "summary")
    )
    assert left <= objects - results[0]["totals"]["events"]  # no event was made an object


def test_findings_past_the_first_five_of_a_code_are_counted_and_summarise_alike(tmp_path):
    """A summary run has the core count the findings of a code past its first five in an input
    (300 connections of an unknown protocol: one `stream.unknown-protocol` each): the summary, its
    first frames and example, and every stream's findings in inspect's fold are those made from
    every finding as an object."""
    sys.path.insert(0, str(REPO / "bench"))
    from gen_capture import short

    from wirelog.cli.fold import InspectFold
    from wirelog.cli.summary import Summary
    from wirelog.engine.local import Options, run
    from wirelog.model import EventCounts, Finding

    paths = [str(tmp_path / "a.pcap"), str(tmp_path / "b.pcap")]
    short(paths[0], 300)
    short(paths[1], 40, seed=5)
    docs, items = [], {}
    for records in ("objects", "summary"):
        summary, fold = Summary(), InspectFold(keep_all=True)
        items[records] = list(run(paths, options=Options(records=records)))
        for item in items[records]:
            summary.add(item)
            fold.add(item)
        docs.append((summary.result(), fold.fold(Summary(per_stream=False).result(), paths)))
        docs[-1][1]["streams"] = list(fold.every_row())
    assert docs[0] == docs[1]
    found = docs[0][0]["findings"][0]
    assert found["code"] == "stream.unknown-protocol" and found["count"] == 340
    assert found["example"].startswith("no known protocol recognised") and len(found["first_frames"]) == 5
    assert all(s["findings"] == 1 for s in docs[0][1]["streams"]) and len(docs[0][1]["streams"]) == 340
    objects = [i for i in items["summary"] if isinstance(i, Finding)]
    counted = [row for i in items["summary"] if isinstance(i, EventCounts) for row in i.findings]
    assert len(objects) == 10  # the first five of each input
    assert sum(row[-1] for row in counted) == 330
