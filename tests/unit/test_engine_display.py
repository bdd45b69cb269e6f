"""The live display of `replicator run` folds batch reports into per-table totals."""

from __future__ import annotations

from replicator.cli import render
from replicator.engine.metrics import BatchReport, TableReport


def test_run_display_accumulates_batches_and_shows_lag():
    display = render.run_display("shop")
    display.update(BatchReport("stream", 0, {"file": "mysql-bin.000001", "pos": 10},
                               [TableReport("shop.orders", changes=10, rows=7)], seconds=2.0),
                   lag="0 bytes")
    display.update(BatchReport("stream", 1, {"file": "mysql-bin.000001", "pos": 99},
                               [TableReport("shop.orders", changes=4, rows=4)], seconds=1.0),
                   lag="5 bytes")
    display.error("transient error (attempt 1): server gone")
    table = display._render()
    assert "2 batch(es), at mysql-bin.000001:99, lag 5 bytes" in str(table.title)
    cells = [list(column.cells) for column in table.columns]
    assert cells[0] == ["shop.orders"] and cells[1] == ["14"] and cells[2] == ["11"]
    assert cells[4] == ["4"]  # changes/s of the last batch
    assert "server gone" in str(table.caption)
