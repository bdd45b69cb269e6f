"""verify by range checksums computed inside MariaDB and DuckDB (``verify.checksum``,
``verify.ranges``): the same canonical text of every awkward value on both sides, any single
changed value found exactly, agreeing ranges never fetched, the fallback named."""

from __future__ import annotations

import pytest

from replicator.context import Context
from replicator.demo.workload import create_schema, seed
from replicator.verify import verify_pipeline
from replicator.verify.compare import TableVerifier
from tests.integration.verify_checksum_support import checksum_pipeline, create_types
from tests.integration.verify_support import load, open_target, replicate_by_snapshot

pytestmark = [pytest.mark.mysql]

CHECKSUMMED = ("orders", "awkward", "types")


@pytest.fixture(scope="module")
def replicated(mariadb, tmp_path_factory):
    """One copy for the module: each test puts back what it tampers with."""
    tmp_path = tmp_path_factory.mktemp("checksum")
    database = "verify_checksum_module"
    root = mariadb.root_connection()
    with root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    create_schema(root, database)
    seed(root, database, customers=20, orders=150, awkward=70)
    create_types(root, database)
    pipeline = load(checksum_pipeline(tmp_path, database), mariadb)
    sink = open_target(pipeline)
    replicate_by_snapshot(pipeline, sink)
    yield pipeline, sink, root
    sink.close()
    with root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    root.close()


def _verifier(pipeline, sink, name):
    context = Context(pipeline)
    table = context.plan.table(name)
    source_table = context.catalog.table(table.source_database, table.source_table)
    return table, TableVerifier(pipeline, source_table, table, sink.connection,
                                end_transaction=False, target_kind="duckdb")


@pytest.mark.parametrize("name", CHECKSUMMED)
def test_every_row_has_the_same_canonical_text_on_both_sides(replicated, name):
    pipeline, sink, _ = replicated
    table, verifier = _verifier(pipeline, sink, name)
    try:
        plan = verifier.checksum_plan()
        assert not isinstance(plan, list), plan
        source = dict(verifier.source.query(
            f"SELECT `{plan.key_source}`, {plan.source_text} FROM {verifier.source.relation}",
            []))
        target = dict(verifier.target.query(
            f'SELECT "{plan.key_target}", {plan.target_text} FROM main."{table.target_table}"',
            []))
    finally:
        verifier.close()
    source = {int(k): (v.decode() if isinstance(v, bytes) else v) for k, v in source.items()}
    target = {int(k): v for k, v in target.items()}
    assert sorted(source) == sorted(target)
    differing = {k: (source[k], target[k]) for k in source if source[k] != target[k]}
    assert not differing, differing


def test_equal_tables_cost_one_checksum_each_and_no_row(replicated):
    pipeline, sink, _ = replicated
    report = verify_pipeline(pipeline, sink=sink)
    assert report.equal, "\n".join(report.describe())
    for name in CHECKSUMMED:
        table = report.table(name)
        assert (table.method, table.checksum_queries, table.fetched_rows) == ("checksum", 1, 0)
        assert table.source_rows == table.target_rows > 0
    customers = report.table("customers")
    assert customers.method == "fetch"
    assert any("EMAIL is masked" in reason for reason in customers.fallback)
    assert customers.fetched_rows == 2 * customers.source_rows == 40
