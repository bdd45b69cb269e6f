"""bench's 1-vs-N decode partitions: the parts decode exactly the whole range (no timing
thresholds — speed is measured by bench/run, never by tests)."""

import pytest

from bench import workload
from bench.decode_partitions import run_decode_partitions

pytestmark = [pytest.mark.mysql]


def test_parts_decode_exactly_the_whole_range(mariadb, mysql_source):
    generated = workload.generate(mariadb.socket, "bench_parts", 3_000, seed=7)
    result = run_decode_partitions(mysql_source, generated.start, generated.end, partitions=2,
                                   server_id=8_100, rounds=1)
    assert result["partitions"] == 2
    assert result["rows"] == generated.changes
    assert result["rows_per_s_1"] > 0 and result["rows_per_s_2"] > 0
    assert result["ratio"] == pytest.approx(result["rows_per_s_2"] / result["rows_per_s_1"],
                                            abs=0.01)
