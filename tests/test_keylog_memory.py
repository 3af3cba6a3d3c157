"""TLS key logs cost what their secrets do (issue 41, item 5): a key log of valid lines costs well
under its own size, a line longer than any valid one is refused without being held, bad lines are
reported as other repeated findings are (the first 100, then one summary with their count), and a
key log read in pieces still decrypts."""

from __future__ import annotations

import random
import subprocess
import sys

from lumberjack_helpers import write_capture

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO
from wirelog.model import Direction

EXAMPLE = str(REPO / "examples" / "lumberjack-pylogbeat.pcap")  # no TLS: the key log is all it costs
TLS = REPO / "native" / "src" / "decoders" / "tls" / "testdata"

# The CLI in a process of its own, which says its peak resident set size on stderr when it ends.
PEAK = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
    "from wirelog.cli.main import main\n"
    "main()\n"
)


def peak_kib(*args: str) -> int:
    proc = subprocess.run([sys.executable, "-c", PEAK, *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.split("peak ")[-1])


def test_a_key_log_of_valid_lines_costs_well_under_its_size(tmp_path):
    rng = random.Random(41)
    keys = tmp_path / "keys.log"
    with keys.open("w") as f:  # 300,000 TLS 1.2 lines: 52.8 MB
        for _ in range(300_000):
            f.write(f"CLIENT_RANDOM {rng.randbytes(32).hex()} {rng.randbytes(48).hex()}\n")
    size_kib = keys.stat().st_size // 1024
    cost = peak_kib("inspect", EXAMPLE, "--tls-keylog", str(keys)) - peak_kib("inspect", EXAMPLE)
    assert cost < 0.6 * size_kib, (cost, size_kib)  # 88 bytes a line of 176; the text was 5 times it


def test_a_line_longer_than_any_valid_one_is_refused_without_being_held(tmp_path):
    keys = tmp_path / "keys.log"
    with keys.open("wb") as f:
        f.write(b"CLIENT_RANDOM ")
        for _ in range(100):
            f.write(b"ab" * (1 << 19))  # 100 MiB in one line
        f.write(b"\n")
    cost = peak_kib("inspect", EXAMPLE, "--tls-keylog", str(keys)) - peak_kib("inspect", EXAMPLE)
    assert cost < 16 * 1024, cost
    code, out, _ = run_cli("convert", EXAMPLE, "--tls-keylog", str(keys), "--protocol", "tls")
    (finding,) = ndjson(out)
    assert code == 0 and finding["code"] == "tls.bad-keylog-line" and finding["line"] == 1
    assert "a line of 104857614 bytes, longer than any valid one (at most 1024)" in finding["message"]


def test_bad_lines_are_capped_like_every_other_finding_with_a_final_count(tmp_path):
    keys = tmp_path / "keys.log"
    keys.write_text("CLIENT_RANDOM nothex nothex\n" * 5000)
    code, out, _ = run_cli("convert", EXAMPLE, "--tls-keylog", str(keys), "--protocol", "tls")
    found = ndjson(out)
    assert code == 0 and len(found) == 101 and {f["code"] for f in found} == {"tls.bad-keylog-line"}
    assert found[99]["message"] == f"{keys} line 100: the client random is not 64 hex digits; line ignored"
    assert found[100]["count"] == 5000
    assert found[100]["message"] == (
        "tls.bad-keylog-line occurred 5000 times (only the first 100 are reported individually)"
    )


def test_a_key_log_read_in_pieces_decrypts(tmp_path, monkeypatch):
    """A genuine TLS 1.3 connection of the core's fixtures, its key log fed to the core in 7-byte
    pieces behind a long comment: the plaintext is decoded (as Lumberjack, the port's protocol)."""
    from wirelog.engine import keylogs

    monkeypatch.setattr(keylogs, "READ_SIZE", 7)
    keylogs.core_keylogs.cache_clear()
    lines = (TLS / "tls13-aes128gcm.transcript").read_text().splitlines()
    turns = [(Direction(d), bytes.fromhex(h)) for d, h in (line.split() for line in lines)]
    pcap = str(write_capture(tmp_path / "tls.pcap", turns, port=5044))
    keys = tmp_path / "keys.log"
    keys.write_text("# " + "x" * 5000 + "\n" + (TLS / "tls13-aes128gcm.keylog").read_text())
    for given, decrypted in (((), False), (("--tls-keylog", str(keys)), True)):
        code, out, err = run_cli("convert", pcap, *given)
        records = ndjson(out)
        assert code == 0, err
        assert ("tls.no-key" in {r.get("code") for r in records}) is not decrypted
        assert any(r["protocol"] == "lumberjack" for r in records) is decrypted
    keylogs.core_keylogs.cache_clear()


def test_the_core_keeps_one_entry_per_valid_line():
    from wirelog import _core

    text = b"".join(
        b"%s %s %s\n" % (label, bytes([n]).hex().encode() * 32, b"11" * 48)
        for n in range(3)
        for label in (b"CLIENT_RANDOM", b"EXPORTER_SECRET")
    )
    assert len(_core.KeyLogs([("k", iter([text[:5], text[5:]]))])) == 3
