"""Plan -> the ordered statements a sink runs for a table, in one dialect.

``replicator plan`` prints exactly the programs of ``plan.program`` that the sink executes:
the setup (then an ALTER per column the target lacks, decided from the columns it read), and
one batch, with a placeholder where the batch's Parquet files go.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import replicator.plan.program as program
from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan
from replicator.plan.program import StagingQuery, Statement
from replicator.plan.stage_roads import driver_reasons, staged_by_driver
from replicator.plan.statements import merging, stage_copy, stage_expressions
from replicator.plan.transpile.translator import describe_transforms


def table_statements(table: TablePlan, dialect: Dialect,
                     snapshot: StagingQuery | None = None) -> list[Statement]:
    """In execution order: the setup, then one batch (then one snapshot batch whose chunk
    files the warehouse stages, ``snapshot``: ``transform.snapshot_staging``; with an
    external stage, every batch's: ``transform.stage.external_staging``)."""
    staged = snapshot if dialect.external_stage else None
    return [
        *program.setup_program(table, dialect),
        *program.setup_end(dialect),
        *(program.batch_program(table, dialect, query=staged) if staged else ()),
        *program.batch_program(table, dialect),
        *(program.batch_program(table, dialect, query=snapshot)
          if snapshot and not staged else ()),
        *_fresh_copy(table, dialect),
        *_recopy_end(table, dialect),
    ]


def _comment(statement: Statement, *, atomic: bool = False,
             dialect: Dialect | None = None) -> str:
    comment = f"-- {statement.purpose}"
    if statement.role == "skip":
        skip = "; ".join(s.sql for s in program.ON_SKIP)
        comment += (f" (a row: that table is left out; a row for every table: {skip} and stop)"
                    if atomic else f" (a row: {skip} and stop)")
    if statement.role == "columns" and statement.subject == "staging":
        comment += " (CREATE OR REPLACE it when they differ from the plan's)"
    elif statement.role == "columns":
        comment += " (ALTER TABLE ... ADD COLUMN for each planned column it lacks)"
    elif statement.role == "key":
        comment += (" (another key, after a key change in MySQL: the table is rebuilt under"
                    " this one, in one transaction, before the re-copy)"
                    if dialect is None or dialect.enforces_primary_key else
                    " (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY"
                    " KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)")
    return comment


def render_sql(table: TablePlan, dialect: Dialect, snapshot: StagingQuery | None = None,
               chunk_read: tuple[str, str | None] | None = None) -> str:
    """One table's statements as a SQL script, each preceded by a comment saying why;
    ``snapshot``: also the program of a snapshot batch the warehouse stages itself;
    ``chunk_read``: the MySQL SELECT of a snapshot chunk and its pushed-down filter
    (``source.snapshot.chunk_select_preview``), printed as comments (it is MySQL's SQL)."""
    parts = [f"-- {table.label} -> {'.'.join(table.target_parts)} ({dialect.name})"]
    if table.routed:
        parts[0] += (
            "\n-- sources: " + ", ".join(table.sources) if table.sources else
            "\n-- sources: every table the patterns match at run time, keyed by _SOURCE_TABLE")
    by_driver = staged_by_driver(table, dialect)
    on_stage = bool(dialect.external_stage) and not by_driver
    transforms = describe_transforms(table)
    if transforms and on_stage:
        transforms += stage_expressions.describe(table)  # and DuckDB's, for the driver's batches
    if transforms:
        engine = ("Snowflake, in the staging INSERT below, or DuckDB for a batch the driver "
                  "stages" if on_stage else "DuckDB over each change batch before staging")
        parts.append(f"-- transforms, evaluated by {engine} (Spark SQL translated):\n" + "\n".join(f"--   {line}" for line in transforms))
    if chunk_read is not None:
        parts.append(_chunk_read(table, *chunk_read))
    setup = [*program.setup_program(table, dialect), *program.setup_end(dialect)]
    parts += [f"{_comment(s, dialect=dialect)}\n{s.sql};" for s in setup]
    staged = snapshot if dialect.external_stage else None
    if staged is not None:
        if dialect.executors_put:
            parts.append("-- each change file, by the executor task that landed it (engine."
                         "landing is local; the driver reads and uploads none):\n"
                         f"{stage_copy.put_landed(dialect.external_stage or '', '')};")
        parts.append(f"-- each batch, stream or snapshot (its change files are COPYed from "
                     f"@{dialect.external_stage}; no row passes through the driver):")
        parts += [f"{_comment(s)}\n{s.sql};"
                  for s in program.batch_program(table, dialect, query=staged)]
        parts.append("-- a batch whose files need the driver (a batch over "
                     "engine.apply.applier.SLICE_ROWS changes, a source column added with a DEFAULT "
                     "while its files were landed, a followed TRUNCATE or re-copy in the "
                     "batch): the driver stages it, as without target.snowflake.stage:")
    elif by_driver:
        parts.append(driver_road(table, dialect))
    else:
        parts.append("-- each batch:")
    parts += [f"{_comment(s)}\n{s.sql};" for s in program.batch_program(table, dialect)]
    if snapshot is not None and staged is None:
        parts.append("-- each snapshot batch (a group of chunk files; the warehouse runs the "
                     "transform step over them):")
        parts += [f"{_comment(s)}\n{s.sql};"
                  for s in program.batch_program(table, dialect, query=snapshot)]
    parts += [f"{_comment(s)}\n{s.sql};" for s in _fresh_copy(table, dialect)]
    parts += [f"{_comment(s)}\n{s.sql};" for s in _recopy_end(table, dialect)]
    return "\n\n".join(parts) + "\n"


def driver_road(table: TablePlan, dialect: Dialect) -> str:
    """Why, under ``target.snowflake.stage``, the driver stages every batch of ``table``
    (``stage_roads``; the plan's warning R312), as the comment before its program."""
    whats = "; ".join(what for what, _ in driver_reasons(table))
    return (f"-- each batch, stream or snapshot, by the driver (R312): target.snowflake.stage "
            f"cannot stage {whats} in Snowflake SQL yet, so the driver reads the batch's "
            "change files from engine.landing, runs the transform step in DuckDB and PUTs the "
            f"staged rows, as without a stage (the other tables' files are COPYed from "
            f"@{dialect.external_stage}; in an atomic batch both kinds commit together):")


def atomic_statements(tables: Sequence[TablePlan], dialect: Dialect,
                      staging: Callable[[TablePlan], StagingQuery | None] | None = None
                      ) -> list[Statement]:
    """The program of a stream batch that changed several tables (``target.atomic``): ONE
    transaction; a batch runs it for the tables it changed, in this order. ``staging``:
    with an external stage, each table's staging query (``transform.snapshot_staging``)."""
    return program.atomic_program(
        [program.AtomicPart(table, query=staging(table) if staging and dialect.external_stage
                            else None)
         for table in tables], dialect)


def render_atomic_sql(tables: Sequence[TablePlan], dialect: Dialect,
                      staging: Callable[[TablePlan], StagingQuery | None] | None = None) -> str:
    """``atomic_statements`` as a SQL script (after the tables' own scripts)."""
    head = ("-- target.atomic: each stream batch that changed several of these tables runs "
            "ONE transaction for all of them\n-- (instead of the per-table batch above; a "
            "batch of one table, and snapshot batches, run that one):")
    body = [f"{_comment(s, atomic=True)}\n{s.sql};" for s in atomic_statements(tables, dialect, staging)]
    return "\n\n".join([head, *body]) + "\n"


def _chunk_read(table: TablePlan, select: str, predicate: str | None) -> str:
    lines = ["-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):",
             f"--   {select}"]
    if predicate is not None:
        lines.append("--   (the filter as far as MySQL decides it exactly as Spark does is pushed "
                     f"down: {predicate}; the transform step applies the whole filter)")
    elif table.filter:
        lines.append("--   (no filter is pushed down: no part of it is provably exact in MySQL, "
                     "or a table reading the same source needs every row)")
    return "\n".join(lines)


def _fresh_copy(table: TablePlan, dialect: Dialect) -> list[Statement]:
    """A copy into a target that held no row as it began: read once before its first batch,
    then each of its batches runs the INSERT in the MERGE's place."""
    if not program.fresh_copy(table):
        return []
    return [program.target_has_rows(table, dialect),
            Statement("in the MERGE's place, in each snapshot batch of a copy that began with "
                      "the target empty: insert the copied rows",
                      merging.insert_copied(table, dialect))]


def _recopy_end(table: TablePlan, dialect: Dialect) -> list[Statement]:
    """The end of a re-copy (``replicator snapshot --table``) of a table whose batches stamp
    every row they write; others find the rows to delete by comparing, as ``verify`` does."""
    if not merging.deletes_not_rewritten(table):
        return []
    return [Statement("after the last chunk of a re-copy (replicator snapshot --table; its "
                      "chunks run the snapshot batch program after an empty first batch): "
                      "delete the rows no batch wrote since that first batch",
                      merging.delete_not_rewritten(table, dialect))]


__all__ = ["Statement", "atomic_statements", "driver_road", "render_atomic_sql", "render_sql", "table_statements"]
