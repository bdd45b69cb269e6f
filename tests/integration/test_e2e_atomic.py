"""`target.atomic`: a MySQL transaction that changed two tables is never visible half applied.

A real run (`python -m replicator run`, a subprocess) streams one source transaction that
changes two replicated tables. The failpoint ``apply.between_tables`` stops it after the first
table's writes of that batch ran and before the second's, and the test kills it there with
SIGKILL. With ``atomic: true`` the target then shows neither table's rows of the
transaction (the state rows included: nothing of the batch is recorded); with
``atomic: false`` it shows the first table's rows without the second's, the half-applied
state the option exists to prevent. On fakesnow a reader also looks while the run waits at
the failpoint: it sees neither. The resumed run applies the batch once, and the target
equals the source row by row. DuckDB and Snowflake (fakesnow's server, through the real
connector; its MERGE made transactional as Snowflake's is: ``bench.fakesnow_run``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import create_schema, seed
from tests.integration.e2e_support import (
    DUCKDB_TARGET,
    SNOWFLAKE_TARGET,
    assert_target_equals_source,
    cli_environment,
    demo_pipeline_yaml,
    kill_at_failpoint,
    ok,
    replicator,
    run,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FAILPOINT = "apply.between_tables"
CUSTOMER, ORDER = 700_001, 800_001  # the transaction's rows (the seed's ids are small)


def _pipeline_file(tmp_path: Path, database: str, target: str, atomic: bool) -> Path:
    path = tmp_path / "atomic.yaml"
    path.write_text(demo_pipeline_yaml(
        "atomic", database, target=f"{target}\n  atomic: {str(atomic).lower()}",
        batching="{max_rows: 1000, max_delay: 200ms}"))
    return path


def _one_transaction_over_two_tables(root: Any, database: str) -> None:
    with root.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute(f"INSERT INTO `{database}`.customers (id, name, email, tier) "
                       "VALUES (%s, 'atomic', 'a@example.com', 'pro')", (CUSTOMER,))
        cursor.execute(f"INSERT INTO `{database}`.orders (id, customer_id, status, total, "
                       "updated_at) VALUES (%s, %s, 'new', 12.50, NOW(6))", (ORDER, CUSTOMER))
        cursor.execute("COMMIT")


def _kill_between_tables(pipeline_file: Path, env: dict[str, str], workdir: Path,
                         meanwhile: Any = None, failpoint: str = FAILPOINT) -> Any:
    """Run until ``failpoint`` fires inside the two-table batch, then SIGKILL the run;
    ``meanwhile()`` runs while the run waits there (its value is returned)."""
    return kill_at_failpoint(pipeline_file, env, workdir / "killed.log", failpoint,
                             meanwhile=meanwhile)[1]


def _visible(cursor: Any, schema: str) -> tuple[int, int]:
    """Whether the transaction's customer and order rows are in the target (0 or 1 each)."""
    cursor.execute(f'SELECT COUNT(*) FROM {schema}."CUSTOMERS" WHERE "ID" = {CUSTOMER}')
    customers = cursor.fetchone()[0]
    cursor.execute(f'SELECT COUNT(*) FROM {schema}."ORDERS" WHERE "ID" = {ORDER}')
    return customers, cursor.fetchone()[0]


def _scenario(root: Any, database: str, pipeline_file: Path, env: dict[str, str],
              workdir: Path, read_target: Any, *, read_while_stopped: bool = False,
              copy: Any = None) -> tuple[Any, tuple[int, int], tuple[int, int]]:
    """Copy, stream the two-table transaction into a run killed between its tables, resume:
    what the target showed while the run was stopped there (``read_while_stopped``: a
    warehouse another process can read while the run writes), after the kill, and after
    the resumed run. ``copy()``: the first copy in-process (one JVM start less) where the
    target allows it; else the CLI copies."""
    create_schema(root, database)
    seed(root, database, customers=20, orders=40, awkward=10)
    if copy is not None:
        copy()
    else:
        ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    _one_transaction_over_two_tables(root, database)
    stopped = _kill_between_tables(
        pipeline_file, env, workdir,
        (lambda: read_target(_visible)) if read_while_stopped else None)
    killed = read_target(_visible)
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    return stopped, killed, read_target(_visible)


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "per-table"])
def test_a_two_table_transaction_is_never_half_visible_in_duckdb(
        spark, mariadb, mysql_source, fresh_database, tmp_path, atomic):
    import duckdb

    root = mariadb.root_connection()
    pipeline_file = _pipeline_file(tmp_path, fresh_database, DUCKDB_TARGET, atomic)
    env = {**os.environ, "MYSQL_HOST": mysql_source.host, "MYSQL_PORT": str(mysql_source.port),
           "MYSQL_USER": mysql_source.user, "MYSQL_PASSWORD": mysql_source.password or "",
           "WORKDIR": str(tmp_path)}
    path = str(tmp_path / "warehouse.duckdb")

    def read_target(read: Any) -> Any:
        with duckdb.connect(path) as target:
            return read(target.cursor(), "main")

    _, killed, resumed = _scenario(
        root, fresh_database, pipeline_file, env, tmp_path, read_target,
        copy=lambda: run(load_pipeline(pipeline_file, environ=env), spark))
    # The kill came after the first table's writes: per table, they were committed.
    assert killed == ((0, 0) if atomic else (1, 0))
    assert resumed == (1, 1)
    pipeline = load_pipeline(pipeline_file, environ=env)
    with duckdb.connect(path, read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
        (recorded,) = target.execute(
            'SELECT COUNT(*) FROM (SELECT "TABLE", "BATCH_ID" FROM main."_REPLICATOR_STATE" '
            'GROUP BY 1, 2 HAVING COUNT(*) > 1)').fetchone()
        assert recorded == 0, "a batch recorded twice for a table"
    root.close()


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "per-table"])
def test_a_two_table_transaction_is_never_half_visible_in_snowflake(
        fakesnow_server, fakesnow_database, mariadb, mysql_source, fresh_database, tmp_path,
        atomic):
    root = mariadb.root_connection()
    pipeline_file = _pipeline_file(tmp_path, fresh_database, SNOWFLAKE_TARGET, atomic)
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)

    def read_target(read: Any) -> Any:
        with fakesnow_server.connect(fakesnow_database, "RAW") as target:
            return read(target.cursor(), '"RAW"')

    stopped, killed, resumed = _scenario(root, fresh_database, pipeline_file, env, tmp_path,
                                         read_target, read_while_stopped=True)
    # A reader while the run stood between the tables (its first table's MERGE and state
    # row done, uncommitted), and after the kill.
    assert stopped == killed == ((0, 0) if atomic else (1, 0))
    assert resumed == (1, 1)
    pipeline = load_pipeline(pipeline_file, environ=env)
    with fakesnow_server.connect(fakesnow_database, "RAW") as target:
        assert_target_equals_source(pipeline, root, target)
        cursor = target.cursor()
        cursor.execute('SELECT COUNT(*) FROM (SELECT "TABLE", "BATCH_ID" FROM '
                       '"RAW"."_REPLICATOR_STATE" GROUP BY 1, 2 HAVING COUNT(*) > 1)')
        assert cursor.fetchone()[0] == 0, "a batch recorded twice for a table"
    root.close()
