"""replicator's own tables beside a target: the state table (one row per applied batch; its key
makes a replayed batch detectable), the dead-letter table (rows the target refused, under
``on_error: dead_letter``) and the lease table (one run of a pipeline applies batches:
``engine.state.lease``). Their column names follow the identifier policy like every target name.
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.identifiers import qualified_name
from replicator.plan.model import TablePlan
from replicator.plan.statements.names import column_definition, namespace, q, state_column
from replicator.plan.types import TargetType, integer

# The state table: one row per applied batch; its key makes a replayed batch detectable.
STATE_COLUMNS: tuple[tuple[str, TargetType, bool], ...] = (
    ("PIPELINE", TargetType("string"), False),
    ("TABLE", TargetType("string"), False),
    ("BATCH_ID", integer(19, 64), False),
    ("END_OFFSET", TargetType("string"), True),  # the batch's end offset as JSON text
    ("APPLIED_AT", TargetType("timestamp_tz", fsp=6), False),
)
STATE_KEY = ("PIPELINE", "TABLE", "BATCH_ID")


def state_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*namespace(table, dialect), table.state_table))


def create_state_table(table: TablePlan, dialect: Dialect) -> str:
    lines = [
        column_definition(state_column(table, name), dialect.type_name(type_), nullable)
        for name, type_, nullable in STATE_COLUMNS
    ]
    lines.append(f"PRIMARY KEY ({', '.join(q(state_column(table, n)) for n in STATE_KEY)})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {state_name(table, dialect)} (\n  {body}\n)"


def state_lookup(table: TablePlan, dialect: Dialect) -> str:
    """Is this batch already applied? Parameters: pipeline, table, batch_id."""
    p = dialect.parameter
    where = " AND ".join(f"{q(state_column(table, n))} = {p}" for n in STATE_KEY)
    return f"SELECT 1 FROM {state_name(table, dialect)} WHERE {where}"


def state_insert(table: TablePlan, dialect: Dialect) -> str:
    """Record an applied batch. Parameters: pipeline, table, batch_id, end_offset (JSON)."""
    p = dialect.parameter
    names = ", ".join(q(state_column(table, name)) for name, _, _ in STATE_COLUMNS)
    return (
        f"INSERT INTO {state_name(table, dialect)} ({names}) "
        f"SELECT {p}, {p}, {p}, {p}, {dialect.current_timestamp}"
    )


def state_latest(table: TablePlan, dialect: Dialect, count: int = 1) -> str:
    """The newest ``count`` state rows of a table, newest first. Parameters: pipeline, table."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (
        f"SELECT {c('BATCH_ID')}, {c('END_OFFSET')}, {c('APPLIED_AT')} "
        f"FROM {state_name(table, dialect)} "
        f"WHERE {c('PIPELINE')} = {p} AND {c('TABLE')} = {p} "
        f"ORDER BY {c('APPLIED_AT')} DESC, {c('BATCH_ID')} DESC LIMIT {int(count)}"
    )


# -- dead letters: rows the target refused (on_error: dead_letter) ---------------------------

DEAD_LETTER_COLUMNS: tuple[tuple[str, TargetType, bool], ...] = (
    ("PIPELINE", TargetType("string"), False),
    ("TABLE", TargetType("string"), False),
    ("BATCH_ID", integer(19, 64), False),
    ("KEY", TargetType("string"), True),  # the row's key as JSON text
    ("COLUMN", TargetType("string"), True),
    ("ERROR", TargetType("string"), False),
    ("BINLOG_FILE", TargetType("string"), True),  # the end of the batch that carried it
    ("BINLOG_POS", integer(19, 64), True),
    ("FAILED_AT", TargetType("timestamp_tz", fsp=6), False),
)


def dead_letter_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*namespace(table, dialect), table.dead_letter_table))


def create_dead_letter_table(table: TablePlan, dialect: Dialect) -> str:
    body = ",\n  ".join(
        column_definition(state_column(table, name), dialect.type_name(type_), nullable)
        for name, type_, nullable in DEAD_LETTER_COLUMNS
    )
    return f"CREATE TABLE IF NOT EXISTS {dead_letter_name(table, dialect)} (\n  {body}\n)"


def dead_letter_insert(table: TablePlan, dialect: Dialect) -> str:
    """One refused row. Parameters: pipeline, table, batch_id, key (JSON), column, error,
    binlog file, binlog pos."""
    p = dialect.parameter
    names = ", ".join(q(state_column(table, name)) for name, _, _ in DEAD_LETTER_COLUMNS)
    values = ", ".join([p] * (len(DEAD_LETTER_COLUMNS) - 1) + [dialect.current_timestamp])
    return f"INSERT INTO {dead_letter_name(table, dialect)} ({names}) SELECT {values}"


def dead_letter_count(table: TablePlan, dialect: Dialect) -> str:
    """How many rows of a table were set aside. Parameters: pipeline, table."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"SELECT COUNT(*) FROM {dead_letter_name(table, dialect)} "
            f"WHERE {c('PIPELINE')} = {p} AND {c('TABLE')} = {p}")


# -- the lease: one run of a pipeline applies batches (engine.state.lease) --------------------------

LEASE_COLUMNS: tuple[tuple[str, TargetType], ...] = (
    ("PIPELINE", TargetType("string")),
    ("GENERATION", integer(19, 64)),
    ("HOLDER", TargetType("string")),  # host/pid of the run; "" once released
    ("SINCE", TargetType("timestamp_tz", fsp=6)),
    ("RENEWED_AT", TargetType("timestamp_tz", fsp=6)),
)


def lease_name(table: TablePlan, dialect: Dialect) -> str:
    suffix = "_LEASE" if table.state_table.upper() == table.state_table else "_lease"
    return qualified_name((*namespace(table, dialect), table.state_table + suffix))


def create_lease_table(table: TablePlan, dialect: Dialect) -> str:
    lines = [column_definition(state_column(table, name), dialect.type_name(type_), True)
             for name, type_ in LEASE_COLUMNS]
    lines.append(f"PRIMARY KEY ({q(state_column(table, 'PIPELINE'))})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {lease_name(table, dialect)} (\n  {body}\n)"


def lease_read(table: TablePlan, dialect: Dialect) -> str:
    """generation, holder, since, renewed_at and the target's clock. Parameters: pipeline."""
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"SELECT {c('GENERATION')}, {c('HOLDER')}, {c('SINCE')}, {c('RENEWED_AT')}, "
            f"CURRENT_TIMESTAMP FROM {lease_name(table, dialect)} "
            f"WHERE {c('PIPELINE')} = {dialect.parameter}")


def lease_insert(table: TablePlan, dialect: Dialect) -> str:
    """The first lease of a pipeline (generation 1). Parameters: pipeline, holder."""
    p = dialect.parameter
    names = ", ".join(q(state_column(table, name)) for name, _ in LEASE_COLUMNS)
    return (f"INSERT INTO {lease_name(table, dialect)} ({names}) "
            f"VALUES ({p}, 1, {p}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


def lease_take(table: TablePlan, dialect: Dialect) -> str:
    """Take the lease over: the next generation, if nobody took it since it was read.
    Parameters: holder, pipeline, the generation read."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {lease_name(table, dialect)} SET {c('GENERATION')} = {c('GENERATION')} + 1, "
            f"{c('HOLDER')} = {p}, {c('SINCE')} = CURRENT_TIMESTAMP, "
            f"{c('RENEWED_AT')} = CURRENT_TIMESTAMP "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")


def lease_renew(table: TablePlan, dialect: Dialect) -> str:
    """The fence: touches the row only while the run's generation holds it (0 rows updated:
    another run took the lease). Inside a batch's transaction it also makes a concurrent take
    wait for the batch's commit. Parameters: pipeline, generation."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {lease_name(table, dialect)} SET {c('RENEWED_AT')} = CURRENT_TIMESTAMP "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")


def lease_claim(table: TablePlan, dialect: Dialect) -> str:
    """The run names its new warehouse session in the lease it holds (``engine.state.lease``).
    Parameters: holder, pipeline, generation."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {lease_name(table, dialect)} SET {c('HOLDER')} = {p} "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")


def lease_release(table: TablePlan, dialect: Dialect) -> str:
    """A run that ends gives the lease up (the next run takes it at once). Parameters:
    pipeline, generation."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {lease_name(table, dialect)} SET {c('HOLDER')} = '' "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")
