"""Preflight rules over server variables and SHOW GRANTS text (no server)."""

from __future__ import annotations

from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    Pipeline,
    TargetConfig,
)
from replicator.source.preflight import (
    binlog_checks,
    grants_check,
    retention_check,
    server_id_check,
)


def statuses(results):
    return {r.check: r.status for r in results}


def test_mysql8_partial_json_fails_and_compression_passes():
    variables = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL",
                 "binlog_row_metadata": "FULL", "binlog_row_value_options": "PARTIAL_JSON",
                 "binlog_transaction_compression": "ON", "binlog_expire_logs_seconds": "2592000"}
    results = statuses(binlog_checks(variables, mariadb=False))
    assert results["binlog_row_value_options"] == "fail"
    # Compressed transactions are decoded (tests/integration/test_mysql8_payload.py).
    assert results["binlog_transaction_compression"] == "pass"
    assert results["binlog retention"] == "pass"
    assert results["binlog_format"] == "pass"


def test_retention_warns_below_three_days_and_reads_days():
    assert retention_check({"binlog_expire_logs_seconds": "86400"}, mariadb=False).status == "warn"
    assert retention_check({"expire_logs_days": "2"}, mariadb=True).status == "warn"
    assert retention_check({"expire_logs_days": "7"}, mariadb=True).status == "pass"
    assert retention_check({}, mariadb=True).status == "pass"  # never expires


def test_grants():
    ok = ["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `replicator`@`%`"]
    assert grants_check(ok, user="replicator", databases={"shop"}, mariadb=False).status == "pass"
    narrowed = ["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `r`@`%`",
                "GRANT SELECT ON `shop`.* TO `r`@`%`"]
    assert grants_check(narrowed, user="r", databases={"shop"}, mariadb=True).status == "pass"
    missing = grants_check(narrowed, user="r", databases={"shop", "hr"}, mariadb=True)
    assert missing.status == "fail" and "SELECT" in missing.detail
    everything = ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"]
    assert grants_check(everything, user="root", databases={"x"}, mariadb=True).status == "pass"
    nothing = grants_check(["GRANT USAGE ON *.* TO `r`@`%`"], user="r", databases=set(),
                           mariadb=False)
    assert nothing.fix == "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'r'@'%';"
    assert "REPLICATION CLIENT" in nothing.detail


def test_server_id_check_spans_every_decode_task_a_run_may_start():
    def check(engine, server_id=4201, theirs=1, batching=BatchPolicy()):
        pipeline = Pipeline(name="p", source=MySQLSource(server_id=4201),
                            target=TargetConfig(warehouse=DuckDBTarget()), tables=(),
                            engine=engine, batching=batching)
        return server_id_check(pipeline, {"server_id": str(theirs)})

    assert "4201..4203" in check(EngineConfig(master="local[3]")).detail  # auto: one per core
    assert "4201; " in check(EngineConfig(master="local[3]", decode_partitions=1)).detail
    # A cluster's cores are known only to the run: as many as a full batch can feed.
    assert "4201..4210" in check(EngineConfig(master="spark://m:7077")).detail
    clash = check(EngineConfig(master="local[3]"), theirs=4203)
    assert clash.status == "fail" and "not 4203" in clash.fix
