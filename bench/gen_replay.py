"""wirelog's own NDJSON of N never-acknowledged Filebeat-shaped Lumberjack events: the input of
the replay bench (bench_replay.py) and of the replay speed and memory tests. Events are cut into
captured connections of `window` events, with event ids as the core writes them
(`stream:offset:seq`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_lumberjack import _event as filebeat_event


def write_records(path: Path, n: int, window: int = 2048) -> None:
    with open(path, "wb") as out:
        for i in range(n):
            stream, seq = divmod(i, window)
            out.write(
                b'{"record":"message","capture":"gen.pcap","stream":%d,"protocol":"lumberjack",'
                b'"kind":"event","version":"2","event":%s,"event_id":"%d:6:%d","delivery":"never_acknowledged"}\n'
                % (stream, filebeat_event(i), stream, seq + 1)
            )


def event_ids(n: int, window: int = 2048) -> list[str]:
    """The ids write_records gives its events, in order."""
    return [f"{i // window}:6:{i % window + 1}" for i in range(n)]
