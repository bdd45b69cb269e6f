"""Routing: the source tables a ``sources:`` selection matches, planned as ONE target table.

``plan_routed`` picks the matching tables from the catalog and merges their columns into one
``SourceTable`` that the ordinary planning turns into the target's columns: a column some
tables lack is NULL for their rows; a column whose types differ between tables (after the
type mapping) is a plan error naming both, unless the YAML declares its target ``type:``.
Every table must agree on the key (the declared ``key:``, else the primary key). The target
gets ``SOURCE_TABLE_COLUMN`` (``db.table`` as MySQL names it) as its first key column, so equal
keys of different shards stay distinct rows, and one MERGE per micro-batch covers every shard.

Offline (``plan --offline``) no table is matched: the YAML's declared columns stand for all.
"""

from __future__ import annotations

from replicator.errors import PlanError
from replicator.model.catalog import Catalog, SourceColumn, SourceTable
from replicator.model.pipeline import SOURCE_TABLE_COLUMN, IdentifierCase, Pipeline, TablePipeline
from replicator.plan.identifiers import target_identifier
from replicator.plan.model import PlannedColumn
from replicator.plan.problems import PlanProblems
from replicator.plan.types import STRING, TargetType, map_mysql_type, parse_target_type


def source_table_column(case: IdentifierCase) -> PlannedColumn:
    """The first key column of a routed target: which source table a row came from. Its value
    is the change batch's table column, added by ``transform.stage`` (the value `metadata: [source_table]`
    has), so compaction, MERGE, SCD2 and changelog rows all key on it."""
    return PlannedColumn(
        target_column=target_identifier(SOURCE_TABLE_COLUMN, case),
        target_type=STRING,
        source_column=SOURCE_TABLE_COLUMN,
        nullable=False,
        is_key=True,
        origin="replicator",
    )


def matching_tables(table: TablePipeline, catalog: Catalog) -> list[SourceTable]:
    """The catalog's tables the selection matches, by name."""
    assert table.selection is not None
    return sorted((t for t in catalog.tables if table.selection.matches(t.name)),
                  key=lambda t: t.name.lower())


def plan_routed(
    pipeline: Pipeline, table: TablePipeline, catalog: Catalog, problems: PlanProblems
) -> tuple[SourceTable, tuple[str, ...]] | None:
    """(the merged source table, the matched source names), or None after adding problems."""
    name = table.source_name
    if not catalog.live:
        placeholder = catalog.table("", name)
        return (placeholder, ()) if placeholder is not None else None
    matched = matching_tables(table, catalog)
    if not matched:
        problems.add(
            f"{table.target_table}: no source table matches sources {name}",
            hint="patterns match the whole database.table name, case-insensitively "
            "(shop_[0-9]+\\.orders); check them, the tables' existence and the replicator "
            "user's SELECT grant",
            code="R307", at=("sources",),
        )
        return None
    merged = _merge(pipeline, table, matched, problems)
    if merged is None:
        return None
    return merged, tuple(t.name for t in matched)


def _target_type(pipeline: Pipeline, table: TablePipeline, column: SourceColumn) -> TargetType | None:
    mapping = table.mapping_for(column.name)
    try:
        if mapping is not None and (mapping.exclude or mapping.mask or mapping.target_type):
            return parse_target_type(mapping.target_type) if mapping.target_type else None
        return map_mysql_type(column.mysql_type, tinyint1=pipeline.source.tinyint1)
    except PlanError:
        return None  # reported by the ordinary planning of the merged column


def _merge(
    pipeline: Pipeline, table: TablePipeline, matched: list[SourceTable], problems: PlanProblems
) -> SourceTable | None:
    before = len(problems.items)
    name = table.source_name
    columns: dict[str, tuple[SourceColumn, SourceTable]] = {}
    order: list[str] = []
    for source in matched:
        for column in sorted(source.columns, key=lambda c: c.ordinal):
            folded = column.name.lower()
            seen = columns.get(folded)
            if seen is None:
                columns[folded] = (column, source)
                order.append(folded)
                continue
            first, first_table = seen
            mine = _target_type(pipeline, table, column)
            theirs = _target_type(pipeline, table, first)
            if mine != theirs:
                problems.add(
                    f"{name}: column {column.name!r} is {first.mysql_type} in "
                    f"{first_table.name} but {column.mysql_type} in {source.name}",
                    hint=f"make the tables agree, or declare one target type for it: "
                    f"columns: {{{column.name}: {{type: VARCHAR}}}}",
                    code="R308", at=("sources",),
                )
            elif column.nullable and not first.nullable:
                columns[folded] = (column, first_table)  # NULL in some table: nullable
    # A column some tables lack is NULL in their rows.
    merged_columns = []
    for ordinal, folded in enumerate(order, start=1):
        column, _ = columns[folded]
        everywhere = all(t.column(column.name) is not None for t in matched)
        merged_columns.append(SourceColumn(
            name=column.name, mysql_type=column.mysql_type,
            nullable=column.nullable or not everywhere, ordinal=ordinal,
            charset=column.charset, default=column.default))

    primary_key: tuple[str, ...] = ()
    if table.key:
        for source in matched:
            lacking = [k for k in table.key if source.column(k) is None]
            if lacking:
                problems.add(
                    f"{name}: {source.name} has no key column {', '.join(map(repr, lacking))}",
                    hint="every selected table needs the `key:` columns; exclude the table "
                    "(sources.exclude) or declare another key",
                    code="R308", at=("key",),
                )
    else:
        first = matched[0]
        primary_key = first.primary_key
        for source in matched[1:]:
            if [k.lower() for k in source.primary_key] != [k.lower() for k in primary_key]:
                problems.add(
                    f"{name}: {first.name} has primary key ({', '.join(primary_key)}) but "
                    f"{source.name} has ({', '.join(source.primary_key)})",
                    hint="declare the key every selected table shares: key: [id], or exclude "
                    "the odd table (sources.exclude)",
                    code="R308", at=("sources",),
                )
                break
        # Key columns are NOT NULL in every table that has them.
        merged_columns = [
            c if c.name.lower() not in {k.lower() for k in primary_key}
            else SourceColumn(c.name, c.mysql_type, False, c.ordinal, c.charset, c.default)
            for c in merged_columns
        ]
    if len(problems.items) > before:
        return None
    return SourceTable(database="", table="", columns=tuple(merged_columns),
                       primary_key=primary_key)
