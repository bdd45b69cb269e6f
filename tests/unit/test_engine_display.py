"""The live display of `replicator run` folds batch reports into per-table totals."""

from __future__ import annotations

from replicator.cli import render
from replicator.engine.apply.metrics import BatchReport, TableReport


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


def test_snapshot_progress_bars_scale_by_the_estimate_and_end_at_the_rows_copied():
    from rich.console import Console

    now = [100.0]
    display = render.RunDisplay("shop", clock=lambda: now[0])
    display.snapshot_started()
    now[0] = 110.0
    display.snapshot(BatchReport("snapshot", -1, None, [TableReport("shop.orders", 2000, 2000)],
                                 finished_at=110.0), {"shop.orders": 5000})
    now[0] = 120.0
    display.snapshot(BatchReport("snapshot", -2, None, [TableReport("shop.orders", 2000, 2000)],
                                 finished_at=120.0), {"shop.orders": 5000})
    console = Console(width=160, record=True, color_system=None)
    console.print(display)
    text = console.export_text()
    assert "snapshot shop.orders" in text and "4000/5000" in text
    assert "200 rows/s" in text  # 4000 rows in the 20 s since the snapshot started
    display.snapshot_done()  # InnoDB's estimate was high: the bar ends at the rows copied
    console.print(display)
    assert "4000/4000" in console.export_text()
