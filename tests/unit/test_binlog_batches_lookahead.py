"""The planner's look-ahead (``binlog_batches._Lookahead``): the next micro-batch's end and decode
ranges are worked out while a batch runs, and used only while they still hold."""

from __future__ import annotations

import threading

import pytest

from replicator.engine.job.binlog_batches import _Lookahead
from replicator.model.changes import BinlogPosition


def at(pos: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", pos)


class Binlog:
    """Batches of 100 bytes; records who asked what, from which thread."""

    def __init__(self, fail_ahead: bool = False) -> None:
        self.calls: list[tuple[str, int, int, str]] = []
        self.fail_ahead = fail_ahead

    def end_after(self, begin, head, max_rows):
        thread = threading.current_thread().name
        self.calls.append(("end", begin.pos, head.pos, thread))
        if self.fail_ahead and thread.startswith("replicator-lookahead"):
            raise ConnectionError("lost the server")
        return at(min(begin.pos + 100, head.pos)).to_offset()

    def small(self, begin, head, max_rows):
        """A batch within 100 bytes of the head is all of (begin, head]: one listing."""
        self.calls.append(("small", begin.pos, head.pos, threading.current_thread().name))
        if head.pos - begin.pos > 100:
            return None
        return head.to_offset(), [(begin, head)]

    def split(self, begin, finish):
        self.calls.append(("split", begin.pos, finish.pos, threading.current_thread().name))
        middle = at((begin.pos + finish.pos) // 2)
        return [(begin, middle), (middle, finish)]

    def asked(self, kind, here=True):
        """The positions asked for, in this thread (here) or in the look-ahead's."""
        return [(b, e) for k, b, e, thread in self.calls if k == kind
                and thread.startswith("replicator-lookahead") != here]


def test_the_next_batch_is_worked_out_ahead_and_used():
    binlog = Binlog()
    ahead = _Lookahead(binlog.end_after, binlog.split, binlog.small)
    head = at(1000)
    assert ahead.end(at(4), head, 50) == at(104).to_offset()
    assert ahead.ranges(at(4), at(104)) == [(at(4), at(54)), (at(54), at(104))]
    assert ahead.end(at(104), head, 50) == at(204).to_offset()
    assert ahead.ranges(at(104), at(204)) == [(at(104), at(154)), (at(154), at(204))]
    ahead.close()
    # Only the first end was asked in the planner's own thread; every split and every later
    # end in the look-ahead's.
    assert binlog.asked("end") == [(4, 1000)]
    assert binlog.asked("split") == []
    assert binlog.asked("end", here=False)[:1] == [(104, 1000)]
    assert binlog.asked("split", here=False)[:2] == [(4, 104), (104, 204)]


def test_an_end_that_was_the_head_is_asked_again_once_the_head_moved():
    binlog = Binlog()
    ahead = _Lookahead(binlog.end_after, binlog.split, binlog.small)
    assert ahead.end(at(4), at(150), 50) == at(104).to_offset()
    # Worked out ahead with head 150: the end was the head itself. The binlog grew since.
    assert ahead.end(at(104), at(400), 50) == at(204).to_offset()
    assert (104, 400) in binlog.asked("end")
    # An end found before the head it was computed with holds for any later head.
    binlog.calls.clear()
    assert ahead.end(at(204), at(900), 50) == at(304).to_offset()
    assert binlog.asked("end") == []
    ahead.close()


def test_ranges_of_another_batch_and_failed_look_aheads_are_worked_out_again():
    binlog = Binlog(fail_ahead=True)
    ahead = _Lookahead(binlog.end_after, binlog.split, binlog.small)
    assert ahead.end(at(4), at(1000), 50) == at(104).to_offset()
    assert ahead.ranges(at(4), at(60)) == [(at(4), at(32)), (at(32), at(60))]  # not the one asked
    assert (4, 60) in binlog.asked("split")
    # The look-ahead of the next end failed: the planner asks itself (an error that lasts
    # then reaches the user from here).
    assert ahead.end(at(104), at(1000), 50) == at(204).to_offset()
    assert (104, 1000) in binlog.asked("end")
    ahead.close()


def test_a_batch_up_to_the_head_takes_the_one_listing_answer():
    binlog = Binlog()
    ahead = _Lookahead(binlog.end_after, binlog.split, binlog.small)
    assert ahead.end(at(4), at(80), 50) == at(80).to_offset()
    assert ahead.ranges(at(4), at(80)) == [(at(4), at(80))]
    # Neither the end nor the ranges were asked for separately, and nothing ahead: the next
    # batch starts at the head, which has not moved yet.
    assert [call[0] for call in binlog.calls] == ["small"]
    ahead.close()


def test_the_batches_spark_pickles_for_its_tasks_leave_the_planners_thread_behind():
    import pickle

    from replicator.engine.job.binlog_batches import BinlogBatches
    from replicator.model.pipeline import MySQLSource

    batches = BinlogBatches(MySQLSource(), tables=["shop.orders"], keys={"shop.orders": ["id"]},
                            server_id=7, max_rows=50, landing="/tmp/landing")
    planned = batches._lookahead()  # the driver's (a thread pool: unpicklable)
    copy = pickle.loads(pickle.dumps(batches))
    assert copy._planned is None and copy.max_rows == 50 and copy.keys == {"shop.orders": ["id"]}
    assert batches._planned is planned  # the driver keeps its own
    batches.close()


def test_a_range_too_short_for_a_batchs_rows_is_one_range_without_asking_the_server(monkeypatch):
    from replicator.model.pipeline import MySQLSource
    from replicator.source import binlog_ranges

    asked = []
    monkeypatch.setattr(binlog_ranges, "connect", lambda source: asked.append(source) or 1 / 0)
    source = MySQLSource()
    # 19 * 1000 bytes hold at most 1000 estimated rows (one per event header): fewer than
    # max_rows 2000, and than a second part's 1500.
    short = at(4 + 19 * 1000)
    assert binlog_ranges.small_batch(source, at(4), short, 2000, 2, part_rows=1500) == [
        (at(4), short)]
    assert binlog_ranges.small_batch(source, at(4), short, 2000, 1) == [(at(4), short)]
    assert asked == []
    # Long enough to hold a batch's rows: only the listing can tell.
    with pytest.raises(ZeroDivisionError):
        binlog_ranges.small_batch(source, at(4), at(4 + 19 * 2000), 2000, 1)
    assert asked == [source]
