"""``replicator plan FILE``: the exact DDL and MERGE the pipeline will run, per table.

Without ``--offline`` the MySQL schema (information_schema) fills in the columns and types the
YAML does not declare, and the output says which came from where; with ``--offline`` only the
YAML's ``source_type`` declarations are used (no server, no Java: it runs in CI). Imports
nothing heavy at module level; the MySQL driver is imported only in live mode.
"""

from __future__ import annotations

import enum
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replicator.cli import render
from replicator.config.diagnostics import REPORTERS, Diagnostic
from replicator.config.loader import load_document
from replicator.context import Context
from replicator.errors import PlanError, UsageError
from replicator.model.catalog import INTEGER_TYPES, MySQLType, MySQLTypeError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from replicator.model.catalog import Catalog
    from replicator.model.pipeline import Pipeline
    from replicator.plan import Dialect, Plan, TablePlan
    from replicator.plan.problems import PlanProblem
    from replicator.plan.program import StagingQuery

COMMAND_SETTINGS = {"help": "Print the DDL and MERGE SQL the pipeline will run, per table."}


class DialectName(enum.StrEnum):
    snowflake = "snowflake"
    duckdb = "duckdb"


class OutputFormat(enum.StrEnum):
    sql = "sql"
    json = "json"
    github = "github"  # the SQL, and plan problems as GitHub Actions annotations


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    table: Annotated[
        str | None, typer.Option("--table", "-t", help="Only this table (source or target name).")
    ] = None,
    dialect: Annotated[
        DialectName | None,
        typer.Option("--dialect", help="SQL dialect (default: the pipeline's target)."),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Use only the YAML (source_type); no MySQL.")
    ] = False,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="sql, json, or github (the SQL; "
                                   "problems as GitHub annotations on the YAML's lines).")
    ] = OutputFormat.sql,
    ddl: Annotated[
        str | None,
        typer.Option("--ddl", help="Preview what the pipeline would do on this DDL statement "
                     "(the target ALTERs, the stop, or nothing); runs nothing."),
    ] = None,
) -> None:
    # The planner (replicator.plan, ~50 ms) and the chunk SELECT, which brings the expression
    # compiler (plan.pushdown, ~35 ms): kept off validate's start-up, which imports every
    # command module.
    from replicator.plan import atomic_statements, get_dialect
    from replicator.plan.dialects import pipeline_dialect
    from replicator.source.snapshot import chunk_select_preview

    context = Context.load(file, offline=offline)
    pipeline = context.pipeline
    if not offline:
        render.detail("reading the MySQL schema of %d table(s)%s", len(pipeline.fixed_tables),
                      " and the tables `sources:` selects" if pipeline.selections else "")
    try:
        catalog = context.catalog
        if not offline:
            _warn_declared_types_that_differ(pipeline, catalog)
        plan = context.plan
    except PlanError as exc:
        if not exc.problems:
            raise
        _report_problems(file, exc.problems, output_format)
        raise typer.Exit(1) from None
    # The pipeline's own target: target.snowflake.stage changes its batch program.
    sql_dialect = get_dialect(dialect.value) if dialect else pipeline_dialect(pipeline)
    tables = _select_tables(plan, table)

    def staging(table_plan: TablePlan) -> StagingQuery | None:  # an atomic batch's, staged
        from replicator.transform import snapshot_staging  # off validate's start-up

        return snapshot_staging(table_plan, catalog, sql_dialect)

    if offline:
        render.info("offline: columns and types come from the YAML's source_type only")
    if plan.notes and output_format is not OutputFormat.json:
        # Warnings (R312: a table the driver stages under target.snowflake.stage), at their
        # settings' lines, before the SQL; the JSON document carries them itself.
        _report_problems(file, plan.notes, output_format)
    if ddl is not None:
        _print_ddl_preview(pipeline, catalog, plan, ddl, sql_dialect, output_format)
        return
    if output_format is OutputFormat.json:
        document = {
            "pipeline": plan.pipeline_name,
            "dialect": sql_dialect.name,
            "offline": offline,
            "tables": [_table_json(t, sql_dialect, catalog, plan.tables) for t in tables],
            "warnings": [{"code": n.code, "message": n.message, "hint": n.hint}
                         for n in plan.notes],
            "atomic": pipeline.target.atomic,
            # target.atomic: what a stream batch that changed several tables runs.
            "atomic_batch": [{"purpose": s.purpose, "sql": s.sql}
                             for s in atomic_statements(tables, sql_dialect, staging)]
            if pipeline.target.atomic and len(tables) > 1 else [],
        }
        render.print_text(json.dumps(document, indent=2, ensure_ascii=False))
        return
    # Off validate's start-up too (see above); the transforms package is ~20 ms more.
    from replicator.plan import render_atomic_sql, render_sql
    from replicator.transform import snapshot_staging

    for table_plan in tables:
        if not offline:
            _say_where_columns_came_from(table_plan)
        render.print_sql(render_sql(table_plan, sql_dialect,
                                    snapshot_staging(table_plan, catalog, sql_dialect),
                                    chunk_select_preview(plan.tables, table_plan, catalog)))
    if pipeline.target.atomic and len(tables) > 1:
        render.print_sql(render_atomic_sql(tables, sql_dialect, staging))


def _print_ddl_preview(pipeline: Pipeline, catalog: Catalog, plan: Plan, ddl: str,
                       dialect: Dialect, output_format: OutputFormat) -> None:
    # Off every command's start-up (~3 ms): only `plan --ddl` needs it.
    from replicator.cli.plan_ddl import preview_ddl, render_effects

    effects = preview_ddl(pipeline, catalog, plan, ddl, dialect)
    if output_format is OutputFormat.json:
        document = {"pipeline": plan.pipeline_name, "dialect": dialect.name, "ddl": ddl,
                    "effects": [effect.to_json() for effect in effects]}
        render.print_text(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        render.print_sql(render_effects(ddl, effects))
    if any(effect.action == "stop" for effect in effects):
        # A migration's CI can gate on it: this DDL would stop the pipeline.
        raise typer.Exit(1)


def _report_problems(file: Path, problems: tuple[PlanProblem, ...],
                     output_format: OutputFormat) -> None:
    """Every plan problem as a ``Diagnostic`` at the line and column of the setting that fixes
    it, through validate's reporters (text on stderr; json and github on stdout)."""
    document = load_document(file)
    diagnostics = []
    for problem in problems:
        position = document.position(problem.where)
        diagnostics.append(Diagnostic(str(file), position.line, position.col, problem.code,
                                      problem.message, problem.hint,
                                      "warning" if problem.severity == "warning" else "error"))
    if output_format is OutputFormat.sql:
        sys.stderr.write(REPORTERS["text"](diagnostics, files=1))
    else:
        sys.stdout.write(REPORTERS[output_format.value](diagnostics, files=1))


def _warn_declared_types_that_differ(pipeline: Pipeline, catalog: Catalog) -> None:
    """A declared source_type that disagrees with MySQL: the live type wins, say so."""
    def comparable(mysql_type: MySQLType) -> MySQLType:
        if mysql_type.name in INTEGER_TYPES and mysql_type.length != 1:
            return replace(mysql_type, length=None)  # int(11) is int: display width only
        return mysql_type

    for table in pipeline.tables:
        source_table = catalog.table(table.source_database, table.source_table)
        for mapping in table.columns:
            live = source_table.column(mapping.source_column) if source_table else None
            if live is None or not mapping.source_type:
                continue
            try:
                declared = MySQLType.parse(mapping.source_type)
            except MySQLTypeError:
                continue  # validate reports it
            if comparable(declared) != comparable(live.mysql_type):
                render.warning(
                    f"{table.source_name}.{live.name}: declared source_type "
                    f"{mapping.source_type!r} but MySQL says {live.mysql_type}; using MySQL's",
                    hint=f"update source_type to {str(live.mysql_type)!r} so --offline plans match",
                )


def _select_tables(plan: Plan, name: str | None) -> list[TablePlan]:
    if name is None:
        return list(plan.tables)
    routes = [t for t in plan.tables if t.outbox is not None
              and name.lower() in (t.source_name.lower(), t.label.lower())]
    if routes:  # an outbox table: all its routes (or the one named db.outbox[route])
        return routes
    try:
        return [plan.table(name)]
    except KeyError:
        known = ", ".join(t.source_name for t in plan.tables)
        raise UsageError(
            f"no table {name!r} in pipeline {plan.pipeline_name}",
            hint=f"use a source or target name: {known}",
        ) from None


def _say_where_columns_came_from(table_plan: TablePlan) -> None:
    if table_plan.outbox is not None:
        paths = ", ".join([f"{name} <- {path}" for name, path in table_plan.outbox.paths]
                          + [f"{name} <- outbox column {column}"
                             for name, column in table_plan.outbox.row_columns])
        render.info("%s columns from the payload (%s): %s", table_plan.label,
                    table_plan.outbox.payload_column, paths)
        from replicator.transform.outbox import describe_flattening  # pyarrow only when run

        render.info("%s payload flattening: %s", table_plan.label, describe_flattening(table_plan))
        return
    data = table_plan.data_columns
    live = [c.source_column for c in data if c.origin == "live" and c.expression is None]
    declared = [c.source_column for c in data if c.origin == "yaml" and c.expression is None]
    computed = [f"{c.target_column} = {c.expression}" for c in table_plan.computed_columns]
    parts = []
    if live:
        parts.append(f"from the live MySQL schema: {', '.join(map(str, live))}")
    if declared:
        parts.append(f"declared in the YAML (checked live): {', '.join(map(str, declared))}")
    if computed:
        parts.append(f"computed: {'; '.join(computed)}")
    if table_plan.ignored:
        parts.append("ignored, added in MySQL under `schema_changes.add_column: ignore` (not in "
                     f"the target, not replicated): {', '.join(table_plan.ignored)}")
    render.info("%s columns %s", table_plan.source_name, "; ".join(parts) or "(none)")


def _flattening(table_plan: TablePlan) -> str:
    from replicator.transform.outbox import describe_flattening

    return describe_flattening(table_plan)


def _outbox_statement(table_plan: TablePlan, catalog: Catalog) -> str | None:
    from replicator.transform.outbox import planned_statement  # DuckDB's SQL, no import

    return planned_statement(table_plan, catalog)


def _table_json(table_plan: TablePlan, dialect: Dialect, catalog: Catalog,
                tables: Sequence[TablePlan]) -> dict[str, Any]:
    # Off validate's start-up: see command().
    from replicator.plan import table_statements
    from replicator.source.snapshot import chunk_select_preview
    from replicator.transform import snapshot_staging

    outbox = table_plan.outbox
    return {
        "source": table_plan.source_name,
        **({"sources": {**table_plan.selection.to_json(), "matched": list(table_plan.sources)}}
           if table_plan.selection is not None else {}),
        "target": ".".join(table_plan.target_parts),
        "outbox": None if outbox is None else {
            "route": outbox.route,
            "type_column": outbox.type_column,
            "payload_column": outbox.payload_column,
            "paths": dict(outbox.paths),
            "row_columns": dict(outbox.row_columns),
            "delete_when": outbox.delete_when,
            "null_on_error": list(outbox.null_on_error),
            "flattening": _flattening(table_plan),
            "statement": _outbox_statement(table_plan, catalog),
        },
        "key": list(table_plan.source_key),
        "key_origin": table_plan.key_origin,
        "deletes": table_plan.deletes,
        "filter": table_plan.filter,
        **_stage_road_json(table_plan, dialect),
        **_chunk_read_json(chunk_select_preview(tables, table_plan, catalog)),
        "excluded": list(table_plan.excluded),
        # Added in MySQL and ignored (`schema_changes.add_column: ignore`); also in excluded.
        "ignored": list(table_plan.ignored),
        "columns": [
            {
                "source_column": c.source_column,
                "target_column": c.target_column,
                "mysql_type": str(c.mysql_type) if c.mysql_type else None,
                "target_type": dialect.type_name(c.target_type),
                "role": c.role,
                "mask": c.mask,
                **({"mask_keep_last": c.mask_keep_last} if c.mask_keep_last else {}),
                **({"mask_length": c.mask_length} if c.mask_length else {}),
                **({"mask_salted": True} if c.mask_salt else {}),  # never the salt itself
                **({"expression": c.expression} if c.expression is not None else {}),
                "origin": c.origin,
                "declared_type": c.declared_type,
                "nullable": c.nullable,
            }
            for c in table_plan.columns
        ],
        "statements": [
            {"purpose": s.purpose, "sql": s.sql} for s in table_statements(
                table_plan, dialect, snapshot_staging(table_plan, catalog, dialect))
        ],
    }


def _stage_road_json(table_plan: TablePlan, dialect: Dialect) -> dict[str, Any]:
    """Under target.snowflake.stage: whether the table's batches are COPYed from the stage
    ("stage") or staged by the driver ("driver", with why: the plan's R312)."""
    if not dialect.external_stage:
        return {}
    from replicator.plan.stage_roads import driver_reasons

    reasons = [what for what, _ in driver_reasons(table_plan)]
    return {"stage_road": "driver" if reasons else "stage", "driver_reasons": reasons}


def _chunk_read_json(chunk_read: tuple[str, str | None] | None) -> dict[str, Any]:
    """The snapshot's chunk SELECT on MySQL and its pushed-down filter (None: none)."""
    if chunk_read is None:
        return {}
    return {"snapshot_select": chunk_read[0], "snapshot_pushdown": chunk_read[1]}
