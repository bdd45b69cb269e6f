"""Measure decode rates on an OLTP-shaped binlog: the unmodified library, ``read_changes`` on the
library (``fast=False``) and the fast path, in the same run, on the same range
(docs/fast-decode.md has the numbers).

    .venv/bin/python -m replicator.source.decode_measure --changes 100000 [--profile fast]

Starts a throwaway MariaDB, writes ``--changes`` single-row INSERT/UPDATE/DELETE statements
(60/30/10) in transactions of 500 on two tables (BIGINT, INT, DECIMAL(12,2), VARCHAR utf8mb4,
DATETIME(6), TIMESTAMP, ENUM), then decodes the range with each reader, touching every value,
and checks that the fast path's events equal ``read_changes``'s. This is a measuring client,
not product code: the workload's values are escaped into statement text by PyMySQL.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import pstats
import random
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import MySQLSource
from replicator.source.binlog import read_changes
from replicator.source.fast.counters import TOTALS
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import current_position
from replicator.source.throwaway import ThrowawayMariaDB

TABLES = ("orders", "payments")
TRANSACTION_ROWS = 500
_server_ids = itertools.count(9100)

_DDL = """CREATE TABLE `{name}` (
  id BIGINT NOT NULL PRIMARY KEY,
  quantity INT NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  note VARCHAR(80) CHARACTER SET utf8mb4 NOT NULL,
  created_at DATETIME(6) NOT NULL,
  updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  status ENUM('new','paid','shipped','cancelled') NOT NULL
)"""
_NOTES = ("plain", "O'Brien", "Zürich café", "emoji 🚀", "中文字符", 'say "hi"', "back\\slash")


def write_workload(connection: Any, database: str, changes: int, seed: int = 11) -> None:
    """``changes`` single-row statements in transactions of TRANSACTION_ROWS."""
    rng = random.Random(seed)
    literal = connection.escape
    live: dict[str, list[int]] = {name: [] for name in TABLES}
    next_id = dict.fromkeys(TABLES, 1)
    base = datetime(2024, 1, 1)
    with connection.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        for name in TABLES:
            cursor.execute(_DDL.format(name=name))
        done = 0
        while done < changes:
            statements = ["BEGIN"]
            for _ in range(min(TRANSACTION_ROWS, changes - done)):
                table = TABLES[rng.random() < 0.5]
                keys = live[table]
                roll = rng.random()
                if roll < 0.6 or len(keys) < 10:
                    key = next_id[table]
                    next_id[table] += 1
                    keys.append(key)
                    stamp = base + timedelta(seconds=key, microseconds=rng.randrange(10**6))
                    statements.append(
                        f"INSERT INTO `{table}` VALUES ({key}, {rng.randrange(-1000, 1000)}, "
                        f"{literal(Decimal(rng.randrange(-10**8, 10**8)) / 100)}, "
                        f"{literal(rng.choice(_NOTES) + str(key))}, {literal(stamp)}, "
                        f"{literal(stamp)}, {literal(rng.choice(('new', 'paid', 'shipped')))})")
                elif roll < 0.9:
                    statements.append(
                        f"UPDATE `{table}` SET quantity = quantity + 1, status = "
                        f"{literal(rng.choice(('paid', 'shipped', 'cancelled')))} "
                        f"WHERE id = {rng.choice(keys)}")
                else:
                    key = keys.pop(rng.randrange(len(keys)))
                    statements.append(f"DELETE FROM `{table}` WHERE id = {key}")
                done += 1
            statements.append("COMMIT")
            cursor.execute(";\n".join(statements))
            while cursor.nextset():
                pass


def _touch(image: dict[str, Any] | None) -> int:
    touched = 0
    if image:
        for _value in image.values():
            touched += 1
    return touched


def library_rows(source: MySQLSource, start: BinlogPosition, end: BinlogPosition) -> int:
    """Unmodified python-mysql-replication, every value touched."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={"host": source.host, "port": source.port, "user": source.user,
                             "passwd": source.password or ""},
        server_id=next(_server_ids), log_file=start.file, log_pos=start.pos,
        resume_stream=True, blocking=False, enable_logging=False,
        only_events=[RotateEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    rows = 0
    file = start.file
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                file = event.next_binlog
            elif isinstance(event, XidEvent):
                if BinlogPosition(file, event.packet.log_pos) >= end:
                    break
            elif isinstance(event, UpdateRowsEvent):
                for row in event.rows:
                    rows += 1
                    _touch(row["before_values"])
                    _touch(row["after_values"])
            else:
                for row in event.rows:
                    rows += 1
                    _touch(row["values"])
    finally:
        stream.close()
    return rows


def _reader_rows(reader: Callable[..., Iterator[Any]], keep: list | None) -> Callable[..., int]:
    def run(source: MySQLSource, start: BinlogPosition, end: BinlogPosition) -> int:
        rows = 0
        for change in reader(source, start=start, end=end, tables=None,
                             server_id=next(_server_ids)):
            if isinstance(change, ChangeEvent):
                rows += 1
                _touch(change.before)
                _touch(change.after)
            if keep is not None:
                keep.append(change)
        return rows

    return run


def timed(run: Callable[..., int], *args: Any,
          profile: bool = False) -> tuple[int, float, float, str]:
    """(rows, wall seconds, CPU seconds of this process, profile text)."""
    profiler = cProfile.Profile() if profile else None
    cpu = time.process_time()
    began = time.perf_counter()
    if profiler:
        profiler.enable()
    rows = run(*args)
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu
    text = ""
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
        text = out.getvalue()
    return rows, seconds, cpu, text


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--profile", choices=("library", "read_changes", "fast"), action="append",
                        default=[], help="print the top cProfile entries of a reader")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip comparing the fast path's events with read_changes'")
    args = parser.parse_args(argv)

    with ThrowawayMariaDB() as server:
        source = server.source()
        import pymysql
        from pymysql.constants import CLIENT

        with pymysql.connect(unix_socket=server.socket, user="root", charset="utf8mb4",
                             autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS) as connection:
            connection.query("CREATE DATABASE measure")
            start = current_position(source)
            began = time.perf_counter()
            write_workload(connection, "measure", args.changes)
            end = current_position(source)
        print(f"workload: {args.changes} statements in {time.perf_counter() - began:.1f} s, "
              f"binlog {start} .. {end}")
        verify = not args.no_verify
        slow: list | None = [] if verify else None
        fast: list | None = [] if verify else None
        readers = [
            ("library", library_rows),
            ("read_changes", _reader_rows(partial(read_changes, fast=False), slow)),
            ("fast", _reader_rows(read_changes_fast, fast)),
        ]
        # Wall time is what a pipeline sees; CPU time of this process is steadier on a shared
        # machine (the server's work is in another process and is the same for every reader).
        rates: dict[str, float] = {}
        cpu_rates: dict[str, float] = {}
        for name, run in readers:
            rows, seconds, cpu, profile = timed(run, source, start, end,
                                                profile=name in args.profile)
            rates[name] = rows / seconds
            cpu_rates[name] = rows / cpu
            print(f"{name:>13}: {rows} rows in {seconds:6.2f} s = {rates[name]:9,.0f} rows/s "
                  f"(CPU {cpu:6.2f} s = {cpu_rates[name]:9,.0f} rows/CPU-s)")
            if profile:
                print(profile)
        for label, table in (("wall", rates), ("CPU", cpu_rates)):
            print(f"speedup ({label}) fast / library: {table['fast'] / table['library']:.1f}x, "
                  f"fast / read_changes: {table['fast'] / table['read_changes']:.1f}x")
        print(f"fast path counters: {TOTALS.as_dict()}")
        if verify:
            same = slow == fast
            print(f"fast events == read_changes events: {same} ({len(fast or [])} events)")
            if not same:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
