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
CQL_QUERY = "CQL requests by outcome: the numbers of `inspect --json`'s `delivery.cql`"
CQL_KEYS = ("requests", "answered", "error", "unanswered", "unknown")


def cql_outcomes(records: list[dict]) -> dict[str, int]:
    """CQL requests by outcome from NDJSON records, counted as the CQL query does; a response
    carries its request's id and outcome, so its record is checked against the request's."""
    requests = {r["event_id"]: r["delivery"] for r in records if _request(r)}
    for r in records:
        if r.get("protocol") == "cql" and r.get("direction") == "s2c" and r.get("event_id"):
            assert requests[r["event_id"]] == r["delivery"], r
    n = dict.fromkeys(CQL_KEYS, 0)
    n["requests"] = len(requests)
    for outcome in requests.values():
        n[outcome] += 1
    return n


def _request(r: dict) -> bool:
    return r.get("protocol") == "cql" and r.get("direction") == "c2s" and r.get("event_id") is not None


def parquet_cql_outcomes(path: Path) -> dict[str, int]:
    """The CQL query of docs/schema.md run by DuckDB on a Parquet file."""
    import duckdb

    (row,) = duckdb.sql(query(CQL_QUERY, f"'{path}'")).fetchall()
    return dict(zip(CQL_KEYS, row, strict=True))


def verdict_of_records(records: list[dict]) -> dict[str, dict[str, int]]:
    """The per-protocol numbers of the verdict from NDJSON records, counted as the verdict query does."""
    classes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r.get("event_id") is not None and r["protocol"] != "cql":  # (CQL: `cql_outcomes`)
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
    assert_cql_agrees(path, out)
    return want


def assert_cql_agrees(path, parquet: Path) -> dict[str, int] | None:
    """CQL requests by outcome: `inspect --json`, the NDJSON records and docs/schema.md's CQL query
    over `parquet` (the capture's records) give the same numbers; returns them (None: no CQL)."""
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    want = json.loads(out)["delivery"].get("cql")
    code, out, err = run_cli("convert", str(path), "--to", "json")
    assert code == 0, err
    records = ndjson(out)
    if want is None:
        assert not any(_request(r) for r in records)
        return None
    assert cql_outcomes(records) == want
    assert parquet_cql_outcomes(parquet) == want
    return want
