"""`wirelog replay`: send the never-acknowledged events of a capture to a real receiver, once.

Layers (docs/commands/replay.md): `selection` reads the events to send from captures or wirelog's
own NDJSON/Parquet output; `lumberjack` and `courier` are sans-IO senders (events in, bytes out;
bytes in, acknowledgements out: no socket inside); `journal` remembers what a receiver
acknowledged; `driver` is the thin socket loop that joins them; `target` parses `--to`.
Nothing here prints: the command (cli/replay.py) does.
"""
