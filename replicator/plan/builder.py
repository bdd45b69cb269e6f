"""``build_plan(pipeline, catalog) -> Plan``: resolve names, keys, columns and types (pure).

Every problem found is collected and reported together in one PlanError, each with the YAML
setting that fixes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from replicator.errors import PlanError
from replicator.model.catalog import Catalog, SourceColumn, SourceTable
from replicator.model.pipeline import (
    LOG_TABLE_SUFFIX,
    METADATA_COLUMNS,
    SCD2_COLUMNS,
    SOFT_DELETE_COLUMNS,
    SOURCE_TABLE_COLUMN,
    IdentifierCase,
    Pipeline,
    SnowflakeTarget,
    TablePipeline,
    Tinyint1Policy,
)
from replicator.plan.columns import (
    METADATA_TYPES,
    changelog_columns,
    check_column_collisions,
    namespace,
    staging_table_name,
    with_staging_names,
)
from replicator.plan.expressions.checker import check_expression, check_filter
from replicator.plan.expressions.errors import ExpressionError
from replicator.plan.expressions.parsing import referenced_columns
from replicator.plan.expressions.spark_types import STRING as SPARK_STRING
from replicator.plan.expressions.spark_types import spark_type_of
from replicator.plan.identifiers import target_identifier
from replicator.plan.model import Plan, PlannedColumn, TablePlan
from replicator.plan.outbox import plan_outbox
from replicator.plan.problems import PlanProblems, expression_code, table_path
from replicator.plan.routing import plan_routed, source_table_column
from replicator.plan.stage_roads import driver_reasons
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.translator import translate
from replicator.plan.types import (
    STRING,
    TargetType,
    map_mysql_type,
    parse_target_type,
)

DEAD_LETTER_TABLE = "_REPLICATOR_DEAD_LETTERS"  # rows the target refused (on_error: dead_letter)


def build_plan(pipeline: Pipeline, catalog: Catalog,
               ignored: Mapping[str, Collection[str]] | None = None) -> Plan:
    """``ignored``: per source table (``db.table``, lower case), the columns a run recorded
    as added in MySQL and ignored (`schema_changes.add_column: ignore`, ``Context``): each is
    left out of the table's plan as `exclude: true` would, while the table's policy is still
    ignore, its key does not name it and `columns:` does not configure it."""
    problems = PlanProblems()
    ignored = ignored or {}
    tables: list[TablePlan] = []
    for table in pipeline.tables:
        problems.base = table_path(pipeline, table)
        planned = _plan_entry(pipeline, table, catalog, problems,
                              ignored.get(table.source_name.lower(), ()))
        tables += planned
        _note_driver_staging(pipeline, planned, problems)
    problems.base = ()
    _check_target_collisions(pipeline, tables, problems)
    _check_external_stage(pipeline, problems)
    problems.raise_if_any()
    return Plan(
        pipeline_name=pipeline.name,
        target_kind=pipeline.target.kind,
        tables=tuple(tables),
        live_catalog=catalog.live,
        notes=tuple(problems.notes),
    )


def _plan_entry(pipeline: Pipeline, table: TablePipeline, catalog: Catalog,
                problems: PlanProblems, ignored_here: Collection[str]) -> list[TablePlan]:
    """The plans of one `tables:` entry: one, one per outbox route, or none (its problems
    are in ``problems``)."""
    if table.routed:
        routed = plan_routed(pipeline, table, catalog, problems)
        if routed is None:
            return []
        first_source, sources = routed
        planned = _plan_table(pipeline, table, first_source, catalog.live, problems, ())
        return [] if planned is None else [dataclasses.replace(planned, sources=sources)]
    source_table = catalog.table(table.source_database, table.source_table)
    if source_table is None:
        problems.add(
            f"{table.source_name}: table not found in the MySQL schema",
            hint="check the `source:` name of the table, and the replicator user's SELECT grant",
            code="R301", at=("source",),
        )
        return []
    if table.outbox is not None:  # one plan per route, all reading the outbox table
        return plan_outbox(pipeline, table, source_table, catalog.live, problems)
    planned = _plan_table(pipeline, table, source_table, catalog.live, problems, ignored_here)
    return [] if planned is None else [planned]


def _check_external_stage(pipeline: Pipeline, problems: PlanProblems) -> None:
    """R311: ``target.snowflake.stage`` needs ``engine.landing``: on an object store the
    stage points at, or a local path whose files the executors PUT to it (an HDFS file
    cannot be PUT)."""
    if not _external_stage(pipeline):
        return
    landing = pipeline.engine.landing or ""
    # A local landing zone: the stage is an internal one the executors PUT each file to.
    if not landing or landing.split("://", 1)[0].lower() == "hdfs":
        problems.add(
            f"target.snowflake.stage: engine.landing must be set, to the object-store location "
            f"the stage points at (s3://, gs://, azure://) or to a local path whose files the "
            f"executors PUT to the stage, not {landing or 'the checkpoint directory'}",
            hint="set engine.landing (docs/snowflake.md), or remove target.snowflake.stage",
            code="R311", at=("target", "snowflake", "stage"))


def _external_stage(pipeline: Pipeline) -> str | None:
    warehouse = pipeline.target.warehouse
    return warehouse.stage if isinstance(warehouse, SnowflakeTarget) else None


def _note_driver_staging(pipeline: Pipeline, planned: Sequence[TablePlan],
                         problems: PlanProblems) -> None:
    """R312 (a warning): under ``target.snowflake.stage``, a table whose transform step the
    external-stage load cannot run as Snowflake SQL (``stage_roads``) takes the
    driver's road: the driver reads its change files, stages them in DuckDB and PUTs the
    rows, as without a stage; the pipeline's other tables keep the driver-free road. Said
    at the setting that decides it, once per table and setting."""
    stage = _external_stage(pipeline)
    if not stage:
        return
    for table in planned:
        reasons: dict[str, list[str]] = {}
        for what, setting in driver_reasons(table):
            reasons.setdefault(setting, []).append(what)
        for setting, whats in reasons.items():
            problems.note(
                f"{table.label}: its batches are staged by the driver: target.snowflake.stage "
                f"cannot stage {'; '.join(whats)} in Snowflake SQL yet (the table's "
                f"`{setting}` setting); the other tables' change files are COPYed from "
                f"@{stage}",
                hint="nothing to do: the table is replicated as without target.snowflake.stage "
                "(its rows cross the driver); docs/snowflake.md lists what the external-stage "
                "load covers", code="R312", at=(setting,))


def _plan_table(
    pipeline: Pipeline,
    table: TablePipeline,
    source_table: SourceTable,
    live: bool,
    problems: PlanProblems,
    ignored_here: Collection[str],
) -> TablePlan | None:
    case = pipeline.target.identifier_case
    name = table.source_name
    before = len(problems.items)

    _check_configured_columns(table, source_table, problems)
    key, key_origin = _resolve_key(table, source_table, problems)
    columns: list[PlannedColumn] = []
    if table.routed:
        # Rows of many source tables: which one a row came from leads the key, so equal keys
        # of different shards stay distinct rows (routing.source_table_column).
        columns.append(source_table_column(case))
        key = (SOURCE_TABLE_COLUMN, *key)
    ignoring = ({c.lower() for c in ignored_here}
                if pipeline.schema_changes_for(table).add_column == "ignore" else set())
    planned, excluded, ignored = _plan_source_columns(pipeline, table, source_table, key, live,
                                                      ignoring, problems)
    columns += planned
    for mapping in table.columns:
        if mapping.computed:
            computed = _plan_computed(pipeline, table, mapping, source_table, problems)
            if computed is not None:
                columns.append(computed)
    data_columns = list(columns)
    columns += _replicator_columns(table, case, problems)
    track_history = _resolve_track_history(table, data_columns, problems)

    check_column_collisions(name, columns, problems)
    columns = with_staging_names(columns)
    log_columns = _plan_log_columns(table, columns, data_columns, case, problems)
    filter_inputs = _plan_filter(pipeline, table, source_table, problems)

    if len(problems.items) > before:
        return None
    target_table = target_identifier(table.target_table or source_table.table, case)
    log_table = (
        target_identifier((table.target_table or source_table.table) + LOG_TABLE_SUFFIX, case)
        if log_columns
        else None
    )
    return TablePlan(
        pipeline_name=pipeline.name,
        source_database="" if table.routed else source_table.database,
        source_table="" if table.routed else source_table.table,
        target_namespace=namespace(pipeline),
        target_table=target_table,
        columns=tuple(columns),
        source_key=key,
        key_origin=key_origin,
        deletes=table.deletes,
        staging_table=staging_table_name(target_table),
        state_table=target_identifier(pipeline.target.state_table, case),
        identifier_case=case,
        on_error=table.on_error,
        dead_letter_table=target_identifier(DEAD_LETTER_TABLE, case),
        filter=table.filter,
        filter_inputs=filter_inputs,
        excluded=tuple(excluded),
        ignored=tuple(ignored),
        mode=table.mode,
        log_table=log_table,
        log_columns=tuple(log_columns),
        track_history=track_history,
        selection=table.selection,
    )


def _plan_source_columns(
    pipeline: Pipeline, table: TablePipeline, source_table: SourceTable, key: tuple[str, ...],
    live: bool, ignoring: Collection[str], problems: PlanProblems,
) -> tuple[list[PlannedColumn], list[str], list[str]]:
    """The source table's columns in the target, in source order, and the names left out:
    excluded (``exclude: true``, and the ignored too) and ignored (added in MySQL under
    ``add_column: ignore``, ``ignoring`` lower-cased)."""
    columns: list[PlannedColumn] = []
    excluded: list[str] = []
    ignored: list[str] = []
    for source_column in sorted(source_table.columns, key=lambda c: c.ordinal):
        declared = table.mapping_for(source_column.name)
        if declared is not None and declared.exclude:
            if source_column.name in key:
                problems.add(
                    f"{table.source_name}: key column {source_column.name!r} cannot be excluded",
                    hint="remove `exclude: true` or declare another `key:`",
                    code="R303", at=("columns", source_column.name),
                )
            excluded.append(source_column.name)
            continue
        if (source_column.name.lower() in ignoring and declared is None
                and source_column.name not in key):
            # Added in MySQL under `add_column: ignore`: left out as an excluded column is.
            excluded.append(source_column.name)
            ignored.append(source_column.name)
            continue
        column = _plan_column(
            table, source_column, key, live, pipeline.target.identifier_case,
            pipeline.source.tinyint1, problems
        )
        if column is not None:
            columns.append(column)

    return columns, excluded, ignored


def _plan_log_columns(table: TablePipeline, columns: Sequence[PlannedColumn],
                      data_columns: Sequence[PlannedColumn], case: str,
                      problems: PlanProblems) -> list[PlannedColumn]:
    """The log table's columns (``log_table: true`` on a merge-mode table), else none."""
    if not (table.log_table and table.mode == "merge"):
        return []
    by_name = {c.target_column: c for c in columns}
    log_columns = [by_name[c.target_column] for c in data_columns]
    log_columns += changelog_columns(case)
    check_column_collisions(f"{table.source_name} (log table)", log_columns, problems)
    return log_columns


def _check_configured_columns(table: TablePipeline, source_table: SourceTable,
                              problems: PlanProblems) -> None:
    """R302 for each column `columns:` configures that the source table does not have."""
    name = table.source_name
    for mapping in table.columns:
        if mapping.computed:
            continue  # checked by _plan_computed
        if not mapping.binding:
            # A pin (source_type only) of a column renamed or dropped in MySQL: a note for
            # offline planning, never a stop; `check` and `status` report it as stale.
            continue
        if source_table.column(mapping.source_column) is None:
            problems.add(
                f"{name}: column {mapping.source_column!r} is configured but not in the source",
                hint="if MySQL renamed or dropped it while no run followed, or the checkpoint "
                "that remembered it is gone, rename or remove the entry (`replicator init "
                "--refresh PIPELINE.yaml` rewrites the pins; settings are yours to move); "
                f"otherwise check its spelling; columns are: "
                f"{', '.join(c.name for c in source_table.columns)}",
                code="R302", at=("columns", mapping.source_column),
            )


def _replicator_columns(table: TablePipeline, case: IdentifierCase,
                        problems: PlanProblems) -> list[PlannedColumn]:
    """The columns replicator adds after the data columns: `metadata:`, or the changelog's
    fixed ones; soft-delete and scd2 columns by mode."""
    name = table.source_name
    columns: list[PlannedColumn] = []
    # A changelog table carries the fixed changelog columns instead of `metadata:`.
    for metadata in table.metadata if table.mode != "changelog" else ():
        if metadata == "source_table" and table.routed:
            continue  # a routed table has the column already, as its first key column
        if metadata not in METADATA_COLUMNS:
            problems.add(
                f"{name}: unknown metadata {metadata!r}",
                hint=f"use some of: {', '.join(METADATA_COLUMNS)}",
                code="R304", at=("metadata",),
            )
            continue
        for target_column in METADATA_COLUMNS[metadata]:
            columns.append(
                PlannedColumn(
                    target_column=target_identifier(target_column, case),
                    target_type=METADATA_TYPES[target_column],
                    role="metadata",
                    metadata=metadata,
                    origin="replicator",
                )
            )
    if table.mode == "changelog":
        columns += changelog_columns(case)
    if table.deletes == "soft" and table.mode == "merge":
        for target_column in SOFT_DELETE_COLUMNS:
            columns.append(
                PlannedColumn(
                    target_column=target_identifier(target_column, case),
                    target_type=METADATA_TYPES[target_column],
                    role="soft_delete",
                    origin="replicator",
                )
            )
    if table.mode == "scd2":
        columns += [
            PlannedColumn(
                target_column=target_identifier(target_column, case),
                target_type=METADATA_TYPES[target_column],
                role="scd2",
                nullable=target_column == "_VALID_TO",
                origin="replicator",
            )
            for target_column in SCD2_COLUMNS
        ]
    return columns


def _plan_filter(pipeline: Pipeline, table: TablePipeline, source_table: SourceTable,
                 problems: PlanProblems) -> tuple[tuple[str, Any], ...]:
    """The filter's input columns (name, Spark type); the filter must check and translate."""
    if not table.filter:
        return ()
    name = table.source_name
    tinyint1 = pipeline.source.tinyint1
    filter_inputs = tuple((c.name, spark_type_of(c.mysql_type, tinyint1=tinyint1))
                          for c in source_table.columns)
    if table.routed:
        filter_inputs += ((SOURCE_TABLE_COLUMN, SPARK_STRING),)
    try:
        check_filter(table.filter, dict(filter_inputs))
        translate(table.filter, dict(filter_inputs))
    except (ExpressionError, Untranslatable) as exc:
        problems.add(f"{name}: filter {table.filter!r}: {exc.message} (at character "
                     f"{exc.offset + 1})", hint=exc.hint, code=expression_code(exc.message),
                     at=("filter",))
    return filter_inputs


def _resolve_track_history(
    table: TablePipeline, data_columns: list[PlannedColumn], problems: PlanProblems
) -> tuple[str, ...]:
    """`track_history:` source column names -> the target names of those columns."""
    if not table.track_history:
        return ()
    by_source = {(c.source_column or "").lower(): c for c in data_columns}
    tracked = []
    for source_column in table.track_history:
        column = by_source.get(source_column.lower())
        if column is None:
            problems.add(
                f"{table.source_name}: track_history column {source_column!r} is not a "
                "replicated source column",
                hint="list source column names that are not excluded: "
                + ", ".join(c.source_column or "" for c in data_columns),
                code="R215", at=("track_history",),
            )
        elif column.is_key:
            problems.add(
                f"{table.source_name}: track_history column {source_column!r} is a key column",
                hint="a key change is a new key, not a new version: remove it from track_history",
                code="R215", at=("track_history",),
            )
        else:
            tracked.append(column.target_column)
    return tuple(tracked)


def _resolve_key(table: TablePipeline, source_table: SourceTable, problems: PlanProblems):
    if table.key:
        resolved: list[str] = []
        for name in table.key:
            column = source_table.column(name)
            if column is None:
                problems.add(
                    f"{table.source_name}: key column {name!r} is not in the source",
                    hint="`key:` lists source column names",
                    code="R303", at=("key",),
                )
            else:
                resolved.append(column.name)  # the catalog's spelling
        return tuple(resolved), "declared"
    if source_table.primary_key:
        return tuple(source_table.primary_key), "primary key"
    if table.mode == "changelog":
        return (), "declared"  # an append-only log matches no rows: a key is optional
    problems.add(
        f"{table.source_name}: the table has no primary key, so rows cannot be matched",
        hint="declare the columns that identify a row: key: [id]",
        code="R303",
    )
    return (), "declared"


def _plan_column(
    table: TablePipeline,
    source_column: SourceColumn,
    key: tuple[str, ...],
    live: bool,
    case: IdentifierCase,
    tinyint1: Tinyint1Policy,
    problems: PlanProblems,
) -> PlannedColumn | None:
    mapping = table.mapping_for(source_column.name)
    is_key = source_column.name in key
    mask = mapping.mask if mapping else None
    declared = bool(mapping and mapping.target_type)
    try:
        if mask is not None:
            if is_key and mask in ("redact", "null", "truncate"):
                raise PlanError(
                    f"key column {source_column.name!r} cannot be masked with {mask!r} "
                    "(distinct keys would collapse into one target row)",
                    hint="use mask: sha256 for a key column, or declare another `key:`",
                )
            target_type = STRING  # a hash, '***' or NULL
            if mask == "truncate":
                target_type = _truncated_type(mapping, source_column, tinyint1)
        elif mapping and mapping.target_type:
            target_type = parse_target_type(mapping.target_type)
        else:
            target_type = map_mysql_type(source_column.mysql_type, tinyint1=tinyint1)
    except PlanError as exc:
        problems.add(f"{table.source_name}.{source_column.name}: {exc.message}", exc.hint,
                     code="R305", at=("columns", source_column.name))
        return None
    target_name = (mapping.target_column if mapping else None) or source_column.name
    declared_source_type = bool(mapping and mapping.source_type)
    return PlannedColumn(
        target_column=target_identifier(target_name, case),
        target_type=target_type,
        source_column=source_column.name,
        mysql_type=source_column.mysql_type,
        nullable=source_column.nullable or mask == "null",
        is_key=is_key,
        mask=mask,
        declared_type=declared,
        origin="live" if live and not declared_source_type else "yaml",
        mask_salt=mapping.mask_salt if mapping else None,
        mask_keep_last=mapping.mask_keep_last if mapping else None,
        mask_length=mapping.mask_length if mapping else None,
        source_default=source_column.default,
    )


def _truncated_type(mapping, source_column: SourceColumn, tinyint1: Tinyint1Policy) -> TargetType:
    """`mask: {truncate: N}` keeps the column's text or binary type."""
    target_type = (parse_target_type(mapping.target_type) if mapping.target_type
                   else map_mysql_type(source_column.mysql_type, tinyint1=tinyint1))
    if target_type.kind not in ("string", "binary"):
        raise PlanError(
            f"mask truncate applies to text and binary columns; this one is "
            f"{source_column.mysql_type}",
            hint="use mask: {redact: {keep_last: N}}, or a computed column: "
            "{expression: \"substring(cast(x AS STRING), 1, N)\", type: VARCHAR}",
        )
    return target_type


def _yaml_location(pipeline: Pipeline, table: TablePipeline, *parts: str) -> str:
    index = next((n for n, t in enumerate(pipeline.tables) if t is table), None)
    where = ".".join((f"tables[{index}]" if index is not None else table.source_name, *parts))
    return f"{pipeline.path}: {where}" if pipeline.path else where


def _plan_computed(
    pipeline: Pipeline,
    table: TablePipeline,
    mapping,
    source_table: SourceTable,
    problems: PlanProblems,
) -> PlannedColumn | None:
    """A computed column: its expression checked against the live (or declared) columns."""
    name = mapping.source_column
    where = _yaml_location(pipeline, table, "columns", name)
    clash = source_table.column(name)
    if clash is not None:
        problems.add(f"{table.source_name}: computed column {name!r} has the name of source "
                     f"column {clash.name!r} ({where})",
                     hint="give the computed column another name (the key is its target name)",
                     code="R244", at=("columns", name))
        return None
    if not mapping.target_type:
        problems.add(f"{table.source_name}: computed column {name!r} has no type ({where})",
                     hint="declare its target type: type: NUMBER(14,2) (or VARCHAR, DATE, ...)",
                     code="R244", at=("columns", name))
        return None
    tinyint1 = pipeline.source.tinyint1
    types = {c.name: spark_type_of(c.mysql_type, tinyint1=tinyint1) for c in source_table.columns}
    try:
        target_type = parse_target_type(mapping.target_type)
        check_expression(mapping.expression, types)
        translate(mapping.expression, types)
    except (ExpressionError, Untranslatable) as exc:
        problems.add(f"{table.source_name}: computed column {name!r}: {exc.message} "
                     f"({where}.expression, at character {exc.offset + 1})", exc.hint,
                     code=expression_code(exc.message), at=("columns", name, "expression"))
        return None
    except PlanError as exc:
        problems.add(f"{table.source_name}: computed column {name!r}: {exc.message} ({where}.type)",
                     exc.hint, code="R244", at=("columns", name, "type"))
        return None
    wanted = {n.lower() for n in referenced_columns(mapping.expression)}
    inputs = tuple((c.name, types[c.name]) for c in source_table.columns if c.name.lower() in wanted)
    if mapping.mask == "truncate" and target_type.kind not in ("string", "binary"):
        problems.add(f"{table.source_name}: computed column {name!r}: mask truncate applies to "
                     f"text and binary types ({where}.mask)", hint="declare type: VARCHAR",
                     code="R245", at=("columns", name, "mask"))
        return None
    return PlannedColumn(
        target_column=target_identifier(mapping.target_column or name, pipeline.target.identifier_case),
        target_type=STRING if mapping.mask not in (None, "truncate") else target_type,
        source_column=None,
        mysql_type=None,
        nullable=True,
        mask=mapping.mask,
        declared_type=True,
        origin="yaml",
        mask_salt=mapping.mask_salt,
        mask_keep_last=mapping.mask_keep_last,
        mask_length=mapping.mask_length,
        expression=mapping.expression,
        expression_inputs=inputs,
    )


def _check_target_collisions(pipeline: Pipeline, tables: list[TablePlan],
                             problems: PlanProblems) -> None:
    """R202, on what the plan resolved (routes, log tables, names folded): validate's check of
    the same rule sees only what the YAML spells out."""
    entries = {t.source_name: n for n, t in reversed(list(enumerate(pipeline.tables)))}
    seen: dict[tuple[str, ...], str] = {}
    for table in tables:
        index = entries.get(table.source_name)
        parts = [table.target_parts] + ([table.log_parts] if table.log_table else [])
        for target in parts:
            folded = tuple(part.upper() for part in target)
            if folded in seen:
                problems.add(
                    f"{table.label} and {seen[folded]} both land in target table "
                    f"{target[-1]!r}",
                    hint="give one of them another `target:` name",
                    code="R202", at=("tables", index, "target") if index is not None else (),
                )
            seen[folded] = table.label
