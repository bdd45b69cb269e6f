"""Source-side preflight for ``replicator check``: binlog settings, retention, grants,
server_id, tables and columns. Each failure names the exact setting or GRANT that fixes it.

The checks read what a least-privileged ``replicator`` user can see: global variables,
SHOW GRANTS for itself, information_schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from replicator.errors import SourceError
from replicator.model.catalog import Catalog
from replicator.model.pipeline import (
    MAX_DECODE_PARTITIONS,
    Pipeline,
    decode_partitions,
    master_cores,
)
from replicator.source.catalog import read_catalog
from replicator.source.connection import connect, grant_statement, is_mariadb, server_variables
from replicator.source.progress import expire_seconds

Status = Literal["pass", "warn", "fail", "skipped"]
MIN_RETENTION_S = 3 * 86_400  # shorter than a long weekend's outage loses the binlog


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: Status
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "detail": self.detail, "fix": self.fix}


def _setting(name: str, value: str | None, wanted: str, fix: str) -> CheckResult:
    if value is None:
        return CheckResult(name, "fail", f"{name} is not available on this server", fix)
    if value.upper() == wanted.upper():
        return CheckResult(name, "pass", f"{name} = {value}")
    return CheckResult(name, "fail", f"{name} = {value}, replicator needs {wanted}", fix)


def _config_fix(setting: str, value: str) -> str:
    return (
        f"SET PERSIST {setting} = {value} (MySQL 8; MariaDB: SET GLOBAL, and {setting}={value} "
        f"under [mysqld] in my.cnf; RDS/Aurora: the DB parameter group)"
    )


def binlog_checks(variables: dict[str, str], *, mariadb: bool) -> list[CheckResult]:
    results: list[CheckResult] = []
    log_bin = variables.get("log_bin", "OFF")
    if log_bin.upper() in ("ON", "1"):
        results.append(CheckResult("log_bin", "pass", "log_bin = ON"))
    else:
        results.append(CheckResult(
            "log_bin", "fail", "the binary log is disabled (log_bin = OFF)",
            "add log-bin=mysql-bin and server-id=1 under [mysqld] in my.cnf and restart "
            "(MySQL 8 enables it by default unless --skip-log-bin/--disable-log-bin; RDS: "
            "enable automated backups)",
        ))
    results.append(_setting("binlog_format", variables.get("binlog_format"), "ROW",
                            _config_fix("binlog_format", "ROW")))
    results.append(_setting("binlog_row_image", variables.get("binlog_row_image"), "FULL",
                            _config_fix("binlog_row_image", "FULL")))
    metadata = variables.get("binlog_row_metadata")
    if metadata is None:
        results.append(CheckResult(
            "binlog_row_metadata", "warn",
            "binlog_row_metadata is unknown to this server (MySQL < 8.0.14 / MariaDB < 10.5): "
            "column names come from information_schema and DDL mid-stream can misname columns",
            "upgrade to MySQL 8.0.14+ / MariaDB 10.5+ and set binlog_row_metadata = FULL",
        ))
    else:
        results.append(_setting("binlog_row_metadata", metadata, "FULL",
                                _config_fix("binlog_row_metadata", "FULL")))
    value_options = variables.get("binlog_row_value_options")
    if value_options is not None:
        if "PARTIAL_JSON" in value_options.upper():
            results.append(CheckResult(
                "binlog_row_value_options", "fail",
                "binlog_row_value_options = PARTIAL_JSON: JSON updates are logged as diffs, "
                "not full values", _config_fix("binlog_row_value_options", "''"),
            ))
        else:
            results.append(CheckResult("binlog_row_value_options", "pass",
                                       f"binlog_row_value_options = '{value_options}'"))
    compression = variables.get("binlog_transaction_compression")
    if compression is not None:
        # Compressed transactions (TRANSACTION_PAYLOAD events) are unpacked by the fast
        # decoder (source.fast.payload); only the library reader (REPLICATOR_FAST_DECODE=0)
        # refuses them, at the first one.
        state = "ON: compressed transactions are decoded (zstd)" \
            if compression.upper() in ("ON", "1") else compression
        results.append(CheckResult("binlog_transaction_compression", "pass",
                                   f"binlog_transaction_compression = {state}"))
    results.append(retention_check(variables, mariadb=mariadb))
    return results


def retention_check(variables: dict[str, str], *, mariadb: bool) -> CheckResult:
    seconds = expire_seconds(variables)
    fix = (
        "SET PERSIST binlog_expire_logs_seconds = 604800 (7 days; MariaDB: SET GLOBAL "
        "expire_logs_days = 7 and in my.cnf; RDS/Aurora: CALL "
        "mysql.rds_set_configuration('binlog retention hours', 168))"
    )
    if seconds == 0:
        return CheckResult("binlog retention", "pass",
                           "binlogs never expire (watch the disk; RDS/Aurora purge on their own "
                           "unless 'binlog retention hours' is set)")
    days_text = f"{seconds / 86_400:.1f} days"
    if seconds < MIN_RETENTION_S:
        return CheckResult(
            "binlog retention", "warn",
            f"binlogs expire after {days_text}: a pipeline paused longer must re-snapshot", fix,
        )
    return CheckResult("binlog retention", "pass", f"binlogs kept {days_text}")


_GRANT = re.compile(r"^GRANT\s+(?P<privileges>.+?)\s+ON\s+(?P<scope>\S+)\s+TO\s", re.IGNORECASE)


def grants_check(grant_lines: list[str], *, user: str, databases: set[str],
                 mariadb: bool) -> CheckResult:
    """Does the user hold REPLICATION SLAVE, REPLICATION CLIENT/BINLOG MONITOR and SELECT?"""
    global_privileges: set[str] = set()
    select_on: set[str] = set()
    for line in grant_lines:
        match = _GRANT.match(line.strip())
        if not match:
            continue
        privileges = {p.strip().upper() for p in match.group("privileges").split(",")}
        scope = match.group("scope").replace("`", "").lower()
        if scope == "*.*":
            global_privileges |= privileges
        elif scope.endswith(".*") and ("SELECT" in privileges or "ALL PRIVILEGES" in privileges):
            select_on.add(scope[:-2])
    has_all = "ALL PRIVILEGES" in global_privileges or "ALL" in global_privileges
    missing: list[str] = []
    if not has_all and "REPLICATION SLAVE" not in global_privileges and (
        "REPLICATION REPLICA" not in global_privileges
    ):
        missing.append("REPLICATION SLAVE")
    monitor = {"REPLICATION CLIENT", "BINLOG MONITOR", "SUPER", "SLAVE MONITOR"}
    if not has_all and not (global_privileges & monitor):
        missing.append("BINLOG MONITOR" if mariadb else "REPLICATION CLIENT")
    if not has_all and "SELECT" not in global_privileges:
        lacking = sorted(db for db in databases if db.lower() not in select_on)
        if lacking:
            missing.append("SELECT")
    if missing:
        return CheckResult(
            "grants", "fail", f"{user} lacks {', '.join(missing)}",
            grant_statement(user, mariadb=mariadb),
        )
    return CheckResult("grants", "pass", f"{user} can stream the binlog and read the tables")


def server_id_check(pipeline: Pipeline, variables: dict[str, str]) -> CheckResult:
    ours = pipeline.server_id
    # The most decode tasks a run may start (each reads with its own server_id); a cluster's
    # cores are known only to the run.
    engine = pipeline.engine
    partitions = decode_partitions(engine, pipeline.batching,
                                   master_cores(engine.master) or MAX_DECODE_PARTITIONS)
    theirs = int(variables.get("server_id", "0") or 0)
    span = range(ours, ours + partitions)
    if theirs in span:
        return CheckResult(
            "server_id", "fail",
            f"the pipeline's server_id {ours} is the MySQL server's own server_id",
            f"set source.mysql.server_id to a value no server or replica uses (not {theirs})",
        )
    detail = f"pipeline readers use server_id {ours}"
    if partitions > 1:
        detail += f"..{ours + partitions - 1}"
    return CheckResult("server_id", "pass", detail + f"; the server is {theirs}")


def table_checks(pipeline: Pipeline, catalog: Catalog) -> list[CheckResult]:
    results: list[CheckResult] = []
    for table in pipeline.tables:
        name = table.source_name
        if table.routed:
            results.append(_routed_check(table, catalog))
            continue
        found = catalog.table(table.source_database, table.source_table)
        if found is None:
            results.append(CheckResult(
                f"table {name}", "fail", f"{name} does not exist on the source (or is not "
                "visible to the replicator user)",
                f"check the name in `tables:`, and GRANT SELECT ON {table.source_database}.* "
                f"TO '{pipeline.source.user}'@'%'",
            ))
            continue
        problems: list[str] = []
        fixes: list[str] = []
        key = table.key or found.primary_key
        if not key:
            problems.append("no primary key and no declared key")
            fixes.append("declare `key: [column, ...]` (columns that identify a row), or "
                         f"ALTER TABLE {name} ADD PRIMARY KEY (...)")
        for column in table.key or ():
            if found.column(column) is None:
                problems.append(f"key column {column!r} does not exist")
                fixes.append(f"fix `key:` of {name}")
        for mapping in table.columns:
            if mapping.computed or not mapping.binding:
                # A computed column is the plan's to check; a pin of a column renamed or
                # dropped in MySQL is a stale entry (config.stale), never a stop.
                continue
            if found.column(mapping.source_column) is None:
                problems.append(f"declared column {mapping.source_column!r} does not exist")
                fixes.append(f"remove or rename {mapping.source_column!r} under `columns:`")
        if problems:
            results.append(CheckResult(f"table {name}", "fail", "; ".join(problems),
                                       "; ".join(dict.fromkeys(fixes))))
        else:
            keyed = "primary key" if not table.key else "declared key"
            results.append(CheckResult(
                f"table {name}", "pass",
                f"{len(found.columns)} columns, {keyed} ({', '.join(key)})",
            ))
    return results


def _routed_check(table: Any, catalog: Catalog) -> CheckResult:
    """A `sources:` selection: which tables it matches now (the plan checks they agree)."""
    # The planner (replicator.plan, ~50 ms) stays off every command's start-up (cli/check
    # imports this module, and cli/main every command module).
    from replicator.plan.routing import matching_tables

    name = f"tables {table.source_name}"
    matched = matching_tables(table, catalog)
    if not matched:
        return CheckResult(name, "fail", "no source table matches",
                           "patterns match whole database.table names, case-insensitively "
                           "(shop_[0-9]+\\.orders); check them and the replicator user's "
                           "SELECT grants")
    shown = ", ".join(t.name for t in matched[:5]) + (" ..." if len(matched) > 5 else "")
    return CheckResult(name, "pass", f"{len(matched)} tables -> {table.target_table}: {shown}")


def source_checks(pipeline: Pipeline) -> tuple[list[CheckResult], Catalog | None]:
    """Every source check, and the live catalog (None when the server cannot be reached)."""
    source = pipeline.source
    try:
        connection = connect(source)
    except SourceError as exc:
        return [CheckResult("connect", "fail", exc.message, exc.hint)], None
    results = [CheckResult("connect", "pass",
                           f"{source.user}@{source.host}:{source.port}")]
    with connection:
        mariadb = is_mariadb(connection)
        results[0] = CheckResult(
            "connect", "pass",
            f"{source.user}@{source.host}:{source.port} ({connection.get_server_info()})",
        )
        variables = server_variables(connection)
        results.extend(binlog_checks(variables, mariadb=mariadb))
        with connection.cursor() as cursor:
            cursor.execute("SHOW GRANTS")
            grant_lines = [str(row[0]) for row in cursor.fetchall()]
        databases = {db for db, _ in pipeline.fixed_tables}
        grants_at = len(results)
        results.append(server_id_check(pipeline, variables))
    try:
        catalog = read_catalog(source, pipeline.fixed_tables, pipeline.selections)
    except SourceError as exc:
        results.insert(grants_at, grants_check(grant_lines, user=source.user,
                                               databases=databases, mariadb=mariadb))
        results.append(CheckResult("catalog", "fail", exc.message, exc.hint))
        return results, None
    # The databases of the tables the selections match need the grants too.
    databases |= {t.database for t in catalog.tables
                  if any(s.matches(t.name) for s in pipeline.selections)}
    results.insert(grants_at, grants_check(grant_lines, user=source.user, databases=databases,
                                           mariadb=mariadb))
    results.extend(table_checks(pipeline, catalog))
    return results, catalog


# Settings without which a run would replicate wrongly or silently nothing: a STATEMENT/MIXED
# binlog has no row events (the reader sees 0 changes), MINIMAL/NOBLOB images lack columns,
# MINIMAL metadata misnames columns after DDL, PARTIAL_JSON logs diffs. Retention is only a warning: it matters for long pauses, not correctness.
REPLICATION_CHECKS = frozenset({
    "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
    "binlog_row_value_options",
})


def replication_failures(variables: dict[str, str], *, mariadb: bool) -> list[CheckResult]:
    """The FAIL results of ``binlog_checks`` that make replication wrong."""
    return [result for result in binlog_checks(variables, mariadb=mariadb)
            if result.status == "fail" and result.check in REPLICATION_CHECKS]


def require_replication_settings(source: Any) -> None:
    """Raise a SourceError naming the fix when the server's binlog settings would make a run
    replicate wrongly; the same checks (and fixes) as ``replicator check``."""
    with connect(source) as connection:
        mariadb = is_mariadb(connection)
        variables = server_variables(connection)
    failures = replication_failures(variables, mariadb=mariadb)
    if not failures:
        return
    where = f"{source.host}:{source.port}"
    raise SourceError(
        f"the MySQL server {where} cannot be replicated as configured: "
        + "; ".join(result.detail for result in failures),
        hint="; ".join(dict.fromkeys(result.fix for result in failures if result.fix))
        + " (then `replicator check PIPELINE.yaml` must pass)",
    )
