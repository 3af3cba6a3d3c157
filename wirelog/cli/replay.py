"""`wirelog replay`: send the events a pipeline never acknowledged to a real receiver, once.

The only place replay prints: the selection, the senders, the journal and the driver
(wirelog/replay/) say what happened through return values, callbacks and exceptions.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import click

from wirelog.cli.common import Session, error, input_options
from wirelog.cli.params import FiniteRange, parse_time
from wirelog.replay.selection import (
    CLASSES,
    DEFAULT_CLASSES,
    encode,
    ndjson_records,
    parquet_records,
    set_id,
    sniff,
)
from wirelog.replay.selection import select as select_events
from wirelog.replay.target import Target, TargetError, parse_target

EXAMPLES = """
\b
Examples:
  wirelog replay lost.pcap --dry-run                       what would be sent (no socket opened)
  wirelog replay lost.pcap --to lumberjack://logstash:5044
  wirelog replay lost.pcap --to lumberjacks://logstash:5044 --ca ca.pem
  wirelog replay lost.pcap --to courier://carver:5043 --delivery unknown
  WIRELOG_HERCULES_API_KEY=... wirelog replay lost.pcap --to 'hercules+http://gate:6306/?stream=logs'
  wirelog convert lost.pcap --events --to json > review.ndjson   # review, edit, then:
  wirelog replay review.ndjson --to lumberjack://logstash:5044
"""

FAILED = 1  # some selected events were not acknowledged: the receiver refused, reset, stalled...
UNUSABLE = 2
FIRST_EVENTS = 3  # documents shown by --dry-run
API_KEY_ENV = "WIRELOG_HERCULES_API_KEY"
DEFAULT_PIPELINING = {"lumberjack": 2, "courier": 10, "hercules": 1}
MAX_WINDOW = 10_000
# Where each event carries its event_id by default: Beats' Elasticsearch output and the usual
# Logstash `document_id => "%{[@metadata][_id]}"` read @metadata._id; Log Courier's receivers reset
# @metadata on every event they read (lc-lib/event/event.go), so there it is a top-level field.
DEFAULT_ID_FIELD = {"lumberjack": "@metadata._id", "courier": "event_id"}  # go-lumber's MaxWindowSize


class _Refused(Exception):
    """Replay stops before an event it must not send (one line)."""


@dataclass
class Plan:
    """What was selected, per connection of the capture (`--dry-run`, the summary)."""

    selected: int = 0
    already: int = 0  # in the journal: acknowledged by an earlier run
    no_id: int = 0  # documents that could not carry the id field
    bytes: int = 0
    connections: dict[tuple[str, str, Any], list[int]] = field(default_factory=dict)
    first: list[Any] = field(default_factory=list)
    complete: bool = False  # the selection was read to its end


@click.command(epilog=EXAMPLES)
@input_options
@click.option("--to", "to", metavar="URL", help="Receiver: lumberjack[s]://HOST:PORT, courier[s]://HOST:PORT, "
              "hercules+http[s]://HOST:PORT/?stream=NAME. Nothing is sent without it.")  # fmt: skip
@click.option(
    "--delivery",
    "classes",
    multiple=True,
    type=click.Choice(CLASSES),
    help="Send the events of this delivery class (repeatable; default never_acknowledged).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be sent; open no socket.")
@click.option("--journal", "journal_path", metavar="FILE",
              help="File of the event ids the receiver acknowledged (default: beside the first input).")  # fmt: skip
@click.option("--id-field", default=None, metavar="PATH",
              help="Dotted path where each event carries its event_id, unless it has one there (default "
              "@metadata._id; event_id for Log Courier, whose receivers drop @metadata).")  # fmt: skip
@click.option("--no-id", is_flag=True, help="Send the documents without the id field.")
@click.option("--window", type=click.IntRange(1, MAX_WINDOW), default=2048, show_default=True,
              help="Events per window/payload (1 to 10000; Filebeat's bulk_max_size).")  # fmt: skip
@click.option("--compression-level", type=click.IntRange(0, 9), default=3, show_default=True,
              help="Lumberjack zlib level (0: plain J frames); Log Courier always uses 3.")  # fmt: skip
@click.option("--pipelining", type=click.IntRange(1, 64), default=None,
              help="Windows awaiting their ACK at once (1 to 64; default 2 for Lumberjack, 10 for Log Courier).")  # fmt: skip
@click.option("--timeout", type=FiniteRange(0.01, 3600), default=30.0, show_default=True,
              help="Seconds without a byte from the receiver before a connection counts as stalled (0.01 to 3600).")  # fmt: skip
@click.option("--retries", type=click.IntRange(0, 1000), default=3, show_default=True,
              help="Connections in a row that may fail before the run gives up (0 to 1000).")  # fmt: skip
@click.option("--backoff", type=FiniteRange(0, 600), default=1.0, show_default=True,
              help="Seconds before the first reconnection, doubling up to 60 (0 to 600).")  # fmt: skip
@click.option(
    "--ca",
    type=click.Path(exists=True, dir_okay=False),
    help="TLS: CA certificates (PEM) to check the receiver with.",
)
@click.option("--cert", type=click.Path(exists=True, dir_okay=False), help="TLS: client certificate (PEM).")
@click.option("--key", type=click.Path(exists=True, dir_okay=False), help="TLS: client key (PEM).")
@click.option("--api-key-file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help=f"Hercules: the Gate's API key, read from FILE (else ${API_KEY_ENV}; never an argument).")  # fmt: skip
@click.option("--allow-plaintext", is_flag=True,
              help="Send events of TLS streams in plaintext to a host that is not this machine.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON object on stdout.")
@click.pass_context
def replay(ctx, to, classes, dry_run, journal_path, id_field, no_id, window, compression_level, pipelining,
           timeout, retries, backoff, ca, cert, key, api_key_file, allow_plaintext, as_json, **params):  # fmt: skip
    """Send the events of CAPTURE... that were never acknowledged to a receiver, once each.

    CAPTURE... are captures (every input option and filter of inspect applies) or wirelog's own
    NDJSON/Parquet output. Each event carries its event_id (--id-field); a journal records what the
    receiver acknowledged, so a rerun never sends it again. Exit status: 0 every selected event
    acknowledged (now or by an earlier run), 1 some were not (the receiver refused, reset, stalled
    or never acknowledged), 2 usage error or no input could be read (docs/commands/replay.md).
    """
    if not to and not dry_run:
        raise click.UsageError("nothing is sent without --to URL (or see what would be with --dry-run)")
    target = None
    if to:
        try:
            target = parse_target(to)
        except TargetError as e:
            raise click.BadParameter(str(e), param_hint="--to") from None
        if not target.tls and (ca or cert or key):
            raise click.UsageError(f"--ca/--cert/--key are for TLS: use {_tls_scheme(to)}")
    api_key = None
    if target is not None and target.protocol == "hercules":
        if id_field is not None:
            raise click.UsageError("--id-field: a Hercules event's id is its UUID, sent as captured")
        no_id = True  # the UUID is the id: nothing is added to the payload
        if not dry_run:
            api_key = _api_key(api_key_file)
    elif api_key_file:
        raise click.UsageError("--api-key-file is for hercules+http(s):// targets")
    if key and not cert:
        raise click.UsageError("--key goes with --cert")
    if id_field is None:
        id_field = DEFAULT_ID_FIELD.get(target.protocol if target else "", "@metadata._id")
    id_path = None if no_id else tuple(id_field.split("."))
    if id_path is not None and not all(id_path):
        raise click.BadParameter(f"{id_field!r} is not a dotted path", param_hint="--id-field")
    params["events"] = True  # only records that carry a document
    # a Gate gets the events from captures as captured, byte for byte
    session = Session(
        params, records="ndjson", event_bytes=target is not None and target.protocol == "hercules"
    )
    paths = list(session.paths)
    journal = _journal(journal_path, paths, target, dry_run)
    plan = Plan()
    records = _records(session, paths, params)
    chosen = select_events(
        records, frozenset(classes) or DEFAULT_CLASSES, streams=frozenset(params["streams"])
    )
    items = _items(chosen, plan, journal, id_path, target, allow_plaintext)
    if dry_run:
        code = _dry_run(items, plan, target, as_json, session)
        ctx.exit(code)
    ctx.exit(_send(items, plan, target, journal, session, as_json, window, compression_level,
                   pipelining, timeout, retries, backoff, ca, cert, key, api_key))  # fmt: skip


def _tls_scheme(url: str) -> str:
    scheme = url.split(":", 1)[0]
    return {
        "lumberjack": "lumberjacks://",
        "courier": "couriers://",
        "hercules+http": "hercules+https://",
    }.get(scheme, "a TLS scheme")


def _api_key(path: str | None) -> str:
    """The Gate's API key: from --api-key-file, else the environment; never from an argument (the
    process list shows arguments to every user of the machine)."""
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                key = f.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise click.UsageError(f"{path}: {getattr(e, 'strerror', None) or e} (--api-key-file)") from None
        where = path
    else:
        key = os.environ.get(API_KEY_ENV, "").strip()
        where = API_KEY_ENV
        if not key:
            raise click.UsageError(f"the Gate needs an API key: --api-key-file FILE, or ${API_KEY_ENV}")
    if not key or not all(32 < ord(c) < 127 for c in key):
        raise click.UsageError(f"{where}: the API key is empty or not one line of printable ASCII")
    return key


def _journal(path: str | None, inputs: list[str], target: Target | None, dry_run: bool):
    from wirelog.replay.journal import Journal, JournalError

    if path is None:
        if target is None:
            return None
        local = [p for p in inputs if p != "-" and "://" not in p]
        if not local:
            raise click.UsageError("name the journal with --journal FILE (the input is not a local file)")
        name = f"{target.protocol}-{target.host}-{target.port}" + (
            f"-{target.stream}" if target.stream else ""
        )
        where = re.sub(r"[^0-9A-Za-z.-]", "_", name)
        path = f"{local[0]}.replay-{where}.journal"
    try:
        journal = Journal(path, target.url if target else "")
        if not dry_run:
            journal.open()
    except JournalError as e:
        raise click.UsageError(str(e)) from None
    return journal


def _records(session: Session, paths: list[str], params: dict) -> Iterator[dict]:
    """Records of every input, in order: captures through the core (filtered there), wirelog's
    NDJSON and Parquet read here (filtered by _keep)."""
    keep = _file_filter(params)
    for path in paths:
        kind = sniff(path)
        if kind == "capture":
            for item in session.items([path], raw=False):
                data = getattr(item, "data", None)
                if data is not None:
                    yield from ndjson_records([bytes(data)])
            continue
        try:
            rows = parquet_records(path) if kind == "parquet" else ndjson_records(_chunks(path))
            yield from (r for r in rows if keep(r))
        except (OSError, ValueError) as e:
            session.failed += 1
            error(f"{path}: {getattr(e, 'strerror', None) or e}")
    if session.raw:
        for item in session.items([], raw=True):
            data = getattr(item, "data", None)
            if data is not None:
                yield from ndjson_records([bytes(data)])


def _chunks(path: str, size: int = 1 << 20) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def _file_filter(params: dict):
    protocols, streams = frozenset(params["protocols"]), frozenset(params["streams"])
    since, until = parse_time(params["since"], "--since"), parse_time(params["until"], "--until")

    def keep(r: dict) -> bool:
        if protocols and r.get("protocol") not in protocols:
            return False
        if streams and r.get("stream") not in streams:
            return False
        if since is not None or until is not None:
            ts = _ns(r.get("ts"))
            if ts is None or (since is not None and ts < since) or (until is not None and ts >= until):
                return False
        return True

    return keep


def _ns(ts: Any) -> int | None:
    if not isinstance(ts, str):
        return None
    try:
        return parse_time(ts, "ts")
    except click.BadParameter:
        return None


def _items(chosen, plan: Plan, journal, id_path, target: Target | None, allow_plaintext: bool):
    """(event_id, encoded document) of each event to send; counts what was selected."""
    guard = target is not None and not target.tls and not allow_plaintext and not target.loopback
    acked = journal if journal is not None and len(journal) else frozenset()  # (no lookup when empty)
    hercules = target is not None and target.protocol == "hercules"
    if hercules:
        from wirelog.replay.hercules import MAX_EVENT, EncodeError, encode_event
    metadata = id_path == ("@metadata", "_id")
    conn_key, conn = None, [0, 0]
    for ev in chosen:  # type: Selected
        plan.selected += 1
        key, doc = ev.key, ev.doc
        if key in acked:
            plan.already += 1
            continue
        if guard and ev.tls:
            raise _Refused(
                f"{ev.capture}: stream {ev.stream} was TLS; not sending its events in plaintext to "
                f"{target.where()} (use {_tls_scheme(target.url)}, or --allow-plaintext)"
            )
        if metadata and type(doc) is dict and type(meta := doc.get("@metadata")) is dict:
            meta.setdefault("_id", key)  # the usual case, without the general walk
        elif id_path is not None and not set_id(doc, id_path, key):
            plan.no_id += 1
        if hercules:
            if ev.header is None:
                raise _Refused(
                    f"{ev.capture}: stream {ev.stream} is {ev.protocol or 'not Hercules'}: "
                    f"{target.url.split(':', 1)[0]}:// sends Hercules events only (--protocol hercules)"
                )
            try:
                payload = ev.raw if ev.raw is not None else encode_event(*ev.header, doc)
            except EncodeError as e:
                raise _Refused(
                    f"{ev.capture}: stream {ev.stream}: event {key}: not a Hercules event: {e}"
                ) from None
            if len(payload) > MAX_EVENT:
                raise _Refused(f"{ev.capture}: stream {ev.stream}: event {key}: {len(payload)} bytes, over the "
                               f"Gate's {MAX_EVENT}-byte limit per event")  # fmt: skip
        else:
            payload = encode(doc)
        size = len(payload)
        plan.bytes += size
        where = (ev.capture, ev.protocol, ev.stream)
        if where != conn_key:
            conn_key, conn = where, plan.connections.setdefault(where, [0, 0])
        conn[0] += 1
        conn[1] += size
        if len(plan.first) < FIRST_EVENTS:
            plan.first.append(doc)
        yield key, payload
    plan.complete = True


def _input_status(session: Session) -> int:
    from wirelog.cli.common import exit_code

    if session.captures:
        return exit_code(session)
    return UNUSABLE if session.failed else 0


def _dry_run(items, plan: Plan, target: Target | None, as_json: bool, session: Session) -> int:
    try:
        for _ in items:
            pass
    except _Refused as e:
        error(str(e))
        return UNUSABLE
    code = _input_status(session)
    summary = {
        "dry_run": True,
        "to": target.url if target else None,
        "selected": plan.selected,
        "already_in_journal": plan.already,
        "would_send": plan.selected - plan.already,
        "bytes": plan.bytes,
        "connections": [
            {"capture": c, "protocol": p, "stream": s, "events": n, "bytes": b}
            for (c, p, s), (n, b) in plan.connections.items()
        ],
        "first_events": plan.first,
    }
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False))
        return code
    dest = f" to {target.url}" if target else ""
    click.echo(f"dry run: would send {summary['would_send']} events ({plan.bytes} bytes of documents){dest}; "
               f"{plan.selected} selected, {plan.already} already acknowledged (journal)")  # fmt: skip
    for (c, p, s), (n, b) in plan.connections.items():
        click.echo(f"  {c} stream {s} ({p}): {n} events, {b} bytes")
    for doc in plan.first:
        click.echo(f"  first: {json.dumps(doc, ensure_ascii=False)[:400]}")
    return code


def _send(items, plan: Plan, target: Target, journal, session: Session, as_json: bool, window: int,
          level: int, pipelining: int | None, timeout: float, retries: int, backoff: float,
          ca, cert, key, api_key: str | None = None) -> int:  # fmt: skip
    from wirelog.replay.driver import Driver, GaveUp, Refused, Settings
    from wirelog.replay.journal import JournalError

    settings = Settings(window=window, timeout=timeout, retries=retries, backoff=backoff, ca=ca, cert=cert,
                        key=key, max_backoff=max(60.0, backoff))  # fmt: skip
    depth = pipelining or DEFAULT_PIPELINING[target.protocol]
    if target.protocol == "lumberjack":
        from wirelog.replay.lumberjack import LumberjackSender

        sender = LumberjackSender(level=level, pipelining=depth)
    elif target.protocol == "hercules":
        from wirelog.replay.hercules import HerculesSender

        sender = HerculesSender(target.host, target.port, target.stream or "", api_key or "")
    else:
        from wirelog.replay.courier import CourierSender

        sender = CourierSender(pipelining=depth)
    started = time.monotonic()
    failure: str | None = None
    code = 0
    with _Progress(plan) as progress:
        driver = Driver(
            sender, target, settings, journal, on_ack=progress.update, on_problem=progress.problem
        )
        try:
            driver.run(items)
        except GaveUp as e:
            failure, code = f"{e}; gave up after {retries + 1} failed connections in a row", FAILED
            _count_rest(items)
        except Refused as e:
            failure, code = f"{e}; stopped (the journal keeps what was acknowledged)", FAILED
            _count_rest(items)
        except _Refused as e:
            failure, code = str(e), UNUSABLE
        except JournalError as e:
            failure, code = str(e), UNUSABLE
        except OSError as e:  # TLS settings that cannot be loaded
            failure, code = f"{target.where()}: {e.strerror or e}", UNUSABLE
        finally:
            try:
                journal.close()
            except JournalError as e:
                failure, code = failure or str(e), code or UNUSABLE
    tally = driver.tally
    elapsed = time.monotonic() - started
    code = code or _input_status(session)
    failed = plan.selected - plan.already - tally.acked if failure else 0
    summary = {
        "to": target.url,
        "selected": plan.selected,
        "sent": tally.sent,
        "resent": tally.resent,
        "acknowledged": tally.acked,
        "already_in_journal": plan.already,
        "failed": failed,
        "selection_complete": plan.complete,
        "connections": tally.connections,
        "bytes": tally.bytes,
        "seconds": round(elapsed, 3),
        "events_per_second": round(tally.acked / elapsed) if elapsed > 0 else None,
        "journal": journal.path,
        "receiver": tally.receiver,
        "problems": tally.problems,
        "error": failure,
        "status": code,
    }
    if failure:
        error(failure)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        rest = "" if plan.complete else " (selection not read to its end)"
        click.echo(
            f"{target.url}: {plan.selected} selected{rest}, {tally.sent} sent, {tally.acked} acknowledged, "
            f"{plan.already} already in the journal, {failed} failed; {tally.connections} connections, "
            f"{elapsed:.2f} s; journal {journal.path}"
        )
    return code


def _count_rest(items) -> None:
    """The rest of the selection, read (not sent) so that the summary counts what failed."""
    try:
        for _ in items:
            pass
    except _Refused:
        pass


class _Progress:
    """Events acknowledged of selected, rate and ETA on a terminal (stderr); nothing otherwise.
    The total is known once the selection was read to its end."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.bar = None
        self.task = None
        self._last = 0.0
        self._tally = None

    def __enter__(self) -> _Progress:
        if sys.stderr.isatty() and os.environ.get("TERM") != "dumb":
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.completed}/{task.fields[of]} acknowledged"),
                                TextColumn("{task.fields[rate]} events/s"), TimeRemainingColumn(),
                                console=Console(stderr=True), transient=True)  # fmt: skip
            self.bar.__enter__()
            self.task = self.bar.add_task("replay", total=None, of="?", rate="-")
            self._start = time.monotonic()
        return self

    def update(self, tally, force: bool = False) -> None:
        if self.bar is None:
            return
        self._tally = tally
        now = time.monotonic()
        if now - self._last < 0.1 and not force:
            return
        self._last = now
        plan = self.plan
        total = plan.selected - plan.already if plan.complete else None
        rate = tally.acked / (now - self._start) if now > self._start else 0
        self.bar.update(self.task, completed=tally.acked, total=total, of=total if total is not None else "?",
                        rate=f"{rate:,.0f}")  # fmt: skip

    def problem(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(f"wirelog: {line}", markup=False, highlight=False)
        else:
            error(line)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            if self._tally is not None:  # the last acknowledgements, and the total once known
                self.update(self._tally, force=True)
            self.bar.__exit__(None, None, None)
