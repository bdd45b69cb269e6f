"""Statements prepared once per DuckDB connection, reading their rows through a holder.

DuckDB 2.0 binds and optimizes a prepared statement again at every EXECUTE when it reads a
catalog entry (a table, a registered view, a MACRO: it re-checks the catalog's identity),
and binding is almost all of a small batch's cost (docs/decisions/outbox-prepared.md,
staging-prepared.md). So the transform step's statements read Python objects instead,
through DuckDB's replacement scan: a ``Rows`` holder whose Arrow stream is the current
batch's, asked for at every EXECUTE. The scan resolves a name from the local variables of
the Python frame that calls ``execute`` (PREPARE, or an EXECUTE should DuckDB ever bind
again), so the caller runs both, with its holders in local variables named as the statement
reads them; this module keeps the statements and holders (``Statements``).
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Hashable

    import pyarrow as pa


class Rows:
    """Rows a prepared statement reads by name: an Arrow stream DuckDB's Python scan asks
    for at every EXECUTE, so that one statement, bound and optimized once, reads each batch."""

    __slots__ = ("table",)

    def __init__(self, table: pa.Table | None = None) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        assert self.table is not None, "a prepared statement's rows read outside its run"
        return self.table.__arrow_c_stream__(requested_schema)


@dataclass
class Prepared:
    """A statement's name on its connection and the holders it was bound to (``rows``: the
    batch, set per EXECUTE; ``constants``: rows that stay, such as bind parameters' values)."""

    name: str
    rows: Rows
    constants: Rows
    fresh: bool = True  # not PREPAREd yet


_NAMES = itertools.count()


class Statements:
    """Per connection: key -> its prepared statement, at most ``size`` of them (the least
    recently used is DEALLOCATEd). The key holds what the bound plan depends on: the text,
    the batch's Arrow schema (a plan is bound to the types it first read) and the constants."""

    def __init__(self, prefix: str, size: int) -> None:
        self.prefix = prefix
        self.size = size
        self._by_connection: weakref.WeakKeyDictionary[Any, OrderedDict[Hashable, Prepared]] = \
            weakref.WeakKeyDictionary()

    def get(self, connection: Any, key: Hashable) -> Prepared:
        """The statement of ``key`` on ``connection``, or a fresh one (``fresh``: the caller
        sets its constants, PREPAREs it, then calls ``prepared``)."""
        statements = self._by_connection.setdefault(connection, OrderedDict())
        prepared = statements.get(key)
        if prepared is None:
            return Prepared(f"{self.prefix}_{next(_NAMES)}", Rows(), Rows())
        statements.move_to_end(key)
        return prepared

    def prepared(self, connection: Any, key: Hashable, prepared: Prepared) -> None:
        """Keep ``prepared`` (just PREPAREd on ``connection``) under ``key``."""
        statements = self._by_connection.setdefault(connection, OrderedDict())
        prepared.fresh = False
        statements[key] = prepared
        if len(statements) > self.size:
            _, oldest = statements.popitem(last=False)
            connection.execute(f"DEALLOCATE {oldest.name}")
