"""Issue 29's acceptance: every kind of DDL of docs/running.md ("Schema changes") on pipelines
made as users make them, on the real MariaDB, Spark, and DuckDB or fakesnow's HTTP server.

The pipeline is ``replicator init --from mysql://...``'s output (every column pinned with its
``source_type``, the key pinned as ``primary_key: [id]``), with the target switched, a
checkpoint and batching added, ``email: {mask: sha256}`` added to contacts' pin, ``truncate:
follow`` on one table and ``drop_table: ignore`` on another; *unpinned* is the same file
without ``columns:`` and ``primary_key:`` (tables listed only). One table per DDL kind, so one
run takes them all:

    added      ADD COLUMN x INT NOT NULL DEFAULT 7
    widened    sku VARCHAR(40) -> VARCHAR(80) utf8mb4 (the length prefix grows to two bytes),
               a row change between, then qty INT -> BIGINT
    retyped    qty INT -> VARCHAR(20) (type_change: recopy)
    renamed    RENAME COLUMN qty TO quantity
    trimmed    DROP COLUMN price (drop_column: ignore: the target keeps it)
    rekeyed    PRIMARY KEY (id) -> (id, sku), then a second row for id 1 (key_change: recopy)
    truncated  TRUNCATE TABLE (truncate: follow, set for this table only)
    swapped    a pt-osc-style swap by hand: CREATE ... LIKE, ALTER, copy, RENAME TABLE, DROP
    indexed    ADD / CREATE / RENAME / DROP INDEX
    optimized  OPTIMIZE TABLE
    gone       DROP TABLE (drop_table: ignore, set for this table only)
    contacts   RENAME COLUMN email TO contact, email masked: no raw email ever in the target

Row changes (update, insert, delete; quotes, emoji, NULL next to 'None', DECIMAL,
DATETIME(6)) go before and after each DDL: while a run streams they land in the DDL's batch
(max_rows 5000); while no run follows they lie between two ``run --until-caught-up``. After
each step the target equals the source row by row, the masked column holds only hashes, and
``replicator verify PIPELINE.yaml`` (the CLI, as typed) exits 0.

Then the default policies' stops (DuckDB): a TRUNCATE of a table without ``truncate: follow``
and a DROP TABLE without ``drop_table: ignore`` stop the run with the policy named; the
user's edit (``truncate: follow`` on that table) lets the next run go on, equal again.

Targets: DuckDB runs the whole matrix -- (streaming, stopped) x (pinned, unpinned) -- with the
runner in-process (the session's Spark). fakesnow's HTTP server runs the pinned pipeline in
both modes, through the CLI only (``run`` as a process, streaming forever, or
``--until-caught-up``), on the kinds whose Snowflake SQL differs: the added column's
DEFAULT, ALTER COLUMN SET DATA TYPE, the re-created retyped column, RENAME COLUMN, the
dropped column's NOT NULL relaxed, DROP/ADD PRIMARY KEY, the TRUNCATE's DELETE, the masked
rename. Index DDL, OPTIMIZE, the table swap and DROP TABLE are decided in the engine alone
(nothing differs in the warehouse) and run on DuckDB only.

A real pt-online-schema-change with a writer: ``test_pt_online_schema_change_*``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.errors import EngineError
from tests.integration.e2e_support import (
    assert_target_equals_source,
    cli_environment,
    differences,
    ok,
    replicator,
    run,
)
from tests.integration.scaffolded_support import (
    WIDE_SKU,
    StreamingProcess,
    Writes,
    create_tables,
    masked,
    raw_values_in,
    scaffold,
    sha256,
    table_setting,
    unpinned,
    verify,
    writer_thread,
)
from tests.integration.test_schema_policies_e2e import Streaming

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

TOUCH = "row changes"  # the Writes' update, insert and delete on the table, at that point

# table -> what happens to it: SQL ({t}: the table, {db}: the database), (SQL, parameters),
# or TOUCH.
KINDS: dict[str, list[Any]] = {
    "added": [TOUCH, "ALTER TABLE {t} ADD COLUMN x INT NOT NULL DEFAULT 7", TOUCH,
              "UPDATE {t} SET x = 8 WHERE id % 3 = 0"],
    "widened": [TOUCH, "ALTER TABLE {t} MODIFY sku VARCHAR(80) CHARACTER SET utf8mb4 NOT NULL",
                TOUCH, ("UPDATE {t} SET sku = %s WHERE id = 2", (WIDE_SKU,)),
                "ALTER TABLE {t} MODIFY qty BIGINT NOT NULL DEFAULT 0", TOUCH,
                "UPDATE {t} SET qty = 5000000000 WHERE id = 3"],
    "retyped": [TOUCH, "ALTER TABLE {t} MODIFY qty VARCHAR(20) NOT NULL DEFAULT '0'", TOUCH,
                ("UPDATE {t} SET qty = %s WHERE id = 2", ("twelve 'q' 🚀",))],
    "renamed": [TOUCH, "ALTER TABLE {t} RENAME COLUMN qty TO quantity", TOUCH,
                "UPDATE {t} SET quantity = 42 WHERE id = 3"],
    "trimmed": [TOUCH, "ALTER TABLE {t} DROP COLUMN price", TOUCH],
    "rekeyed": [TOUCH, "ALTER TABLE {t} DROP PRIMARY KEY, ADD PRIMARY KEY (id, sku)", TOUCH,
                ("INSERT INTO {t} (id, sku, note) VALUES (1, %s, %s)",
                 ("a second row for id 1 🚀", "None"))],
    "truncated": [TOUCH, "TRUNCATE TABLE {t}", TOUCH, TOUCH],
    "swapped": [TOUCH, "CREATE TABLE {db}._swapped_new LIKE {t}",
                "ALTER TABLE {db}._swapped_new ADD COLUMN y DECIMAL(8,2) DEFAULT 1.50, "
                "MODIFY qty BIGINT NOT NULL DEFAULT 0",
                "INSERT INTO {db}._swapped_new (id, sku, qty, price, note, made_at) "
                "SELECT id, sku, qty, price, note, made_at FROM {t}",
                "RENAME TABLE {t} TO {db}._swapped_old, {db}._swapped_new TO {t}",
                "DROP TABLE {db}._swapped_old", TOUCH, "UPDATE {t} SET y = 2.25 WHERE id = 4"],
    "indexed": [TOUCH, "ALTER TABLE {t} ADD INDEX idx_sku (sku)", TOUCH,
                "CREATE INDEX idx_qty ON {t} (qty)",
                "ALTER TABLE {t} RENAME INDEX idx_sku TO idx_sku_2",
                "DROP INDEX idx_qty ON {t}", TOUCH],
    "optimized": [TOUCH, "OPTIMIZE TABLE {t}", TOUCH],
    "gone": [TOUCH, "DROP TABLE {t}"],
    "contacts": [TOUCH, "ALTER TABLE {t} RENAME COLUMN email TO contact", TOUCH],
}
# The kinds whose warehouse SQL differs between DuckDB and Snowflake (module docstring).
SNOWFLAKE_KINDS = ("added", "widened", "retyped", "renamed", "trimmed", "rekeyed",
                   "truncated", "contacts")


def _pipeline_text(text: str, database: str, *, pins: bool, tables: tuple[str, ...]) -> str:
    text = text if pins else unpinned(text)
    text = masked(text, database)
    text = table_setting(text, database, "truncated", "schema_changes: {truncate: follow}")
    if "gone" in tables:
        text = table_setting(text, database, "gone", "schema_changes: {drop_table: ignore}")
    return text


def _apply(root: Any, writes: Writes, database: str, tables: tuple[str, ...]) -> int:
    """Every table's DDL with its row changes, in one burst; rows ``gone`` held at its drop."""
    held = 0
    with root.cursor() as cursor:
        for table in tables:
            for step in KINDS[table]:
                if step is TOUCH:
                    writes.touch(table)
                    continue
                sql, params = step if isinstance(step, tuple) else (step, None)
                if table == "gone" and sql.startswith("DROP TABLE"):
                    cursor.execute(f"SELECT COUNT(*) FROM `{database}`.gone")
                    held = cursor.fetchone()[0]
                cursor.execute(sql.format(t=f"`{database}`.`{table}`", db=f"`{database}`"),
                               params)
                if cursor.description:
                    cursor.fetchall()  # OPTIMIZE TABLE answers with a result set
        writes.touch("added")  # the last change: caught up once it is applied
    return held


def _problems(pipeline_file: Path, env: dict[str, str], root: Any, reader: Any,
              writes: Writes, database: str, *, schema: str, gone_rows: int | None,
              step: str) -> list[str]:
    """What is wrong after ``step``, all of it (every table compared, not the first only):
    target vs source row by row; contacts' CONTACT not sha256 of the source's value; a raw
    email in any target cell; gone's target rows lost. (``verify``: ``_verified``.)"""
    pipeline = load_pipeline(pipeline_file, environ=env)
    problems = [f"{step}: {p}" for p in differences(pipeline, root, reader)]
    with root.cursor() as cursor:
        cursor.execute(f"SELECT id, contact FROM `{database}`.contacts")
        source = {row[0]: sha256(row[1]) for row in cursor.fetchall()}
    target_tables = [row[0] for row in _fetch(
        reader, f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}'")]
    problems += [f"{step}: unmasked: {p}" for p in raw_values_in(reader, target_tables,
                                                                 writes.emails)]
    columns = {row[0] for row in _fetch(reader, "SELECT column_name FROM "
                                        "information_schema.columns WHERE table_name = 'CONTACTS'")}
    if "CONTACT" not in columns:
        problems.append(f"{step}: CONTACTS has no CONTACT column: {sorted(columns)}")
    else:
        target = dict(_fetch(reader, 'SELECT "ID", "CONTACT" FROM "CONTACTS"'))
        wrong = {k: (v, target.get(k)) for k, v in source.items() if target.get(k) != v}
        if wrong:
            problems.append(f"{step}: CONTACTS.CONTACT is not sha256(contact) for ids "
                            f"{sorted(wrong)[:10]}: {list(wrong.items())[:3]}")
    if gone_rows is not None and _fetch(reader, 'SELECT COUNT(*) FROM "GONE"') != [(gone_rows,)]:
        problems.append(f"{step}: GONE lost rows: "
                        f"{_fetch(reader, 'SELECT COUNT(*) FROM GONE')} != {gone_rows}")
    return problems


def _verified(pipeline_file: Path, env: dict[str, str], step: str) -> list[str]:
    """``replicator verify PIPELINE.yaml`` as typed: [] when it exits 0 (every table equal)."""
    result = replicator("verify", str(pipeline_file), env=env, timeout=300)
    if result.returncode == 0:
        return []
    return [f"{step}: replicator verify exited {result.returncode}:\n{result.stdout[-3000:]}"
            f"{result.stderr[-2000:]}"]


def _fetch(reader: Any, sql: str) -> list[tuple[Any, ...]]:
    cursor = reader.cursor()
    cursor.execute(sql)
    return [tuple(row) for row in cursor.fetchall()]


@contextlib.contextmanager
def _duckdb(path: Path):
    import duckdb

    with duckdb.connect(str(path), read_only=True) as connection:
        yield connection


# -- DuckDB: the whole matrix, the runner in-process -------------------------------------------


@pytest.mark.parametrize("pins", [True, False], ids=["pinned", "unpinned"])
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "stopped"])
def test_every_ddl_kind_on_a_scaffolded_pipeline_duckdb(
        spark, mariadb, mysql_source, fresh_database, tmp_path, streaming, pins):
    db, tables = fresh_database, tuple(KINDS)
    root = mariadb.root_connection()
    env = {**cli_environment_plain(mysql_source)}
    running = None
    try:
        create_tables(root, db, list(tables))
        pipeline_file = tmp_path / "scaffold.yaml"
        text = _pipeline_text(scaffold(mysql_source, db, tmp_path, environ=env), db,
                              pins=pins, tables=tables)
        pipeline_file.write_text(text)
        writes = Writes(root, db)

        def load() -> Any:
            return load_pipeline(pipeline_file, environ=env)

        run(load(), spark)  # the copy (Streaming.caught_up cannot tell a copy's end)
        if streaming:
            running = Streaming(load(), spark, root)
            writes.touch("added")
            running.caught_up()
            gone = _apply(root, writes, db, tables)
            running.caught_up()
            _copied(running.notices, db, ("retyped", "rekeyed"))
            running, stopping = None, running
            stopping.close()  # DuckDB: one writer; verify opens the file
        else:
            gone = _apply(root, writes, db, tables)
            run(load(), spark)
        problems = _after(pipeline_file, env, root, writes, db, gone, "every DDL kind")

        # The default policy stops at a TRUNCATE (truncate: follow is set on `truncated` only)
        def truncate() -> None:
            writes.touch("added")
            with root.cursor() as cursor:
                cursor.execute(f"TRUNCATE TABLE `{db}`.added")
            writes.touch("added")

        stopped = _stopped(load(), spark, root, writes, streaming, truncate)
        said = f"{stopped.message}\nhint: {stopped.hint}"
        if not ("TRUNCATE TABLE" in stopped.message and "added" in stopped.message
                and "stops the pipeline" in stopped.message
                and "`truncate: follow`" in (stopped.hint or "")):
            problems.append(f"the TRUNCATE's stop is not clear: {said}")
        # ... the user sets it on that table, and the next run follows it.
        pipeline_file.write_text(table_setting(pipeline_file.read_text(), db, "added",
                                               "schema_changes: {truncate: follow}"))
        if streaming:
            running = Streaming(load(), spark, root)
            running.caught_up()
            running, stopping = None, running
            stopping.close()
        else:
            run(load(), spark)
        problems += _after(pipeline_file, env, root, writes, db, gone, "TRUNCATE followed")

        # ... and at a DROP TABLE (drop_table: ignore is set on `gone` only).
        def drop() -> None:
            writes.touch("indexed")
            with root.cursor() as cursor:
                cursor.execute(f"DROP TABLE `{db}`.widened")
            writes.touch("indexed")

        stopped = _stopped(load(), spark, root, writes, streaming, drop)
        said = f"{stopped.message}\nhint: {stopped.hint}"
        if not ("widened" in stopped.message and "stops the pipeline" in stopped.message
                and "`schema_changes.drop_table` is stop" in (stopped.hint or "")
                and "`drop_table: ignore`" in (stopped.hint or "")):
            problems.append(f"the DROP TABLE's stop is not clear: {said}")
        assert not problems, "\n".join(problems)
    finally:
        if running is not None:  # a failed assertion must not leave the query running
            running.stop.set()
            running.thread.join(timeout=300)
        root.close()


def _copied(notices: list[str], database: str, tables: tuple[str, ...],
            timeout: float = 300.0) -> None:
    """Wait for the re-copies the DDL queued (a type change, a key change): they go on chunk
    by chunk between stream batches, after the run caught up with the binlog."""
    deadline = time.monotonic() + timeout
    for table in tables:
        done = re.compile(rf"re-copy of \S*{database}\S*{table}\S* done")
        while not any(done.search(n) for n in notices):
            assert time.monotonic() < deadline, f"no re-copy of {table} done: {notices}"
            time.sleep(0.5)


def _after(pipeline_file: Path, env: dict[str, str], root: Any, writes: Writes, database: str,
           gone_rows: int, step: str) -> list[str]:
    with _duckdb(pipeline_file.parent / "warehouse.duckdb") as reader:
        problems = _problems(pipeline_file, env, root, reader, writes, database,
                             schema="main", gone_rows=gone_rows, step=step)
    return problems + _verified(pipeline_file, env, step)


def cli_environment_plain(mysql_source: Any) -> dict[str, str]:
    """The CLI's environment for a DuckDB pipeline: the scaffold's ${MYSQL_PASSWORD}."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("SNOWFLAKE_")}
    env["MYSQL_PASSWORD"] = mysql_source.password or ""
    return env


def _stopped(pipeline: Any, spark: Any, root: Any, writes: Writes, streaming: bool,
             ddl: Callable[[], None]) -> EngineError:
    """The error the run stops with at ``ddl``: written while the run streams (after it
    caught up), or while none runs (then the next run stops at start-up)."""
    if not streaming:
        ddl()
        with pytest.raises(EngineError) as stopped:
            run(pipeline, spark)
        return stopped.value
    running = Streaming(pipeline, spark, root)
    try:
        writes.touch("indexed")  # a change to catch up to: the run streams when the DDL comes
        running.caught_up()
        ddl()
        running.thread.join(timeout=600)
    finally:
        if running.thread.is_alive():
            running.stop.set()
            running.thread.join(timeout=300)
            pytest.fail("the run did not stop at the DDL")
    assert isinstance(running.failure, EngineError), running.failure
    return running.failure


# -- fakesnow's HTTP server: the CLI as users run it --------------------------------------------


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "stopped"])
def test_ddl_on_a_scaffolded_pipeline_fakesnow(fakesnow_server, fakesnow_database, mariadb,
                                               mysql_source, fresh_database, tmp_path,
                                               streaming):
    db, tables = fresh_database, SNOWFLAKE_KINDS
    root = mariadb.root_connection()
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)
    running = None
    try:
        create_tables(root, db, list(tables))
        pipeline_file = tmp_path / "scaffold.yaml"
        text = scaffold(mysql_source, db, tmp_path, target="snowflake",
                        snowflake_database=fakesnow_database, environ=env)
        pipeline_file.write_text(_pipeline_text(text, db, pins=True, tables=tables))
        writes = Writes(root, db)
        ok(replicator("check", str(pipeline_file), env=env))
        if streaming:
            running = StreamingProcess(pipeline_file, env, tmp_path / "run.log")
            writes.touch("added")
            running.caught_up(root, poke=lambda: writes.touch("added"))
            _apply(root, writes, db, tables)
            running.caught_up(root)
            # the type and key changes' re-copies go on between stream batches after the
            # catch-up, one after the other: the target is whole once both are done
            for copied in ("retyped", "rekeyed"):
                running.said(rf"re-copy of \S*{db}\S*{copied}\S* done")
        else:
            ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
            _apply(root, writes, db, tables)
            ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
        with fakesnow_server.connect(fakesnow_database, "RAW") as reader:
            problems = _problems(pipeline_file, env, root, reader, writes, db, schema="RAW",
                                 gone_rows=None, step="every DDL kind")
        # (while the streaming run goes on, as a user checks it)
        problems += _verified(pipeline_file, env, "every DDL kind")
        assert not problems, "\n".join(problems)
    finally:
        if running is not None:
            running.close()
        root.close()


# -- a real pt-online-schema-change ------------------------------------------------------------


@pytest.mark.skipif(shutil.which("pt-online-schema-change") is None,
                    reason="Debian's percona-toolkit is not installed (scripts/bootstrap)")
def test_pt_online_schema_change_on_a_scaffolded_pipeline(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    """pt-osc (its copy, triggers and RENAME swap) with a writer on the table, on the pinned
    scaffold: once while no run follows, once while one streams. The --alter adds a column
    with a DEFAULT and widens sku across the 255-byte prefix boundary (then qty INT -> BIGINT
    the second time); the target ends equal to the source and `verify` exits 0 each time."""
    db = fresh_database
    root = mariadb.root_connection()
    env = cli_environment_plain(mysql_source)
    running = None
    try:
        create_tables(root, db, ["items", "contacts"])
        pipeline_file = tmp_path / "scaffold.yaml"
        pipeline_file.write_text(masked(scaffold(mysql_source, db, tmp_path, environ=env), db))
        writes = Writes(root, db)

        def load() -> Any:
            return load_pipeline(pipeline_file, environ=env)

        def pt_osc(alter: str, first_id: int) -> None:
            stop, errors = threading.Event(), []
            writer = writer_thread(lambda: mariadb.root_connection(db), "items", first_id,
                                   stop, errors)
            try:
                done = subprocess.run(
                    ["pt-online-schema-change", "--execute", "--no-check-replication-filters",
                     "--recursion-method=none", "--chunk-size=10", "--no-check-alter",
                     "--alter", alter, f"S={mariadb.socket},u=root,D={db},t=items"],
                    capture_output=True, text=True, timeout=300)
            finally:
                stop.set()
                writer.join(timeout=60)
            assert done.returncode == 0, done.stdout + done.stderr
            assert not errors, errors
            writes.touch("items")

        def check() -> None:
            with _duckdb(tmp_path / "warehouse.duckdb") as reader:
                assert_target_equals_source(load(), root, reader)
                assert _fetch(reader, 'SELECT count(*) FROM "ITEMS" WHERE "X" IS NULL') == [(0,)]
            verify(pipeline_file, env)

        run(load(), spark)
        writes.touch("items")
        pt_osc("ADD COLUMN x INT NOT NULL DEFAULT 7, "
               "MODIFY sku VARCHAR(80) CHARACTER SET utf8mb4 NOT NULL", 5000)
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE `{db}`.items SET sku = %s WHERE id = 2", (WIDE_SKU,))
        run(load(), spark)
        check()

        running = Streaming(load(), spark, root)
        writes.touch("items")
        running.caught_up()
        pt_osc("ADD COLUMN y VARCHAR(30) DEFAULT 'it''s 🚀', MODIFY qty BIGINT NOT NULL DEFAULT 0",
               50_000)
        with root.cursor() as cursor:
            cursor.execute(f"UPDATE `{db}`.items SET qty = 5000000000 WHERE id = 3")
        writes.touch("items")
        running.caught_up()
        running, stopping = None, running
        stopping.close()
        check()
    finally:
        if running is not None:
            running.stop.set()
            running.thread.join(timeout=300)
        root.close()
