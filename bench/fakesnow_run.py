"""The bench's Snowflake: fakesnow's HTTP server in a process of its own, reached by the
unmodified replicator CLI through a ``connections.toml`` (nothing patched).

``fakesnow_server(workdir)`` starts ``python -m bench.fakesnow_run serve --port N`` (uvicorn
serving ``fakesnow.server.app``: Snowflake's HTTP protocol, DuckDB underneath) on a free
port, writes ``<workdir>/snowflake-home/connections.toml`` with a ``[fakesnow]`` connection
for it, and yields the environment the CLI needs (``SNOWFLAKE_HOME``) and the server's pid
(its CPU is the warehouse's, counted apart like the MySQL server's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.s3_landing import read_external_stages

CONNECTION = "fakesnow"
SETTINGS = {"account": "fakesnow", "user": "bench", "password": "bench", "protocol": "http"}


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_connections_toml(home: Path, port: int) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    entry = {**SETTINGS, "host": "127.0.0.1", "port": port}
    path = home / "connections.toml"
    path.write_text(f"[{CONNECTION}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items()))
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def fakesnow_server(workdir: Path, timeout_s: float = 60.0,
                    environment: Mapping[str, str] | None = None,
                    ) -> Iterator[tuple[dict[str, str], int]]:
    """A fakesnow server process and the environment that points the CLI at it;
    ``environment``: more variables for the server (the S3 its external stages are on)."""
    port = _free_port()
    log = open(workdir / "fakesnow-server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([sys.executable, "-m", "bench.fakesnow_run", "serve",
                                "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                               cwd=str(Path(__file__).resolve().parents[1]),
                               env={**os.environ, **(environment or {})})
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"fakesnow server exited: see {log.name}")
            with contextlib.closing(socket.socket()) as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"fakesnow server did not listen on {port}: see {log.name}")
            time.sleep(0.1)
        home = workdir / "snowflake-home"
        write_connections_toml(home, port)
        yield {"SNOWFLAKE_HOME": str(home)}, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def keep_null_timestamps() -> None:
    """Fix fakesnow 0.12.1's server answering a NULL TIMESTAMP as 1970-01-01 00:00:00.

    Its result encoder (``fakesnow.arrow.timestamp_to_sf_struct``) builds Snowflake's
    timestamp struct without a validity mask, so a NULL reaches the connector as epoch 0
    (the warehouse holds NULL: ``col IS NULL`` is true). Only the server's answer is
    corrected; the replicator process under test is not touched.
    """
    import fakesnow.arrow
    import pyarrow as pa

    original = fakesnow.arrow.timestamp_to_sf_struct
    if getattr(original, "keeps_nulls", False):
        return

    def timestamp_to_sf_struct(ts: Any) -> Any:
        if isinstance(ts, pa.ChunkedArray):
            ts = ts.combine_chunks()
        struct = original(ts)
        if not ts.null_count:
            return struct
        children = [struct.field(i) for i in range(struct.type.num_fields)]
        fields = [struct.type.field(i) for i in range(struct.type.num_fields)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=ts.is_null())

    timestamp_to_sf_struct.keeps_nulls = True  # type: ignore[attr-defined]
    fakesnow.arrow.timestamp_to_sf_struct = timestamp_to_sf_struct


def merge_keeps_transaction() -> None:
    """Fix fakesnow 0.12.1's MERGE committing the transaction it runs in.

    fakesnow runs a MERGE as several statements, the first a ``CREATE OR REPLACE TEMPORARY
    TABLE merge_candidates``, and with autocommit off it commits the open transaction before
    any CREATE (Snowflake's rule for DDL). So a MERGE commits whatever ran before it in the
    transaction (a second table's MERGE commits the first's), which Snowflake's MERGE, a DML
    statement, never does. That internal CREATE runs inside the transaction here (DuckDB's
    DDL is transactional); the caller's own DDL still commits. Only the emulator is patched;
    the replicator process under test is not touched.
    """
    import fakesnow.cursor
    import sqlglot.expressions as exp

    cursor_class = fakesnow.cursor.FakeSnowflakeCursor
    original = cursor_class._execute
    if getattr(original, "keeps_transaction", False):
        return

    def _execute(self: Any, transformed: Any, params: Any = None) -> None:
        internal = (isinstance(transformed, exp.Create) and transformed.this is not None
                    and transformed.this.find(exp.Table) is not None
                    and transformed.this.find(exp.Table).name.lower() == "merge_candidates")
        if not internal or self._conn._autocommit or not self._conn._in_transaction:
            original(self, transformed, params)
            return
        # Nor is the temporary table's comment recorded in fakesnow's global catalog: one
        # DuckDB transaction writes one database.
        transformed.set("table_comment", None)
        transformed.set("text_lengths", None)
        duck = self._duck_conn
        self._duck_conn = _NoCommit(duck)
        try:
            original(self, transformed, params)
        finally:
            self._duck_conn = duck
            self._conn._in_transaction = True

    _execute.keeps_transaction = True  # type: ignore[attr-defined]
    cursor_class._execute = _execute


_DROP_PRIMARY_KEY = re.compile(
    r"\s*ALTER\s+TABLE\s+(?P<name>.+?)\s+DROP\s+PRIMARY\s+KEY(\s+(CASCADE|RESTRICT))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL)


def drop_primary_key() -> None:
    """Run Snowflake's ``ALTER TABLE t DROP PRIMARY KEY``, which fakesnow 0.12.1 cannot parse.

    The sink runs it, then ``ADD PRIMARY KEY (...)``, when a source table's key changed
    (``tables.rekey_target``): on Snowflake both are metadata (the key is not enforced).
    DuckDB cannot drop a constraint either, so the emulator's table is rebuilt without its
    key, as fakesnow would run a DDL: the open transaction committed first, every column,
    type, DEFAULT and NOT NULL kept (the old key's columns stay NOT NULL, as a column
    declared NOT NULL does on Snowflake), every row copied. Only the emulator is patched;
    the replicator process under test is not touched.
    """
    import fakesnow.cursor
    import sqlglot
    import sqlglot.expressions as exp

    cursor_class = fakesnow.cursor.FakeSnowflakeCursor
    original = cursor_class.execute
    if getattr(original, "drops_primary_key", False):
        return

    def execute(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        match = _DROP_PRIMARY_KEY.match(command) if isinstance(command, str) else None
        if match is None:
            return original(self, command, *args, **kwargs)
        table = sqlglot.parse_one(match["name"], read="snowflake", into=exp.Table)
        database = table.catalog or self._conn.database
        schema = table.db or self._conn.schema
        duck = self._duck_conn
        if not self._conn._autocommit:
            duck.commit()  # a DDL: Snowflake commits the open transaction first
            self._conn._in_transaction = False
        where = ("database_name = ? AND schema_name = ? AND table_name = ?",
                 [database, schema, table.name])
        row = duck.execute(f"SELECT sql FROM duckdb_tables() WHERE {where[0]}",
                           where[1]).fetchone()
        if row is None:
            raise snowflake_error(f"Table '{table.name}' does not exist or not authorized.")
        key = duck.execute("SELECT constraint_column_names FROM duckdb_constraints() WHERE "
                           f"{where[0]} AND constraint_type = 'PRIMARY KEY'", where[1]).fetchone()
        if key is None:
            raise snowflake_error(f"Table '{table.name}' has no primary key.")
        full = ".".join(f'"{part}"' for part in (database, schema, table.name))
        aside = ".".join(f'"{part}"' for part in (database, schema, table.name + "__FS_PK"))
        body = re.sub(r",\s*PRIMARY KEY\s*\([^)]*\)", "", row[0][row[0].index("("):])
        duck.begin()
        try:
            duck.execute(f'ALTER TABLE {full} RENAME TO "{table.name}__FS_PK"')
            duck.execute(f"CREATE TABLE {full}{body.rstrip(';')}")
            duck.execute(f"INSERT INTO {full} SELECT * FROM {aside}")
            duck.execute(f"DROP TABLE {aside}")
            for column in key[0]:
                duck.execute(f'ALTER TABLE {full} ALTER COLUMN "{column}" SET NOT NULL')
            duck.commit()
        except BaseException:
            duck.rollback()
            raise
        return original(self, "SELECT 'Statement executed successfully.' AS \"status\"")

    execute.drops_primary_key = True  # type: ignore[attr-defined]
    cursor_class.execute = execute


# Snowflake's MD5_NUMBER_LOWER64 (the low 64 bits of the MD5, read big-endian, unsigned:
# https://docs.snowflake.com/en/sql-reference/functions/md5_number_lower64), under the name
# fakesnow 0.12.1 translates the call to and then lacks.
_LOWER64 = ("CREATE OR REPLACE TEMP MACRO m_d5_number_lower64(t) AS "
            "CAST(('0x' || substr(md5(t), 17, 16)) AS UBIGINT)")


def md5_number_lower64() -> None:
    """Give fakesnow Snowflake's ``MD5_NUMBER_LOWER64`` (verify's range checksums use it):
    a DuckDB macro with the documented meaning, created on the statement's own DuckDB
    connection (a TEMP macro is per connection) before a statement that calls it. Only the
    emulator is patched."""
    import fakesnow.cursor

    cursor_class = fakesnow.cursor.FakeSnowflakeCursor
    original = cursor_class.execute
    if getattr(original, "has_md5_number_lower64", False):
        return

    def execute(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        if isinstance(command, str) and "md5_number_lower64" in command.lower():
            self._duck_conn.execute(_LOWER64)
        return original(self, command, *args, **kwargs)

    execute.has_md5_number_lower64 = True  # type: ignore[attr-defined]
    cursor_class.execute = execute


def lock_conflicts_as_snowflake() -> None:
    """Answer a write that meets another session's open transaction as Snowflake may.

    DuckDB refuses such a write at once ("Conflict on update"); fakesnow 0.12.1 lets that
    escape as an HTTP 500, which the connector retries without end: a test would hang where
    Snowflake queues the statement behind the lock (and gives up with error 000625 when too
    many wait). Here it is that error at once, which the sink retries with backoff and then
    reports. Only the emulator is patched; the replicator process under test is not touched.
    """
    import duckdb
    import fakesnow.cursor
    import snowflake.connector.errors

    cursor_class = fakesnow.cursor.FakeSnowflakeCursor
    original = cursor_class._execute
    if getattr(original, "translates_conflicts", False):
        return

    def _execute(self: Any, transformed: Any, params: Any = None) -> None:
        try:
            original(self, transformed, params)
        except duckdb.TransactionException as exc:
            if "conflict" not in str(exc).lower():
                raise
            raise snowflake.connector.errors.ProgrammingError(
                msg=f"Statement was aborted because the lock on its table is held by another "
                f"transaction ({str(exc).splitlines()[0]})", errno=625, sqlstate="57014",
            ) from exc

    _execute.__dict__.update(original.__dict__)  # the other patches' marks stay true
    _execute.translates_conflicts = True  # type: ignore[attr-defined]
    cursor_class._execute = _execute


def data_errors_as_snowflake() -> None:
    """Answer a value DuckDB cannot compute (an overflow, a division by zero, a date out of
    range) as Snowflake does: a statement error.

    fakesnow 0.12.1 turns only some of DuckDB's errors into the connector's ProgrammingError;
    an OutOfRangeException or InvalidInputException escapes as an HTTP 500, which the
    connector retries for minutes, where Snowflake fails the statement at once (its
    "Numeric value out of range", 100046). Only the emulator is patched.
    """
    import duckdb
    import fakesnow.cursor
    import snowflake.connector.errors

    cursor_class = fakesnow.cursor.FakeSnowflakeCursor
    original = cursor_class._execute
    if getattr(original, "translates_data_errors", False):
        return

    def _execute(self: Any, transformed: Any, params: Any = None) -> None:
        try:
            original(self, transformed, params)
        except (duckdb.OutOfRangeException, duckdb.InvalidInputException) as exc:
            raise snowflake.connector.errors.ProgrammingError(
                msg=str(exc).splitlines()[0], errno=100046, sqlstate="22003") from exc

    _execute.__dict__.update(original.__dict__)  # the other patches' marks stay true
    _execute.translates_data_errors = True  # type: ignore[attr-defined]
    cursor_class._execute = _execute


def snowflake_error(message: str) -> Exception:
    import snowflake.connector.errors

    return snowflake.connector.errors.ProgrammingError(msg=message, errno=2003,
                                                       sqlstate="42S02")


class _NoCommit:
    """A DuckDB connection whose ``commit`` does nothing (``merge_keeps_transaction``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def commit(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


_internal_patched = False


def copy_named_internal_files() -> None:
    """fakesnow 0.12.1 COPYs ``FILES = (...)`` only from a stage with a URL: an internal
    stage's directory has no scheme, and its ``_source_urls`` refuses it ("invalid URL
    prefix"). Emulator only: the named files of an internal stage are joined to its
    directory as its glob of the whole stage would list them; the PUT that put them there,
    and the rest of the COPY, are fakesnow's own (the executor-side PUT of
    ``engine.job.stage_put`` COPYs them by name)."""
    global _internal_patched
    if _internal_patched:
        return
    import fakesnow.copy_into as copy_into
    from fakesnow.transforms import stage

    original = copy_into._source_urls

    def source_urls(source: str, files: list[str]) -> list[str]:
        if stage.is_internal(source):
            return [f"{source.rstrip('/')}/{name}" for name in files] or [source]
        return original(source, files)

    copy_into._source_urls = source_urls
    _internal_patched = True


def connect(environment: dict[str, str], database: str, schema: str) -> Any:
    """A connection to the server ``fakesnow_server`` started (its ``connections.toml``)."""
    import tomllib

    import snowflake.connector

    home = Path(environment["SNOWFLAKE_HOME"])
    entry = tomllib.loads((home / "connections.toml").read_text())[CONNECTION]
    return snowflake.connector.connect(**entry, database=database, schema=schema)


def serve(port: int) -> None:
    import fakesnow.server
    import uvicorn

    keep_null_timestamps()
    merge_keeps_transaction()
    drop_primary_key()
    lock_conflicts_as_snowflake()
    md5_number_lower64()
    copy_named_internal_files()
    read_external_stages()

    # warning: fakesnow logs every login and query at info level
    uvicorn.run(fakesnow.server.app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fakesnow_run")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_command = commands.add_parser("serve", help="serve fakesnow on 127.0.0.1:PORT")
    serve_command.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    serve(args.port)


if __name__ == "__main__":
    main()
