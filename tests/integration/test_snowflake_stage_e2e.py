"""The external-stage path end to end, as users run it: ``replicator run`` as a subprocess
with ``engine.landing`` on S3 (moto's server, ``tests.fixtures.s3_landing``) and
``target.snowflake.stage`` naming a stage over it, created on fakesnow's server.

The S3 endpoint and keys reach the CLI, its Spark driver and its Python workers through the
standard AWS variables only (``s3_environment``); the YAML names no endpoint and no key.
Snapshot, then a stream of inserts, updates (a key move among them) and deletes, into a
merged table of awkward values, a soft-delete table, an scd2 table (key moves) and a
filtered changelog table: every target equals the source row by row (``replicator
verify``), every statement of the run went through fakesnow's query log, and none was a PUT (the
change files were COPYed from the stage by name, ``FILES = (...)``).

The crash test SIGKILLs a streaming run at a failpoint after the batch's COPY into the raw
table committed and before its MERGE (``apply.after_load``), another after the MERGE and
the state row before the COMMIT (``apply.before_commit``): each resumed run applies every
change exactly once; on the object store, and on a local landing zone whose files the
executors PUT into an internal stage (``engine.job.stage_put``), where a first run is also
killed after those PUTs and before the driver's COPY (``apply.before_load``), and a further
test checks that every PUT is an executor's and the targets verify equal.

The cluster test runs snapshot and stream on the standalone master + worker
(``spark_cluster``): the worker's executors land the files on the object store (they get
the S3 variables as ``spark.executorEnv.*``; without them the snapshot's tasks fail), the
driver only COPYs, and the target equals the source row by row.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from bench.fakesnow_run import copy_named_internal_files
from replicator.config import load_pipeline
from tests.fixtures.s3_landing import BUCKET, s3_environment
from tests.integration.e2e_support import (
    assert_target_equals_source,
    cli_environment,
    kill_at_failpoint,
    ok,
    replicator,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

BIGINT_UNSIGNED_MAX = 18_446_744_073_709_551_615
SCHEMA = (
    """CREATE TABLE items (
        id BIGINT UNSIGNED PRIMARY KEY,
        title VARCHAR(255) NULL,
        amount DECIMAL(38,10) NULL,
        happened_at DATETIME(6) NULL,
        recorded_at TIMESTAMP(6) NULL DEFAULT NULL,
        duration TIME(6) NULL,
        big BIGINT UNSIGNED NULL,
        payload JSON NULL,
        raw BLOB NULL,
        mood ENUM('happy','sad','it''s complicated') NULL,
        tags SET('red','green','blue') NULL,
        is_active TINYINT(1) NULL,
        born DATE NULL,
        ratio DOUBLE NULL
    )""",
    "CREATE TABLE people (id INT PRIMARY KEY, nick VARCHAR(50) NULL)",
    # The other modes' tables (the first test's pipeline only).
    "CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(50) NULL, n INT NULL)",
    "CREATE TABLE events (id INT PRIMARY KEY, kind VARCHAR(20) NULL, amount DECIMAL(10,2) NULL)",
)
ITEM_COLUMNS = ("id", "title", "amount", "happened_at", "recorded_at", "duration", "big",
                "payload", "raw", "mood", "tags", "is_active", "born", "ratio")
ITEMS = [
    (1, "it's \"quoted\" \\ back\\slash\nnewline 🚀 漢字",
     Decimal("-9999999999999999999999999999.9999999999"), dt.datetime(1970, 1, 1, 0, 0, 0, 1),
     "2038-01-19 03:14:07.999999", "-838:59:59.000000", BIGINT_UNSIGNED_MAX,
     '{"a": [1, "ü"], "s": "quote \\" 🐬", "n": null}', b"\x00\xff'\"\\\n", "it's complicated",
     "red,green,blue", 1, dt.date(1000, 1, 1), 1e-300),
    (2, "None", Decimal("0.0000000001"), dt.datetime(2024, 2, 29, 23, 59, 59, 999999), None,
     "838:59:59.000000", 0, "null", b"", "happy", "", 0, None, -0.0),
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None),
    (4, "", Decimal("12.5"), None, "2021-03-28 01:30:00.000001", "25:00:00.123456", 7,
     "[]", None, "sad", "green", None, dt.date(2000, 2, 29), 1.7976931348623157e308),
    (BIGINT_UNSIGNED_MAX, "'; DROP TABLE items; --", Decimal("1"), None, None, None, None,
     '"just a string"', b"max", None, None, 1, None, 3.0),
]
PEOPLE = [(1, "ann"), (2, "bob"), (3, "NULL"), (4, None)]


def _source(root: Any, database: str) -> None:
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        cursor.execute("SET SESSION time_zone = '+00:00'")
        for statement in SCHEMA:
            cursor.execute(statement)
        marks = ", ".join(["%s"] * len(ITEM_COLUMNS))
        cursor.executemany(f"INSERT INTO items ({', '.join(ITEM_COLUMNS)}) VALUES ({marks})",
                           ITEMS)
        cursor.executemany("INSERT INTO people VALUES (%s, %s)", PEOPLE)
        cursor.executemany("INSERT INTO notes VALUES (%s, %s, %s)",
                           [(1, "one", 1), (2, "two", 2), (3, None, None)])
        cursor.executemany("INSERT INTO events VALUES (%s, %s, %s)",
                           [(1, "click", "1.50"), (2, "spam", "0.00"), (3, "view", None)])
    root.commit()


def _changes(root: Any, database: str, round_number: int) -> None:
    """Inserts, updates (one key several times, one key moved), deletes, in both tables."""
    base = 100 * round_number
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        cursor.execute("SET SESSION time_zone = '+00:00'")
        cursor.execute("INSERT INTO items (id, title, amount, payload, raw, mood, tags) VALUES "
                       "(%s, %s, %s, %s, %s, %s, %s)",
                       (base + 10, "new 'one' \\ 😀", Decimal("1.2345678901"),
                        '{"k": "v"}', b"\x01\x02", "sad", "blue"))
        for step in range(3):  # several changes of one key in one transaction
            cursor.execute("UPDATE items SET title = %s, amount = amount + 1 WHERE id = 2",
                           (f"None step {round_number}.{step}",))
        moved = 4 if round_number == 1 else 140  # 4 -> 140 -> 241
        cursor.execute("UPDATE items SET id = %s WHERE id = %s", (base + 40 + round_number - 1,
                                                                  moved))
        cursor.execute("DELETE FROM items WHERE id = %s",
                       (3 if round_number == 1 else BIGINT_UNSIGNED_MAX,))
        cursor.execute("UPDATE items SET title = NULL, payload = %s WHERE id = 1",
                       (f'{{"round": {round_number}}}',))
        cursor.execute("INSERT INTO people VALUES (%s, %s)", (base + 5, f"new {round_number}"))
        cursor.execute("UPDATE people SET nick = %s WHERE id = 1", (f"ann {round_number}",))
        cursor.execute("DELETE FROM people WHERE id = %s", (2 if round_number == 1 else 3,))
        if round_number == 1:
            cursor.execute("UPDATE people SET id = 40 WHERE id = 4")  # a key move, soft side
        cursor.execute("UPDATE notes SET body = %s, n = n + 1 WHERE id = 1",
                       (f"one {round_number}",))
        cursor.execute("UPDATE notes SET id = %s WHERE id = %s",
                       (base + 2, 2 if round_number == 1 else 102))
        cursor.execute("INSERT INTO events VALUES (%s, 'spam', 9.99), (%s, 'click', %s)",
                       (base + 1, base + 2, f"{round_number}.25"))
        cursor.execute("UPDATE events SET kind = 'spam' WHERE id = %s", (round_number,))
    root.commit()


def _pipeline_yaml(database: str, *, modes: bool = False, mixed: bool = False,
                   landing: str = "s3://" + BUCKET + "/${LANDING_PREFIX}", conf: str = "") -> str:
    # Only variables: the endpoint and keys come from the environment (s3_environment).
    return (
        "version: 1\nname: stage-e2e\nsource:\n  mysql:\n    host: ${MYSQL_HOST}\n"
        "    port: ${MYSQL_PORT}\n    user: ${MYSQL_USER}\n    password: ${MYSQL_PASSWORD}\n"
        "target:\n  snowflake:\n    connection: fakesnow\n"
        '    database: "${TARGET_DATABASE}"\n    schema: RAW\n'
        '    stage: "${TARGET_DATABASE}.RAW.LANDING"\n'
        "batching: {max_rows: 300, max_delay: 500ms}\n"
        "engine:\n  master: local[2]\n  checkpoint: ${WORKDIR}/checkpoint\n"
        f"  landing: {landing}\n"
        f'  conf: {{spark.sql.shuffle.partitions: "2"{conf}}}\n'
        f"tables:\n  - source: {database}.items\n"
        f"  - source: {database}.people\n    deletes: soft\n"
        + (f"  - source: {database}.notes\n    mode: scd2\n"
           f"  - source: {database}.events\n    mode: changelog\n"
           # Beyond comparisons (rendered for Snowflake: plan.transpile.snowflake): a
           # function, LIKE, a computed column; verify recomputes them with DuckDB's SQL.
           "    filter: \"kind <> 'spam' AND NOT kind LIKE 'sp%m' AND (amount * 2 >= 2 "
           "OR amount IS NULL) AND length(coalesce(kind, '')) < 20\"\n"
           "    columns:\n      label: {expression: \"concat(substring(kind, 1, 3), '/', "
           "id % 7, '/', round(amount, 1))\", type: VARCHAR}\n"
           if modes else "")
        # A table the stage cannot stage (dead letters): the driver stages it (R312).
        + (f"  - source: {database}.notes\n    on_error: dead_letter\n" if mixed else ""))


def _setup(fakesnow_server: Any, database: str, mariadb: Any, mysql_source: Any,
           fresh_database: str, s3_endpoint: str, tmp_path: Path, *, modes: bool = False,
           local: bool = False, conf: str = "", mixed: bool = False
           ) -> tuple[Path, dict[str, str], Any]:
    """The source tables, the stage on fakesnow, the pipeline file and its environment.
    ``local``: the landing zone is a local directory and the stage an internal one (the
    executors PUT each landed file to it); ``conf``: more of ``engine.conf``."""
    prefix = f"stage-e2e/{uuid.uuid4().hex[:8]}"
    with fakesnow_server.connect(database, "RAW") as connection:
        cursor = connection.cursor()
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
        cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {database}.RAW")
        # The user's one-time setup (docs/snowflake.md), without a storage integration.
        cursor.execute(f"CREATE OR REPLACE STAGE {database}.RAW.LANDING" + (
            "" if local else f" URL = 's3://{BUCKET}/{prefix}/'"))
    root = mariadb.root_connection()
    _source(root, fresh_database)
    pipeline_file = tmp_path / "staged.yaml"
    landing = {"landing": "${WORKDIR}/landing"} if local else {}
    pipeline_file.write_text(_pipeline_yaml(fresh_database, modes=modes, conf=conf,
                                            mixed=mixed, **landing))
    env = {**cli_environment(fakesnow_server, database, mysql_source, tmp_path),
           **s3_environment(s3_endpoint), "LANDING_PREFIX": prefix}
    return pipeline_file, env, root


def _assert_staged_only(queries: list[str], stage: str, *, local: bool = False) -> None:
    """No PUT of the driver's: every batch's files were COPYed from the stage by name (a
    local landing zone's files were PUT there by the executors, ``local``)."""
    puts = [q for q in queries if q.lstrip().upper().startswith("PUT")]
    assert all(f" @{stage}/" in q for q in puts) if local else not puts, puts
    copies = [q for q in queries if q.lstrip().upper().startswith("COPY INTO")]
    assert copies and all(f"FROM @{stage}" in q and "FILES = ('" in q for q in copies), copies


def _counts(connection: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Per target table: (key, rows with that key[, deleted flag]) ordered by key."""
    cursor = connection.cursor()
    cursor.execute('SELECT "ID", COUNT(*) FROM "RAW"."ITEMS" GROUP BY 1 ORDER BY 1')
    items = cursor.fetchall()
    cursor.execute('SELECT "ID", COUNT(*), MIN("_DELETED") FROM "RAW"."PEOPLE" '
                   "GROUP BY 1 ORDER BY 1")
    return {"items": items, "people": cursor.fetchall()}


def test_snapshot_and_stream_through_the_external_stage(fakesnow_server, fakesnow_database,
                                                        s3_endpoint, mariadb, mysql_source,
                                                        fresh_database, tmp_path):
    pipeline_file, env, root = _setup(fakesnow_server, fakesnow_database, mariadb,
                                      mysql_source, fresh_database, s3_endpoint, tmp_path,
                                      modes=True)
    text = pipeline_file.read_text()
    assert s3_endpoint not in text and "127.0.0.1" not in text and "testing" not in text
    stage = f"{fakesnow_database}.RAW.LANDING"

    fakesnow_server.queries.clear()
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the snapshot
    _assert_staged_only(fakesnow_server.queries, stage)
    # Every target, the scd2 and filtered changelog ones too, equals the source row by row.
    ok(replicator("verify", str(pipeline_file), env=env))
    _changes(root, fresh_database, 1)
    _changes(root, fresh_database, 2)
    fakesnow_server.queries.clear()
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the stream
    queries = list(fakesnow_server.queries)

    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        counts = _counts(connection)
    items = [key for key, _ in counts["items"]]
    assert items == [1, 2, 110, 210, 241] and all(n == 1 for _, n in counts["items"])
    # people: 2 and 3 deleted (soft), 4 moved to 40 (its old key soft-deleted).
    assert counts["people"] == [(1, 1, False), (2, 1, True), (3, 1, True), (4, 1, True),
                                (40, 1, False), (105, 1, False), (205, 1, False)]
    _assert_staged_only(queries, stage)
    # events' filter and computed column ran in Snowflake's INSERT into staging
    assert any(q.startswith("INSERT INTO") and "SUBSTR(" in q and "ESCAPE" in q for q in queries)
    ok(replicator("verify", str(pipeline_file), env=env))
    root.close()


@pytest.mark.parametrize("local", [False, True], ids=["object store", "executors put"])
def test_runs_killed_after_the_copy_and_before_the_commit_apply_each_change_once(
        fakesnow_server, fakesnow_database, s3_endpoint, mariadb, mysql_source, fresh_database,
        tmp_path, local):
    if local:
        copy_named_internal_files()
    pipeline_file, env, root = _setup(fakesnow_server, fakesnow_database, mariadb,
                                      mysql_source, fresh_database, s3_endpoint, tmp_path,
                                      local=local)
    stage = f"{fakesnow_database}.RAW.LANDING"
    pipeline = load_pipeline(pipeline_file, environ=env)
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the snapshot
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        snapshot = _counts(connection)
    _changes(root, fresh_database, 1)
    _changes(root, fresh_database, 2)

    def at_the_failpoint() -> tuple[list[str], dict[str, list[tuple[Any, ...]]]]:
        """What the run sent before it stopped there; the targets as another session sees them."""
        sent = list(fakesnow_server.queries)
        with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
            return sent, _counts(connection)

    if local:
        # 0. Killed after the executors PUT the batch's files into the stage, before the
        #    driver's COPY: the replay lands and PUTs them again (OVERWRITE), loads them once.
        fakesnow_server.queries.clear()
        _, (killed, seen) = kill_at_failpoint(pipeline_file, env, tmp_path / "before-load.log",
                                              "apply.before_load", meanwhile=at_the_failpoint)
        assert seen == snapshot
        puts = [q for q in killed if q.startswith("PUT") and "/stream/" in q]
        assert puts and not [q for q in killed if q.startswith(("COPY INTO", "MERGE"))], killed

    # 1. Killed after the batch's COPY from the stage committed (its raw tables loaded),
    #    before its MERGE: nothing of the batch is in the targets.
    fakesnow_server.queries.clear()
    _, (killed, seen) = kill_at_failpoint(pipeline_file, env, tmp_path / "after-load.log",
                                          "apply.after_load", meanwhile=at_the_failpoint)
    assert seen == snapshot
    copies = [n for n, q in enumerate(killed) if q.startswith("COPY INTO")]
    assert copies and not [q for q in killed[copies[-1]:] if q.startswith("MERGE")]
    assert killed[-1] == "COMMIT"  # the load's; the run then waited at the failpoint

    # 2. The replay, killed after its MERGEs and state rows ran, before their COMMIT.
    fakesnow_server.queries.clear()
    _, (killed, seen) = kill_at_failpoint(pipeline_file, env, tmp_path / "before-commit.log",
                                          "apply.before_commit", meanwhile=at_the_failpoint)
    assert seen == snapshot  # the open transaction shows nothing to another session
    merges = [q for q in killed if q.startswith("MERGE INTO")]
    assert len(merges) == 2 and "INSERT INTO" in killed[-1] and "_REPLICATOR_STATE" in killed[-1]

    # 3. Resumed: the killed run's open transaction is aborted, the batch applied once.
    fakesnow_server.queries.clear()
    aborted = len(fakesnow_server.sessions.aborted)
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    _assert_staged_only(fakesnow_server.queries, stage, local=local)
    assert len(fakesnow_server.sessions.aborted) == aborted + 1  # the killed run's
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        assert_target_equals_source(pipeline, root, connection)
        counts = _counts(connection)
    assert counts == {
        "items": [(1, 1), (2, 1), (110, 1), (210, 1), (241, 1)],
        "people": [(1, 1, False), (2, 1, True), (3, 1, True), (4, 1, True), (40, 1, False),
                   (105, 1, False), (205, 1, False)],
    }
    root.close()


@pytest.mark.parametrize("local", [False, True], ids=["object store", "executors put"])
def test_a_snapshot_killed_between_landing_and_copy_and_between_copy_and_merge_copies_once(
        fakesnow_server, fakesnow_database, s3_endpoint, mariadb, mysql_source, fresh_database,
        tmp_path, local):
    """The snapshot's chunk files landed on the stage (or PUT there by their executor
    tasks) and the run SIGKILLed before the group's COPY (``snapshot.before_load``); the
    resumed run killed after the COPY into the raw table committed, before the INSERT/MERGE
    (``apply.after_load``); the next run copies every row once. A table the stage cannot
    stage (dead letters, R312) rides along on the driver's road."""
    if local:
        copy_named_internal_files()
    pipeline_file, env, root = _setup(fakesnow_server, fakesnow_database, mariadb,
                                      mysql_source, fresh_database, s3_endpoint, tmp_path,
                                      local=local, mixed=True)
    stage = f"{fakesnow_database}.RAW.LANDING"
    pipeline = load_pipeline(pipeline_file, environ=env)
    empty = {"items": [], "people": []}

    def at_the_failpoint() -> tuple[list[str], dict[str, list[tuple[Any, ...]]]]:
        sent = list(fakesnow_server.queries)
        with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
            return sent, _counts(connection)

    # 1. Every chunk file of the first group landed (PUT, with a local landing zone), nothing
    #    COPYed or written to a target.
    fakesnow_server.queries.clear()
    output, (killed, seen) = kill_at_failpoint(
        pipeline_file, env, tmp_path / "before-load.log", "snapshot.before_load",
        args=("--chunk-rows", "2"), meanwhile=at_the_failpoint)
    assert seen == empty
    assert "notes: its batches are staged by the driver" in output  # the plan's R312
    assert not [q for q in killed if q.startswith(("COPY INTO", "MERGE"))
                or "%_REPLICATOR_STAGE_" in q]  # nor the driver's PUT of staged rows
    puts = [q for q in killed if q.startswith("PUT") and "/snapshot/" in q]
    assert bool(puts) == local and all(f" @{stage}/" in q for q in puts), killed
    # The notes' chunks are not PUT: only the driver reads them (engine.job.stage_put).
    assert not [q for q in puts if ".notes/" in q]

    # 2. Resumed (the chunks not applied are read and landed again), killed after the
    #    first group's COPY committed, before its rows reached the target.
    fakesnow_server.queries.clear()
    _, (killed, seen) = kill_at_failpoint(pipeline_file, env, tmp_path / "after-load.log",
                                          "apply.after_load", args=("--chunk-rows", "2"),
                                          meanwhile=at_the_failpoint)
    # The driver's last statement was the load's COMMIT (executor tasks may still PUT the
    # chunks of later groups meanwhile).
    driver = [q for q in killed if not (q.startswith("PUT") and f" @{stage}/" in q)]
    assert seen == empty and driver[-1] == "COMMIT"
    assert [q for q in killed if q.startswith("COPY INTO")]

    # 3. Resumed: each row once, the covered tables COPYed from the stage, the notes staged
    #    and PUT by the driver (its table stage).
    fakesnow_server.queries.clear()
    ok(replicator("run", str(pipeline_file), "--until-caught-up", "--chunk-rows", "2",
                  env=env))
    queries = list(fakesnow_server.queries)
    assert any(q.startswith("COPY INTO") and f"FROM @{stage}" in q for q in queries)
    assert any(q.startswith("PUT") and "%_REPLICATOR_STAGE_NOTES" in q for q in queries)
    assert not [q for q in queries if f" @{stage}/" in q and ".notes/" in q]
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        assert_target_equals_source(pipeline, root, connection)
        counts = _counts(connection)
    assert counts == {
        "items": [(key, 1) for key, *_ in ITEMS],
        "people": [(key, 1, False) for key, _ in PEOPLE]}
    root.close()


def test_executors_put_a_local_landing_zone_s_files_and_the_driver_only_copies(
        fakesnow_server, fakesnow_database, s3_endpoint, mariadb, mysql_source, fresh_database,
        tmp_path):
    """engine.landing local, target.snowflake.stage an internal stage: each decode and
    snapshot task PUTs the files it landed into the stage (under their landing-relative
    names); the driver's statements are the COPYs, never a PUT."""
    copy_named_internal_files()
    pipeline_file, env, root = _setup(fakesnow_server, fakesnow_database, mariadb,
                                      mysql_source, fresh_database, s3_endpoint, tmp_path,
                                      local=True)
    stage = f"{fakesnow_database}.RAW.LANDING"
    planned = ok(replicator("plan", str(pipeline_file), env=env))
    assert f"PUT 'file://<each file the task landed>' @{stage}/" in planned.stdout

    fakesnow_server.queries.clear()
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the snapshot
    _changes(root, fresh_database, 1)
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the stream
    queries = list(fakesnow_server.queries)
    puts = [q for q in queries if q.lstrip().upper().startswith("PUT")]
    landing = str(tmp_path / "landing")
    # Every PUT is an executor's: a landed file into the internal stage, none into a table
    # stage (the driver's own staging path).
    # (fakesnow's stage looks like GCS to the connector, which then asks for each file's
    # upload URL again by its base name alone: 'file://<name>'.)
    wrong = [q for q in puts if f" @{stage}/" not in q or (
        q.startswith("PUT 'file:///") and not q.startswith(f"PUT 'file://{landing}/"))]
    assert puts and not wrong, wrong
    assert any("/snapshot/" in q for q in puts) and any("/stream/" in q for q in puts)
    copies = [q for q in queries if q.startswith("COPY INTO")]
    assert copies and all(f"FROM @{stage}" in q and "FILES = ('" in q for q in copies)
    ok(replicator("verify", str(pipeline_file), env=env))
    root.close()


def test_a_cluster_s_executors_land_on_the_object_store_and_the_warehouse_copies(
        spark_cluster, fakesnow_server, fakesnow_database, s3_endpoint, mariadb, mysql_source,
        fresh_database, tmp_path):
    """The snapshot and the stream on the standalone master + worker (``--master
    spark://``): the worker's executors write the change files to the object store, the
    driver only COPYs them from the external stage by name; target equal to source."""
    # The executors run under the worker daemon, started before this module's S3: they get
    # the endpoint and keys as Spark's documented executor environment, from variables.
    conf = "".join(f', spark.executorEnv.{name}: "${{{name}}}"'
                   for name in sorted(s3_environment(s3_endpoint)))
    pipeline_file, env, root = _setup(
        fakesnow_server, fakesnow_database, mariadb, mysql_source, fresh_database,
        s3_endpoint, tmp_path, conf=conf + ', spark.cores.max: "2", spark.executor.memory: "1g"')
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    on_cluster = ("--master", spark_cluster["master_url"])
    work = Path(spark_cluster["dir"]) / "work"
    apps_before = {path.name for path in work.glob("app-*")}
    stage = f"{fakesnow_database}.RAW.LANDING"

    fakesnow_server.queries.clear()
    ok(replicator("run", str(pipeline_file), *on_cluster, "--until-caught-up", env=env))
    _changes(root, fresh_database, 1)
    _changes(root, fresh_database, 2)
    ok(replicator("run", str(pipeline_file), *on_cluster, "--until-caught-up", env=env))
    _assert_staged_only(fakesnow_server.queries, stage)
    # Both runs were applications of the cluster (their executors under the worker).
    assert len({path.name for path in work.glob("app-*")} - apps_before) == 2
    pipeline = load_pipeline(pipeline_file, environ=env)
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        assert_target_equals_source(pipeline, root, connection)
        counts = _counts(connection)
    assert counts["items"] == [(1, 1), (2, 1), (110, 1), (210, 1), (241, 1)]
    root.close()
