"""A deterministic OLTP workload for the benchmark: same seed, same statements.

Three tables with the columns that are awkward to carry exactly (DECIMAL(12,2) and
DECIMAL(38,10), DATETIME(6), TIMESTAMP, utf8mb4 VARCHAR with unicode, quotes and backslashes,
JSON, ENUM, nullable columns, BIGINT UNSIGNED up to its max), changed by single-row
INSERT/UPDATE/DELETE statements the way an OLTP application does: transactions of a few
hundred statements interleaved across the tables, 60% inserts, 30% updates, 10% deletes.

The binlog therefore has one Table_map + one rows event per row change, the shape that costs
python-mysql-replication the most (DESIGN.md). Statements are *sent* efficiently: a whole
transaction (BEGIN; ...; COMMIT) goes in one round trip as a multi-statement query, so the
generator is not the bottleneck of the measurement. This is the benchmark's own client, not
product code: values are escaped by PyMySQL's ``literal`` into the statement text, as any
MySQL client library does for a text-protocol query.

Two modes:

- ``generate``: N changes as fast as possible, with the binlog head recorded before and
  after (the range every reader of the benchmark decodes);
- ``generate_steady``: a fixed rate (e.g. 1k changes/s for 60 s) in small transactions,
  recording each transaction's commit time (wall clock, after COMMIT returned) and the binlog
  head right after it (its end boundary), so latency can be matched to applied batches.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from bench.tables import TABLES
from replicator.model.changes import BinlogPosition

if TYPE_CHECKING:
    import pymysql

DEFAULT_SEED = 20261121
DEFAULT_CHANGES = 300_000
OP_WEIGHTS = {"c": 60, "u": 30, "d": 10}  # insert, update, delete
TRANSACTION_ROWS = (100, 500)  # a few hundred single-row statements per transaction

BIGINT_UNSIGNED_MAX = 2**64 - 1
# events.id counts up from here: every key is a BIGINT UNSIGNED beyond the signed range.
EVENT_ID_BASE = 18_446_744_073_000_000_000

# Text that breaks naive quoting and encoding: quotes, backslashes, newlines, 4-byte UTF-8.
AWKWARD_TEXT = (
    "O'Brien",
    'say "hello"',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "emoji 🚀🎉",
    "Zürich café",
    "中文字符",
    "Ελληνικά",
    "русский текст",
    "  padded  ",
    "",
    "' OR 1=1 --",
    "%_wildcards_%",
)
FIRST_NAMES = ("Ana", "Björn", "Chloé", "Dmitri", "Émile", "Fatima", "Günther", "Hiroshi",
               "Ingrid", "José", "Kwame", "Łukasz", "Maëlle", "Nuño", "O'Neil", "Zoë")
LAST_NAMES = ("Smith", "Müller", "García", "O'Connor", "Nguyễn", "Kowalski", "Ødegaard",
              "D'Angelo", "Søren", "王", "Иванов", "Ñúñez")
ORDER_STATUS = ("new", "paid", "shipped", "cancelled")
CUSTOMER_TIER = ("free", "silver", "gold", "it's complicated")
EVENT_KIND = ("view", "click", "cart", "checkout", "refund")


_EPOCH = datetime(2024, 1, 1)


class _Keys:
    """Live primary keys of one table: O(1) add, random pick and removal."""

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._index: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: int) -> None:
        self._index[key] = len(self._keys)
        self._keys.append(key)

    def pick(self, rng: random.Random) -> int:
        return self._keys[rng.randrange(len(self._keys))]

    def remove(self, key: int) -> None:
        index = self._index.pop(key)
        last = self._keys.pop()
        if index < len(self._keys):
            self._keys[index] = last
            self._index[last] = index


class _Values:
    """Column values from one seeded RNG (so the statements are reproducible)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def text(self, limit: int) -> str:
        rng = self.rng
        parts = [rng.choice(AWKWARD_TEXT) for _ in range(rng.randint(1, 3))]
        return " ".join(parts)[:limit]

    def name(self) -> str:
        return f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"

    def moment(self) -> datetime:
        # within 2024-2026, with microseconds (DATETIME(6)); never a DST-ambiguous local time
        # because the throwaway server runs in UTC.
        return _EPOCH + timedelta(seconds=self.rng.randrange(0, 3 * 365 * 86400),
                                  microseconds=self.rng.randrange(0, 1_000_000))

    def timestamp(self) -> datetime:
        return self.moment().replace(microsecond=0)

    def decimal(self, digits: int, scale: int) -> Decimal:
        unscaled = self.rng.randrange(-(10 ** (digits - 1)), 10 ** (digits - 1))
        return Decimal(unscaled).scaleb(-scale)

    def maybe(self, value: Callable[[], Any], null_share: float = 0.2) -> Any:
        return None if self.rng.random() < null_share else value()

    def document(self) -> str:
        rng = self.rng
        return json.dumps(
            {
                "source": rng.choice(("web", "ios", "android")),
                "tags": [rng.choice(AWKWARD_TEXT) for _ in range(rng.randint(0, 3))],
                "score": rng.randint(-1000, 1000) / 8,
                "nested": {"ok": rng.random() < 0.5, "n": None},
            },
            ensure_ascii=False,
        )


@dataclass
class Statement:
    table: str
    op: str  # c | u | d
    sql: str


class Generator:
    """Seeded stream of single-row statements over ``TABLES`` in one database."""

    def __init__(self, database: str, seed: int = DEFAULT_SEED) -> None:
        self.database = database
        self.rng = random.Random(seed)
        self.values = _Values(self.rng)
        self.keys = {spec.name: _Keys() for spec in TABLES}
        self.next_id = {"customers": 1, "orders": 1, "events": EVENT_ID_BASE}
        self._tables = [spec.name for spec in TABLES]
        self._table_weights = [spec.weight for spec in TABLES]
        self._ops = list(OP_WEIGHTS)
        self._op_weights = list(OP_WEIGHTS.values())

    # -- rows ---------------------------------------------------------------------------

    def _row(self, table: str, key: int) -> dict[str, Any]:
        v = self.values
        rng = self.rng
        if table == "customers":
            return {
                "id": key,
                "email": f"user{key}+{rng.randrange(1000)}@example.com",
                "full_name": v.maybe(v.name, 0.1),
                "balance": v.decimal(28, 10),
                "lifetime_points": BIGINT_UNSIGNED_MAX if rng.random() < 0.05
                else rng.randrange(0, 2**63),
                "tier": rng.choice(CUSTOMER_TIER),
                "last_login": v.maybe(v.moment),
                "preferences": v.maybe(v.document, 0.3),
                "updated_at": v.timestamp(),
            }
        if table == "orders":
            customers = self.keys["customers"]
            return {
                "id": key,
                "customer_id": customers.pick(rng) if len(customers) else 0,
                "status": rng.choice(ORDER_STATUS),
                "amount": v.decimal(10, 2),
                "discount": v.maybe(lambda: v.decimal(4, 2), 0.6),
                "note": v.maybe(lambda: v.text(255), 0.4),
                "created_at": v.moment(),
                "updated_at": v.timestamp(),
            }
        orders = self.keys["orders"]
        return {
            "id": key,
            "order_id": orders.pick(rng) if len(orders) and rng.random() < 0.8 else None,
            "kind": rng.choice(EVENT_KIND),
            "payload": v.maybe(v.document, 0.2),
            "weight": v.maybe(lambda: v.decimal(38, 10), 0.3),
            "label": v.text(64),
            "occurred_at": v.moment(),
        }

    # -- statements ---------------------------------------------------------------------

    def next_statement(self, literal: Callable[[Any], str]) -> Statement:
        rng = self.rng
        table = rng.choices(self._tables, self._table_weights)[0]
        op = rng.choices(self._ops, self._op_weights)[0]
        keys = self.keys[table]
        if op != "c" and len(keys) < 10:
            op = "c"  # nothing (much) to change yet
        name = f"`{self.database}`.`{table}`"
        if op == "c":
            key = self.next_id[table]
            self.next_id[table] = key + 1
            row = self._row(table, key)
            keys.add(key)
            columns = ", ".join(f"`{c}`" for c in row)
            values = ", ".join(literal(value) for value in row.values())
            return Statement(table, op, f"INSERT INTO {name} ({columns}) VALUES ({values})")
        key = keys.pick(rng)
        if op == "d":
            keys.remove(key)
            return Statement(table, op, f"DELETE FROM {name} WHERE `id` = {key}")
        row = self._row(table, key)
        del row["id"]
        changed = rng.sample(sorted(row), rng.randint(1, 3))
        assignments = ", ".join(f"`{c}` = {literal(row[c])}" for c in changed)
        return Statement(table, op, f"UPDATE {name} SET {assignments} WHERE `id` = {key}")

    def transactions(
        self, changes: int, literal: Callable[[Any], str], rows: tuple[int, int] = TRANSACTION_ROWS
    ) -> Iterator[list[Statement]]:
        """``changes`` statements cut into transactions of ``rows`` (inclusive range) statements."""
        left = changes
        while left > 0:
            size = min(left, self.rng.randint(*rows))
            left -= size
            yield [self.next_statement(literal) for _ in range(size)]


# -- running it against a server --------------------------------------------------------


def connect_root(socket_path: str, database: str | None = None) -> pymysql.Connection:
    """A root connection that may send several statements in one query (one round trip)."""
    import pymysql
    from pymysql.constants import CLIENT

    return pymysql.connect(
        unix_socket=socket_path,
        user="root",
        database=database,
        charset="utf8mb4",
        autocommit=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
    )


def head(connection: pymysql.Connection) -> BinlogPosition:
    from replicator.source.positions import head_position

    return head_position(connection)


def create_tables(connection: pymysql.Connection, database: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cursor.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
        for spec in TABLES:
            cursor.execute(f"USE `{database}`")
            cursor.execute(spec.ddl)


def _send_transaction(connection: pymysql.Connection, statements: list[Statement]) -> list[int]:
    """BEGIN; statements; COMMIT in one round trip; the rows each statement changed.

    An UPDATE that sets the values a row already has changes nothing and writes no binlog
    row, so the row changes in the binlog are the affected rows, not the statements.
    """
    sql = "BEGIN;\n" + ";\n".join(s.sql for s in statements) + ";\nCOMMIT"
    affected: list[int] = []
    with connection.cursor() as cursor:
        cursor.execute(sql)  # result of BEGIN
        while cursor.nextset():
            affected.append(max(0, cursor.rowcount))
    return affected[: len(statements)]  # the last result is COMMIT's


@dataclass
class WorkloadResult:
    database: str
    seed: int
    statements: int  # single-row statements sent
    changes: int  # rows they changed: the row changes in the binlog range
    transactions: int
    start: BinlogPosition  # binlog head before the first transaction (a boundary)
    end: BinlogPosition  # binlog head after the last one
    seconds: float
    ops: dict[str, int] = field(default_factory=dict)  # c/u/d -> count
    tables: dict[str, int] = field(default_factory=dict)  # table -> changes
    binlog_bytes: int = 0

    @property
    def rate(self) -> float:
        return self.changes / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.database, "seed": self.seed, "statements": self.statements,
            "changes": self.changes,
            "transactions": self.transactions, "start": str(self.start), "end": str(self.end),
            "seconds": round(self.seconds, 3), "changes_per_s": round(self.rate, 1),
            "ops": self.ops, "tables": self.tables, "binlog_bytes": self.binlog_bytes,
        }


def _binlog_bytes(start: BinlogPosition, end: BinlogPosition, connection: pymysql.Connection) -> int:
    if start.file == end.file:
        return end.pos - start.pos
    from replicator.source.positions import binary_logs

    total = 0
    for name, size in binary_logs(connection):
        at = BinlogPosition(name, 0)
        if at.sequence == start.sequence:
            total += size - start.pos
        elif start.sequence < at.sequence < end.sequence:
            total += size
    return total + end.pos


def generate(
    socket_path: str, database: str, changes: int = DEFAULT_CHANGES, *, seed: int = DEFAULT_SEED,
    rows: tuple[int, int] = TRANSACTION_ROWS,
) -> WorkloadResult:
    """Create the tables in ``database`` (fresh) and apply ``changes`` row changes."""
    connection = connect_root(socket_path)
    try:
        create_tables(connection, database)
        generator = Generator(database, seed)
        start = head(connection)
        ops = dict.fromkeys(OP_WEIGHTS, 0)
        tables = {spec.name: 0 for spec in TABLES}
        transactions = 0
        started = time.perf_counter()
        for statements in generator.transactions(changes, connection.escape, rows):
            affected = _send_transaction(connection, statements)
            transactions += 1
            for statement, count in zip(statements, affected, strict=True):
                ops[statement.op] += count
                tables[statement.table] += count
        seconds = time.perf_counter() - started
        end = head(connection)
        return WorkloadResult(
            database=database, seed=seed, statements=changes, changes=sum(ops.values()),
            transactions=transactions,
            start=start, end=end, seconds=seconds, ops=ops, tables=tables,
            binlog_bytes=_binlog_bytes(start, end, connection),
        )
    finally:
        connection.close()


@dataclass(frozen=True)
class CommittedTransaction:
    committed_at: float  # time.time() right after COMMIT returned
    end: BinlogPosition  # binlog head right after it: this transaction's end boundary
    rows: int


@dataclass
class SteadyResult:
    database: str
    rate: float  # target changes/s
    seconds: float  # wall time of the steady phase
    transactions: list[CommittedTransaction]

    @property
    def changes(self) -> int:
        return sum(t.rows for t in self.transactions)

    @property
    def achieved_rate(self) -> float:
        return self.changes / self.seconds if self.seconds else 0.0


class SteadyWriter:
    """Writes at a fixed rate in small transactions; keeps each one's commit time and end.

    The tables must exist (``create_tables``); one writer per database, because the binlog
    head read right after COMMIT is this transaction's end only when nothing else commits.
    """

    def __init__(self, socket_path: str, database: str, *, seed: int = DEFAULT_SEED + 1) -> None:
        self.connection = connect_root(socket_path)
        self.generator = Generator(database, seed)
        self.database = database

    def write(self, rate: float, seconds: float, *, transaction_rows: int = 10,
              should_stop: Callable[[], bool] = lambda: False) -> SteadyResult:
        """``rate`` changes/s for ``seconds``, as transactions of ``transaction_rows`` rows."""
        interval = transaction_rows / rate
        count = max(1, round(seconds * rate / transaction_rows))
        literal = self.connection.escape
        committed: list[CommittedTransaction] = []
        started = time.perf_counter()
        for index in range(count):
            if should_stop():
                break
            due = started + index * interval
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            statements = [self.generator.next_statement(literal) for _ in range(transaction_rows)]
            affected = _send_transaction(self.connection, statements)
            committed_at = time.time()
            committed.append(CommittedTransaction(committed_at, head(self.connection),
                                                  sum(affected)))
        return SteadyResult(self.database, rate, time.perf_counter() - started, committed)

    def close(self) -> None:
        self.connection.close()
