"""Fencing: a run takes a lease row in the target and every batch transaction checks its
generation, so a run that lost the lease (another host took it over) applies nothing more;
a second run names the holder and since when, and exits 3."""

from __future__ import annotations

import threading
import time

import pytest

from replicator.context import Context
from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.state.lease import take_lease
from replicator.errors import LeaseError
from replicator.model.pipeline import DuckDBTarget
from replicator.sink import open_sink
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def _target(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


def _other_host(pipeline, **options):
    """A sink of the same pipeline as another host opens it, holding the lease."""
    plan = Context(pipeline).plan
    sink = open_sink(pipeline, plan)
    sink.prepare()
    return sink, take_lease(sink, pipeline.name, **options)


def test_a_second_run_is_refused_and_a_taken_over_run_applies_nothing_more(
    spark, mariadb, mysql_source, fresh_database, tmp_path
):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=30, awkward=20)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    run(pipeline, spark)  # takes the lease, releases it at the end

    # Another host holds the lease: this run stops before applying anything, naming it.
    other, held = _other_host(pipeline, holder="other-host/pid 4242")
    with pytest.raises(LeaseError) as refused:
        run(pipeline, spark)
    assert refused.value.exit_code == 3
    assert f"{held.holder} holds its lease since" in refused.value.message
    assert "--take-over" in (refused.value.hint or "")
    held.release()
    other.close()

    # A run in progress loses the lease to a take-over: its next batch rolls back, it stops.
    failed: list[BaseException] = []
    stop = threading.Event()
    applied: list[int] = []

    def forever() -> None:
        try:
            run(pipeline, spark, until_caught_up=False, stop=stop,
                on_report=lambda report: applied.append(report.batch_id))
        except BaseException as exc:  # reported below
            failed.append(exc)

    runner = threading.Thread(target=forever, daemon=True)
    runner.start()
    apply_changes(root, fresh_database, rounds=2, seed_value=3)
    deadline = time.monotonic() + 120
    while not applied and not failed:
        assert time.monotonic() < deadline, "the run applied no batch"
        time.sleep(0.2)
    thief, taken = _other_host(pipeline, take_over=True)
    assert taken.generation >= 3
    with root.cursor() as cursor:  # a change the fenced run must not apply
        cursor.execute(f"UPDATE `{fresh_database}`.customers SET name = 'fenced' WHERE id = 1")
    runner.join(timeout=120)
    stop.set()
    assert not runner.is_alive()
    assert failed and isinstance(failed[0], LeaseError), failed
    assert "another run took the lease" in failed[0].message
    taken.release()
    thief.close()
    with _target(warehouse) as target:
        name = target.execute("SELECT name FROM customers WHERE id = 1").fetchone()[0]
    assert name != "fenced"

    # The lease is free again: a run applies what the fenced one could not.
    run(pipeline, spark)
    with _target(warehouse) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()


def test_a_stale_lease_is_taken_after_the_timeout(mariadb, mysql_source, fresh_database,
                                                  tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    root.close()
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    first_sink, first = _other_host(pipeline, holder="other-host/pid 4242")
    second_sink = open_sink(pipeline, Context(pipeline).plan)
    with pytest.raises(LeaseError):
        take_lease(second_sink, pipeline.name)
    notices: list[str] = []
    second = take_lease(second_sink, pipeline.name, timeout_s=0.0, notice=notices.append)
    assert second.generation == first.generation + 1
    assert any("took the lease" in line for line in notices), notices
    assert first_sink.lease_statement("renew", [pipeline.name, first.generation]) == 0
    first_sink.close()
    second_sink.close()
