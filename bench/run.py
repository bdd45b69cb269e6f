"""``bench/run``: start a throwaway MariaDB, generate the workload, measure every section.

    bench/run                         # the full benchmark (300k changes; ~15-25 min on 2 cores)
    bench/run --quick                 # a small smoke run of every section
    bench/run --only decode,startup   # some sections
    bench/run --changes 100000 --out /tmp/result.json

Sections (all by default): decode, profile, e2e, partitions, latency, snapshot, bigtxn, recopy,
pushdown, startup, cpu (the CPU per change of each part: needs decode and e2e, run here if
not asked for; bench/cpu_budget.py), idle (a bounded run with nothing to apply against `status`), transforms,
transforms_e2e (issue 17's table end to end, with and without
transforms, bench/e2e.py), peer (Debezium embedded on the e2e range, bench/peer.py), atomic (the e2e
run with target.atomic on and off). A failing section
is recorded with its error and the others still run; the exit status is 1 if any failed.
See bench/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import decode, workload
from bench.context import BenchContext, Sizes
from bench.environment import describe
from bench.report import RESULTS_DIR, render_table, write_charts, write_json
from bench.tables import TABLES

SECTIONS = ("decode", "profile", "e2e", "cpu", "partitions", "latency", "snapshot", "bigtxn",
            "recopy", "pushdown", "startup", "idle", "transforms", "transforms_e2e", "peer",
            "atomic", "stage", "stage_snapshot")
# The server for the benchmark: a bigger buffer pool than the test default so the 1M-row
# table is not disk-bound.
SERVER_ARGS = ("--innodb-buffer-pool-size=512M",)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, help="row changes in the workload (default 300000)")
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--seed", type=int, default=workload.DEFAULT_SEED)
    parser.add_argument("--latency-rate", type=float, help="changes/s of the latency run")
    parser.add_argument("--latency-seconds", type=float, help="length of the latency run")
    parser.add_argument("--latency-max-delay",
                        help="batching.max_delay of the latency run (default 1s): the trigger "
                             "interval, so a change waits half of it on average")
    parser.add_argument("--snapshot-rows", type=int, help="rows of the snapshot table")
    parser.add_argument("--bigtxn-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the bigtxn runs (replicator run --conf), "
                        "e.g. spark.python.use.daemon=false; repeatable")
    parser.add_argument("--bigtxn-duckdb", action="append", default=[], metavar="KEY=VALUE",
                        help="a DuckDB setting of the bigtxn runs' target (target.duckdb.settings), "
                        "e.g. memory_limit=384MB; repeatable")
    parser.add_argument("--bigtxn-modes", default="merge,changelog,scd2",
                        help="modes the bigtxn section streams the big transaction into")
    parser.add_argument("--atomic-targets", default="duckdb,snowflake",
                        help="targets the atomic section runs on (duckdb, snowflake)")
    parser.add_argument("--atomic-rounds", type=int, default=2,
                        help="runs of each setting in the atomic section (on, off alternating)")
    parser.add_argument("--transforms-rounds", type=int, default=2,
                        help="rounds of the transforms_e2e section (plain/transformed, alternating)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>.json)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only.split(",")) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    return args


def sizes_from(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if args.quick else Sizes()
    overrides = {
        "changes": args.changes, "latency_rate": args.latency_rate,
        "latency_seconds": args.latency_seconds, "snapshot_rows": args.snapshot_rows,
        "latency_max_delay": args.latency_max_delay,
    }
    return dataclasses.replace(sizes, **{k: v for k, v in overrides.items() if v is not None})


def _section(results: dict[str, Any], name: str, measure: Callable[[], Any]) -> Any:
    """Run one section; an exception is recorded as its result, and the run goes on."""
    print(f"bench: {name} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        value = measure()
    except Exception as exc:
        value = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"}
    print(f"bench: {name} done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    results[name] = value
    return value


def _decode(ctx: BenchContext, generated: workload.WorkloadResult) -> dict[str, Any]:
    source = ctx.source()
    tables = [f"{generated.database}.{spec.name}" for spec in TABLES]
    out: dict[str, Any] = {}
    readers: list[tuple[str, Callable[[], decode.DecodeResult]]] = [
        ("library", lambda: decode.decode_library(
            source, generated.start, generated.end, server_id=ctx.next_server_id())),
        ("read_changes", lambda: decode.decode_read_changes(
            source, generated.start, generated.end, tables=tables, server_id=ctx.next_server_id())),
    ]
    if decode.read_changes_has_paths():
        readers.insert(1, ("read_changes_library", lambda: decode.decode_read_changes(
            source, generated.start, generated.end, tables=tables,
            server_id=ctx.next_server_id(), fast=False)))
    for reader, measure in readers:
        _section(out, reader, lambda m=measure: m().to_json())
    missing = decode.fast_decoder_available()
    if missing:
        out["fast"] = {"skipped": missing}
    else:
        _section(out, "fast", lambda: decode.decode_fast(
            source, generated.start, generated.end, tables=tables,
            server_id=ctx.next_server_id()).to_json())
        if hasattr(importlib.import_module(decode.FAST_PACKAGE), "read_changes"):
            _section(out, "fast_identical_to_read_changes",
                     lambda: decode.compare_fast_with_read_changes(
                         source, generated.start, generated.end, tables=tables,
                         server_ids=(ctx.next_server_id(), ctx.next_server_id()),
                         limit=ctx.sizes.verify_changes))
    _section(out, "columnar", lambda: decode.decode_columnar(
        source, generated.start, generated.end, tables=tables,
        server_id=ctx.next_server_id()).to_json())
    with tempfile.TemporaryDirectory(prefix="bench-landing-") as root:
        _section(out, "landed", lambda: decode.decode_landed(
            source, generated.start, generated.end, tables=tables,
            server_id=ctx.next_server_id(), root=root).to_json())
    library = out.get("library", {}).get("rows_per_s")
    for reader in ("read_changes_library", "read_changes", "fast", "columnar", "landed"):
        entry = out.get(reader, {})
        if library and "rows_per_s" in entry:
            entry["ratio_to_library"] = round(entry["rows_per_s"] / library, 3)
            entry["same_rows_as_library"] = entry["rows"] == out["library"]["rows"]
    return out


def _cpu_budget(ctx: BenchContext, generated: workload.WorkloadResult,
                results: dict[str, Any]) -> dict[str, Any]:
    """The CPU per change of each part (bench/cpu_budget.py), from the decode and e2e
    figures of this run; the ones it needs and no section measured are measured here."""
    import pyarrow.parquet  # noqa: F401  (imported before the decode clocks start)

    from bench.cpu_budget import cpu_budget
    from bench.e2e import run_e2e
    from replicator.engine.job import landing  # noqa: F401
    from replicator.source.fast import columnar  # noqa: F401

    source = ctx.source()
    tables = [f"{generated.database}.{spec.name}" for spec in TABLES]
    decoded = results.setdefault("decode", {})
    if "columnar" not in decoded:
        _section(decoded, "columnar", lambda: decode.decode_columnar(
            source, generated.start, generated.end, tables=tables,
            server_id=ctx.next_server_id()).to_json())
    if "landed" not in decoded:
        with tempfile.TemporaryDirectory(prefix="bench-landing-") as root:
            _section(decoded, "landed", lambda: decode.decode_landed(
                source, generated.start, generated.end, tables=tables,
                server_id=ctx.next_server_id(), root=root).to_json())
    if "parquet" not in decoded:
        with tempfile.TemporaryDirectory(prefix="bench-parquet-") as root:
            _section(decoded, "parquet", lambda: decode.parquet_write(
                source, generated.start, generated.end, tables=tables,
                server_id=ctx.next_server_id(), root=root).to_json())
    e2e = results.setdefault("e2e", {})
    if "duckdb" not in e2e:
        _section(e2e, "duckdb", lambda: run_e2e(ctx, generated, "duckdb", None))
    return cpu_budget(results)


def run(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    from replicator.source.throwaway import ThrowawayMariaDB

    sections = [s for s in SECTIONS if s in args.only.split(",")]
    sizes = sizes_from(args)
    workdir = Path(tempfile.mkdtemp(prefix="replicator-bench-"))
    results: dict[str, Any] = {}
    try:
        server_args = SERVER_ARGS
        if "peer" in sections:  # Debezium 3.6 refuses MariaDB 10.11's version string
            from bench.peer import PEER_VERSION

            server_args = (*server_args, f"--version={PEER_VERSION}")
        with ThrowawayMariaDB(extra_args=server_args) as server:
            with server.root_connection() as connection, connection.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                server_version = str(cursor.fetchone()[0])
            results["environment"] = describe(server_version)
            results["sizes"] = dataclasses.asdict(sizes)
            results["sections"] = sections
            results["seed"] = args.seed
            ctx = BenchContext(server, workdir, sizes)
            generated = None
            if {"decode", "profile", "e2e", "cpu", "partitions", "peer", "atomic",
                "transforms_e2e", "stage"} & set(sections):
                print(f"bench: generating {sizes.changes:,} changes ...", file=sys.stderr, flush=True)
                generated = workload.generate(server.socket, "bench", sizes.changes, seed=args.seed)
                results["workload"] = generated.to_json()
            library_rate = None
            if "decode" in sections and generated is not None:
                decoded = _section(results, "decode", lambda: _decode(ctx, generated))
                library_rate = (decoded.get("library") or {}).get("rows_per_s")
            if "profile" in sections and generated is not None:
                from bench.profile import run_profile

                _section(results, "profile", lambda: run_profile(
                    ctx.source(), generated.start, generated.end, database=generated.database,
                    server_ids=iter(ctx.next_server_id, None)))
            if "e2e" in sections and generated is not None:
                from bench.e2e import run_e2e

                results["e2e"] = {}
                for target, label in (("duckdb", "duckdb"), ("snowflake", "fakesnow")):
                    _section(results["e2e"], label,
                             lambda t=target: run_e2e(ctx, generated, t, library_rate))
            if "cpu" in sections and generated is not None:
                _section(results, "cpu_budget", lambda: _cpu_budget(ctx, generated, results))
            if "peer" in sections and generated is not None:
                from bench.e2e import run_e2e
                from bench.peer import run_peer

                # Both over the same range in this run: replicator's e2e DuckDB figure (run
                # here unless the e2e section ran) and Debezium's.
                results.setdefault("e2e", {})
                if "duckdb" not in results["e2e"]:
                    _section(results["e2e"], "duckdb",
                             lambda: run_e2e(ctx, generated, "duckdb", library_rate))
                _section(results, "peer", lambda: run_peer(ctx, generated, results["e2e"]["duckdb"]))
            if "partitions" in sections and generated is not None:
                from bench.e2e import run_e2e

                # 1 vs N decode partitions: the e2e DuckDB run with engine.decode_partitions
                # 1 (the N-partition figure is e2e.duckdb: its default, auto, is one per core).
                partitions = max(2, os.cpu_count() or 2)
                from bench.decode_partitions import run_decode_partitions

                _section(results, "decode_partitions", lambda: run_decode_partitions(
                    ctx.source(), generated.start, generated.end, partitions=partitions,
                    server_id=ctx.next_server_id()))
                results.setdefault("e2e", {})
                _section(results["e2e"], "duckdb_1_partition",
                         lambda: run_e2e(ctx, generated, "duckdb", library_rate,
                                         decode_partitions=1))
            if "atomic" in sections and generated is not None:
                from bench.e2e import run_atomic

                # Batches of the default size, and small ones (where a transaction's fixed
                # cost weighs most).
                _section(results, "atomic", lambda: run_atomic(
                    ctx, generated, max_rows=(50_000, 2_000),
                    targets=tuple(t for t in args.atomic_targets.split(",") if t),
                    rounds=args.atomic_rounds))
            if "transforms_e2e" in sections and generated is not None:
                from bench.e2e import run_transforms_e2e

                _section(results, "transforms_e2e", lambda: run_transforms_e2e(
                    ctx, generated, rounds=args.transforms_rounds))
            if "stage" in sections and generated is not None:
                from bench.e2e import run_e2e, stage_summary

                # The stage path (executors PUT, the driver only COPYs) beside the driver's
                # staging into fakesnow and DuckDB, on the same range (issue 32's targets).
                results.setdefault("e2e", {})
                for target, label in (("duckdb", "duckdb"), ("snowflake", "fakesnow")):
                    if label not in results["e2e"]:
                        _section(results["e2e"], label,
                                 lambda t=target: run_e2e(ctx, generated, t, library_rate))
                _section(results["e2e"], "fakesnow_stage", lambda: run_e2e(
                    ctx, generated, "snowflake", library_rate, stage=True, suffix="-stage"))
                results["stage"] = stage_summary(results["e2e"])
            if "latency" in sections:
                from bench.latency import run_latency

                _section(results, "latency", lambda: run_latency(ctx))
            if {"snapshot", "bigtxn", "recopy", "pushdown", "stage_snapshot"} & set(sections):
                from bench import snapshot

                filled = snapshot.fill_table(ctx, sizes.snapshot_rows)
                if "snapshot" in sections:
                    _section(results, "snapshot", lambda: snapshot.run_snapshot(
                        ctx, sizes.snapshot_rows, library_rate, filled))
                modes = [m for m in args.bigtxn_modes.split(",") if m]
                if "bigtxn" in sections and "merge" in modes:
                    _section(results, "big_transaction", lambda: snapshot.run_big_transaction(
                        ctx, sizes.snapshot_rows, filled, conf=tuple(args.bigtxn_conf),
                        duckdb=tuple(args.bigtxn_duckdb)))
                for mode in (m for m in modes if m != "merge") if "bigtxn" in sections else ():
                    results.setdefault("big_transaction_modes", {})
                    _section(results["big_transaction_modes"], mode,
                             lambda mode=mode: snapshot.run_big_transaction(
                                 ctx, sizes.snapshot_rows, filled, mode=mode,
                                 conf=tuple(args.bigtxn_conf), duckdb=tuple(args.bigtxn_duckdb)))
                if "stage_snapshot" in sections:  # reads the table, changes none
                    _section(results, "stage_snapshot", lambda: snapshot.run_stage_snapshot(
                        ctx, sizes.snapshot_rows, filled))
                if "recopy" in sections:  # after bigtxn: it reads the table, changes none
                    from bench.recopy import run_recopy

                    _section(results, "recopy", lambda: run_recopy(ctx, sizes.snapshot_rows))
                if "pushdown" in sections:  # reads the table, changes none
                    from bench.pushdown import run_pushdown

                    _section(results, "pushdown", lambda: run_pushdown(ctx, sizes.snapshot_rows))
            if "transforms" in sections:  # no server needed: a generated change batch
                from bench.transforms import run_transforms

                _section(results, "transforms", lambda: run_transforms(
                    5_000 if args.quick else 50_000, 3 if args.quick else 9))
            if "startup" in sections:
                from bench.pipelines import write_pipeline
                from bench.startup import run_startup

                pipeline = write_pipeline(
                    workdir / "bench-startup.yaml", name="bench-startup", database="bench",
                    target="duckdb", start="initial", server_id=ctx.next_server_id())
                _section(results, "startup", lambda: run_startup(ctx, pipeline))
            if "idle" in sections:
                from bench.pipelines import write_pipeline
                from bench.startup import run_idle

                idle_pipeline = write_pipeline(
                    workdir / "bench-idle.yaml", name="bench-idle", database="bench_idle",
                    target="duckdb", start="latest", server_id=ctx.next_server_id())
                _section(results, "idle", lambda: run_idle(ctx, idle_pipeline))
    finally:
        results["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        if args.keep:
            print(f"bench: work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    failed = sorted(_failures(results))
    results["failed"] = failed
    return results, 1 if failed else 0


def _failures(results: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, value in results.items():
        if isinstance(value, dict):
            if "error" in value:
                found.append(prefix + key)
            else:
                found.extend(_failures(value, f"{prefix}{key}."))
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results, status = run(args)
    out = args.out or RESULTS_DIR / f"{dt.date.today().isoformat()}.json"
    write_json(results, out)
    print(render_table(results))
    charts = write_charts(results, out.with_suffix(""))
    print(f"\nresults: {out}" + "".join(f"\nchart: {chart}" for chart in charts)
          + (f"\nfailed: {', '.join(results['failed'])}" if status else ""))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
