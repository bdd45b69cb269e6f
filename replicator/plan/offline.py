"""The catalog ``plan --offline`` works from: the YAML's declared ``source_type`` only.

``replicator init`` pins every column's type and the primary key in the YAML, so a plan needs
no server (CI, code review); a column without a pin is one problem in the PlanError, with the
setting that fixes it.
"""

from __future__ import annotations

from replicator.model.catalog import Catalog, MySQLType, MySQLTypeError, SourceColumn, SourceTable
from replicator.model.pipeline import Pipeline
from replicator.plan.outbox import offline_outbox_table
from replicator.plan.problems import PlanProblems, table_path


def offline_catalog(pipeline: Pipeline) -> Catalog:
    """The catalog ``plan --offline`` works from: the YAML's declared ``source_type`` only."""
    problems = PlanProblems()
    tables = []
    for table in pipeline.tables:
        problems.base = table_path(pipeline, table)
        if table.outbox is not None:  # the routes' columns come from the YAML
            tables.append(offline_outbox_table(table, problems))
            continue
        columns = []
        missing = []
        for ordinal, mapping in enumerate(table.columns, start=1):
            if mapping.computed:
                continue  # not a source column
            if mapping.source_type is None:
                if not mapping.exclude:
                    missing.append(mapping.source_column)
                continue
            try:
                mysql_type = MySQLType.parse(mapping.source_type)
            except MySQLTypeError as exc:
                problems.add(
                    f"{table.source_name}.{mapping.source_column}: {exc}",
                    hint="write the type as MySQL's information_schema does: decimal(10,2)",
                    code="R309", at=("columns", mapping.source_column, "source_type"),
                )
                continue
            key = table.key or table.primary_key or ()
            columns.append(
                SourceColumn(
                    name=mapping.source_column,
                    mysql_type=mysql_type,
                    nullable=mapping.source_column not in key,
                    ordinal=ordinal,
                )
            )
        if missing:
            problems.add(
                f"{table.source_name}: no source_type declared for "
                f"{', '.join(repr(m) for m in missing)}",
                hint="add `source_type:` (e.g. source_type: 'varchar(255)') to those columns, "
                "or run without --offline to read them from MySQL",
                code="R309", at=("columns", missing[0]),
            )
        if not columns and not missing:
            problems.add(
                f"{table.source_name}: no columns declared, --offline knows nothing about it",
                hint="declare its columns with `source_type:`, or run without --offline",
                code="R309",
            )
        tables.append(
            SourceTable(
                # A routed table: one placeholder named by its patterns stands for every
                # table the selection will match (routing.plan_routed).
                database="" if table.routed else table.source_database,
                table=table.source_name if table.routed else table.source_table,
                columns=tuple(columns),
                # offline: the `primary_key:` pin, where `replicator init` wrote one
                primary_key=tuple(table.primary_key or ()),
            )
        )
    problems.raise_if_any()
    return Catalog(tables=tuple(tables), live=False)
