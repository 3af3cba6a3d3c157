"""Text from the wire or the capture reaches the terminal escaped (issue 44, item 3).

Captures whose event messages, host names, Hercules tag keys and stream names, CQL queries and file
names hold Rich markup (`[bold]`, `[link=...]`), an ANSI sequence, NUL and bytes that are not UTF-8
go through `inspect`, `inspect --stream`, `inspect --frame`, `streams` and `validate`: the text
appears literally, control characters as `\\x1b` / `\\x00`, and no raw ESC or NUL reaches stdout.
Record values read as people read them: no Python reprs, absent fields left out, yes/no, durations
in ms with the unit, one time format.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from tests.capture_tools import run_cli
from tests.cql_wire import envelope
from tests.fault_helpers import EXAMPLE, WIRELOG
from tests.hercules_codec import Event, Type, Variant, encode_batch
from tests.lumberjack_helpers import ack, dframe, jframe, window
from tests.pcap_helpers import tcp_conversation, write_pcap
from tests.pty_tools import ANSI, on_terminal

HOSTILE = "[bold]B[/bold] [link=http://x]L[/link] \x1b[31mRED\x00NUL"
SHOWN = r"[bold]B[/bold] [link=http://x]L[/link] \x1b[31mRED\x00NUL"  # as the terminal shows it
STREAM = "st[bold]\x1b[31m[x]"
STREAM_SHOWN = r"st[bold]\x1b[31m[x]"
# a file name that would switch the terminal to line drawing and set its title (no glob characters)
NAME = "cap\x1b(0q\x1b]0;pwned\x07.pcap"
NAME_SHOWN = r"cap\x1b(0q\x1b]0;pwned\x07.pcap"


def _lstr(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


@pytest.fixture(scope="module")
def caps(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    lj = window(2) + jframe(1, {"message": HOSTILE, "host": {"name": HOSTILE}})
    lj += jframe(2, b'{"message":"bad \xff\xfe utf8 \x1b[2J"}')
    write_pcap(d / "lj.pcap", tcp_conversation([("c", lj), ("s", ack(2))]))
    v1 = window(1, "1") + dframe(1, [(b"host", HOSTILE.encode() + b"\xff"), (b"line", b"x\x1b]0;t\x07")], "1")
    write_pcap(d / "lj1.pcap", tcp_conversation([("c", v1), ("s", ack(1, "1"))]))
    tags = (
        (HOSTILE, Variant(Type.STRING, HOSTILE)),
        (b"k\xff\x1b[1m", Variant(Type.STRING, b"v\xff\x1b[2J")),
    )
    body = encode_batch([Event(1, 15_276_799_200_000_000, bytes(range(16)), tags)])
    head = (
        f"POST /stream/send?stream={STREAM.replace('[', '%5B').replace(chr(27), '%1B')} HTTP/1.1\r\n"
        f"Host: g\r\nContent-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    turns = [("c", head.encode() + body), ("s", resp)]
    write_pcap(d / "herc.pcap", tcp_conversation(turns, server=("10.1.0.9", 6306)))
    startup = envelope(4, False, 0, 0, 0x01, b"\x00\x01" + b"\x00\x0bCQL_VERSION" + b"\x00\x053.0.0")
    query = envelope(
        4, False, 0, 1, 0x07, _lstr(b"SELECT '" + HOSTILE.encode() + b"\xff' FROM t") + b"\x00\x01\x00"
    )
    turns = [
        ("c", startup),
        ("s", envelope(4, True, 0, 0, 0x02, b"")),
        ("c", query),
        ("s", envelope(4, True, 0, 1, 0x08, struct.pack(">i", 1))),
    ]
    write_pcap(d / "cql.pcap", tcp_conversation(turns, server=("10.1.0.9", 9042)))
    shutil.copy(d / "lj.pcap", d / NAME)
    return {"dir": d, **{p.stem: p for p in d.iterdir()}, "named": d / NAME}


def run(*args: str) -> str:
    code, out, err = run_cli(*args)
    assert code in (0, 1), err  # validate: 1 when an error-level finding exists
    assert b"\x1b" not in out and b"\x00" not in out and b"\x07" not in out
    return out.decode()  # strict: no byte that is not UTF-8 reached stdout


CASES = [
    # (command, capture, texts that must appear as they are)
    (["inspect"], "herc", ["(non-empty, [a-zA-Z0-9_.-])", f"gate streams: {STREAM_SHOWN} 1", f"'{SHOWN}'"]),
    (["inspect", "--stream", "0"], "herc", [f"stream_name={STREAM_SHOWN}", "(non-empty, [a-zA-Z0-9_.-])"]),
    (["inspect", "--stream", "0"], "cql", [f"QUERY SELECT '{SHOWN}"]),  # its Info (cut at 80)
    (["inspect", "--frame", "3"], "lj", [f"message: {SHOWN}", f"name: {SHOWN}", r"utf8 \x1b[2J"]),
    (["inspect", "--frame", "3"], "lj1", [f"host: {SHOWN}\ufffd", r"line: x\x1b]0;t\x07"]),
    (["inspect", "--frame", "3"], "herc", [f"{SHOWN}: {SHOWN}", "k\ufffd\\x1b[1m: v\ufffd\\x1b[2J"]),
    (["inspect", "--frame", "5"], "cql", [f"query: SELECT '{SHOWN}\ufffd' FROM t"]),
    (["validate"], "herc", ["(non-empty, [a-zA-Z0-9_.-])", f"'{SHOWN}'"]),
    (["validate"], "named", [f"{NAME_SHOWN} stream 0 frame 3"]),
    (["streams"], "named+lj", [NAME_SHOWN]),
    (["inspect"], "named+lj", [NAME_SHOWN, f"{NAME_SHOWN}:0"]),
]


@pytest.mark.parametrize(
    ("args", "which", "texts"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_wire_and_capture_text_is_shown_escaped(caps, args, which, texts):
    paths = [str(caps[name]) for name in which.split("+")]
    out = run(*args, *paths)
    text = " ".join(out.split())  # a long cell may wrap; the words stay in order
    for expected in texts:
        assert " ".join(expected.split()) in text, (expected, out)


def test_a_terminal_gets_no_raw_control_sequence_from_the_wire(caps):
    """On a pseudo-terminal rich styles the output itself, but the wire's ESC sequences, its
    [link=...] (an OSC 8 hyperlink) and its NUL never reach the terminal raw."""
    for args in (["inspect", "--frame", "3", str(caps["lj"])], ["inspect", str(caps["herc"])]):
        out = _in_a_terminal(args, 120)
        assert b"\x1b[31mRED" not in out and b"\x1b]8;" not in out and b"\x00" not in out
        assert b"\x1b(0" not in out and b"\x07" not in out
        shown = ANSI.sub(b"", out).decode()
        assert r"\x1b[31mRED\x00NUL" in shown and "[bold]B[/bold]" in shown


def _in_a_terminal(args: list[str], width: int, columns: int | None = None, stderr: bool = True) -> bytes:
    """What wirelog writes on a pseudo-terminal of `width` columns (and stderr there too, with
    `stderr`: its progress line), COLUMNS set to `columns` or unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    status, out, _ = on_terminal([*WIRELOG, *args], width, env, stderr="terminal" if stderr else "null")
    assert status == 0
    return out


def test_frame_fields_are_human_values_not_reprs():
    out = run("inspect", str(EXAMPLE), "--frame", "8")
    for repr_text in ("<Direction", "None", "False", "True", "'"):
        assert repr_text not in out, out
    lines = {line.strip() for line in out.splitlines()}
    assert {
        "direction: s2c",
        "keepalive: no",
        "client: 127.0.0.1:56466",
        "interpretation: count=highest-seq",
    } <= lines
    assert not any(
        line.startswith(("event:", "event_id:", "delivery:")) for line in lines
    )  # absent: left out


def test_an_events_frame_says_its_ack_and_document_in_words():
    out = run("inspect", str(EXAMPLE), "--frame", "6")
    lines = [line.strip() for line in out.splitlines()]
    assert "acked: yes" in lines and "compressed: yes" in lines and "delivery: delivered" in lines
    assert not any(re.search(r"\b(None|True|False)\b", line) for line in lines)


def test_stream_details_leave_absent_fields_out_and_say_yes_or_no():
    out = run("inspect", str(EXAMPLE), "--stream", "0")
    assert not re.search(r"\b(None|True|False)\b", out)
    assert "[acked at frame 8]" in out and "keep-alive ACK, 1042.015 ms after the last" in out
    assert "acks_lost=no" in out  # a message without an Info of its own: its fields, in words


def test_durations_are_ms_with_the_unit_and_times_have_one_format(caps):
    out = run("inspect", str(caps["cql"]), "--stream", "0")
    assert "→ RESULT void, 1.000 ms" in out and "latency_ns" not in out and "1000000" not in out
    out = run("inspect", str(caps["herc"]), "--frame", "3")
    assert "time: 2018-05-30T11:32:00.000000000Z" in out  # as ts: nine digits (the record has seven)
    assert "2018-05-30T11:32:00.0000000Z" not in out and "15276799200000000" not in out
    out = run("inspect", str(EXAMPLE))
    assert "keepalive max interval: 1042.015 ms" in out and "ack latency p50: 0.274 ms" in out
    assert "_ms" not in out and "server kinds: highest-seq 1" in out


def test_clean_escapes_every_control_and_undecodable_byte():
    from wirelog.cli.text import clean, literal

    assert clean("a\x1b[1mb\x00c\x7f\x9bd") == r"a\x1b[1mb\x00c\x7f\x9bd"
    assert clean("line\nnext\ttab\r") == r"line\nnext\ttab\r"
    assert clean(b"n\xffx".decode("utf-8", "surrogateescape")) == r"n\xffx"
    assert clean("abc\u202edef\u2028") == r"abc\u202edef\u2028"  # bidi override, line separator
    assert clean("été [b] \\ ok") == "été [b] \\ ok"
    assert literal("[bold]x[/bold]").plain == "[bold]x[/bold]" and not literal("[bold]x").spans


def test_human_values():
    from wirelog.cli.text import human_value

    assert human_value("keepalive", False) == ("keepalive", "no")
    assert human_value("window", None) is None and human_value("options", {}) is None
    assert human_value("latency_ns", 371_000, "cql") == ("latency", "0.371 ms")
    assert human_value("interval_s", 3, "courier") == ("interval", "3000 ms")
    assert human_value("interval_ms", 1002) == ("interval", "1002 ms")
    assert human_value("timestamp", 1_700_000_000_000_000, "cql") == (
        "timestamp",
        "2023-11-14T22:13:20.000000000Z",
    )
