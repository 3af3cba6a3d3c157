"""The delivery verdict as the records carry it (`event_id`, `delivery`), counted the ways
docs/schema.md tells users to: its named SQL queries, run as written."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO

VERDICT_KEYS = (
    "distinct_events", "delivered", "recovered_by_resend", "delivered_twice", "never_acknowledged",
    "ack_unknown",
)  # fmt: skip


def schema_queries() -> dict[str, str]:
    """docs/schema.md's example queries that start with a `-- name` line, by name."""
    queries: dict[str, list[str]] = {}
    name = None
    for line in (REPO / "docs" / "schema.md").read_text().splitlines():
        if line.startswith("    -- "):
            name = line[7:].strip()
            queries[name] = []
        elif name and (line.startswith("    ") or not line.strip()):
            queries[name].append(line[4:])
        else:
            name = None
    return {n: "\n".join(body).strip() for n, body in queries.items()}


def query(name: str, table: str) -> str:
    """A docs/schema.md query reading `table` (a path or a table name) instead of 'events.parquet'."""
    return schema_queries()[name].replace("'events.parquet'", table).rstrip(";")


VERDICT_QUERY = "the delivery verdict: one row per protocol, the numbers of `inspect --json`'s `delivery`"
LOST_QUERY = "events lost: distinct events never acknowledged, per protocol"


def verdict_of_records(records: list[dict]) -> dict[str, dict[str, int]]:
    """The per-protocol numbers of the verdict from NDJSON records, counted as the verdict query does."""
    classes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r.get("event_id") is not None:
            classes[(r["protocol"], r["event_id"])].add(r["delivery"])
    out: dict[str, dict[str, int]] = {}
    for (protocol, _), seen in classes.items():
        n = out.setdefault(protocol, dict.fromkeys(VERDICT_KEYS, 0))
        n["distinct_events"] += 1
        n["delivered"] += bool(seen & {"delivered", "delivered_twice"})
        n["recovered_by_resend"] += "recovered_by_resend" in seen
        n["delivered_twice"] += "delivered_twice" in seen
        n["never_acknowledged"] += "never_acknowledged" in seen
        n["ack_unknown"] += "unknown" in seen
    return out


def verdict_numbers(delivery: dict) -> dict[str, dict[str, int]]:
    """`inspect --json`'s `delivery`, reduced to the numbers the records reproduce."""
    return {p: {k: v[k] for k in VERDICT_KEYS} for p, v in delivery.items() if v.get("distinct_events")}


def parquet_verdict(path: Path) -> dict[str, dict[str, int]]:
    """The verdict query of docs/schema.md run by DuckDB on a Parquet file."""
    import duckdb

    rows = duckdb.sql(query(VERDICT_QUERY, f"'{path}'")).fetchall()
    return {row[0]: dict(zip(VERDICT_KEYS, row[1:], strict=True)) for row in rows}


def events(path, *args: str) -> list[dict]:
    code, out, err = run_cli("convert", str(path), "--events", "--to", "json", *args)
    assert code == 0, err
    return ndjson(out)


def events_of(path) -> list[dict]:
    """The event records the verdict follows."""
    return [r for r in events(path) if r["event_id"] is not None]


def inspect_verdict(path) -> dict:
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    return verdict_numbers(json.loads(out)["delivery"])


def assert_every_surface_agrees(path, tmp_path) -> dict:
    """The records' count (NDJSON) and docs/schema.md's queries (DuckDB over the Parquet) give
    `inspect --json`'s numbers; returns them."""
    want = inspect_verdict(path)
    records = events(path)
    assert all(r["delivery"] is not None for r in records if r["event_id"] is not None)
    assert verdict_of_records(records) == want
    out = tmp_path / f"{path.name}.parquet"
    code, _, err = run_cli("convert", str(path), "--to", "parquet", "-o", str(out))
    assert code == 0, err
    assert parquet_verdict(out) == want
    import duckdb

    lost = dict(duckdb.sql(query(LOST_QUERY, f"'{out}'")).fetchall())
    assert lost == {p: n["never_acknowledged"] for p, n in want.items() if n["never_acknowledged"]}
    return want
