"""``verify`` at scale (issue 31): range checksums inside both databases vs fetching rows.

The 1M-row ``bench_snapshot.orders`` (``bench.snapshot.fill_table``: BIGINT UNSIGNED key,
ENUM, two DECIMAL(12,2), a utf8mb4 VARCHAR with a quote and an emoji, DATETIME(6),
TIMESTAMP) against a DuckDB target whose table the sink creates (``sink.prepare``) and
which is filled *inside DuckDB* with the same values from the same row-number formulas
(``TARGET_FILL``; a copy through replication would take minutes and is not what is measured:
the checksum tests prove replicated values hash alike). ``verify`` finding the table equal
first proves the two fills agree value for value.

Measured in one run, each as a user runs it (a subprocess, wall time):

- ``client_read_s``: ``mariadb --quick -e "SELECT * FROM bench_snapshot.orders" > /dev/null``,
  the MariaDB client merely reading the table once: the yardstick (target: verify <= 0.5x);
  ``client_read_cpu``: the CPU seconds that first read cost MariaDB and the client, and
  ``cpu_vs_client_read``: the equal verify's CPU (MariaDB's and its own) over the read's,
  the same ratio by work rather than by a wall clock the load moves;
- ``checksum``: ``replicator verify`` (checksums) with 0, 1, 3 and 100 target rows tampered
  with (an UPDATE of ``note`` in DuckDB), its wall time, the keys it names, its range
  queries and fetched rows (``--format json``), and the CPU seconds it cost MariaDB
  (``source_cpu_s``: the server process, every connection) and itself (``verify_cpu_s``:
  the verify process, DuckDB's side included): on a shared machine the wall time follows
  the load, the CPU seconds follow the work;
- ``fetch``: ``replicator verify --method fetch`` (every row of both sides into Python, the
  path before issue 31) with 3 rows tampered with (``--no-fetch`` skips it).

``--curve`` (for 10M rows: ``python -m bench.verify 10000000 --curve --out FILE``): only
``verify`` with 0, 1 and 100 rows tampered with (``CURVE``) and the client read, on a server
whose buffer pool holds the table (``CURVE_SERVER_ARGS``): how verify's time grows with the
differing ranges at a size where a fetch of the table is out of the question.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.context import BenchContext, replicator_command
from bench.pipelines import write_pipeline
from bench.procmon import cpu_seconds
from bench.snapshot import DATABASE, ORDERS

# The values of bench.snapshot's MySQL fill, computed by DuckDB from the same row number.
TARGET_FILL = """INSERT INTO {relation}
  ("ID", "CUSTOMER_ID", "STATUS", "AMOUNT", "DISCOUNT", "NOTE", "CREATED_AT", "UPDATED_AT")
SELECT i, i % 100000,
  ['new', 'paid', 'shipped', 'cancelled'][1 + i % 4],
  CAST(((i * 7919) % 100000000) // 100 || '.' || lpad(CAST((i * 7919) % 100 AS VARCHAR), 2, '0')
       AS DECIMAL(12,2)),
  CASE WHEN i % 3 = 0 THEN NULL ELSE CAST((i % 500) // 100 || '.'
       || lpad(CAST(i % 100 AS VARCHAR), 2, '0') AS DECIMAL(12,2)) END,
  CASE WHEN i % 5 = 0 THEN NULL ELSE 'order ' || i || ' for O''Brien 🚀' END,
  make_timestamp(epoch_us(TIMESTAMP '2024-01-01') + i * 1000000 + (i * 37) % 1000000),
  to_timestamp(1700000000 + i)
FROM range(1, {rows} + 1) AS t(i)"""

DIFFERENCES = (0, 1, 3, 100)
CURVE = (0, 1, 100)
# 10M bench rows are ~1.3 GB of InnoDB pages: the curve measures verify, not the disk.
CURVE_SERVER_ARGS = ("--innodb-buffer-pool-size=4G",)


def prepare_target(ctx: BenchContext, name: str, rows: int) -> tuple[Path, Path, str]:
    """A pipeline over the filled source table and its DuckDB target filled to match;
    (pipeline file, DuckDB file, the target table's qualified name)."""
    from replicator.config import load_pipeline
    from replicator.context import Context
    from replicator.plan.identifiers import qualified_name

    path = write_pipeline(ctx.workdir / f"{name}.yaml", name=name, database=DATABASE,
                          tables=(ORDERS,), target="duckdb", start="latest",
                          server_id=ctx.next_server_id())
    pipeline = load_pipeline(path, environ=ctx.environment())
    context = Context(pipeline)
    sink = context.open_sink()
    try:
        sink.prepare()
        relation = qualified_name(context.plan.tables[0].target_parts)
        sink.connection.execute(TARGET_FILL.format(relation=relation, rows=int(rows)))
    finally:
        sink.close()
    return path, ctx.workdir / f"{name}.duckdb", relation


def tamper(warehouse: Path, relation: str, keys: list[int]) -> None:
    import duckdb

    with duckdb.connect(str(warehouse)) as connection:
        connection.execute(f'UPDATE {relation} SET "NOTE" = \'tampered\' WHERE "ID" = ANY(?)',
                           [keys])


def untamper(warehouse: Path, relation: str, keys: list[int]) -> None:
    """Put the tampered notes back (the fill's formula)."""
    import duckdb

    with duckdb.connect(str(warehouse)) as connection:
        connection.execute(
            f"UPDATE {relation} SET \"NOTE\" = CASE WHEN \"ID\" % 5 = 0 THEN NULL ELSE 'order ' "
            f"|| \"ID\" || ' for O''Brien 🚀' END WHERE \"ID\" = ANY(?)", [keys])


def spread_keys(rows: int, count: int) -> list[int]:
    """``count`` keys spread over the table (never the same bucket twice for small counts)."""
    return [1 + (rows - 1) * (2 * k + 1) // (2 * count) for k in range(count)] if count else []


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _verify(ctx: BenchContext, path: Path, *extra: str) -> dict[str, Any]:
    server = ctx.server.pid
    assert server is not None
    source_cpu, own_cpu = cpu_seconds(server), _children_cpu()
    started = time.perf_counter()
    done = subprocess.run([*replicator_command(), "verify", str(path), "--format", "json",
                           *extra], capture_output=True, text=True, env=ctx.environment(),
                          cwd=str(ctx.workdir), timeout=3600)
    seconds = time.perf_counter() - started
    source_cpu, own_cpu = cpu_seconds(server) - source_cpu, _children_cpu() - own_cpu
    if done.returncode not in (0, 1):
        raise RuntimeError(f"verify failed ({done.returncode}): {done.stderr[-2000:]}")
    (table,) = json.loads(done.stdout)["tables"]
    return {"seconds": round(seconds, 2), "in_process_s": table["seconds"],
            "source_cpu_s": round(source_cpu, 2), "verify_cpu_s": round(own_cpu, 2),
            # BIGINT UNSIGNED keys are DECIMALs, which the JSON spells as text.
            "method": table["method"], "keys": sorted(int(d["key"]["id"])
                                                      for d in table["differences"]),
            "checksum_queries": table["checksum_queries"],
            "fetched_rows": table["fetched_rows"], "source_rows": table["source_rows"]}


def client_read(ctx: BenchContext) -> float:
    env = {**os.environ, "MYSQL_PWD": ""}
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        subprocess.run(["mariadb", "--quick", "-S", str(ctx.server.socket), "-u", "root", "-e",
                        f"SELECT * FROM `{DATABASE}`.`orders`"], stdout=sink, check=True,
                       env=env, timeout=3600)
    return round(time.perf_counter() - started, 2)


def _client_read_with_cpu(ctx: BenchContext) -> tuple[float, dict[str, float]]:
    server = ctx.server.pid
    assert server is not None
    source_cpu, client_cpu = cpu_seconds(server), _children_cpu()
    seconds = client_read(ctx)
    return seconds, {"source_cpu_s": round(cpu_seconds(server) - source_cpu, 2),
                     "client_cpu_s": round(_children_cpu() - client_cpu, 2)}


def run_verify(ctx: BenchContext, rows: int, *, fetch: bool = True,
               differences: tuple[int, ...] = DIFFERENCES) -> dict[str, Any]:
    """Every figure above, over ``bench_snapshot.orders`` filled with ``rows`` rows."""
    path, warehouse, relation = prepare_target(ctx, "bench-verify", rows)
    read_s, read_cpu = _client_read_with_cpu(ctx)
    result: dict[str, Any] = {"rows": rows, "client_read_s": read_s,
                              "client_read_cpu": read_cpu, "checksum": {}}
    for count in differences:
        keys = spread_keys(rows, count)
        tamper(warehouse, relation, keys)
        measured = _verify(ctx, path)
        measured["found_exactly"] = measured["keys"] == keys
        if count > 3:
            measured["keys"] = len(measured["keys"])
        result["checksum"][str(count)] = measured
        if count == 3 and fetch:
            result["fetch"] = _verify(ctx, path, "--method", "fetch")
        untamper(warehouse, relation, keys)
    result["client_read_again_s"] = client_read(ctx)  # the machine's load may move
    equal = result["checksum"]["0"]["seconds"]
    result["checksum_vs_client_read"] = round(equal / result["client_read_s"], 2)
    equal_cpu = result["checksum"]["0"]["source_cpu_s"] + result["checksum"]["0"]["verify_cpu_s"]
    result["cpu_vs_client_read"] = round(equal_cpu / max(0.01, sum(read_cpu.values())), 2)
    return result


def main() -> None:
    """``python -m bench.verify [ROWS]``: this section alone, on its own server."""
    import sys
    import tempfile

    from bench.context import Sizes
    from bench.run import SERVER_ARGS
    from bench.snapshot import fill_table
    from replicator.source.throwaway import ThrowawayMariaDB

    args = sys.argv[1:]
    rows = int(args[0]) if args and args[0].isdigit() else 1_000_000
    curve = "--curve" in args
    out = Path(args[args.index("--out") + 1]) if "--out" in args else None
    fetch = "--no-fetch" not in args and not curve
    server_args = (*SERVER_ARGS, *CURVE_SERVER_ARGS) if curve else SERVER_ARGS
    with ThrowawayMariaDB(extra_args=server_args) as server:
        ctx = BenchContext(server, Path(tempfile.mkdtemp(prefix="replicator-bench-verify-")),
                           Sizes())
        _, _, fill_seconds = fill_table(ctx, rows)
        started = os.getloadavg()
        verify = run_verify(ctx, rows, fetch=fetch,
                            differences=CURVE if curve else DIFFERENCES)
        text = json.dumps({"command": "python -m bench.verify " + " ".join(args),
                           "server_args": list(server_args), "fill_s": round(fill_seconds, 1),
                           "load_average": started, "load_average_after": os.getloadavg(),
                           "verify": verify}, indent=2)
        print(text)
        if out is not None:
            out.write_text(text + "\n")


if __name__ == "__main__":
    main()
