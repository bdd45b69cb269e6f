"""Shared pieces of the end-to-end tests: a pipeline over the demo schema, and the check
that the target equals the source (``replicator.demo.compare``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.context import Context
from replicator.demo.compare import compare_table
from replicator.engine.runner import RunOptions, RunResult, run_pipeline
from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    Pipeline,
    SnowflakeTarget,
    TablePipeline,
    TargetConfig,
)

DEMO_TABLES = ("customers", "orders", "awkward")


def demo_pipeline(
    source: MySQLSource, database: str, workdir: Path, warehouse: Any, *, name: str = "e2e",
    max_rows: int = 300,
) -> Pipeline:
    return Pipeline(
        name=name,
        source=source,
        target=TargetConfig(warehouse),
        tables=tuple(TablePipeline(database, table) for table in DEMO_TABLES),
        batching=BatchPolicy(max_rows=max_rows, max_delay_ms=500),
        engine=EngineConfig(checkpoint=str(workdir / "checkpoint")),
    )


def run(pipeline: Pipeline, spark: Any, **options: Any) -> RunResult:
    options.setdefault("until_caught_up", True)
    options.setdefault("handle_signals", False)
    return run_pipeline(pipeline, RunOptions(**options), spark=spark)


def differences(pipeline: Pipeline, source_connection: Any, target_connection: Any) -> list[str]:
    """One description per table whose target differs from its source."""
    plan = Context(pipeline).plan  # the live schema: includes columns added mid-stream
    problems = []
    for table in plan.tables:
        comparison = compare_table(source_connection, target_connection, table)
        assert comparison.source_rows > 0, f"{table.source_name}: no rows to compare"
        if not comparison.equal:
            problems.append(comparison.describe())
    return problems


def assert_target_equals_source(pipeline: Pipeline, source_connection: Any, target_connection: Any) -> None:
    problems = differences(pipeline, source_connection, target_connection)
    assert not problems, "\n".join(problems)


@contextlib.contextmanager
def fakesnow_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SnowflakeTarget, Callable[[], Any]]]:
    """A Snowflake target (ANALYTICS.RAW) served by fakesnow under ``tmp_path``, and a function
    opening a connection to it (a context manager that closes it). fakesnow runs the
    sink's ``DROP PRIMARY KEY`` (``bench.fakesnow_run.drop_primary_key``).

    ``SNOWFLAKE_*`` variables of the developer's shell are removed first: the sink would
    otherwise take them as connection settings.
    """
    fakesnow = pytest.importorskip("fakesnow")
    for name in list(os.environ):
        if name.startswith("SNOWFLAKE_"):
            monkeypatch.delenv(name)
    settings = {"account": "fake", "user": "fake", "password": "fake",
                "database": "ANALYTICS", "schema": "RAW"}
    from bench.fakesnow_run import drop_primary_key

    drop_primary_key()  # run by a key change (issue 18), not parsed by fakesnow 0.12.1
    directory = tmp_path / "fakesnow"
    directory.mkdir()
    with fakesnow.patch(db_path=str(directory)):
        import snowflake.connector

        def connect() -> Any:
            return contextlib.closing(snowflake.connector.connect(**settings))

        yield SnowflakeTarget(**settings), connect


class TargetReader:
    """A target read back: a DuckDB file (read only), or the Snowflake sink's SQL on fakesnow
    (``fakesnow_warehouse``); ``kind`` says which. A context manager, as a connection is."""

    def __init__(self, kind: str, connect: Callable[[], Any]):
        self.kind, self._connect = kind, connect
        self._connection: Any = None

    def __enter__(self) -> TargetReader:
        self._opened = self._connect()
        self._connection = self._opened.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._opened.__exit__(*exc)

    def cursor(self) -> Any:  # for assert_target_equals_source
        return self._connection.cursor()

    def execute(self, sql: str) -> Any:
        cursor = self._connection.cursor()
        cursor.execute(sql)
        return cursor

    def columns(self, table: str) -> set[str]:
        return set(self.types(table))

    def types(self, table: str) -> dict[str, str]:
        """Upper-case column name -> its type as the target's information schema names it:
        DuckDB's ``DECIMAL(14,4)``, ``VARCHAR``, ``BIGINT``; Snowflake's ``NUMBER(14,4)``,
        ``TEXT``."""
        rows = self.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale FROM "
            f"information_schema.columns WHERE table_name = '{table}'").fetchall()
        if self.kind == "duckdb":
            return {name.upper(): kind for name, kind, _, _ in rows}
        return {name.upper(): f"{kind}({precision},{scale})" if kind == "NUMBER" else kind
                for name, kind, precision, scale in rows}


@pytest.fixture(params=["duckdb", "snowflake"])
def warehouse(request, tmp_path, monkeypatch):
    """(the pipeline's target, a function opening a ``TargetReader`` of it): a DuckDB file, or
    ANALYTICS.RAW on fakesnow. Import it into a test module to run its tests on both."""
    if request.param == "duckdb":
        import duckdb

        path = tmp_path / "warehouse.duckdb"
        yield DuckDBTarget(str(path)), lambda: TargetReader("duckdb", lambda: contextlib.closing(
            duckdb.connect(str(path), read_only=True)))
        return
    with fakesnow_warehouse(tmp_path, monkeypatch) as (target, connect):
        yield target, lambda: TargetReader("snowflake", connect)


# -- the CLI as a subprocess against fakesnow's server (tests/fixtures/fakesnow_server.py) ------

ROOT = Path(__file__).resolve().parents[2]


DUCKDB_TARGET = 'duckdb: {path: "${WORKDIR}/warehouse.duckdb"}'
SNOWFLAKE_TARGET = 'snowflake: {connection: fakesnow, database: "${TARGET_DATABASE}", schema: RAW}'


def demo_pipeline_yaml(name: str, database: str, *, target: str = DUCKDB_TARGET,
                       batching: str = "{max_rows: 300, max_delay: 500ms}",
                       engine: str = "master: local[2]\n  checkpoint: ${WORKDIR}/checkpoint\n"
                       '  conf: {spark.sql.shuffle.partitions: "2"}') -> str:
    """The demo tables' pipeline YAML for the CLI tests, configured by ``cli_environment``'s
    variables (MySQL, WORKDIR, TARGET_DATABASE): only what differs is passed."""
    tables = "".join(f"  - source: {database}.{table}\n" for table in DEMO_TABLES)
    return (f"version: 1\nname: {name}\nsource:\n  mysql:\n    host: ${{MYSQL_HOST}}\n"
            "    port: ${MYSQL_PORT}\n    user: ${MYSQL_USER}\n    password: ${MYSQL_PASSWORD}\n"
            f"target:\n  {target}\nbatching: {batching}\nengine:\n  {engine}\ntables:\n{tables}")


def cli_environment(fakesnow_server, database: str, mysql_source, workdir: Path,
                    **connection: object) -> dict[str, str]:
    """The subprocess's environment: MySQL settings for the YAML, SNOWFLAKE_HOME for the
    connector, and none of the developer's SNOWFLAKE_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SNOWFLAKE_")}
    env.update(
        MYSQL_HOST=mysql_source.host, MYSQL_PORT=str(mysql_source.port),
        MYSQL_USER=mysql_source.user, MYSQL_PASSWORD=mysql_source.password or "",
        WORKDIR=str(workdir), TARGET_DATABASE=database,
        SNOWFLAKE_HOME=str(fakesnow_server.snowflake_home(**connection)),
    )
    return env


def replicator(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicator", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    if result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, result.args[2:]))} exited {result.returncode}\n"
                    f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}",
                    pytrace=False)
    return result


def kill_at_failpoint(pipeline_file: Path, env: dict[str, str], log: Path, failpoint: str, *,
                      also: str = "", args: tuple[str, ...] = (),
                      meanwhile: Callable[[], Any] | None = None) -> tuple[str, Any]:
    """Run ``replicator run FILE`` (streaming, as in production) with ``failpoint`` armed
    (``also``: more, as ``name=sleep(n);``), wait until it fires, call ``meanwhile()`` while
    the run waits there, then SIGKILL the run: (its output, meanwhile's value)."""
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", str(pipeline_file), *args],
            env={**env, "REPLICATOR_FAILPOINTS": f"{also}{failpoint}=sleep(900)"}, cwd=ROOT,
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    with sigkilled(process):
        deadline = time.monotonic() + 600  # JVM start-up alone takes minutes on a busy box
        while f"failpoint {failpoint}: sleeping" not in log.read_text(errors="replace"):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        seen = meanwhile() if meanwhile is not None else None
        os.kill(process.pid, signal.SIGKILL)
    return log.read_text(errors="replace"), seen


@contextlib.contextmanager
def sigkilled(process: subprocess.Popen) -> Iterator[None]:
    """The block SIGKILLs the run ``process`` when it decides to. The run is dead after it
    (killed here if the block failed first); a block that ended normally must have killed
    it with SIGKILL."""
    try:
        yield
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    time.sleep(1)  # the driver's JVM exits when its Python parent's pipe closes
