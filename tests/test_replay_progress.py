"""`wirelog replay`'s progress bar on a terminal (issue 45, item 4): events acknowledged of those
selected, rate, ETA, on stderr when stderr is a pseudo-terminal; nothing of it when it is a pipe.

The receiver is this suite's Hercules Gate (tests/test_replay_hercules.py), answering each
one-event request after 0.4 s so that the bar is drawn several times while the run goes on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from replay_helpers import replay_cmd, replay_env
from test_replay_hercules import KEY, LOST, capture, gate

from tests.pty_tools import ANSI, on_terminal

__all__ = ["capture"]  # the module-scoped capture fixture, shared


def _replay_on_a_terminal(args: list[str], width: int = 120) -> tuple[int, str, str]:
    """(status, stdout, what stderr's pseudo-terminal showed, escapes removed)."""
    env = {k: v for k, v in replay_env().items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    status, err, out = on_terminal(replay_cmd(*args), width, env, stdout="pipe")
    return status, out.decode(), ANSI.sub(b"", err).decode(errors="replace")


def test_the_bar_shows_acknowledged_of_selected_rate_and_eta(capture: Path, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(KEY)
    with gate(delay=0.4) as server:
        url = f"hercules+http://127.0.0.1:{server.server_address[1]}/?stream=logs_replayed"
        code, out, shown = _replay_on_a_terminal([str(capture), "--to", url, "--api-key-file", str(key),
                                                  "--journal", str(tmp_path / "j"), "--window", "1"])  # fmt: skip
    assert code == 0, shown
    assert len(server.requests) == len(LOST) == 3
    # while the selection is still being read the total is not known: "?"; then it is
    assert "0/? acknowledged" in shown or "1/? acknowledged" in shown, shown
    assert "2/3 acknowledged" in shown or "3/3 acknowledged" in shown, shown
    assert "events/s" in shown
    assert "-:--:--" in shown or "0:00:0" in shown  # rich's ETA column: unknown, then seconds
    assert "replay" in shown
    # the summary is on stdout, not in the bar
    assert "3 selected, 3 sent, 3 acknowledged" in out


def test_no_bar_when_stderr_is_not_a_terminal(capture: Path, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(KEY)
    with gate() as server:
        url = f"hercules+http://127.0.0.1:{server.server_address[1]}/?stream=logs_replayed"
        proc = subprocess.run(replay_cmd(str(capture), "--to", url, "--api-key-file", str(key), "--journal",
                                         str(tmp_path / "j")), capture_output=True, text=True, env=replay_env(),
                              timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
