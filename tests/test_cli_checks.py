"""Filters, numeric options and their ranges are checked (issue 41, item 5): a name or a value the
run cannot use is a usage error (status 2) that says why, never an internal error, and a filter that
matches nothing is said on stderr."""

from __future__ import annotations

import re

import pytest

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO
from wirelog.engine import protocols

EXAMPLE = str(REPO / "examples" / "lumberjack-pylogbeat.pcap")  # one Lumberjack stream, 27 packets
CAPTURES = [EXAMPLE, *(str(p) for p in sorted((REPO / "tests" / "data").glob("*/*.pcap")))]


def command(name: str, tmp_path) -> list[str]:
    """`name` with what it needs besides inputs and filters."""
    return {
        "convert": ["convert", "--to", "json", "-o", str(tmp_path / "out.ndjson")],
        "report": ["report", "-o", str(tmp_path / "r.html")],
    }.get(name, [name])


COMMANDS = ["inspect", "validate", "convert", "report", "streams"]


def usage_error(err: str) -> str:
    """The `Error:` line of a usage error (click prints the usage above it)."""
    (line,) = [x for x in err.splitlines() if x.startswith("Error: ")]
    return line


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unknown_protocol_is_a_usage_error_with_a_suggestion(name, tmp_path):
    code, out, err = run_cli(*command(name, tmp_path), EXAMPLE, "--protocol", "lumbrjack")
    line = usage_error(err)
    assert code == 2 and out == b"", err
    assert "'lumbrjack' is not a protocol (did you mean lumberjack?)" in line
    assert "known: " + ", ".join(protocols.record_protocols()) in line


def test_a_finding_is_not_a_kind_and_the_kinds_are_listed_per_protocol():
    code, _, err = run_cli("convert", EXAMPLE, "--kind", "finding")
    line = usage_error(err)
    assert code == 2
    assert "findings are records of their own, which --kind drops (`wirelog validate` lists them)" in line
    assert "lumberjack: window, compressed, event, ack, connection;" in line
    assert "cql: error, startup, ready" in line


def test_an_unknown_kind_suggests_the_near_one():
    code, _, err = run_cli("inspect", EXAMPLE, "--kind", "windw")
    assert code == 2 and "'windw': not a message kind (did you mean window?)" in usage_error(err)


def test_validate_refuses_the_filters_that_drop_every_finding():
    for option in (["--kind", "event"], ["--events"]):
        code, _, err = run_cli("validate", EXAMPLE, *option)
        assert code == 2 and "validate lists findings, which --kind and --events drop" in usage_error(err)


def _doc_kinds(text: str) -> list[str]:
    """The kinds in the first column of a protocol page's "Record kinds" table."""
    table = text.split("## Record kinds", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return [kind for row in rows for kind in re.findall(r"`([a-z_]+)`", row)]


@pytest.mark.parametrize("protocol", ["lumberjack", "courier", "hercules"])
def test_the_kinds_are_those_the_protocol_page_lists(protocol):
    page = (REPO / "docs" / "protocols" / f"{protocol}.md").read_text()
    assert sorted(_doc_kinds(page)) == sorted(protocols.kinds()[protocol])


def test_the_cql_and_tls_kinds_are_those_their_pages_name():
    cql = (REPO / "docs" / "protocols" / "cql.md").read_text()
    sentence = cql.split("`kind` is the opcode name: ", 1)[1].split(". ", 1)[0]
    assert re.findall(r"`([a-z_]+)`", sentence) == list(protocols.kinds()["cql"])
    tls = (REPO / "docs" / "tls.md").read_text()
    assert all(f"`{kind}`" in tls for kind in protocols.kinds()["tls"])


def test_the_protocol_names_are_those_the_record_contract_lists():
    row = next(
        x for x in (REPO / "docs" / "records.md").read_text().splitlines() if x.startswith("| `protocol` |")
    )
    named = re.findall(r"`([a-z]+)`", row.split("(these are", 1)[0])
    assert named[1:] == protocols.record_protocols()


def test_every_kind_the_decoders_write_is_known():
    code, out, err = run_cli("convert", *CAPTURES, "--to", "json")
    assert code == 0, err
    written = {(r["protocol"], r["kind"]) for r in ndjson(out) if r["record"] == "message"}
    kinds = protocols.kinds()
    assert written and all(kind in kinds[protocol] for protocol, kind in written), written


OUT_OF_RANGE = [
    (["--held-memory", "99999999999t"], "'99999999999t' is more than 1 PiB"),
    (["--held-memory", "-1"], "'-1' is not a size"),
    (["--stream", "-1"], "-1 is not in the range 0<=x<=18446744073709551615"),
    (["--stream", str(1 << 64)], f"{1 << 64} is not in the range"),
    (["--since", "-99999999999"], "'-99999999999' is outside the times wirelog holds"),
    (["--since", "0001-01-01"], "'0001-01-01' is outside the times wirelog holds"),
    (["--until", "1e400"], "'1e400' is not a time"),
    (["--until", "nan"], "'nan' is not a time"),
    (["--reorder-window", str(1 << 64)], "is not in the range 0<=x<=1000000000"),
]


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize(
    ("option", "why"), OUT_OF_RANGE, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_a_shared_option_out_of_range_is_a_usage_error_in_every_command(name, option, why, tmp_path):
    code, _, err = run_cli(*command(name, tmp_path), EXAMPLE, *option)
    assert code == 2 and f"Invalid value for {option[0]}" in err.replace("'", "") and why in err, err


@pytest.mark.parametrize("name", COMMANDS)
def test_held_memory_from_the_environment_is_checked_alike(name, tmp_path, monkeypatch):
    monkeypatch.setenv("WIRELOG_HELD_MEMORY", "99999999999t")
    code, _, err = run_cli(*command(name, tmp_path), EXAMPLE)
    assert code == 2
    assert "'99999999999t' (from WIRELOG_HELD_MEMORY) is more than 1 PiB" in usage_error(err)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["report", "-o", "r.html", "--stall", "nan"], "'nan' is not a number"),
        (["report", "-o", "r.html", "--stall", "inf"], "inf is not in the range 0<=x<=1000000000"),
        (["report", "-o", "r.html", "--stall", "-1"], "-1.0 is not in the range"),
        (["report", "-o", "r.html", "--top", str(1 << 70)], "is not in the range 1<=x<=10000"),
        (["convert", "--jobs", str(1 << 70)], "is not in the range 0<=x<=1024"),
        (["convert", "--engine", "spark", "-o", "d", "--split-size", "99999999999t"], "is more than 1 PiB"),
        (["inspect", "--frame", "0"], "0 is not in the range 1<=x<=18446744073709551615"),
        (["streams", "--dump", "-1"], "-1 is not in the range 0<=x<=18446744073709551615"),
    ],
)
def test_a_command_option_out_of_range_is_a_usage_error(args, why, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(*args, EXAMPLE)
    assert code == 2 and why in usage_error(err), err


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["validate", "--stream", "7"], "no stream 7 in the input (its streams: 0)"),
        (["inspect", "--stream", "7"], "no stream 7 in the input (its streams: 0)"),
        (["convert", "--protocol", "cql"], "no cql stream in the input (its protocols: lumberjack)"),
        (
            ["validate", "--protocol", "hercules"],
            "no hercules stream in the input (its protocols: lumberjack)",
        ),
        (["convert", "--kind", "query"], "no record matched the filters (--kind query)"),
        (
            ["convert", "--to", "parquet", "-o", "x.parquet", "--events", "--until", "2000-01-01"],
            "no record matched the filters (--events --until 2000-01-01T00:00:00.000000000Z)",
        ),
        (["inspect", "--frame", "28"], "frame 28 is not in the input (it has 27 packets)"),
    ],
)
def test_what_matches_nothing_is_said_once_and_the_status_stays(args, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(*args, EXAMPLE)
    assert code == 0 and err.splitlines() == [f"wirelog: {line}"], err


def test_a_filter_that_matches_is_not_reported():
    code, out, err = run_cli(
        "convert", EXAMPLE, "--protocol", "lumberjack", "--stream", "0", "--kind", "event"
    )
    assert code == 0 and err == "" and len(ndjson(out)) == 9


def test_the_verdict_under_a_filter_says_it_covers_the_whole_capture():
    _, out, _ = run_cli("inspect", EXAMPLE, "--protocol", "cql")
    assert "delivery (lumberjack, whole capture: the filters do not apply): 9 distinct events" in out.decode()
    _, out, _ = run_cli("inspect", EXAMPLE)
    assert "delivery (lumberjack): 9 distinct events" in out.decode()


def test_dumping_a_stream_the_capture_does_not_hold_is_a_usage_error():
    code, out, err = run_cli("streams", EXAMPLE, "--dump", "7")
    assert (code, out) == (2, b"")
    assert err.splitlines() == ["wirelog: --dump 7: no stream 7 in the input (its streams: 0)"]
