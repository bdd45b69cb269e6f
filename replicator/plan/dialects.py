"""One ``Dialect`` per warehouse: the differences between Snowflake and DuckDB, as data.

Statement functions (``plan.statements``) read these fields instead of branching on the dialect
name. Differences measured on this machine (DuckDB 2.0, fakesnow 0.12.1, see DESIGN.md):
DuckDB has no NUMBER / TIMESTAMP_NTZ names, its FLOAT is 4 bytes (DOUBLE is 8), JSON instead of
VARIANT, one action per ALTER TABLE, unqualified column names in UPDATE SET, and TEMP tables
live in their own catalog (no qualified TEMP names). Snowflake staging is a TRANSIENT table
loaded by PUT + COPY; DuckDB staging a TEMP table filled by read_parquet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from replicator.errors import PlanError
from replicator.model.pipeline import Pipeline, SnowflakeTarget
from replicator.plan.types import TargetType


@dataclass(frozen=True)
class Dialect:
    name: str
    # TargetType.kind -> type name template, formatted with the TargetType's fields.
    type_names: Mapping[str, str]
    # DuckDB integers are named by width; Snowflake's by digits (NUMBER(p,0)).
    integer_names: Mapping[int, str] = field(default_factory=dict)
    # How a staged JSON text becomes the target's JSON type, in the MERGE's source query.
    json_from_text: str = "{}"
    current_timestamp: str = "CURRENT_TIMESTAMP"
    # ALTER TABLE t ADD COLUMN a ..., ADD COLUMN b ... in one statement?
    multiple_alter_actions: bool = True
    # MERGE ... UPDATE SET tgt.col = ... (Snowflake) or SET col = ... (DuckDB)?
    qualified_update_set: bool = True
    # The staging table: TEMPORARY (private to a connection, so created by every batch on
    # its own cursor) or TRANSIENT (created once by the setup, loaded by COPY: fakesnow cannot
    # COPY ... MATCH_BY_COLUMN_NAME into a TEMPORARY table, and a transient table has no
    # fail-safe storage to pay for). Only a non-TEMP staging name is qualified (DuckDB has no
    # qualified TEMP names).
    staging_kind: str = "TEMPORARY"
    staging_per_batch: bool = True
    qualified_staging_names: bool = False
    # Load staging by PUT + COPY through the staging table's stage (Snowflake), or read the
    # Parquet files in place (DuckDB's read_parquet).
    load_through_stage: bool = False
    # The warehouse runs the transform step itself over a batch's change files (the landing
    # zone's Parquet, ``model.change_batch`` layout), instead of the driver staging them
    # first: the relation those files are read as (one parameter: the list of paths; the
    # row's number in its file as the column ``{ord}``) and the statement that makes the
    # session read instants in UTC, as the transform step's casts assume. None: the driver
    # stages (Snowflake: its COPY cannot run our DuckDB SQL).
    change_files: str | None = None
    utc_session: str | None = None
    # Snowflake with ``target.snowflake.stage``: the user's external stage over the landing
    # zone's object-store location. The change files are COPYed from it by name into a raw
    # table and the transform step runs as Snowflake SQL over that table
    # (``statements.stage_copy``), so no row passes through the driver.
    external_stage: str | None = None
    # With a local engine.landing the stage is internal: the executor task that lands a
    # file PUTs it there (``stage_copy.put_landed``), and the driver only COPYs.
    executors_put: bool = False
    # An instant from microseconds since the epoch, as the transform step types its
    # timestamps where the warehouse stages (``transform.stage.statement``).
    instant_from_micros: str = "timezone('UTC', make_timestamp({}))"
    # How a batch's transaction starts: an explicit statement, or (None) the first statement
    # opens it (a Snowflake connection with autocommit off: every statement does).
    begin_transaction: str | None = "BEGIN TRANSACTION"
    implicit_transactions: bool = False
    # COMMIT the staging load before the MERGE: fakesnow runs a MERGE only as the first
    # statement of a transaction (DESIGN.md); staging holds only this batch, so it is the
    # same on Snowflake.
    commit_after_load: bool = False
    # The driver describes every column's type exactly as ``type_name`` wrote it (DuckDB:
    # tests/unit/test_plan_types.py holds it), so a column whose type changed in MySQL while
    # no run followed it is found by its arguments too (``types.lags_plan``).
    exact_described_types: bool = False
    # The kinds (``TargetType.kind``) the driver describes exactly while describing no other
    # kind at all (Snowflake's: fixed-point numbers, by precision and scale): a column of
    # such a kind is compared by its arguments, and a column it leaves undescribed is known
    # to be of another kind.
    described_kinds: frozenset[str] = frozenset()
    # Does the sink create the target schema itself? (Snowflake schemas are the admin's.)
    create_schema: bool = False
    # How many parts qualify a table name before its own: database.schema (2) or schema (1).
    namespace_depth: int = 2
    # Bind parameter marker (the Snowflake connector is opened with paramstyle="qmark").
    parameter: str = "?"
    # Does the target enforce a table's PRIMARY KEY (DuckDB)? A key changed in MySQL then
    # needs the target rebuilt under the new one (DuckDB cannot drop a constraint). Where it
    # does not (Snowflake: keys are informational metadata), the declared key is replaced in
    # place, DROP PRIMARY KEY then ADD PRIMARY KEY: no rows move, and grants, history, streams
    # and clustering stay with the table (``tables.rekey_target``).
    enforces_primary_key: bool = False
    # The target's key is read by SHOW PRIMARY KEYS, a row per column (Snowflake), rather
    # than from a catalog view (DuckDB's duckdb_constraints(): one row, a list of columns).
    show_primary_keys: bool = False
    # A backslash in a string literal escapes the next character (Snowflake; DuckDB follows
    # standard SQL): a column DEFAULT's literal doubles it there.
    backslash_escapes: bool = False
    # TargetType.kind -> the largest value (bytes) a column of that kind takes; a bigger one
    # is refused by the load (``sink.limits`` names its row first). Empty: no limit known.
    max_value_bytes: Mapping[str, int] = field(default_factory=dict)

    @property
    def reads_change_files(self) -> bool:
        """Whether the warehouse stages a batch's change files itself (its own SQL over the
        landing zone's files), so the driver reads none of their rows."""
        return self.change_files is not None or self.external_stage is not None

    def type_name(self, target_type: TargetType) -> str:
        if target_type.kind == "integer" and self.integer_names:
            return self.integer_names[target_type.bits or 64]
        template = self.type_names[target_type.kind]
        if target_type.kind == "string" and target_type.length and "{length}" not in template:
            template = self.type_names.get("string_length", template)
        return template.format(
            precision=target_type.precision,
            scale=target_type.scale,
            fsp=target_type.fsp if target_type.fsp is not None else 6,
            length=target_type.length,
        )

    def staging_type_name(self, target_type: TargetType) -> str:
        """Staging columns hold JSON as text: both drivers load Arrow strings, not JSON."""
        if target_type.kind == "json":
            return self.type_names["string"]
        return self.type_name(target_type)


SNOWFLAKE = Dialect(
    name="snowflake",
    backslash_escapes=True,
    type_names={
        "integer": "NUMBER({precision},0)",
        "decimal": "NUMBER({precision},{scale})",
        "float": "FLOAT",  # Snowflake FLOAT is 8 bytes
        "string": "VARCHAR",
        "string_length": "VARCHAR({length})",
        "time_text": "VARCHAR",
        "boolean": "BOOLEAN",
        "date": "DATE",
        "timestamp": "TIMESTAMP_NTZ({fsp})",
        "timestamp_tz": "TIMESTAMP_TZ({fsp})",
        "binary": "BINARY",
        "json": "VARIANT",
    },
    json_from_text="PARSE_JSON({})",
    # Scale 6: the number counts microseconds; a TIMESTAMP_TZ is an instant whatever its zone.
    # https://docs.snowflake.com/en/sql-reference/functions/to_timestamp
    instant_from_micros="TO_TIMESTAMP_TZ({}, 6)",
    current_timestamp="CURRENT_TIMESTAMP()",
    # Snowflake takes `ADD COLUMN a T1, b T2`, fakesnow (DuckDB underneath) does not: one
    # column per statement runs on both, and added columns are rare.
    multiple_alter_actions=False,
    qualified_update_set=True,
    staging_kind="TRANSIENT",
    staging_per_batch=False,
    qualified_staging_names=True,
    load_through_stage=True,
    begin_transaction=None,
    implicit_transactions=True,
    commit_after_load=True,
    create_schema=False,
    show_primary_keys=True,
    # The connector's cursor description gives NUMBER's precision and scale (type code 0),
    # and of every other type only its code (``SnowflakeSink.described_type``).
    described_kinds=frozenset({"integer", "decimal"}),
    # VARCHAR / VARIANT without a larger declared length: 16 MB; BINARY: 8 MB.
    max_value_bytes={"string": 16_777_216, "json": 16_777_216, "binary": 8_388_608},
)

DUCKDB = Dialect(
    name="duckdb",
    type_names={
        "decimal": "DECIMAL({precision},{scale})",
        "float": "DOUBLE",  # DuckDB FLOAT is 4 bytes
        "string": "VARCHAR",
        "time_text": "VARCHAR",
        "boolean": "BOOLEAN",
        "date": "DATE",
        "timestamp": "TIMESTAMP",  # microseconds
        "timestamp_tz": "TIMESTAMPTZ",
        "binary": "BLOB",
        "json": "JSON",
    },
    integer_names={8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"},
    json_from_text="CAST({} AS JSON)",
    current_timestamp="CURRENT_TIMESTAMP",
    multiple_alter_actions=False,
    qualified_update_set=False,
    create_schema=True,
    namespace_depth=1,
    enforces_primary_key=True,
    exact_described_types=True,
    change_files=("SELECT * EXCLUDE (file_row_number), file_row_number AS {ord} "
                  "FROM read_parquet(?, file_row_number = true)"),
    utc_session="SET TimeZone = 'UTC'",
)

DIALECTS: Mapping[str, Dialect] = {"snowflake": SNOWFLAKE, "duckdb": DUCKDB}


def landed_locally(landing: str | None) -> bool:
    """Whether ``engine.landing`` is a local path: then ``target.snowflake.stage`` names an
    internal stage, and the executor task that lands a file PUTs it there
    (``statements.stage_copy.put_landed``)."""
    return bool(landing) and ("://" not in (landing or "") or (landing or "").startswith("file://"))


def pipeline_dialect(pipeline: Pipeline) -> Dialect:
    """The dialect of the pipeline's target, with what its configuration adds: Snowflake
    with ``target.snowflake.stage`` reads change files from that external stage."""
    warehouse = pipeline.target.warehouse
    if isinstance(warehouse, SnowflakeTarget) and warehouse.stage:
        return replace(SNOWFLAKE, external_stage=warehouse.stage,
                       executors_put=landed_locally(pipeline.engine.landing))
    return get_dialect(pipeline.target.kind)


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name.lower()]
    except KeyError:
        raise PlanError(
            f"unknown dialect {name!r}", hint=f"use one of: {', '.join(DIALECTS)}"
        ) from None
