"""Outbox tables (``mode: outbox``) -> one TablePlan per route (pure).

An outbox route's columns come from the YAML only (name, JSON path, declared type): the
payload has no catalog. The outbox table itself must exist with its type and payload
columns, which is checked against the live catalog (or the ``source_type`` declarations
under ``plan --offline``). Every route plan reads the outbox table (``TablePlan.reads``);
``transform.outbox`` turns the outbox rows into the route's change batch.
"""

from __future__ import annotations

from replicator.errors import PlanError
from replicator.model.catalog import (
    BINARY_TYPES,
    INTEGER_TYPES,
    STRING_TYPES,
    MySQLType,
    MySQLTypeError,
    SourceColumn,
    SourceTable,
)
from replicator.model.jsonpath import PathError, parse_path
from replicator.model.pipeline import (
    METADATA_COLUMNS,
    SOFT_DELETE_COLUMNS,
    IdentifierCase,
    OutboxRoute,
    Pipeline,
    TablePipeline,
)
from replicator.plan.columns import (
    METADATA_TYPES,
    changelog_columns,
    check_column_collisions,
    namespace,
    staging_table_name,
    with_staging_names,
)
from replicator.plan.identifiers import target_identifier
from replicator.plan.model import OutboxPlan, PlannedColumn, TablePlan
from replicator.plan.problems import PlanProblems
from replicator.plan.types import parse_target_type

# MySQL types that can hold a JSON document (text in some form).
PAYLOAD_TYPES = frozenset({"json", *STRING_TYPES, *BINARY_TYPES}) - {"enum", "set"}
# MySQL types a type column can have (its value is compared as text with the route names).
TYPE_COLUMN_TYPES = frozenset({*STRING_TYPES, *BINARY_TYPES, *INTEGER_TYPES})


def check_outbox_columns(table: TablePipeline, source_table: SourceTable, problems: PlanProblems,
                         *, live: bool) -> None:
    """The outbox table has the type and payload columns, of types that can work."""
    spec = table.outbox
    assert spec is not None
    columns = ", ".join(c.name for c in source_table.columns) or "(none)"
    where = "in MySQL" if live else "among its declared columns (source_type)"
    if spec.type_column.lower() == spec.payload_column.lower():
        problems.add(f"{table.source_name}: outbox type_column and payload_column are both "
                     f"{spec.type_column!r}", hint="they are two different columns of the table",
                     code="R238", at=("outbox", "payload_column"))
        return
    for role, name, allowed, wanted in (
        ("type_column", spec.type_column, TYPE_COLUMN_TYPES, "a string or integer type"),
        ("payload_column", spec.payload_column, PAYLOAD_TYPES, "JSON or a text type"),
    ):
        column = source_table.column(name)
        if column is None:
            problems.add(f"{table.source_name}: outbox {role} {name!r} is not a column of the "
                         f"table {where}", hint=f"the table's columns are: {columns}",
                         code="R238", at=("outbox", role))
        elif column.mysql_type.name not in allowed:
            problems.add(f"{table.source_name}: outbox {role} {name!r} is "
                         f"{column.mysql_type}, not {wanted}",
                         hint=f"point {role} at the column that holds {wanted}",
                         code="R238", at=("outbox", role))


def _row_column(source_table: SourceTable, name: str) -> str:
    column = source_table.column(name)
    return column.name if column is not None else name  # the catalog's spelling


def _check_row_columns(table: TablePipeline, source_table: SourceTable, problems: PlanProblems,
                       *, live: bool) -> None:
    """Route columns taken from the outbox row (`column:`) name columns it has."""
    spec = table.outbox
    assert spec is not None
    where = "in MySQL" if live else "among its declared columns (source_type)"
    for route in spec.routes:
        for column in route.columns:
            if column.column is not None and source_table.column(column.column) is None:
                problems.add(
                    f"{table.source_name}[{route.type_value}].{column.name}: column "
                    f"{column.column!r} is not a column of the outbox table {where}",
                    hint="the outbox's columns are: "
                    + ", ".join(c.name for c in source_table.columns),
                    code="R239", at=("outbox", "routes", route.type_value, "columns", column.name),
                )


def plan_outbox(pipeline: Pipeline, table: TablePipeline, source_table: SourceTable,
                live: bool, problems: PlanProblems) -> list[TablePlan]:
    spec = table.outbox
    assert spec is not None
    before = len(problems.items)
    check_outbox_columns(table, source_table, problems, live=live)
    if len(problems.items) > before:
        return []
    type_column = source_table.column(spec.type_column)
    payload_column = source_table.column(spec.payload_column)
    assert type_column is not None and payload_column is not None
    routed = tuple(route.type_value for route in spec.routes)
    _check_row_columns(table, source_table, problems, live=live)
    if len(problems.items) > before:
        return []
    plans = []
    for index, route in enumerate(spec.routes):
        outbox = OutboxPlan(
            route=route.type_value,
            type_column=type_column.name,
            payload_column=payload_column.name,
            paths=tuple((c.name, c.path) for c in route.columns if c.path is not None),
            row_columns=tuple(
                (c.name, _row_column(source_table, c.column))
                for c in route.columns if c.column is not None
            ),
            null_on_error=tuple(
                c.name for c in route.columns
                if c.name not in route.key and (c.on_error or route.on_error) == "null"
            ),
            delete_when=route.delete_when,
            outbox_key=tuple(source_table.primary_key),
            routed=routed,
            unrouted=spec.unrouted,
            first=index == 0,
        )
        table_base = problems.base
        problems.base = (*table_base, "outbox", "routes", route.type_value)
        try:
            planned = _plan_route(pipeline, table, source_table, route, outbox, problems)
        finally:
            problems.base = table_base
        if planned is not None:
            plans.append(planned)
    return plans


def _plan_route(pipeline: Pipeline, table: TablePipeline, source_table: SourceTable,
                route: OutboxRoute, outbox: OutboxPlan, problems: PlanProblems) -> TablePlan | None:
    case = pipeline.target.identifier_case
    label = f"{table.source_name}[{route.type_value}]"
    before = len(problems.items)
    columns: list[PlannedColumn] = []
    for column in route.columns:
        try:
            target_type = parse_target_type(column.type)
            if column.path is not None:
                parse_path(column.path)
        except PlanError as exc:
            problems.add(f"{label}.{column.name}: {exc.message}", exc.hint,
                         code="R310", at=("columns", column.name))
            continue
        except PathError as exc:
            problems.add(f"{label}.{column.name}: {exc.message}", exc.hint,
                         code="R310", at=("columns", column.name))
            continue
        is_key = column.name in route.key
        columns.append(PlannedColumn(
            target_column=target_identifier(column.name, case),
            target_type=target_type,
            source_column=column.name,
            nullable=not is_key,
            is_key=is_key,
            declared_type=True,
            origin="yaml",
        ))
    if route.delete_when is not None:
        try:
            parse_path(route.delete_when)
        except PathError as exc:
            problems.add(f"{label}: delete_when: {exc.message}", exc.hint, code="R233",
                         at=("delete_when",))
    names = {c.name for c in route.columns}
    for key in route.key:
        if key not in names:
            problems.add(f"{label}: key column {key!r} is not among the route's columns",
                         hint=f"key lists route column names: {', '.join(sorted(names))}",
                         code="R232", at=("key",))
    if not route.key:
        problems.add(f"{label}: the route has no key", hint="key: [id]", code="R232")
    columns += _metadata(label, route, case, problems)
    check_column_collisions(label, columns, problems)
    if len(problems.items) > before:
        return None
    target_table = target_identifier(route.target_table, case)
    return TablePlan(
        pipeline_name=pipeline.name,
        source_database=source_table.database,
        source_table=source_table.table,
        target_namespace=namespace(pipeline),
        target_table=target_table,
        columns=tuple(with_staging_names(columns)),
        source_key=tuple(route.key),
        key_origin="declared",
        deletes=route.deletes,
        staging_table=staging_table_name(target_table),
        state_table=target_identifier(pipeline.target.state_table, case),
        identifier_case=case,
        mode=route.mode,
        outbox=outbox,
    )


def _metadata(label: str, route: OutboxRoute, case: IdentifierCase,
              problems: PlanProblems) -> list[PlannedColumn]:
    if route.mode == "changelog":
        return changelog_columns(case)
    columns = []
    for metadata in route.metadata:
        if metadata not in METADATA_COLUMNS:
            problems.add(f"{label}: unknown metadata {metadata!r}",
                         hint=f"use some of: {', '.join(METADATA_COLUMNS)}",
                         code="R304", at=("metadata",))
            continue
        columns += [
            PlannedColumn(target_column=target_identifier(name, case),
                          target_type=METADATA_TYPES[name], role="metadata",
                          metadata=metadata, origin="replicator")
            for name in METADATA_COLUMNS[metadata]
        ]
    if route.deletes == "soft":
        columns += [
            PlannedColumn(target_column=target_identifier(name, case),
                          target_type=METADATA_TYPES[name], role="soft_delete",
                          origin="replicator")
            for name in SOFT_DELETE_COLUMNS
        ]
    return columns


def offline_outbox_table(table: TablePipeline, problems: PlanProblems) -> SourceTable:
    """The outbox table as ``plan --offline`` knows it: its declared columns (source_type),
    or, when it declares none, just the type (varchar) and payload (json) columns."""
    spec = table.outbox
    assert spec is not None
    columns: list[SourceColumn] = []
    declared = [m for m in table.columns if m.source_type]
    for ordinal, mapping in enumerate(declared, start=1):
        try:
            mysql_type = MySQLType.parse(mapping.source_type or "")
        except MySQLTypeError as exc:
            problems.add(f"{table.source_name}.{mapping.source_column}: {exc}",
                         hint="write the type as MySQL's information_schema does: varchar(50)",
                         code="R309", at=("columns", mapping.source_column, "source_type"))
            continue
        columns.append(SourceColumn(name=mapping.source_column, mysql_type=mysql_type,
                                    nullable=True, ordinal=ordinal))
    if not declared:
        columns = [
            SourceColumn(name=spec.type_column, mysql_type=MySQLType.parse("varchar(255)"),
                         nullable=True, ordinal=1),
            SourceColumn(name=spec.payload_column, mysql_type=MySQLType.parse("json"),
                         nullable=True, ordinal=2),
        ]
    return SourceTable(database=table.source_database, table=table.source_table,
                       columns=tuple(columns), primary_key=())
