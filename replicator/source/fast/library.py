"""The bridge to python-mysql-replication, for what the fast path does not decode itself.

- Table_map events are parsed by the library's own ``TableMapEvent`` (once per distinct map:
  the reader caches the result by the map's bytes), so column names, charsets, signedness and
  ENUM/SET members are exactly what ``read_changes`` sees;
- rows events of a table whose map has a column type the generated decoders do not handle
  (MySQL's binary JSON, pre-5.6 temporal types ...) are decoded by the library's
  ``RowsEvent`` classes and normalised the way ``read_changes`` does (PARTIAL_UPDATE_ROWS
  events are refused by the reader: their JSON values are diffs).
"""

from __future__ import annotations

from typing import Any

from replicator.source.values import (
    ZeroDates,
    binlog_converter,
    is_zero_date_source,
    patch_library_time2,
)


class _ControlStub:
    """What the library's event classes ask of their control connection: the DBMS flavour
    (for charset tables) and the connection charset; they query nothing when the map carries
    FULL row metadata."""

    charset = "utf8mb4"

    def __init__(self, dbms: str) -> None:
        self.dbms = dbms

    def _get_dbms(self) -> str:
        return self.dbms


class Library:
    """Decodes single events with the library, given the stream's settings."""

    def __init__(self, *, dbms: str, use_checksum: bool) -> None:
        patch_library_time2()  # the same TIME2 fix read_changes applies
        self.control = _ControlStub(dbms)
        self.use_checksum = use_checksum
        self.mysql_version: tuple[int, ...] = (0, 0, 0)
        self.post_header_lengths: tuple[int, ...] | None = None
        self.tables: dict[int, Any] = {}  # table id -> the library's Table

    def _wrap(self, packet: bytes, allowed: frozenset) -> Any:
        from pymysql.protocol import MysqlPacket
        from pymysqlreplication.packet import BinLogPacketWrapper

        wrapper = BinLogPacketWrapper(
            MysqlPacket(packet, "utf8"), self.tables, self.control, self.mysql_version,
            self.use_checksum, allowed, None, None, None, None, False, False, False, True,
            False, False, self.post_header_lengths,
        )
        return wrapper.event

    def format_description(self, packet: bytes) -> None:
        from pymysqlreplication.event import FormatDescriptionEvent

        event = self._wrap(packet, frozenset({FormatDescriptionEvent}))
        self.mysql_version = event.mysql_version
        self.post_header_lengths = event.post_header_len

    def table_map(self, packet: bytes) -> Any:
        """The library's Table for a Table_map event (columns with names, charsets ...)."""
        from pymysqlreplication.row_event import TableMapEvent

        event = self._wrap(packet, frozenset({TableMapEvent}))
        table = event.get_table()
        self.tables[table.table_id] = table
        return table

    def rows(self, packet: bytes, table: Any, table_name: str,
             zero_dates: ZeroDates) -> list[tuple[str, str, dict | None, dict | None]]:
        """A rows event decoded by the library -> (table, op, before, after) tuples, values
        normalised exactly as ``read_changes`` normalises them."""
        from pymysqlreplication.row_event import (
            DeleteRowsEvent,
            PartialUpdateRowsEvent,
            UpdateRowsEvent,
            WriteRowsEvent,
        )

        self.tables[table.table_id] = table
        event = self._wrap(packet, frozenset({WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent,
                                              PartialUpdateRowsEvent}))
        plan: list[tuple[str, Any]] = []
        for column in event.columns:
            converter = binlog_converter(column, table=table_name, zero_dates=zero_dates)
            if converter is not None:
                plan.append((column.name, converter))

        def convert(image: dict[str, Any], none_sources: dict[str, str]) -> dict[str, Any]:
            for name, value in image.items():
                if value is None and is_zero_date_source(none_sources.get(name)):
                    zero_dates(table_name, name, "0000-00-00")
            for name, converter in plan:
                value = image.get(name)
                if value is not None or none_sources.get(name) == "empty set":
                    image[name] = converter(value)
            return image

        changes: list[tuple[str, str, dict | None, dict | None]] = []
        if isinstance(event, WriteRowsEvent):
            for row in event.rows:
                changes.append((table_name, "c", None, convert(row["values"], row["none_sources"])))
        elif isinstance(event, DeleteRowsEvent):
            for row in event.rows:
                changes.append((table_name, "d", convert(row["values"], row["none_sources"]), None))
        else:
            for row in event.rows:
                changes.append((
                    table_name, "u",
                    convert(row["before_values"], row["before_none_sources"]),
                    convert(row["after_values"], row["after_none_sources"]),
                ))
        return changes
