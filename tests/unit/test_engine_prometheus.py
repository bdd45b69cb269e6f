"""Pipeline metrics in the Prometheus exposition format: counters add up per table and
phase, lag is computed from commit times and the binlog head, the file and endpoint serve it."""

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from replicator.engine.apply.metrics import BatchReport, TableReport, format_json, format_text
from replicator.engine.apply.prometheus import PipelineMetrics
from replicator.model.changes import BinlogPosition


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def parse(text: str) -> dict[tuple[str, str], float]:
    """(sample name, labels as `pipeline="..",table=".."` in this order) -> value, parsed by
    the client library's own parser (a malformed exposition raises)."""
    order = ("pipeline", "table", "phase", "kind")
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{_escape(sample.labels[k])}"'
                              for k in sorted(sample.labels, key=lambda k: (
                                  order.index(k) if k in order else 9, k)))
            samples[(sample.name, labels)] = sample.value
    return samples


def report(batch_id, tables, *, kind="stream", end=None, ts_ms=0, seconds=0.5):
    return BatchReport(
        kind, batch_id, end,
        tables=[TableReport(name, changes, rows, seconds_decode=0.1, seconds_merge=0.2,
                            last_ts_ms=ts_ms) for name, changes, rows in tables],
        seconds=seconds, finished_at=1_000.0, pipeline='shop "eu"',
    )


def test_counters_add_up_per_table_and_phase():
    metrics = PipelineMetrics('shop "eu"', clock=lambda: 2_000.0)
    metrics.observe(report(0, [("shop.orders", 10, 7), ("shop.items", 5, 5)], kind="snapshot"))
    metrics.observe(report(1, [("shop.orders", 3, 2)], ts_ms=1_990_000))
    metrics.error("transient")
    samples = parse(metrics.render())
    p = 'pipeline="shop \\"eu\\""'
    assert samples[("replicator_changes_read_total", f'{p},table="shop.orders"')] == 13
    assert samples[("replicator_rows_applied_total", f'{p},table="shop.orders"')] == 9
    assert samples[("replicator_rows_applied_total", f'{p},table="shop.items"')] == 5
    assert samples[("replicator_table_batches_total", f'{p},table="shop.orders"')] == 2
    phase = f'{p},table="shop.orders",phase="merge"'
    assert abs(samples[("replicator_phase_seconds_total", phase)] - 0.4) < 1e-9
    assert samples[("replicator_batches_total", f'{p},kind="stream"')] == 1
    assert samples[("replicator_batches_total", f'{p},kind="snapshot"')] == 1
    assert samples[("replicator_errors_total", f'{p},kind="transient"')] == 1
    # newest commit applied at 1990 s, now 2000 s
    assert samples[("replicator_lag_seconds", p)] == 10


def test_lag_in_bytes_reads_the_head_at_most_every_interval():
    now = [100.0]
    heads = []

    def head():
        heads.append(now[0])
        return BinlogPosition("mysql-bin.000003", 500)

    def lag_bytes(position, head_position):
        assert position == BinlogPosition("mysql-bin.000002", 40)
        return 12_345

    metrics = PipelineMetrics("p", head=head, lag_bytes=lag_bytes, head_interval_s=5,
                              clock=lambda: now[0])
    end = {"file": "mysql-bin.000002", "pos": 40}
    metrics.observe(report(1, [("a.b", 1, 1)], end=end))
    now[0] = 102.0
    metrics.observe(report(2, [("a.b", 1, 1)], end=end))
    assert heads == [100.0]  # the second batch came within the interval
    samples = parse(metrics.render())
    assert samples[("replicator_lag_bytes", 'pipeline="p"')] == 12_345
    assert samples[("replicator_lag_files", 'pipeline="p"')] == 1


def test_a_failing_head_read_is_counted_not_raised():
    def head():
        raise OSError("server gone")

    metrics = PipelineMetrics("p", head=head, lag_bytes=lambda a, b: 0)
    metrics.observe(report(1, [("a.b", 1, 1)], end={"file": "mysql-bin.000001", "pos": 4}))
    samples = parse(metrics.render())
    assert samples[("replicator_errors_total", 'pipeline="p",kind="metrics"')] == 1
    assert ("replicator_lag_bytes", 'pipeline="p"') not in samples


def test_file_is_replaced_whole_and_endpoint_serves_it(tmp_path):
    metrics = PipelineMetrics("p")
    metrics.observe(report(1, [("a.b", 4, 4)]))
    path = tmp_path / "metrics" / "replicator.prom"
    metrics.write_file(path)
    assert parse(path.read_text())[("replicator_rows_applied_total", 'pipeline="p",table="a.b"')] == 4
    assert [p.name for p in path.parent.iterdir()] == ["replicator.prom"]  # no temp left behind

    server = metrics.serve(0)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            served = parse(response.read().decode())
        assert served[("replicator_rows_applied_total", 'pipeline="p",table="a.b"')] == 4
        # The client's process collector comes along (what every exporter has).
        assert served[("process_resident_memory_bytes", "")] > 0
        assert ("process_cpu_seconds_total", "") in served
    finally:
        server.shutdown()


def test_log_lines_name_the_pipeline_table_and_batch():
    line = format_json(report(7, [("shop.orders", 3, 2)]))
    assert '"pipeline":"shop \\"eu\\""' in line and '"batch_id":7' in line
    assert '"table":"shop.orders"' in line
    text = format_text(report(7, [("shop.orders", 3, 2)]))
    assert text.startswith('stream pipeline=shop "eu" batch=7 ')
    assert "table=shop.orders" in text


def test_lag_is_zero_when_applied_up_to_the_head_however_idle_the_source():
    now = [2_000.0]
    head = BinlogPosition("mysql-bin.000002", 40)
    metrics = PipelineMetrics("p", head=lambda: head, lag_bytes=lambda position, at: (
        0 if position == at else 99), head_interval_s=0, clock=lambda: now[0])
    metrics.observe(report(1, [("a.b", 1, 1)], end={"file": "mysql-bin.000002", "pos": 10},
                           ts_ms=1_990_000))
    assert parse(metrics.render())[("replicator_lag_seconds", 'pipeline="p"')] == 10
    metrics.observe(report(2, [("a.b", 0, 0)], end={"file": "mysql-bin.000002", "pos": 40}))
    now[0] = 90_000.0  # a day of nothing: still caught up
    metrics.observe(report(3, [], end={"file": "mysql-bin.000002", "pos": 40}))
    assert parse(metrics.render())[("replicator_lag_seconds", 'pipeline="p"')] == 0


def test_retention_of_the_needed_binlog_is_a_gauge_when_known():
    asked = []

    def left(position):
        asked.append(position)
        return 5_400.0 if position.file == "mysql-bin.000002" else None

    metrics = PipelineMetrics("p", head=lambda: BinlogPosition("mysql-bin.000003", 9),
                              lag_bytes=lambda position, at: 99, retention_left=left,
                              head_interval_s=0, clock=lambda: 2_000.0)
    metrics.observe(report(1, [("a.b", 1, 1)], end={"file": "mysql-bin.000002", "pos": 10}))
    assert parse(metrics.render())[("replicator_binlog_retention_seconds", 'pipeline="p"')] == 5_400
    metrics.observe(report(2, [("a.b", 1, 1)], end={"file": "mysql-bin.000003", "pos": 9}))
    assert ("replicator_binlog_retention_seconds", 'pipeline="p"') not in parse(metrics.render())
    assert asked[0] == BinlogPosition("mysql-bin.000002", 10)
