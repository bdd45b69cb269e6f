"""Reading the target side of a comparison through the sink's own connection.

Plain SELECTs over the target columns with bind parameters (``?``: DuckDB's and the
Snowflake connector's qmark style), so the same statements run on both warehouses. Key
ranges are spelled out lexicographically (``a > ? OR (a = ? AND b > ?)``) because not every
warehouse compares row values. Soft-deleted rows (``_DELETED`` true) count as absent; an SCD2 target is compared by its
current versions (``_IS_CURRENT``), a changelog target by the latest change of each key (by
binlog position; a delete as its last change makes the key absent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replicator.errors import ReplicatorError
from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.plan.model import PlannedColumn, TablePlan

LOOKUP_BATCH = 300


class VerifyError(ReplicatorError):
    """verify could not compare (exit 2): a table or connection it needs is not there."""

    exit_code = 2


def _range_condition(keys: Sequence[str], bound: Sequence[Any], strict: str) -> tuple[str, list]:
    """(k1, k2, ...) <op> bound, spelled lexicographically; ``strict`` is '>' or '<'."""
    terms, params = [], []
    for i, column in enumerate(keys):
        equal = [f"{quote_identifier(k)} = ?" for k in keys[:i]]
        terms.append("(" + " AND ".join([*equal, f"{quote_identifier(column)} {strict} ?"]) + ")")
        params += [*bound[:i], bound[i]]
    return "(" + " OR ".join(terms) + ")", params


def _named(table: TablePlan, replicator_column: str) -> str:
    """A column replicator adds (``_DELETED``, ``_IS_CURRENT``...) as the plan spells it."""
    for column in table.columns:
        if column.source_column is None and column.target_column.upper() == replicator_column:
            return column.target_column
    raise VerifyError(f"{table.source_name}: the plan has no {replicator_column} column",
                      hint="run `replicator plan` to see the target's columns")


class TargetReader:
    """Rows of one target table: key columns first, then the compared columns."""

    def __init__(self, connection: Any, table: TablePlan, columns: Sequence[PlannedColumn],
                 *, end_transaction: bool = False, source_name: str | None = None,
                 condition: str | None = None) -> None:
        """``source_name``: read only the rows of that source table (a routed target's
        _SOURCE_TABLE), bound as a parameter like every value. ``condition``: the slice
        (``verify --where``, carried to the target by ``slice``), over the live rows (a
        changelog: over each key's latest change)."""
        self.connection = connection
        self.table = table
        self.key = [c.target_column for c in table.key_columns]
        self.columns = list(columns)
        self.name = ".".join(table.target_parts)
        # Snowflake's session runs with autocommit off: end each read-only transaction.
        self._end_transaction = end_transaction
        names = ", ".join(quote_identifier(c.target_column) for c in columns)
        self._select = f"SELECT {names} FROM {qualified_name(table.target_parts)}"
        # changelog: the latest change per key (ranked inside), then deletes dropped outside.
        self._rank = ""
        self._outer: tuple[str, str] | None = None
        self._live = ""
        if table.mode == "changelog":
            order = ", ".join(f"{quote_identifier(_named(table, n))} DESC"
                              for n in ("_BINLOG_FILE", "_BINLOG_POS", "_TRANSACTION_ORDER"))
            self._select = f"SELECT * FROM {qualified_name(table.target_parts)}"
            self._rank = (" QUALIFY ROW_NUMBER() OVER (PARTITION BY "
                          + ", ".join(quote_identifier(k) for k in self.key)
                          + f" ORDER BY {order}) = 1")
            self._outer = (f"SELECT {names} FROM (", ") AS latest WHERE NOT COALESCE("
                           f"{quote_identifier(_named(table, '_DELETED'))}, FALSE)"
                           + (f" AND ({condition})" if condition else ""))
        elif table.mode == "scd2":  # the current version of each key
            self._live = f"COALESCE({quote_identifier(_named(table, '_IS_CURRENT'))}, FALSE)"
        elif any(c.role == "soft_delete" for c in table.columns):
            self._live = f"NOT COALESCE({quote_identifier(_named(table, '_DELETED'))}, FALSE)"
        self._slice = f"({condition})" if condition and not self._outer else ""
        self._only: tuple[str, list[Any]] = ("", [])
        if source_name is not None:
            routed = next(c for c in table.key_columns if c.origin == "replicator")
            self._only = (f"{quote_identifier(routed.target_column)} = ?", [source_name])

    @property
    def live(self) -> list[str]:
        """The conditions a live row meets (not soft-deleted; SCD2's current version),
        without parameters; a routed or changelog target has more than conditions."""
        return [self._live] if self._live else []

    @property
    def scope(self) -> list[str]:
        """``live`` and the slice's condition: the rows compared."""
        return [c for c in (self._live, self._slice) if c]

    def _rows(self, conditions: list[str], params: list[Any]) -> list[tuple[Any, ...]]:
        where = [c for c in [self._live, self._slice, self._only[0], *conditions] if c]
        params = [*self._only[1], *params]
        sql = self._select + (" WHERE " + " AND ".join(where) if where else "")
        if self._outer:
            sql = self._outer[0] + sql + self._rank + self._outer[1]
        return self.query(sql, params)

    def query(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Any read of the target (bind parameters ``?``), its transaction ended."""
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql, params) if params else cursor.execute(sql)
            rows = [tuple(row) for row in cursor.fetchall()]
            if self._end_transaction:
                self.connection.rollback()
            return rows
        except ReplicatorError:
            raise
        except Exception as exc:  # the warehouse driver's own error types
            raise VerifyError(
                f"could not read target table {self.name}: {exc}",
                hint="run `replicator run` first (it creates the target tables), and check "
                "the target connection in the pipeline file",
            ) from None
        finally:
            cursor.close()

    def range(self, lower: Sequence[Any] | None, upper: Sequence[Any] | None) -> list[tuple]:
        """Rows with lower < key <= upper (target-typed bounds; None: unbounded)."""
        conditions, params = [], []
        if lower is not None:
            condition, values = _range_condition(self.key, lower, ">")
            conditions.append(condition)
            params += values
        if upper is not None:
            condition, values = _range_condition(self.key, upper, "<")
            equal = " AND ".join(f"{quote_identifier(k)} = ?" for k in self.key)
            conditions.append(f"({condition} OR ({equal}))")
            params += [*values, *upper]
        return self._rows(conditions, params)

    def between(self, column: str, lower: Any, upper: Any) -> list[tuple]:
        """Rows with ``lower <= column < upper`` (a key column, target name; None:
        unbounded)."""
        quoted = quote_identifier(column)
        conditions = ([f"{quoted} >= ?"] if lower is not None else []) + (
            [f"{quoted} < ?"] if upper is not None else [])
        return self._rows(conditions, [b for b in (lower, upper) if b is not None])

    def lookup(self, keys: Sequence[tuple[Any, ...]]) -> list[tuple]:
        rows: list[tuple] = []
        match = "(" + " AND ".join(f"{quote_identifier(k)} = ?" for k in self.key) + ")"
        for start in range(0, len(keys), LOOKUP_BATCH):
            batch = keys[start:start + LOOKUP_BATCH]
            condition = "(" + " OR ".join([match] * len(batch)) + ")"
            rows += self._rows([condition], [value for key in batch for value in key])
        return rows
