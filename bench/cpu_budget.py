"""The CPU budget per change (issue 30): where one row change's CPU goes, part by part.

Built from figures the same ``bench/run`` measured on the same binlog range:

- ``mariadb``: the MariaDB server's CPU during the e2e run (``/proc/<mariadbd>/stat``):
  serving the binlog dumps (the executors' reads and the planner's paging for batch ends);
- ``decode``: the fast decoder filling Arrow change batches in the bench process, what an
  executor's decode task runs: ``decode.landed`` (``engine.landing.land_range``, decode +
  Parquet) minus ``parquet`` (results without it: ``decode.columnar``, the decode alone,
  which runs first on a cold range and reads ~10% higher);
- ``parquet``: writing those batches as the landing zone's zstd Parquet files, as
  ``engine.landing.land_range`` does, timed alone (``decode.parquet``; results without it:
  ``decode.landed`` - ``decode.columnar``, within the noise of the two runs);
- ``spark_python``: the run's Spark Python processes (pyspark.daemon and its forked decode
  workers, the data source's planner, the streaming source runner) minus decode and parquet:
  their start-up, planning and transport;
- ``jvm``: the Spark JVM (driver-side Spark: session, streaming query, micro-batch planning,
  the manifest rows);
- ``apply``: the driver process's CPU inside ``foreachBatch`` after the Spark read
  (``BatchReport.cpu_seconds``, every thread): reading the manifest, staging and MERGE. On
  DuckDB the warehouse runs in this process, so this *is* the warehouse's CPU plus the Python
  around it; on fakesnow it is the connector's side (Parquet, PUT, COPY, statements);
- ``warehouse``: a warehouse in a process of its own (fakesnow's HTTP server + DuckDB);
- ``driver_rest``: the rest of the driver process (interpreter and imports, catalog, plan,
  sink prepare, the Spark session's py4j side, waiting for batches);
- ``tree``: every process ``replicator run`` started (driver, JVM, Spark Python); ``all`` adds
  the MariaDB server and a warehouse process.

In microseconds of CPU per row change applied by the e2e run. Decode and parquet come from
an in-process run (one process, no Spark), so ``spark_python`` carries whatever the executors
pay beyond them; a negative value there would say the estimate is off (not seen so far).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PARTS = ("mariadb", "decode", "parquet", "spark_python", "jvm", "apply", "warehouse",
         "driver_rest", "tree", "all")

LABELS = {
    "mariadb": "MariaDB binlog dump (mariadbd)",
    "decode": "decode (fast decoder -> Arrow)",
    "parquet": "Parquet write (landing zone)",
    "spark_python": "Spark Python processes, rest",
    "jvm": "Spark JVM",
    "apply": "driver's apply (stage + MERGE)",
    "warehouse": "warehouse process",
    "driver_rest": "driver, rest (start-up, plan, py4j)",
    "tree": "whole tree (replicator run)",
    "all": "all (tree + MariaDB + warehouse)",
}


def _per_row(entry: dict[str, Any] | None) -> float | None:
    if not entry or "error" in entry or not entry.get("rows"):
        return None
    return entry["cpu_seconds"] / entry["rows"]


def budget_of(e2e: dict[str, Any], decode: dict[str, Any]) -> dict[str, Any]:
    """One e2e run's budget: us per change by part, and the driver's share of the tree."""
    changes = e2e.get("changes") or 0
    if "error" in e2e or not changes:
        return {"error": "no e2e run to split"}
    usage = e2e.get("usage") or {}
    by_role = usage.get("cpu_seconds_by_role") or {}
    us = 1e6 / changes
    landed_s = _per_row(decode.get("landed"))
    parquet_s = _per_row(decode.get("parquet"))  # measured alone (bench.decode.parquet_write)
    # The executors run land_range: decode = landed - parquet (columnar, the decode alone,
    # runs first on a cold range and reads ~10% higher, measured 2026-11-28)
    decode_s = (landed_s - parquet_s if landed_s is not None and parquet_s is not None
                else _per_row(decode.get("columnar")))
    workers = by_role.get("python_workers", 0.0) * us
    apply = float(e2e.get("apply_cpu_seconds", 0.0)) * us
    driver = by_role.get("driver", 0.0) * us
    tree = float(usage.get("cpu_seconds", 0.0)) * us
    parts: dict[str, float | None] = {
        "mariadb": float(e2e.get("server_cpu_seconds", 0.0)) * us,
        "decode": None if decode_s is None else decode_s * 1e6,
        "parquet": (parquet_s * 1e6 if parquet_s is not None
                    else None if decode_s is None or landed_s is None
                    else (landed_s - decode_s) * 1e6),
        "spark_python": None,
        "jvm": (by_role.get("jvm", 0.0) + by_role.get("other", 0.0)) * us,
        "apply": apply,
        "warehouse": float(e2e.get("warehouse_cpu_seconds", 0.0)) * us,
        "driver_rest": driver - apply,
        "tree": tree,
    }
    if parts["decode"] is not None and parts["parquet"] is not None:
        parts["spark_python"] = workers - parts["decode"] - parts["parquet"]
    else:  # no in-process split: the workers' whole CPU, decode and parquet included
        parts["spark_python"] = workers
    parts["all"] = tree + (parts["mariadb"] or 0.0) + (parts["warehouse"] or 0.0)
    result: dict[str, Any] = {
        "changes": changes,
        "us_per_change": {k: None if v is None else round(v, 1) for k, v in parts.items()},
        "driver_share_of_tree": round(driver / tree, 3) if tree else None,
        "driver_share_streaming": e2e.get("driver_cpu_share_streaming"),
        # the stream alone (first batch start -> last batch end), start-up and shutdown left out
        "streaming_us_per_change_by_role": {
            role: round(seconds * us, 1)
            for role, seconds in (e2e.get("streaming_cpu_seconds_by_role") or {}).items()},
        "cpu_seconds_by_label": usage.get("cpu_seconds_by_label") or {},
    }
    if e2e.get("target") == "duckdb":
        result["note"] = "DuckDB runs inside the driver: the warehouse's CPU is in apply"
    return result


def cpu_budget(results: dict[str, Any]) -> dict[str, Any]:
    """The budget of every e2e run of ``results`` (DuckDB, fakesnow, ...)."""
    decode = results.get("decode") or {}
    return {target: budget_of(entry, decode)
            for target, entry in (results.get("e2e") or {}).items()
            if target in ("duckdb", "fakesnow")}


def budget_table(budget: dict[str, Any]) -> Iterator[tuple[str, ...]]:
    """Rows of a markdown-ready table: part, then us per change for each target."""
    targets = [t for t, b in budget.items() if "error" not in b]
    yield ("part", *(f"{t} us/change" for t in targets))
    for part in PARTS:
        values = [budget[t]["us_per_change"].get(part) for t in targets]
        yield (LABELS[part], *("-" if v is None else f"{v:,.1f}" for v in values))
    yield ("driver's share of the tree's CPU (whole run)",
           *(f"{100 * budget[t]['driver_share_of_tree']:.0f}%"
             if budget[t].get("driver_share_of_tree") is not None else "-" for t in targets))
    yield ("driver's share, streaming window",
           *(f"{100 * budget[t]['driver_share_streaming']:.0f}%"
             if budget[t].get("driver_share_streaming") is not None else "-" for t in targets))


def markdown(budget: dict[str, Any]) -> str:
    rows = list(budget_table(budget))
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.cpu_budget RESULT.json ...``: the table of each result, recomputed
    from its e2e and decode figures (so results of older formulas read alike)."""
    import json
    import sys
    from pathlib import Path

    for name in (sys.argv[1:] if argv is None else argv):
        results = json.loads(Path(name).read_text())
        print(f"{name}:\n{markdown(cpu_budget(results))}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
