"""What every target table plan shares, whoever plans it (``builder`` for tables, ``outbox``
for outbox routes): the target schema, the metadata and changelog columns, staging names, and
the check that no two columns land in one target column."""

from __future__ import annotations

import dataclasses
import re
import zlib

from replicator.model.pipeline import CHANGELOG_COLUMNS, DuckDBTarget, IdentifierCase, Pipeline
from replicator.plan.identifiers import target_identifier
from replicator.plan.model import RESERVED_PREFIX, PlannedColumn
from replicator.plan.problems import PlanProblems
from replicator.plan.types import BOOLEAN, STRING, TargetType, integer

STAGING_PREFIX = "_REPLICATOR_STAGE_"

# The warehouse type of each metadata column (names come from model.METADATA_COLUMNS).
METADATA_TYPES: dict[str, TargetType] = {
    "_OP": STRING,
    "_TS_MS": integer(19, 64),
    "_SYNCED_AT": TargetType("timestamp_tz", fsp=6),
    "_BINLOG_FILE": STRING,
    "_BINLOG_POS": integer(19, 64),
    "_TRANSACTION_ID": STRING,
    "_TRANSACTION_ORDER": integer(10, 64),
    "_SOURCE_TABLE": STRING,
    "_DELETED": BOOLEAN,
    "_DELETED_AT": TargetType("timestamp_tz", fsp=6),
    "_VALID_FROM": TargetType("timestamp_tz", fsp=6),
    "_VALID_TO": TargetType("timestamp_tz", fsp=6),
    "_IS_CURRENT": BOOLEAN,
    # The binlog position of the last change applied to a version, zero-padded so that it
    # sorts as text (a 64-bit number cannot hold file sequence, pos and row index).
    "_CHANGE_SEQ": STRING,
}
# Which metadata value each changelog column holds (plan.statements.stage_copy.METADATA_SOURCES: its batch column).
CHANGELOG_METADATA = {
    "_OP": "op",
    "_DELETED": "deleted",
    "_TS_MS": "ts",
    "_BINLOG_FILE": "position",
    "_BINLOG_POS": "position",
    "_TRANSACTION_ID": "transaction",
    "_TRANSACTION_ORDER": "transaction",
}


def namespace(pipeline: Pipeline) -> tuple[str, ...]:
    """The target schema every table of the pipeline lands in (database and schema on
    Snowflake, schema on DuckDB), folded."""
    warehouse = pipeline.target.warehouse
    case = pipeline.target.identifier_case
    if isinstance(warehouse, DuckDBTarget):
        return (target_identifier(warehouse.schema, case),)
    return (target_identifier(warehouse.database, case), target_identifier(warehouse.schema, case))


def changelog_columns(case: IdentifierCase) -> list[PlannedColumn]:
    """The metadata columns of a changelog (and of a log table)."""
    return [
        PlannedColumn(
            target_column=target_identifier(target_column, case),
            target_type=METADATA_TYPES[target_column],
            role="metadata",
            metadata=CHANGELOG_METADATA[target_column],
            origin="replicator",
        )
        for target_column in CHANGELOG_COLUMNS
    ]


_PLAIN_IDENTIFIER = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def with_staging_names(columns: list[PlannedColumn]) -> list[PlannedColumn]:
    """Columns whose target name is not a plain identifier get a plain staging name."""
    return [
        c
        if _PLAIN_IDENTIFIER.match(c.target_column)
        else dataclasses.replace(c, staging_column=f"{RESERVED_PREFIX}COL_{position}")
        for position, c in enumerate(columns, start=1)
    ]


def staging_table_name(target_table: str) -> str:
    """A plain identifier (see PlannedColumn.staging_column), unique per target table."""
    plain = re.sub(r"[^A-Za-z0-9_]", "_", target_table).upper()
    if plain == target_table.upper() and _PLAIN_IDENTIFIER.match(plain):
        return STAGING_PREFIX + plain
    return f"{STAGING_PREFIX}{plain}_{zlib.crc32(target_table.encode()):08X}"


def check_column_collisions(name: str, columns: list[PlannedColumn], problems: PlanProblems,
                            ) -> None:
    """R306 for a reserved target column name, R203 for two columns landing in one."""
    seen: dict[str, str] = {}
    for column in columns:
        folded = column.target_column.upper()  # both warehouses may match names case-blind
        origin = column.source_column or column.target_column
        if folded.startswith(RESERVED_PREFIX):
            problems.add(
                f"{name}: target column {column.target_column!r} starts with "
                f"{RESERVED_PREFIX}, which replicator reserves",
                hint=f"rename it: columns: {{{origin}: {{name: ...}}}}",
                code="R306", at=("columns", origin),
            )
        if folded in seen:
            problems.add(
                f"{name}: {origin!r} and {seen[folded]!r} both land in target column "
                f"{column.target_column!r}",
                hint=f"rename one of them: columns: {{{origin}: {{name: ...}}}}",
                code="R203", at=("columns", origin),
            )
        seen[folded] = origin
