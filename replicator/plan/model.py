"""The plan: frozen values saying exactly what lands where, per table.

Built once by ``builder.build_plan`` (pure), printed by ``replicator plan``, executed by the
sinks: nothing computes names or types twice. Target names here are already under the
identifier policy (folded or preserved) but not quoted; ``identifiers.quote_identifier``
quotes them when SQL is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from replicator.model.catalog import MySQLType
from replicator.model.pipeline import DeleteMode, IdentifierCase, MaskKind, TableMode
from replicator.model.selection import SelectedSource, TableSelection
from replicator.plan.types import TargetType

if TYPE_CHECKING:
    from replicator.plan.expressions.spark_types import SparkType
    from replicator.plan.problems import PlanProblem

ColumnRole = Literal["data", "metadata", "soft_delete", "scd2"]
ColumnOrigin = Literal["live", "yaml", "replicator"]

# Internal staging columns the MERGE needs (never in the target).
STAGE_OP = "_REPLICATOR_OP"  # c / u / d / r of the change
STAGE_SEQ = "_REPLICATOR_SEQ"  # order of the change inside the staged batch (last wins)
STAGE_TS = "_REPLICATOR_TS"  # commit time of the change (soft delete's _DELETED_AT)
INTERNAL_STAGE_COLUMNS = (STAGE_OP, STAGE_SEQ, STAGE_TS)
# SCD2 staging rows are versions, not changes: STAGE_TS is when the version starts,
# STAGE_VALID_TO when a later change of the same batch ended it (NULL: still current), and
# STAGE_CHANGE_SEQ the binlog position of the last change folded into it (see CHANGE_SEQ).
STAGE_VALID_TO = "_REPLICATOR_VALID_TO"
STAGE_CHANGE_SEQ = "_REPLICATOR_CHANGE_SEQ"
SCD2_STAGE_COLUMNS = (STAGE_VALID_TO, STAGE_CHANGE_SEQ)
RESERVED_PREFIX = "_REPLICATOR_"  # target columns may not start with it
COMPUTED_IMAGE_PREFIX = "\x00computed:"  # row-image keys of computed values (PlannedColumn.image_key)


@dataclass(frozen=True)
class PlannedColumn:
    target_column: str
    target_type: TargetType
    role: ColumnRole = "data"
    source_column: str | None = None  # None for metadata / soft-delete columns
    mysql_type: MySQLType | None = None
    nullable: bool = True
    is_key: bool = False
    mask: MaskKind | None = None
    declared_type: bool = False  # the YAML's `type:` won over the mapping
    origin: ColumnOrigin = "live"  # where the column's MySQL type came from
    metadata: str | None = None  # "op", "ts", ... for metadata columns
    # Its name in the staging table: the target name when that is a plain upper-case
    # identifier, else _REPLICATOR_COL_<n>. Bulk loaders (write_pandas, COPY column lists)
    # handle plain names only: fakesnow's breaks on a '"' in a column name, and the
    # connector's rejects unquoted names that are not valid identifiers.
    staging_column: str | None = None
    # Mask parameters (`mask: {sha256: {salt}}`, `{redact: {keep_last}}`, `{truncate: N}`).
    mask_salt: str | None = field(default=None, repr=False)
    mask_keep_last: int | None = None
    mask_length: int | None = None
    # A computed column: its Spark SQL expression and the source columns it reads, with the
    # Spark type each reads as (plan.expressions.spark_types.spark_type_of).
    expression: str | None = None
    expression_inputs: tuple[tuple[str, SparkType], ...] = ()
    # The MySQL column's DEFAULT as information_schema.COLUMNS shows it: a column added to
    # the target takes it for the rows already there, as MySQL shows them (issue 18).
    source_default: str | None = None

    @property
    def image_key(self) -> str:
        """Where the column's value is in a row image: its source column, or (computed) the
        key a per-row image carries the computed value under (scd2's tracked columns; the
        tests' per-row reference) — no MySQL name can equal it."""
        if self.expression is not None:
            return COMPUTED_IMAGE_PREFIX + self.target_column
        return self.source_column or ""

    @property
    def staging_name(self) -> str:
        return self.staging_column or self.target_column

    @property
    def staged(self) -> bool:
        """Computed by the MERGE itself (_SYNCED_AT, soft-delete flags) or staged as data."""
        return self.role not in ("soft_delete", "scd2") and self.metadata != "synced_at"


@dataclass(frozen=True)
class OutboxPlan:
    """What makes a TablePlan an outbox route (``transform.outbox`` flattens its payloads).

    The route's data columns are named by the YAML (their ``source_column`` is the route
    column's name, also its column in the route's change batch ``transform.outbox`` builds).
    """

    route: str  # the type column's value whose events land here
    type_column: str  # outbox table columns (the catalog's spelling)
    payload_column: str
    paths: tuple[tuple[str, str], ...]  # (route column, JSON path) of payload columns
    # (route column, outbox column) of the columns taken from the outbox row itself.
    row_columns: tuple[tuple[str, str], ...] = ()
    null_on_error: tuple[str, ...] = ()  # route columns that load NULL when a value fails
    delete_when: str | None = None  # JSON path; a truthy value there deletes the key
    outbox_key: tuple[str, ...] = ()  # the outbox table's primary key (names rows in errors)
    routed: tuple[str, ...] = ()  # every routed type value of this outbox
    unrouted: Literal["ignore", "fail"] = "ignore"
    first: bool = True  # the outbox's first route: counts the unrouted events


@dataclass(frozen=True)
class TablePlan(SelectedSource):
    pipeline_name: str
    source_database: str
    source_table: str
    target_namespace: tuple[str, ...]  # (database, schema) in Snowflake, (schema,) in DuckDB
    target_table: str
    columns: tuple[PlannedColumn, ...]  # target order: data, metadata, soft-delete columns
    source_key: tuple[str, ...]
    key_origin: Literal["declared", "primary key"]
    deletes: DeleteMode
    staging_table: str
    state_table: str
    identifier_case: IdentifierCase
    # A row the target refuses: "fail" or "dead_letter" (into ``dead_letter_table``).
    on_error: str = "fail"
    dead_letter_table: str = "_REPLICATOR_DEAD_LETTERS"
    filter: str | None = None
    excluded: tuple[str, ...] = ()  # source columns left out on purpose
    # Those of ``excluded`` that were added in MySQL and ignored by the table's
    # `schema_changes.add_column: ignore` (``builder.build_plan``'s ``ignored``).
    ignored: tuple[str, ...] = ()
    # The Spark type of every source column the filter may read (excluded ones too, and
    # _SOURCE_TABLE of a routed table): plan.expressions.spark_types.spark_type_of.
    filter_inputs: tuple[tuple[str, SparkType], ...] = ()
    mode: TableMode = "merge"
    # `log_table: true`: the <TARGET>_LOG table appended beside the merged target, and its
    # columns (the row image plus CHANGELOG_COLUMNS). A changelog-mode table is its own log:
    # its `columns` already have that layout and `log_table` stays None.
    log_table: str | None = None
    log_columns: tuple[PlannedColumn, ...] = ()
    # scd2: target columns whose changes open a new version (empty: every non-key column).
    track_history: tuple[str, ...] = ()
    outbox: OutboxPlan | None = None  # set for an outbox route (several may read one table)
    # `sources:` (routing): the selection feeding this target, and the source tables it
    # matched in the live catalog the plan was built from (empty offline). source_database
    # and source_table are then empty; the key starts with SOURCE_TABLE_COLUMN.
    selection: TableSelection | None = None
    sources: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The table's name in messages: its source, or ``db.outbox[route]`` for a route."""
        if self.outbox is None:
            return self.source_name
        return f"{self.source_name}[{self.outbox.route}]"

    @property
    def source_names(self) -> tuple[str, ...]:
        """The source tables (``db.table``) this plan copies and compares, one by one."""
        return self.sources if self.selection is not None else (self.source_name,)

    def reads(self, source_name: str) -> bool:
        """Whether changes of the source table ``db.table`` feed this target table
        (MySQL names compare case-insensitively). A routed table reads every table its
        selection matches, also one created after the plan was built."""
        if self.selection is not None:
            return self.selection.matches(source_name)
        return source_name.lower() == self.source_name.lower()

    @property
    def target_parts(self) -> tuple[str, ...]:
        return (*self.target_namespace, self.target_table)

    @property
    def state_parts(self) -> tuple[str, ...]:
        return (*self.target_namespace, self.state_table)

    @property
    def data_columns(self) -> tuple[PlannedColumn, ...]:
        return tuple(c for c in self.columns if c.role == "data")

    @property
    def computed_columns(self) -> tuple[PlannedColumn, ...]:
        return tuple(c for c in self.data_columns if c.expression is not None)

    @property
    def key_columns(self) -> tuple[PlannedColumn, ...]:
        by_source = {c.source_column: c for c in self.data_columns}
        return tuple(by_source[name] for name in self.source_key)

    @property
    def target_key(self) -> tuple[str, ...]:
        return tuple(c.target_column for c in self.key_columns)

    @property
    def staged_columns(self) -> tuple[PlannedColumn, ...]:
        """Columns that travel in the staging table (internal columns come after): the
        target's, then the log table's that the target lacks."""
        staged = [c for c in self.columns if c.staged]
        names = {c.staging_name for c in staged}
        staged += [c for c in self.log_columns if c.staged and c.staging_name not in names]
        return tuple(staged)

    @property
    def keeps_every_change(self) -> bool:
        """Changelog rows (own or a log table) need every change, not the last per key."""
        return self.mode == "changelog" or self.log_table is not None

    @property
    def log_parts(self) -> tuple[str, ...]:
        if self.log_table is None:
            raise ValueError(f"{self.source_name} has no log table")
        return (*self.target_namespace, self.log_table)

    @property
    def tracked_columns(self) -> tuple[PlannedColumn, ...]:
        """scd2: the non-key data columns whose changes open a new version."""
        candidates = [c for c in self.data_columns if not c.is_key]
        if not self.track_history:
            return tuple(candidates)
        return tuple(c for c in candidates if c.target_column in self.track_history)

    def column(self, target_column: str) -> PlannedColumn:
        for column in self.columns:
            if column.target_column == target_column:
                return column
        raise KeyError(target_column)


@dataclass(frozen=True)
class Plan:
    pipeline_name: str
    target_kind: str  # the pipeline's warehouse: "snowflake" | "duckdb"
    tables: tuple[TablePlan, ...]
    live_catalog: bool = True  # False: built from the YAML only (plan --offline)
    # Warnings found while planning (``PlanProblems.note``: R312, a table whose batches the
    # driver stages under target.snowflake.stage): `plan` reports them, `run` says them.
    notes: tuple[PlanProblem, ...] = ()

    def table(self, name: str) -> TablePlan:
        """By source name (db.table), source table name or target table name."""
        wanted = name.lower()
        for table in self.tables:
            if wanted in (
                table.source_name.lower(),
                table.source_table.lower(),
                table.target_table.lower(),
            ):
                return table
        for table in self.tables:  # a source table of a routed target
            if table.routed and "." in name and table.reads(name):
                return table
        raise KeyError(name)

    def source_names(self) -> list[str]:
        """Every source table the plan copies, as ``db.table``."""
        return [name for table in self.tables for name in table.source_names]
