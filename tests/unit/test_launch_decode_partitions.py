"""How many decode tasks a micro-batch gets (``model.pipeline.decode_partitions``) and how its
binlog range is cut into them (``binlog_ranges.cut_range`` and ``binlog_batches.partition_rows``), on made-up boundaries: no server needed."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from replicator.engine.job.binlog_batches import partition_rows
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import (
    MIN_PARTITION_ROWS,
    BatchPolicy,
    EngineConfig,
    decode_partitions,
    master_cores,
)
from replicator.source.binlog_ranges import Boundary, cut_range

START = BinlogPosition("mysql-bin.000001", 4)


def _boundaries(sizes: list[int]) -> tuple[list[Boundary], BinlogPosition]:
    """One transaction per size (rows); boundaries at their starts, then the range's end."""
    found, rows, pos = [], 0, 4
    for size in sizes:
        if pos > 4:
            found.append(Boundary(BinlogPosition("mysql-bin.000001", pos), rows))
        rows += size
        pos += 100 + size * 50
    end = BinlogPosition("mysql-bin.000001", pos)
    found.append(Boundary(end, rows))
    return found, end


def _rows(parts, boundaries):
    at = {b.position: b.rows_before for b in boundaries}
    at[START] = 0
    return [at[b] - at[a] for a, b in parts]


def test_equal_transactions_split_evenly():
    boundaries, end = _boundaries([1] * 1000)
    parts = cut_range(boundaries, START, end, 2)
    assert _rows(parts, boundaries) == [500, 500]
    parts = cut_range(boundaries, START, end, 3)
    assert sorted(_rows(parts, boundaries)) == [333, 333, 334]


def test_the_nearest_boundary_balances_uneven_transactions():
    # a first-boundary-past-the-middle rule would cut after 900 rows (900 / 100)
    boundaries, end = _boundaries([400, 500, 100])
    assert _rows(cut_range(boundaries, START, end, 2), boundaries) == [400, 600]


def test_one_huge_transaction_stays_one_partition():
    boundaries, end = _boundaries([50_000])
    assert cut_range(boundaries, START, end, 4) == [(START, end)]


def test_a_batch_smaller_than_the_policy_gets_fewer_parts():
    boundaries, end = _boundaries([1] * 300)
    # max_rows 1000 over 4 partitions: a part is worth 250 rows, so 300 rows make 2 parts
    parts = cut_range(boundaries, START, end, 4, part_rows=partition_rows(1000, 4))
    assert len(parts) == 2
    assert len(cut_range(boundaries, START, end, 4, part_rows=1000)) == 1


def test_partition_rows_come_from_the_batching_policy():
    assert partition_rows(50_000, 2) == 25_000
    assert partition_rows(50_001, 2) == 25_001
    assert partition_rows(0, 4) == MIN_PARTITION_ROWS


@given(st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=60),
       st.integers(min_value=1, max_value=6))
def test_parts_are_contiguous_ordered_and_cover_the_range(sizes, wanted):
    boundaries, end = _boundaries(sizes)
    parts = cut_range(boundaries, START, end, wanted)
    assert 1 <= len(parts) <= wanted
    assert parts[0][0] == START and parts[-1][1] == end
    for (a, b), (c, _) in itertools.pairwise(parts):
        assert b == c and a < b
    assert all(rows > 0 for rows in _rows(parts, boundaries))
    assert sum(_rows(parts, boundaries)) == sum(sizes)
    # never worse than one transaction away from the even share
    if len(parts) == wanted:
        assert max(_rows(parts, boundaries)) <= sum(sizes) / wanted + 2 * max(sizes)


def test_local_masters_name_their_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert master_cores("local") == 1
    assert master_cores("local[3]") == 3
    assert master_cores("local[4,2]") == 4  # local[N, maxFailures]
    assert master_cores("local[*]") == 6
    assert master_cores("spark://master:7077") is None
    assert master_cores("yarn") is None


def test_auto_is_one_task_per_core_while_a_full_batch_feeds_each():
    auto = EngineConfig(master="local[4]")
    assert auto.decode_partitions == "auto"  # the default
    assert decode_partitions(auto, BatchPolicy(max_rows=50_000)) == 4  # the master's cores
    assert decode_partitions(auto, BatchPolicy(max_rows=50_000), cores=16) == 10  # 5,000 rows each
    assert decode_partitions(auto, BatchPolicy(max_rows=12_000), cores=16) == 2
    assert decode_partitions(auto, BatchPolicy(max_rows=1_000), cores=16) == 1  # never below one
    assert decode_partitions(auto, BatchPolicy(max_rows=0), cores=16) == 16  # unbounded batches
    cluster = EngineConfig(master="spark://master:7077")
    assert decode_partitions(cluster, BatchPolicy()) == 1  # cores unknown before Spark says
    assert decode_partitions(cluster, BatchPolicy(), cores=8) == 8
    fixed = EngineConfig(master="local[4]", decode_partitions=3)
    assert decode_partitions(fixed, BatchPolicy(max_rows=1_000), cores=16) == 3  # as written
    assert MIN_PARTITION_ROWS == 5_000
