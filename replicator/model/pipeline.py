"""Frozen dataclasses describing one pipeline, as declared in its YAML file.

Names say which side they belong to: ``source_*`` is MySQL, ``target_*`` is the warehouse.
Values that can be derived (key columns from the primary key, target names from source
names, the server_id from the pipeline name) are ``None`` here when the YAML leaves them
out; ``plan`` resolves them against the live catalog (or reports what it could not).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from replicator.model.selection import SelectedSource, TableSelection

StartKind = Literal["initial", "latest", "position", "gtid"]
DeleteMode = Literal["hard", "soft"]
# merge: one target row per key (upsert). changelog: append every change, never compacted.
# scd2: one row per version of a key, with _VALID_FROM / _VALID_TO / _IS_CURRENT.
# outbox: the table is an outbox (see OutboxSpec); its routes are merge or changelog targets.
TableMode = Literal["merge", "changelog", "scd2", "outbox"]
RouteMode = Literal["merge", "changelog"]
# What an outbox value that does not convert to its column's type does: stop the pipeline
# with an error naming the row, route, column, path and value, or load NULL.
OutboxOnError = Literal["fail", "null"]
UnroutedPolicy = Literal["ignore", "fail"]
MaskKind = Literal["sha256", "md5", "redact", "null", "truncate"]
IdentifierCase = Literal["upper", "preserve"]
Tinyint1Policy = Literal["boolean", "integer"]
ZeroDatePolicy = Literal["null", "error"]
OnError = Literal["fail", "dead_letter"]
# MySQL's client --ssl-mode values (https://dev.mysql.com/doc/refman/8.0/en/connection-options.html#option_general_ssl-mode).
SslMode = Literal["DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"]
SSL_MODES: tuple[str, ...] = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
# What a run does on one kind of schema change of a replicated table (issue 18): follow it in
# the target, ignore it (keep the target as it is), or stop with a message.
SchemaChangeAction = Literal["follow", "ignore", "stop", "recopy"]

# Metadata a table can ask for in its target (``metadata: [op, ts, ...]``), and the target
# columns each one adds. The plan decides the warehouse types.
METADATA_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "op": ("_OP",),  # c / u / d / r (snapshot read)
    "ts": ("_TS_MS",),  # commit time of the source transaction, ms since epoch
    "synced_at": ("_SYNCED_AT",),  # when the batch was applied to the target
    "position": ("_BINLOG_FILE", "_BINLOG_POS"),  # where the change is in the binlog
    "transaction": ("_TRANSACTION_ID", "_TRANSACTION_ORDER"),  # GTID/xid, order inside it
    "source_table": ("_SOURCE_TABLE",),  # db.table the row came from
}
# The column a table fed by a `sources:` selection keys its rows by (the first key column):
# the same column, and value, as `metadata: [source_table]` (transform.stage: the batch's table column).
SOURCE_TABLE_COLUMN = METADATA_COLUMNS["source_table"][0]
DEFAULT_METADATA: tuple[str, ...] = ("op", "ts", "synced_at")
# Columns a soft-deleting table gets in its target.
SOFT_DELETE_COLUMNS: tuple[str, ...] = ("_DELETED", "_DELETED_AT")
# Columns every changelog row carries after the row image (`mode: changelog`, and the
# `<TARGET>_LOG` table of `log_table: true`), as in the managed services' `_log` tables.
CHANGELOG_COLUMNS: tuple[str, ...] = (
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER",
)
# Columns an SCD type 2 table gets after the row image and its metadata.
SCD2_COLUMNS: tuple[str, ...] = ("_VALID_FROM", "_VALID_TO", "_IS_CURRENT", "_CHANGE_SEQ")
LOG_TABLE_SUFFIX = "_LOG"

SERVER_ID_MIN = 1
SERVER_ID_MAX = 2**32 - 1
# Derived server_ids live in a band of their own so they rarely meet hand-picked ones
# (MySQL replicas are usually numbered 1..1000).
_DERIVED_SERVER_ID_BASE = 1_000_000_000
_DERIVED_SERVER_ID_SPAN = 1_000_000_000


def derive_server_id(pipeline_name: str) -> int:
    """A stable server_id for a pipeline that does not declare one.

    Stable across restarts (the seeds' random server_id makes every restart look like a new
    replica) and spread by pipeline name, so two pipelines rarely collide; readers started in
    parallel add their partition index to it (see ``source``).
    """
    return _DERIVED_SERVER_ID_BASE + zlib.crc32(pipeline_name.encode()) % _DERIVED_SERVER_ID_SPAN


@dataclass(frozen=True)
class StartPosition:
    """Where a fresh pipeline starts reading.

    ``initial``: snapshot every table, then stream from the position recorded before the
    snapshot (default). ``latest``: no snapshot, stream from the current binlog end.
    ``position``: stream from an explicit ``file``/``pos`` (a transaction boundary).
    ``gtid``: stream from after an executed GTID set.
    """

    kind: StartKind = "initial"
    file: str | None = None
    pos: int | None = None
    gtid: str | None = None


@dataclass(frozen=True)
class MySQLSource:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "replicator"
    password: str | None = field(default=None, repr=False)
    server_id: int | None = None  # None: derive_server_id(pipeline.name)
    start: StartPosition = StartPosition()
    connect_timeout_s: float = 10.0
    ssl: bool = False
    # None: VERIFY_IDENTITY when TLS is asked for (ssl: true or a CA/certificate), else
    # DISABLED. See ``tls_mode``.
    ssl_mode: SslMode | None = None
    ssl_ca: str | None = None  # PEM file of the CA(s) to trust instead of the system store
    ssl_cert: str | None = None  # client certificate (PEM), with ssl_key
    ssl_key: str | None = None
    # How MySQL zero dates ('0000-00-00') arrive in the target: NULL (with a warning in the
    # metrics) or a hard stop.
    zero_dates: ZeroDatePolicy = "null"
    # TINYINT(1) is MySQL's BOOLEAN; many schemas also use it as a small integer.
    tinyint1: Tinyint1Policy = "boolean"

    @property
    def tls_mode(self) -> SslMode:
        """The effective ssl_mode. As MySQL's client does, REQUIRED with a CA verifies the
        certificate against it (VERIFY_CA): a CA given and then ignored would be a trap."""
        if self.ssl_mode is not None:
            if self.ssl_mode == "REQUIRED" and self.ssl_ca:
                return "VERIFY_CA"
            return self.ssl_mode
        if self.ssl or self.ssl_ca or self.ssl_cert:
            return "VERIFY_IDENTITY"
        return "DISABLED"


@dataclass(frozen=True)
class SnowflakeTarget:
    """Snowflake by a named connection in ``connections.toml`` and/or explicit fields.

    Explicit fields override the named connection; ``SNOWFLAKE_*`` environment variables
    fill what neither gives (the connector's own conventions).
    """

    database: str
    schema: str
    connection: str | None = None
    account: str | None = None
    user: str | None = None
    role: str | None = None
    warehouse: str | None = None
    authenticator: str | None = None  # snowflake | SNOWFLAKE_JWT | oauth | programmatic_access_token ...
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    private_key_file: str | None = None
    private_key_file_pwd: str | None = field(default=None, repr=False)
    # An external stage (DB.SCHEMA.STAGE) over engine.landing's object-store location: the
    # warehouse COPYs the change files from it (plan.statements.stage_copy).
    stage: str | None = None

    kind: Literal["snowflake"] = "snowflake"


@dataclass(frozen=True)
class DuckDBTarget:
    """The embedded local target: one DuckDB file (one writer process at a time)."""

    path: str = "./warehouse.duckdb"
    schema: str = "main"
    # DuckDB configuration options for the connection (name, value), sorted by name.
    settings: tuple[tuple[str, str | int | bool], ...] = ()

    kind: Literal["duckdb"] = "duckdb"


@dataclass(frozen=True)
class TargetConfig:
    warehouse: SnowflakeTarget | DuckDBTarget
    # upper: fold target identifiers to upper case, Snowflake's own rule for unquoted names,
    # so users query DRIVER_TRIPS without quotes. preserve: keep the case as written.
    # Either way every identifier is quoted in generated SQL, so spaces and reserved words work.
    identifier_case: IdentifierCase = "upper"
    # The table where each applied batch is recorded, for exactly-once replay.
    state_table: str = "_REPLICATOR_STATE"
    # All tables of a batch (and their state rows) in one target transaction, so a source
    # transaction over several tables is never visible half applied (docs/guarantees.md).
    atomic: bool = True

    @property
    def kind(self) -> str:
        return self.warehouse.kind


@dataclass(frozen=True)
class BatchPolicy:
    """How much to gather before a MERGE: whichever limit is reached first.

    Fewer, larger MERGEs are much cheaper (measured: 100 MERGEs of 1k rows cost 25-30x one
    MERGE of 100k), so ``max_rows`` trades latency for throughput.
    """

    max_rows: int = 50_000
    max_delay_ms: int = 10_000


@dataclass(frozen=True)
class EngineConfig:
    master: str = "local[*]"
    checkpoint: str | None = None  # None: .replicator/<pipeline name>/
    conf: Mapping[str, str] = field(default_factory=dict)
    # How many Spark tasks decode a micro-batch's binlog range: a number, or "auto"
    # (``decode_partitions()``: one per core Spark has).
    decode_partitions: int | str = "auto"
    # Where executors land change batches as Parquet (engine.landing); None: the checkpoint
    # directory's landing/ (engine.landing module doc: layout and naming).
    landing: str | None = None
    # How long landed files are kept after their batch is applied (audits, reloads).
    landing_retention_ms: int = 24 * 3600 * 1000


AUTO_PARTITIONS = "auto"
# A part of a micro-batch costs a binlog connection and a Spark task: with "auto", no part of
# a full batch is smaller than this many row changes.
MIN_PARTITION_ROWS = 5_000
MAX_DECODE_PARTITIONS = 1_024  # the schema's maximum


def master_cores(master: str) -> int | None:
    """The task slots of a local master (``local``, ``local[N]``, ``local[*]``,
    ``local[N,F]``); None for a cluster's (known once its executors register)."""
    if master == "local":
        return 1
    if not (master.startswith("local[") and master.endswith("]")):
        return None
    slots = master[len("local["):-1].split(",")[0].strip()
    if slots == "*":
        return os.cpu_count() or 1
    return int(slots) if slots.isdigit() and int(slots) > 0 else None


def decode_partitions(engine: EngineConfig, batching: BatchPolicy,
                      cores: int | None = None) -> int:
    """How many Spark tasks decode one micro-batch. A number is taken as it is. ``auto``: one
    per core (``cores``: Spark's default parallelism, else the local master's), as long as a
    full batch (``batching.max_rows``) still gives each part ``MIN_PARTITION_ROWS``. A smaller
    batch is cut into fewer parts anyway (``source.binlog_ranges.split_range``)."""
    if engine.decode_partitions != AUTO_PARTITIONS:
        return max(1, int(engine.decode_partitions))
    slots = cores or master_cores(engine.master) or 1
    if batching.max_rows > 0:
        slots = min(slots, max(1, batching.max_rows // MIN_PARTITION_ROWS))
    return max(1, slots)


@dataclass(frozen=True)
class SchemaChangePolicy:
    """What a run does on each kind of DDL of a replicated table (`schema_changes:`, pipeline
    default + per-table override). The defaults are Flink CDC's LENIENT idea: additive and
    widening changes are followed, a dropped column stays in the target (NULL from then on),
    a type change the target cannot widen in place re-creates the column and copies the table
    again while the others stream, and so does a changed primary key (the stream restarts with
    it), destructive or ambiguous changes stop the pipeline. Which actions each kind allows is in
    ``engine.follow.schema_changes.POLICY_CHOICES`` (and the JSON Schema)."""

    add_column: SchemaChangeAction = "follow"
    widen_type: SchemaChangeAction = "follow"
    type_change: SchemaChangeAction = "recopy"
    rename_column: SchemaChangeAction = "follow"
    drop_column: SchemaChangeAction = "ignore"
    key_change: SchemaChangeAction = "recopy"
    truncate: SchemaChangeAction = "stop"
    rename_table: SchemaChangeAction = "follow"
    drop_table: SchemaChangeAction = "stop"

    def action(self, kind: str) -> SchemaChangeAction:
        return getattr(self, kind)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ColumnMapping:
    """What happens to one source column on its way to the target."""

    source_column: str
    target_column: str | None = None  # None: the source name under the identifier policy
    target_type: str | None = None  # None: mapped from the MySQL type
    # The MySQL column type as information_schema writes it (``decimal(38,10)``): lets
    # ``plan --offline`` work without a server; checked against the live schema otherwise.
    source_type: str | None = None
    exclude: bool = False
    mask: MaskKind | None = None
    # `mask: {sha256: {salt: ...}}`: hashed as sha256(salt + value); never printed.
    mask_salt: str | None = field(default=None, repr=False)
    mask_keep_last: int | None = None  # `mask: {redact: {keep_last: N}}`
    mask_length: int | None = None  # `mask: {truncate: N}`
    # A computed column (not a source column): a Spark SQL expression over the row's source
    # columns, and its target type (`type:` is required with it).
    expression: str | None = None

    @property
    def computed(self) -> bool:
        return self.expression is not None

    @property
    def binding(self) -> bool:
        """Whether the entry states an intent for its column (a target name or type, a mask,
        an exclude, an expression). An entry with only ``source_type`` is a *pin*: a note
        for offline planning (``replicator init`` pins every column), which never stops a run
        when its column is renamed, dropped or retyped (``model.followed``)."""
        return bool(self.target_column or self.target_type or self.exclude or self.mask
                    or self.expression)


@dataclass(frozen=True)
class OutboxColumn:
    """One target column of an outbox route: where its value is in the payload, its type."""

    name: str  # the target column, as written (identifier_case applies)
    path: str | None  # JSON path into the payload ($.a.b, $.a[0], $['odd key']) ...
    type: str  # declared target type (plan.types.parse_target_type)
    on_error: OutboxOnError | None = None  # None: the route's
    column: str | None = None  # ... or a column of the outbox row itself (event id, time)


@dataclass(frozen=True)
class OutboxRoute:
    """Events whose type column holds ``type_value`` -> one target table."""

    type_value: str
    target_table: str
    key: tuple[str, ...]  # names of route columns
    columns: tuple[OutboxColumn, ...]
    mode: RouteMode = "merge"
    deletes: DeleteMode = "hard"
    metadata: tuple[str, ...] = DEFAULT_METADATA
    delete_when: str | None = None  # JSON path: a truthy value there deletes the key
    on_error: OutboxOnError = "fail"  # default of the route's non-key columns

    def column(self, name: str) -> OutboxColumn | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None


@dataclass(frozen=True)
class OutboxSpec:
    """``mode: outbox``: rows inserted into the table are events, flattened into routes."""

    type_column: str  # source column whose value picks the route
    payload_column: str  # source column holding the JSON document
    routes: tuple[OutboxRoute, ...]
    unrouted: UnroutedPolicy = "ignore"


@dataclass(frozen=True)
class TablePipeline(SelectedSource):
    # One source table; for a table fed by a `sources:` selection both are empty and
    # ``selection`` says which tables feed it (see ``routed``).
    source_database: str
    source_table: str
    target_table: str | None = None  # None: the source table name under the identifier policy
    key: tuple[str, ...] | None = None  # source column names; None: the primary key
    # A pin (``model.followed``): the primary key `replicator init` read, for `plan
    # --offline`'s catalog only; the live primary key always wins.
    primary_key: tuple[str, ...] | None = None
    deletes: DeleteMode = "hard"
    # A row the target refuses: stop (fail) or set it aside in the dead-letter table.
    on_error: OnError = "fail"
    columns: tuple[ColumnMapping, ...] = ()
    metadata: tuple[str, ...] = DEFAULT_METADATA
    # A MySQL-flavoured SQL predicate over source columns; rows that fail it are not
    # replicated (and a row that stops matching is deleted from the target).
    filter: str | None = None
    batching: BatchPolicy | None = None  # None: the pipeline's batching
    mode: TableMode = "merge"
    # merge mode: also append every change to <target>_LOG (same transaction as the MERGE).
    log_table: bool = False
    # scd2 mode: source columns whose changes open a new version; changes to other columns
    # update the current version in place. None: every column is tracked.
    track_history: tuple[str, ...] | None = None
    # mode outbox: the type/payload columns and the routes (None for every other mode).
    outbox: OutboxSpec | None = None
    # `sources: {include, exclude}`: every matching source table lands in target_table,
    # keyed by (SOURCE_TABLE_COLUMN, *key).
    selection: TableSelection | None = None
    # None: the pipeline's `schema_changes:` (a per-table override is resolved by config.build)
    schema_changes: SchemaChangePolicy | None = None

    def mapping_for(self, source_column: str) -> ColumnMapping | None:
        """The declared mapping of a source column (MySQL column names are case-insensitive)."""
        wanted = source_column.lower()
        for mapping in self.columns:
            if mapping.source_column.lower() == wanted and not mapping.computed:
                return mapping
        return None


@dataclass(frozen=True)
class Pipeline:
    name: str
    source: MySQLSource
    target: TargetConfig
    tables: tuple[TablePipeline, ...]
    batching: BatchPolicy = BatchPolicy()
    engine: EngineConfig = EngineConfig()
    version: int = 1
    path: str | None = None  # the YAML file it was loaded from
    schema_changes: SchemaChangePolicy = SchemaChangePolicy()
    # The pipeline as its YAML declares it, when this one has column renames and drops a run
    # followed applied (``model.followed.with_followed``); None: this is the YAML's own.
    declared: Pipeline | None = field(default=None, compare=False, repr=False)
    # ... and what was applied: db.table -> declared name -> current column (None: dropped).
    followed: Mapping[str, Mapping[str, str | None]] | None = field(
        default=None, compare=False, repr=False)

    @property
    def server_id(self) -> int:
        return self.source.server_id or derive_server_id(self.name)

    @property
    def checkpoint_dir(self) -> str:
        return self.engine.checkpoint or f".replicator/{self.name}"

    def batching_for(self, table: TablePipeline) -> BatchPolicy:
        return table.batching or self.batching

    def schema_changes_for(self, table: TablePipeline) -> SchemaChangePolicy:
        return table.schema_changes or self.schema_changes

    def table(self, name: str) -> TablePipeline:
        """Look a table up by source name (db.table) or target name."""
        for table in self.tables:
            if name.lower() in (table.source_name.lower(), (table.target_table or "").lower()):
                return table
        for table in self.tables:
            if table.selection is not None and table.selection.matches(name):
                return table
        raise KeyError(name)

    @property
    def fixed_tables(self) -> list[tuple[str, str]]:
        """(database, table) of the tables named by `source:`."""
        return [(t.source_database, t.source_table) for t in self.tables if not t.routed]

    @property
    def selections(self) -> list[TableSelection]:
        return [t.selection for t in self.tables if t.selection is not None]
