"""`wirelog replay`: send the never-acknowledged events of a capture to a real receiver, once.

Layers (docs/commands/replay.md): `selection` reads the events to send from captures or wirelog's
own NDJSON/Parquet output; `lumberjack`, `courier` and `hercules` are sans-IO senders (events in,
bytes out; bytes in, acknowledgements out: no socket inside) sharing `resend.Resending` (what a
lost connection left unacknowledged); `journal` remembers what a receiver acknowledged (a text
file, looked up through an on-disk index); `driver` is the thin socket loop that joins them (and
reads the selection ahead in a thread where idle connections are PINGed); `target` parses `--to`.
Nothing here prints: the command (cli/replay.py) does.
"""
