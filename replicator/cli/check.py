"""``replicator check FILE``: preflight of the source and the target, pass/warn/fail.

Source: binlog settings, retention, grants, server_id, declared tables, keys and columns
(``source.preflight``). Stale YAML: every entry that no longer matches the live schema (a
column renamed, dropped, retyped or added in MySQL), with its edit (``config.stale``): a
warning, since the run follows the change, except a binding entry whose column is gone with
no followed rename or drop (the run stops on it). Target: the plan builds against the live
catalog, and the sink can connect and create its tables (``Sink.prepare`` is idempotent: it is
what ``run`` does first). The pipeline checked is the one a run would use: the YAML with the
column renames and drops runs followed applied (``Context.pipeline``).
Exit 0 when nothing fails (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicator.cli import render
from replicator.cli.options import OutputFormat, TextOrJson
from replicator.config import load_pipeline
from replicator.config.loader import load_document
from replicator.config.stale import StaleEntry, find_stale
from replicator.context import Context
from replicator.errors import ReplicatorError
from replicator.model.catalog import Catalog
from replicator.model.pipeline import Pipeline
from replicator.sink import open_sink
from replicator.source.preflight import CheckResult, source_checks

COMMAND_SETTINGS = {"help": "Preflight: binlog settings, grants, retention, tables, target access."}


def target_checks(pipeline: Pipeline, catalog: Catalog | None) -> list[CheckResult]:
    """The plan builds against the live catalog; the target is reachable and writable."""
    where = pipeline.target.kind
    if catalog is None:
        return [CheckResult("target", "skipped", f"{where}: no source catalog to plan from")]
    try:
        # The planner (replicator.plan, ~50 ms) stays off every command's start-up: cli/main
        # imports this module.
        from replicator.plan import build_plan

        plan = build_plan(pipeline, catalog)
    except ReplicatorError as exc:
        return [CheckResult("plan", "fail", exc.message, exc.hint)]
    results = [CheckResult("plan", "pass", f"{len(plan.tables)} tables planned")]
    try:
        sink = open_sink(pipeline, plan)
        try:
            sink.prepare()
        finally:
            sink.close()
    except ReplicatorError as exc:
        return [*results, CheckResult("target", "fail", exc.message, exc.hint)]
    except Exception as exc:  # a driver error the sink did not classify
        return [*results, CheckResult("target", "fail", f"{where}: {exc}")]
    return [*results, CheckResult("target", "pass", f"{where} reachable; target and state "
                                  "tables exist (created if missing)")]


def run_checks(pipeline: Pipeline, *, check_target: bool = True) -> list[CheckResult]:
    return check_pipeline(pipeline, check_target=check_target)[0]


def check_pipeline(pipeline: Pipeline, *, check_target: bool = True,
                   ) -> tuple[list[CheckResult], list[StaleEntry]]:
    """Every check of ``pipeline`` (as a run applies it: the followed renames and drops of
    its checkpoint), and its stale entries (also among the results, one each)."""
    context = Context(pipeline)
    pipeline = context.pipeline
    results, catalog = source_checks(pipeline)
    stale: list[StaleEntry] = []
    if catalog is not None:
        declared = pipeline.declared or pipeline
        document = load_document(declared.path) if declared.path else None
        stale = find_stale(declared, context.followed_columns(), catalog,
                           ignored=context.ignored_columns(), document=document)
        results.extend(stale_result(entry) for entry in stale)
    if check_target:
        results.extend(target_checks(pipeline, catalog))
    return results, stale


def stale_result(entry: StaleEntry) -> CheckResult:
    """A stale entry warns (the run follows MySQL); one the run stops on fails."""
    where = f"{entry.file}:{entry.line}: " if entry.file and entry.line else ""
    return CheckResult("stale entry", "fail" if entry.blocking else "warn",
                       f"{where}{entry.source_table} {entry.setting}: {entry.problem}",
                       entry.fix)


_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "skipped": "dim"}


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    output_format: TextOrJson = OutputFormat.text,
    skip_target: Annotated[
        bool, typer.Option("--skip-target", help="Check only the MySQL side.")
    ] = False,
) -> None:
    pipeline = load_pipeline(file)
    results, stale = check_pipeline(pipeline, check_target=not skip_target)
    failed = [r for r in results if r.status == "fail"]
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps({"pipeline": pipeline.name, "ok": not failed,
                                     "checks": [r.as_dict() for r in results],
                                     "stale": [e.as_dict() for e in stale]}, indent=2) + "\n")
    else:
        for result in results:
            render.print_text(f"{result.status.upper():7} {result.check}: {result.detail}",
                              style=_STYLE[result.status])
            if result.fix and result.status in ("fail", "warn"):
                render.print_text(f"        fix: {result.fix}")
        warned = sum(r.status == "warn" for r in results)
        render.print_text(
            f"{pipeline.name}: {len(results) - len(failed) - warned} passed, {warned} warnings, "
            f"{len(failed)} failed",
            style="red" if failed else None,
        )
    raise typer.Exit(1 if failed else 0)
