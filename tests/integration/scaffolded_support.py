"""Pipelines made as users make them, for the schema-change tests of issue 29.

``scaffold`` runs ``replicator init --from mysql://...`` against the test server (every column
pinned with its ``source_type``, the primary key pinned as ``primary_key:``), switches the target to a DuckDB
file or to fakesnow's HTTP server, and adds what a user adds: a checkpoint directory, batching,
per-table ``schema_changes:``, a mask. ``unpinned`` takes the pins and keys out again (a
pipeline that lists only its tables, so the run uses MySQL's key).

The schema: one table per kind of DDL, all of one layout with awkward values (quotes, emoji,
NULL next to 'None', DECIMAL, DATETIME(6), a utf8mb4 VARCHAR(40) whose widening to 80 crosses
the 255-byte length-prefix boundary), and ``contacts`` with an email to mask. ``touch`` writes
row changes (update, insert, delete) that fit every layout a DDL leaves behind, so the same
writes go before and after each DDL.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.e2e_support import ROOT, ok, replicator

# A layout every DDL kind starts from. qty has a DEFAULT so inserts that name only the
# columns no DDL touches fit every table at every step (renamed, retyped, dropped or not).
LAYOUT = ("(id INT NOT NULL PRIMARY KEY, sku VARCHAR(40) CHARACTER SET utf8mb4 NOT NULL, "
          "qty INT NOT NULL DEFAULT 0, price DECIMAL(12,2) NULL, note VARCHAR(100) NULL, "
          "made_at DATETIME(6) NULL) DEFAULT CHARSET=utf8mb4")
CONTACTS = ("(id INT NOT NULL PRIMARY KEY, name VARCHAR(100) NOT NULL, "
            "email VARCHAR(200) NULL) DEFAULT CHARSET=utf8mb4")

NOTES = ("it's \"quoted\"", "emoji 🐬🚀 and 漢字", "None", None, "", "back\\slash \\n",
         "NULL", "'; DROP TABLE x; --")
SEED_ROWS = 30
# 80 four-byte characters: only a VARCHAR(80) utf8mb4 (320 bytes, two-byte prefix) holds it.
WIDE_SKU = "🚀" * 79 + "'"


def email(n: int) -> str:
    """A raw email; none of these may ever be seen in the target (the column is masked)."""
    return f"person.{n}+'q'@exämple.com"


def sha256(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def create_tables(root: Any, database: str, tables: list[str]) -> None:
    with root.cursor() as cursor:
        for table in tables:
            layout = CONTACTS if table == "contacts" else LAYOUT
            cursor.execute(f"CREATE TABLE `{database}`.`{table}` {layout}")
            for n in range(1, SEED_ROWS + 1):
                if table == "contacts":
                    cursor.execute(f"INSERT INTO `{database}`.contacts VALUES (%s, %s, %s)",
                                   (n, f"name {n} 'ö'", None if n % 7 == 0 else email(n)))
                    continue
                cursor.execute(
                    f"INSERT INTO `{database}`.`{table}` VALUES (%s, %s, %s, %s, %s, %s)",
                    (n, f"sku-{n} 'q' 🚀", n * 3,
                     None if n % 6 == 0 else Decimal(f"{n * 1000 - 4321}.{n % 100:02d}"),
                     NOTES[n % len(NOTES)],
                     None if n % 5 == 0 else dt.datetime(2024, 2, 29, 23, 59, 59, n * 12345)))


class Writes:
    """Row changes that fit every layout a DDL leaves: update, insert (ids from 1000 up) and
    delete, using only id, sku, note and made_at (and email/contact on contacts)."""

    def __init__(self, root: Any, database: str):
        self.root, self.database, self.step = root, database, 0
        self.emails: set[str] = {email(n) for n in range(1, SEED_ROWS + 1)}

    def touch(self, table: str) -> None:
        self.step += 1
        n, t = self.step, f"`{self.database}`.`{table}`"
        with self.root.cursor() as cursor:
            if table == "contacts":
                cursor.execute("SELECT column_name FROM information_schema.columns WHERE "
                               "table_schema = %s AND table_name = 'contacts' AND "
                               "column_name IN ('email', 'contact')", (self.database,))
                (email_column,) = cursor.fetchone()
                raw = email(1000 + n)
                self.emails.add(raw)
                cursor.execute(f"UPDATE {t} SET name = %s WHERE id = %s",
                               (f"renamed 'x' {n} 🚀", n % 5 + 1))
                cursor.execute(f"INSERT INTO {t} (id, name, `{email_column}`) VALUES (%s, %s, %s)",
                               (1000 + n, f"new {n}", raw))
                updated = email(2000 + n)
                self.emails.add(updated)
                cursor.execute(f"UPDATE {t} SET `{email_column}` = %s WHERE id = %s",
                               (updated, n % 5 + 8))
                return
            cursor.execute(f"UPDATE {t} SET note = %s, made_at = %s WHERE id = %s",
                           (NOTES[n % len(NOTES)], dt.datetime(2001, 1, 1, 0, 0, 0, n),
                            n % 5 + 1))
            cursor.execute(f"INSERT INTO {t} (id, sku, note, made_at) VALUES (%s, %s, %s, %s)",
                           (1000 + n, f"new {n} \"q\"", NOTES[(n + 3) % len(NOTES)],
                            dt.datetime(2030, 12, 31, 23, 59, 59, 999999)))
            cursor.execute(f"DELETE FROM {t} WHERE id = %s", (10 + n % 20,))


# -- the pipeline file -------------------------------------------------------------------------


def scaffold(mysql_source: Any, database: str, workdir: Path, *, target: str = "duckdb",
             snowflake_database: str = "", environ: dict[str, str] | None = None) -> str:
    """``replicator init --from mysql://...`` as a user types it, then the edits a user makes:
    the target (a DuckDB file under ``workdir``, or fakesnow's connection), a checkpoint, and
    batching that keeps a burst of changes in one batch."""
    env = dict(environ or os.environ)
    env["MYSQL_PASSWORD"] = mysql_source.password or ""
    url = f"mysql://{mysql_source.user}@127.0.0.1:{mysql_source.port}/{database}"
    text = ok(replicator("init", "--from", url, "--target",
                         "duckdb" if target == "duckdb" else "snowflake", env=env)).stdout
    assert "source_type" in text and "password: ${MYSQL_PASSWORD}" in text, text
    if target == "duckdb":
        text = _replace_once(text, "duckdb: {path: ./warehouse.duckdb}",
                             f'duckdb: {{path: "{workdir / "warehouse.duckdb"}"}}')
    else:
        text = _replace_once(text, "snowflake: {connection: default, database: ANALYTICS,",
                             f"snowflake: {{connection: fakesnow, database: {snowflake_database},")
    settings = ("batching: {max_rows: 5000, max_delay: 500ms}\n"
                "engine:\n  master: local[2]\n"
                f'  checkpoint: "{workdir / "checkpoint"}"\n'
                '  conf: {spark.sql.shuffle.partitions: "2"}\n')
    return _replace_once(text, "\ntables:\n", f"\n{settings}tables:\n")


def unpinned(text: str) -> str:
    """The scaffold without its pins (columns, primary key): each table just
    ``- source: db.table``."""
    kept = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.startswith("    columns:"):
            skipping = True
            continue
        if skipping and line.startswith("      "):
            continue
        skipping = False
        if line.startswith(("    key: [", "    primary_key: [")):
            continue
        kept.append(line)
    out = "".join(kept)
    assert "source_type" not in out and "key:" not in out, out
    return out


def table_setting(text: str, database: str, table: str, setting: str) -> str:
    """``setting`` (a line such as ``schema_changes: {truncate: follow}``) under the table."""
    # init quotes a name YAML would misread (a database name that starts like a number)
    (entry,) = re.findall(rf'^  - source: "?{re.escape(f"{database}.{table}")}"?\n', text, re.M)
    return _replace_once(text, entry, f"{entry}    {setting}\n")


def masked(text: str, database: str) -> str:
    """contacts' email masked with sha256: added to its pin, or as the table's only entry."""
    pin = '      email: {source_type: "varchar(200)"}\n'
    if pin in text:
        return _replace_once(text, pin, '      email: {source_type: "varchar(200)", '
                                         'mask: sha256}\n')
    return table_setting(text, database, "contacts", "columns: {email: {mask: sha256}}")


def _replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} is not once in:\n{text}"
    return text.replace(old, new)


# -- checks a user makes -----------------------------------------------------------------------


def verify(pipeline_file: Path, env: dict[str, str]) -> None:
    """``replicator verify PIPELINE.yaml`` as typed: exit 0 (every table equal)."""
    result = replicator("verify", str(pipeline_file), env=env, timeout=300)
    if result.returncode != 0:
        pytest.fail(f"replicator verify {pipeline_file.name} exited {result.returncode}\n"
                    f"--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-4000:]}",
                    pytrace=False)


def raw_values_in(reader: Any, tables: list[str], raw: set[str]) -> list[str]:
    """Every cell of every listed target table that holds one of the ``raw`` strings."""
    found = []
    for table in tables:
        cursor = reader.cursor()
        cursor.execute(f'SELECT * FROM "{table}"')
        names = [d[0] for d in cursor.description]
        for row in cursor.fetchall():
            for name, value in zip(names, row, strict=True):
                text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                hits = [r for r in raw if r in text]
                if hits:
                    found.append(f"{table}.{name} = {text!r} holds {hits}")
    return found


# -- `replicator run` streaming as a process ---------------------------------------------------


class StreamingProcess:
    """``replicator run FILE`` streaming forever, as in production; ``caught_up`` waits until
    its log says a batch ended at or past the source's current binlog position."""

    _BATCH = re.compile(r"^stream .*position=(\S+):(\d+)", re.M)

    def __init__(self, pipeline_file: Path, env: dict[str, str], log: Path):
        self.log = log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "replicator", "run", str(pipeline_file)], env=env,
                cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def caught_up(self, root: Any, timeout: float = 600.0,
                  poke: Callable[[], None] | None = None) -> None:
        """``poke``: writes a change, called every 15 s until a stream batch reaches it (a
        run still copying or starting logs no stream batch for a change it copied)."""
        def head() -> tuple[str, int]:
            with root.cursor() as cursor:
                cursor.execute("SHOW MASTER STATUS")
                return cursor.fetchone()[:2]

        file, pos = head()
        wanted = (int(file.rsplit(".", 1)[1]), int(pos))
        deadline = time.monotonic() + timeout
        poked = time.monotonic()
        while time.monotonic() < deadline:
            if poke is not None and time.monotonic() - poked > 15:
                poke()
                poked, (file, pos) = time.monotonic(), head()
                wanted = (int(file.rsplit(".", 1)[1]), int(pos))
            text = self.output()
            if any((int(f.rsplit(".", 1)[1]), int(p)) >= wanted
                   for f, p in self._BATCH.findall(text)):
                return
            if self.process.poll() is not None:
                pytest.fail(f"the streaming run exited {self.process.returncode} before "
                            f"reaching {file}:{pos}\n{text[-6000:]}", pytrace=False)
            time.sleep(0.5)
        pytest.fail(f"not caught up with {file}:{pos}\n{self.output()[-6000:]}", pytrace=False)

    def said(self, pattern: str, timeout: float = 300.0) -> None:
        """Wait until the run's output matches ``pattern`` (a notice such as a re-copy's end)."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.output()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the run never said {pattern!r}\n{self.output()[-6000:]}",
                            pytrace=False)
            time.sleep(0.5)

    def ended(self, timeout: float = 300.0) -> str:
        """Wait for the run to stop by itself (a schema change it stops at): its output."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            pytest.fail(f"the run did not stop\n{self.output()[-6000:]}", pytrace=False)
        return self.output()

    def close(self) -> None:
        """SIGTERM (stop after the current batch), as a user's Ctrl-C; SIGKILL if it hangs."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


def writer_thread(connect: Any, table: str, first_id: int, stop: threading.Event,
                  errors: list[BaseException]) -> threading.Thread:
    """Inserts (ids from ``first_id`` on), updates and deletes on ``table`` until ``stop``
    (while pt-osc copies it)."""

    def write() -> None:
        connection = connect()
        try:
            n = first_id
            with connection.cursor() as cursor:
                while not stop.is_set():
                    n += 1
                    cursor.execute(f"INSERT INTO `{table}` (id, sku, note, made_at) VALUES "
                                   "(%s, %s, %s, NOW(6))", (n, f"w{n} 'q' 🚀", NOTES[n % 8]))
                    cursor.execute(f"UPDATE `{table}` SET note = %s WHERE id = %s",
                                   (f"writer {n} \"q\"", n % 30 + 1))
                    if n % 7 == 0:
                        cursor.execute(f"DELETE FROM `{table}` WHERE id = %s", (n - 3,))
                    time.sleep(0.01)
        except BaseException as exc:  # reported by the test, which joins the thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=write, name="writer", daemon=True)
    thread.start()
    return thread
