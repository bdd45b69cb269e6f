"""``python -m bench.outbox [rows]``: outbox routes through ``transform.stage_batch``.

Rows per second of one batch of ``rows`` outbox rows per route of pipelines/outbox.yaml (order:
VARIANT + array index; customer: DATE, BOOLEAN; payment: a row column, TIMESTAMP_TZ), with
well-typed payloads and with numbers and booleans as text; the median of 3, no server.
docs/decisions/one-data-plane.md quotes it.
"""

import json
import random
import statistics
import sys
import time

from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan
from replicator.transform import change_batch, stage_batch
from replicator.transform.outbox import route_batch
from replicator.transform.stage import _connection, batch_key
from tests.unit.test_outbox import PIPELINE, outbox_catalog

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
rng = random.Random(7)
plan = build_plan(load_pipeline(PIPELINE, environ={}), outbox_catalog())
columns = [(c.name, c.mysql_type) for c in outbox_catalog().tables[0].columns]

def payload(kind, typed):
    amount = f"{rng.randrange(10**6)}.{rng.randrange(100):02d}"
    if kind == "order":
        return json.dumps({"id": rng.randrange(10**6), "customer": {"id": rng.randrange(10**5)}, "status": "new",
                           "total": amount if not typed else float(amount), "placed_at": "2024-01-02T10:11:12",
                           "lines": [{"sku": "a", "n": 2}], "gift note": "hi"})
    if kind == "customer":
        return json.dumps({"id": rng.randrange(10**5), "email": "a@b", "vip": True if typed else "true",
                           "signed_up": "2024-02-29", "deleted": rng.random() < 0.05})
    return json.dumps({"id": rng.randrange(10**6), "order_id": rng.randrange(10**6),
                       "amount": float(amount) if typed else amount, "paid_at": "2024-01-02T10:00:00+01:00"})

for typed in (True, False):
    for table in plan.tables:
        kind = table.outbox.route
        events = [ChangeEvent("shop.outbox", "c", BinlogPosition("mysql-bin.000001", 4 + i), 0, 1_700_000_000_000,
                              after={"id": i, "aggregate_type": kind, "aggregate_id": "x", "payload": payload(kind, typed)})
                  for i in range(n)]
        batch = change_batch(events, columns, batch_key(table))
        stage_batch(table, batch)
        times, flattening = [], []
        for _ in range(3 if n >= 1000 else 21):
            started = time.perf_counter()
            stage_batch(table, batch)
            times.append(time.perf_counter() - started)
            started = time.perf_counter()
            route_batch(table, batch, _connection())
            flattening.append(time.perf_counter() - started)
        s, f = statistics.median(times), statistics.median(flattening)
        print(f"{'typed' if typed else 'text-numbers'} {kind:9s} n={n}: {s * 1000:.1f} ms  "
              f"{n / s:,.0f} rows/s  (flatten {f * 1000:.1f} ms)")
