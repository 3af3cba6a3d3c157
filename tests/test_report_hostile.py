"""`wirelog report` on hostile input: the page is safe and bounded (issue 44, item 5).

Every text from the wire or the capture's name reaches the page through the JSON data island
(`< > &` U+2028 U+2029 and non-ASCII as \\u escapes) or as escaped HTML text: no byte sequence in a
Gate stream name, a Hercules tag key, an event's message, a CQL query or the file name can end an
element early, start a script, or stop a chart from being drawn. A real Chromium loads the page and
says so. And the page does not grow with the number of connections: the stream list is folded.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture_tools import run_cli
from tests.hercules_codec import Event, Type, Variant, encode_batch
from tests.lumberjack_helpers import jframe, window
from tests.pcap_helpers import tcp_conversation, write_pcap
from tests.test_report import CHROMIUM, OFFLINE, report

pytest.importorskip("vl_convert")

PWN = "window.pwned=1;document.title='pwned'"
# Each would end the data island, start a script or an element if it reached the page as markup.
HOSTILE: list[bytes] = [
    b"<!--<script>",
    b"<!--<script>" + PWN.encode() + b"</script>",
    b"</script><script>" + PWN.encode() + b"</script>",
    b"<img/src=x/onerror=" + PWN.encode() + b">",
    b"<svg/onload=" + PWN.encode() + b">",
    "\u2028\u2029".encode(),
    b"\x00nul\x1b[31m",
    b"\xff\xfe\xc3(not-utf-8",
    b"&lt;&#x3C;script&gt;]]>",
]
# Linux file names take any byte but NUL and '/' (a name that is not UTF-8: test_non_utf8_file_name).
FILE_NAME = b"<!--<script>\xe2\x80\xa8\xe2\x80\xa9\x1b<svg onload=window.pwned=1>&amp;.pcap"


def _gate(i: int, name: bytes) -> list[tuple[str, bytes]]:
    """A Gate request to stream `name` carrying an event whose tag key and value are `name`, and
    the Gate's answer."""
    event = Event(1, 15_276_799_200_000_000, bytes(range(16)), ((name, Variant(Type.STRING, name)),))
    body = encode_batch([event])
    url = b"/stream/send?stream=" + name.replace(b" ", b"%20")
    request = (
        b"POST " + url + b" HTTP/1.1\r\nHost: gate\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    return [("c", request), ("s", answer)]


def _cql(query: bytes) -> list[tuple[str, bytes]]:
    """CQL v4: STARTUP, READY, a QUERY of `query`, its RESULT (Void)."""

    def envelope(response: bool, stream: int, opcode: int, body: bytes) -> bytes:
        return struct.pack(">BBhBI", 4 | (0x80 if response else 0), 0, stream, opcode, len(body)) + body

    startup = struct.pack(">H", 1) + b"".join(
        struct.pack(">H", len(s)) + s for s in (b"CQL_VERSION", b"3.0.0")
    )
    body = struct.pack(">I", len(query)) + query + struct.pack(">HB", 1, 0)
    return [
        ("c", envelope(False, 0, 0x01, startup)),
        ("s", envelope(True, 0, 0x02, b"")),
        ("c", envelope(False, 1, 0x07, body)),
        ("s", envelope(True, 1, 0x08, struct.pack(">i", 1))),
    ]


def hostile_capture(path: Path) -> Path:
    """A Gate session, a Lumberjack connection (events never acknowledged) and a CQL session per
    hostile string."""
    frames = []
    for i, text in enumerate(HOSTILE):
        client = f"10.9.{i}.1"
        frames += tcp_conversation(_gate(i, text), client=(client, 41000), server=("10.8.0.1", 6306))
        event = b'{"message":"' + text.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"}'
        turns = [("c", window(2) + jframe(1, event) + jframe(2, {"message": text.decode("latin-1")}))]
        frames += tcp_conversation(turns, client=(client, 42000), server=("10.8.0.2", 5044))
        frames += tcp_conversation(_cql(b"SELECT '" + text + b"' FROM ks.t"), client=(client, 43000),
                                   server=("10.8.0.3", 9042))  # fmt: skip
    return write_pcap(path, frames)


def test_hostile_text_stays_text_in_the_data_and_the_markup(tmp_path):
    pcap = hostile_capture(tmp_path / os.fsdecode(FILE_NAME))
    text, data = report(tmp_path, str(pcap))
    island = re.search(r'<script type="application/json" id="wirelog-data">(.*?)</script>', text, re.S)
    assert island and island[1].isascii()
    assert not re.search(r"[<>&\u2028\u2029]", island[1])
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", text, flags=re.S)
    assert markup.count("<script") == 3 and "<svg" not in markup and "<img" not in markup
    assert "\x00" not in text and "\u2028" not in text and "\x1b" not in text
    text.encode("utf-8")  # no lone surrogate from the bytes that were not UTF-8
    # what the peers sent is there to read: as data and as escaped text
    gate = data["inspect"]["protocols"]["hercules"]["gate_streams"]
    assert "<!--<script>" in gate and "</script><script>" + PWN + "</script>" in gate
    assert "&lt;!--&lt;script&gt;" in markup and "\\x00nul\\x1b[31m" in markup
    assert os.fsdecode(FILE_NAME) in data["inspect"]["captures"][0]["capture"]


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (make test installs it where apt-get can)"
)
def test_chromium_draws_every_chart_and_runs_no_injected_script(tmp_path):
    pcap = hostile_capture(tmp_path / os.fsdecode(FILE_NAME))
    text, data = report(tmp_path, str(pcap))
    assert {"timeline", "gate_streams", "delivery", "events"} <= set(data["charts"])
    # The page as written, plus a probe run last (and again after a second: an element's onerror
    # or onload fires later) that writes what an injected script would have changed into the DOM.
    probe = (
        "<script>function probe(){document.body.dataset.pwned=String(window.pwned);"
        "document.body.dataset.title=document.title;}probe();setTimeout(probe,1000);</script>"
    )
    page = tmp_path / "probed.html"
    head, end, tail = text.rpartition("</body></html>")  # the last: the Vega bundle holds one too
    page.write_text(head + probe + end + tail, encoding="utf-8")
    dom = subprocess.run(
        [CHROMIUM, *OFFLINE, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert [line for line in dom.stderr.splitlines() if ":CONSOLE" in line] == []
    out = dom.stdout
    rendered = re.findall(r'id="chart-(\w+)"[^>]*data-rendered="true"', out)
    assert sorted(rendered) == sorted(data["charts"]) and 'class="chart-error"' not in out
    for name in data["charts"]:  # each chart drew its own marks: an SVG, or the timeline's canvas
        drawn = re.search(
            rf'id="chart-{name}"[^>]*>(.*?)</div>\s*(?:<div class="chart"|<h2|<script|<p)', out, re.S
        )
        assert drawn and ("<canvas" if name == "timeline" else "<svg") in drawn[1], name
    assert 'data-pwned="undefined"' in out and 'data-title="wirelog report"' in out
    assert "<title>wirelog report</title>" in out
    body = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", out, flags=re.S)
    assert body.count("<script") == 4  # the Vega bundle, the data island, the page's, the probe
    assert "<img" not in body and not re.search(r"<[a-zA-Z][^>]*\son\w+=", body)  # no handler either
    assert "&lt;!--&lt;script&gt;" in body  # the hostile texts are shown, as text


def test_non_utf8_file_name(tmp_path):
    pcap = hostile_capture(tmp_path / os.fsdecode(b"\xff<!--<script>.pcap"))
    text, _ = report(tmp_path, str(pcap))
    assert "\\xff&lt;!--&lt;script&gt;" in text


def _page_size(tmp_path: Path, connections: int) -> tuple[int, dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from gen_capture import short

    pcap = tmp_path / f"short{connections}.pcap"
    short(str(pcap), connections)
    text, data = report(tmp_path, str(pcap), name=f"short{connections}.html")
    return len(text.encode()), data


def test_the_page_does_not_grow_with_the_connections(tmp_path):
    """2,000 and 20,000 short connections: the same bounded list of streams, the rest counted with
    the command that lists them; the page grows by the series' bins only."""
    small, a = _page_size(tmp_path, 2000)
    big, b = _page_size(tmp_path, 20_000)
    for data, n in ((a, 2000), (b, 20_000)):
        s = data["inspect"]
        assert s["totals"]["streams"] == n and len(s["streams"]) == 100
        assert s["streams_folded"]["streams"] == n - 100
        assert s["streams_folded"]["command"].startswith("wirelog streams --json ")
        assert s["stream_protocols"] == {"unknown": n}
    assert big < small * 1.5 and big < 2 * 1024 * 1024, (small, big)


def test_the_runs_memory_stays_flat_when_the_connections_double(tmp_path):
    """100,000 and 200,000 short connections: the report's peak RSS grows by less than 6 MiB (it
    rose by 28 MiB from 50,000 to 200,000 while each stream stayed a few numbers until the input
    ended; reassembly's own state stops growing by ~75,000 connections of this shape)."""
    from tests.fault_helpers import measured

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from gen_capture import short

    peaks = {}
    for n in (100_000, 200_000):
        pcap = tmp_path / f"short{n}.pcap"
        short(str(pcap), n)
        status, peaks[n], _ = measured("report", str(pcap), "-o", str(tmp_path / f"{n}.html"))
        assert status == 0
        pcap.unlink()
    assert peaks[200_000] - peaks[100_000] < 6 << 20, peaks


def test_the_command_of_the_folded_streams_lists_them(tmp_path):
    """The folded line's command, run, lists every stream."""
    _, data = _page_size(tmp_path, 300)
    words = data["inspect"]["streams_folded"]["command"].split()
    assert words[:3] == ["wirelog", "streams", "--json"]
    code, out, err = run_cli(*words[1:])
    assert code == 0, err
    assert len([line for line in out.splitlines() if json.loads(line).get("stream") is not None]) == 300


def test_the_worst_streams_are_the_rows_whatever_their_place(tmp_path):
    """150 Lumberjack connections, all acknowledged but the last three, whose events are never
    acknowledged (their fate is known only when the input ends, after their stream summaries): the
    three are the first rows, most never-acknowledged events first, and the others are counted."""
    from tests.lumberjack_helpers import ack
    from tests.test_inspect_delivery import batch, connections

    conns = [[("c", batch(1, 2)), ("s", ack(2))] for _ in range(147)]
    conns += [[("c", batch(1, n))] for n in (1, 3, 2)]
    pcap = connections(tmp_path / "lost.pcap", conns)
    _, data = report(tmp_path, str(pcap))
    s = data["inspect"]
    assert [(r["stream"], r["unacked"]) for r in s["streams"][:3]] == [(148, 3), (149, 2), (147, 1)]
    assert len(s["streams"]) == 100 and s["streams_folded"]["streams"] == 50
    assert s["streams_folded"]["unacked"] == 0 and s["totals"]["unacked"] == 6
    assert (
        s["totals"]["events"]
        == 147 * 2 + 6
        == s["streams_folded"]["events"] + sum(r["events"] for r in s["streams"])
    )
