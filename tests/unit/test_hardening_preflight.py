"""Which binlog settings stop a run (the same checks and fixes as `replicator check`)."""

from __future__ import annotations

from replicator.source.preflight import replication_failures

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL", "expire_logs_days": "1"}


def test_a_well_configured_server_has_no_failures_even_with_short_retention():
    assert replication_failures(GOOD, mariadb=True) == []


def test_each_wrong_setting_is_a_failure_naming_its_fix():
    cases = {
        "log_bin": ("OFF", "log-bin=mysql-bin"),
        "binlog_format": ("MIXED", "binlog_format = ROW"),
        "binlog_row_image": ("MINIMAL", "binlog_row_image = FULL"),
        "binlog_row_metadata": ("MINIMAL", "binlog_row_metadata = FULL"),
    }
    for name, (value, fix) in cases.items():
        failures = replication_failures({**GOOD, name: value}, mariadb=False)
        assert [f.check for f in failures] == [name]
        assert fix in (failures[0].fix or "")
