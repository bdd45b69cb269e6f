"""Checks the JSON Schema cannot express: names that collide, keys that do not exist, ...

They run on the loaded data even when the schema found problems (every problem is reported
in one pass), so every lookup here tolerates values of the wrong type: those were already
reported by the schema check.

Which columns a table has is only known for sure when the YAML declares them: ``columns``
normally lists just the columns that need a mapping. When *any* column of a table declares
its ``source_type``, the list is taken as the table's complete column list (that is what
``plan --offline`` builds the table from), and then key columns must be among them (R201)
and every column should declare its type (R211). Otherwise the live catalog decides, in
``replicator check`` / ``plan``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from replicator.config.identifiers import check_identifier
from replicator.config.loader import JsonPath, LoadedDocument
from replicator.config.outbox import check_outbox
from replicator.model.catalog import MySQLType, MySQLTypeError
from replicator.model.identifiers import target_identifier
from replicator.model.pipeline import (
    CHANGELOG_COLUMNS,
    DEFAULT_METADATA,
    LOG_TABLE_SUFFIX,
    METADATA_COLUMNS,
    SCD2_COLUMNS,
    SOFT_DELETE_COLUMNS,
    SOURCE_TABLE_COLUMN,
)
from replicator.model.selection import PatternError, TableSelection, compile_pattern

# https://docs.snowflake.com/en/sql-reference/identifiers-syntax : quoted identifiers hold
# up to 255 characters, any of them except NUL.
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h)\s*$")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
# database.table; a part with spaces, dots, quotes or backticks is written in MySQL's backticks
# (a backtick inside doubled): `shop`.`order items`, `my db`.`x``y`.
_NAME_PART = r"`(?:[^`]|``)+`|[^.\s`]+"
_SOURCE_NAME = re.compile(rf"^({_NAME_PART})\.({_NAME_PART})$")
SECRET_PATHS: tuple[JsonPath, ...] = (
    ("source", "mysql", "password"),
    ("target", "snowflake", "password"),
    ("target", "snowflake", "token"),
    ("target", "snowflake", "private_key_file_pwd"),
)
TARGET_KINDS = ("snowflake", "duckdb")


def parse_duration(text: Any) -> int | None:
    """Milliseconds of ``250ms``/``10s``/``2m``/``1h``; None if it is not such a text."""
    if not isinstance(text, str):
        return None
    match = _DURATION.match(text)
    if not match:
        return None
    return int(match.group(1)) * _DURATION_MS[match.group(2)]


def split_source_name(text: Any) -> tuple[str, str] | None:
    if not isinstance(text, str):
        return None
    match = _SOURCE_NAME.match(text.strip())
    if not match:
        return None
    database, table = (_unquote(part) for part in match.groups())
    # "db.table" is how changes name their table inside replicator: a dot in the database
    # name would be ambiguous there (MySQL allows it only in quoted names, rarely used).
    if "." in database or not database.strip() or not table.strip():
        return None
    return database, table


def _unquote(part: str) -> str:
    if len(part) > 1 and part.startswith("`") and part.endswith("`"):
        return part[1:-1].replace("``", "`")
    return part


def format_source_name(database: str, table: str) -> str:
    """``database.table`` as ``tables[].source`` accepts it (backticks where needed)."""
    def part(name: str) -> str:
        if re.fullmatch(r"[^.\s`]+", name):
            return name
        return "`" + name.replace("`", "``") + "`"
    return f"{part(database)}.{part(table)}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def check_semantics(document: LoadedDocument) -> None:
    data = document.data
    if not isinstance(data, dict):
        return
    _check_secrets(document, data)
    _check_target_kind(document, data)
    _check_durations(document, data)
    _check_tls(document, data)
    _check_tables(document, data)
    _check_schema_changes(document, data)
    _check_checkpoint(document, data)


def _check_checkpoint(document: LoadedDocument, data: dict[str, Any]) -> None:
    """The checkpoint is plain files the driver writes (offsets, start state, lock): a URI
    would become a local folder named after its scheme (R251). The landing zone may be remote."""
    checkpoint = _dict(data.get("engine")).get("checkpoint")
    if not isinstance(checkpoint, str) or "://" not in checkpoint or checkpoint.startswith("file://"):
        return
    document.add(document.position(("engine", "checkpoint")), "R251",
                 f"engine.checkpoint: {checkpoint!r} is a remote URI; the checkpoint is files on "
                 "the driver's disk",
                 "use a local path or a mounted volume (on a cluster, a persistent volume at that "
                 "path); without it a run resumes from the target's state table. engine.landing "
                 "may be a remote URI")


def _check_schema_changes(document: LoadedDocument, data: dict[str, Any]) -> None:
    """``key_change: ignore`` keeps merging by the key the YAML declares; without ``key:`` the
    merge key IS the primary key that changed, so there is nothing to keep (R246)."""
    pipeline_wide = _dict(data.get("schema_changes")).get("key_change")
    for index, table in enumerate(_list(data.get("tables"))):
        if not isinstance(table, dict) or table.get("key"):
            continue
        own = _dict(table.get("schema_changes"))
        if own.get("key_change", pipeline_wide) != "ignore":
            continue
        path: JsonPath = (("tables", index, "schema_changes", "key_change") if "key_change" in own
                          else ("schema_changes", "key_change"))
        name = table.get("source") or table.get("target") or f"tables[{index}]"
        document.add(document.position(path), "R246",
                     f"{name}: schema_changes.key_change is ignore, but the table declares no "
                     "key: its merge key is the primary key that would change",
                     f"declare the key to keep (tables[{index}].key: [id]), or set "
                     "key_change: stop")

    # add_column: ignore leaves a column out of one table's plan; a `sources:` target is the
    # union of its tables' columns and follows every one added (docs/routing.md) (R247).
    for index, table in enumerate(_list(data.get("tables"))):
        own = _dict(table.get("schema_changes")) if isinstance(table, dict) else {}
        if "sources" in table and own.get("add_column") == "ignore":
            document.add(document.position(("tables", index, "schema_changes", "add_column")),
                         "R247", f"tables[{index}]: schema_changes.add_column: ignore does not "
                         "apply to a `sources:` target: its columns are the union of the "
                         "selected tables', and a column added to any of them is followed",
                         "remove it here; to keep a column out of the target, name it under "
                         "`columns:` with `exclude: true`", severity="warning")


def _check_secrets(document: LoadedDocument, data: dict[str, Any]) -> None:
    for path in SECRET_PATHS:
        value: Any = data
        for part in path:
            value = _dict(value).get(part)  # type: ignore[arg-type]
        if isinstance(value, str) and value and path not in document.interpolated:
            variable = "MYSQL_PASSWORD" if path[0] == "source" else f"SNOWFLAKE_{str(path[-1]).upper()}"
            document.add(document.position(path), "R013",
                         f"{'.'.join(map(str, path))} is written in the file",
                         f"keep secrets out of files: {path[-1]}: ${{{variable}}}",
                         severity="warning")


def _check_target_kind(document: LoadedDocument, data: dict[str, Any]) -> None:
    target = data.get("target")
    if not isinstance(target, dict):
        return
    kinds = [kind for kind in TARGET_KINDS if kind in target]
    if not kinds:
        document.add(document.key_position(("target",)), "R210",
                     "target: no warehouse given",
                     "add `snowflake: {connection: default, database: ..., schema: ...}` "
                     "or `duckdb: {path: ./warehouse.duckdb}`")
    elif len(kinds) > 1:
        document.add(document.key_position(("target", kinds[1])), "R210",
                     f"target: both {kinds[0]} and {kinds[1]} given; a pipeline has one target",
                     "remove one of them (a second target is a second pipeline file)")


def _check_tls(document: LoadedDocument, data: dict[str, Any]) -> None:
    """R250: TLS settings that cannot all hold (a CA that would be ignored, TLS both on and
    off, half a client certificate)."""
    mysql = _dict(_dict(data.get("source")).get("mysql"))
    base: JsonPath = ("source", "mysql")
    mode = mysql.get("ssl_mode")
    files = [key for key in ("ssl_ca", "ssl_cert", "ssl_key") if isinstance(mysql.get(key), str)]
    if mode == "DISABLED":
        for key in [*(["ssl"] if mysql.get("ssl") is True else []), *files]:
            document.add(document.position((*base, key)), "R250",
                         f"source.mysql.{key} asks for TLS, but ssl_mode is DISABLED",
                         f"remove {key}, or set ssl_mode: VERIFY_IDENTITY")
    elif isinstance(mode, str) and mysql.get("ssl") is False:
        document.add(document.position((*base, "ssl")), "R250",
                     f"source.mysql.ssl is false, but ssl_mode is {mode}",
                     "remove `ssl: false` (ssl_mode decides)")
    if mode == "PREFERRED" and "ssl_ca" in files:
        document.add(document.position((*base, "ssl_ca")), "R250",
                     "source.mysql.ssl_ca is not used by ssl_mode PREFERRED (which does not "
                     "verify the server)",
                     "set ssl_mode: VERIFY_IDENTITY (or VERIFY_CA when the certificate does not "
                     "name the host)")
    for have, missing in (("ssl_cert", "ssl_key"), ("ssl_key", "ssl_cert")):
        if have in files and missing not in files:
            document.add(document.position((*base, have)), "R250",
                         f"source.mysql.{have} without {missing}: a client certificate needs "
                         "both files",
                         f"add {missing}: /path/to/client-{missing[4:]}.pem")


def _duration_paths(data: dict[str, Any]) -> Iterator[JsonPath]:
    yield ("batching", "max_delay")
    yield ("source", "mysql", "connect_timeout")
    for index, _table in enumerate(_list(data.get("tables"))):
        yield ("tables", index, "batching", "max_delay")


def _check_durations(document: LoadedDocument, data: dict[str, Any]) -> None:
    for path in _duration_paths(data):
        value: Any = data
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None or not isinstance(value, str):
            continue  # absent, or a type error the schema reported
        if parse_duration(value) is None:
            number = re.sub(r"\D", "", value) or "10"
            document.add(document.position(path), "R206",
                         f"{'.'.join(map(str, path))}: {value!r} is not a duration",
                         f"write a number and a unit (ms, s, m, h): {path[-1]}: {number}s")


def _check_tables(document: LoadedDocument, data: dict[str, Any]) -> None:
    target = _dict(data.get("target"))
    # Anything but `preserve` folds (an unknown value is R104 already): the plan's policy.
    identifier_case = "preserve" if target.get("identifier_case") == "preserve" else "upper"
    defaults = _dict(data.get("defaults"))
    seen_sources: dict[str, int] = {}
    seen_targets: dict[str, tuple[int, str]] = {}
    state_table = target.get("state_table", "_REPLICATOR_STATE")
    _check_target_identifiers(document, target, state_table)

    tables = _list(data.get("tables"))
    selections = _check_sources(document, tables)
    for index, table in enumerate(tables):
        if not isinstance(table, dict):
            continue
        base: JsonPath = ("tables", index)
        source = table.get("source")
        if "sources" in table and isinstance(source, str):
            source = None  # R221 reported it; the entry is a selection
        parts = split_source_name(source)
        _check_source_name(document, index, source, parts, selections, seen_sources)

        if table.get("mode") == "outbox" or "outbox" in table:
            check_outbox(document, base, table, defaults, identifier_case, seen_targets,
                         state_table)
            if table.get("mode") == "outbox":
                continue  # the routes land in targets, the table itself does not

        if "sources" in table:
            source = f"tables[{index}].sources"
        target_table = table.get("target")
        if isinstance(target_table, str):
            check_identifier(document, (*base, "target"), target_table, "target table name")
        elif parts is not None:
            target_table = parts[1]
        if isinstance(target_table, str) and target_table:
            _check_target_name(document, index, table, source, target_table, identifier_case,
                               seen_targets, state_table)

        _check_mode(document, base, table, defaults)
        _check_columns(document, base, table, defaults, identifier_case)


def _check_target_identifiers(document: LoadedDocument, target: dict[str, Any],
                              state_table: Any) -> None:
    """The state table's name and the warehouse's database and schema names."""
    if isinstance(state_table, str):
        check_identifier(document, ("target", "state_table"), state_table, "state table")
    for kind, names in (("snowflake", ("database", "schema")), ("duckdb", ("schema",))):
        for name in names:
            value = _dict(target.get(kind)).get(name)
            if isinstance(value, str):
                check_identifier(document, ("target", kind, name), value, f"{kind} {name}")


def _check_source_name(document: LoadedDocument, index: int, source: Any,
                       parts: tuple[str, str] | None, selections: list[tuple[int, Any]],
                       seen_sources: dict[str, int]) -> None:
    """``tables[index].source``: database.table (R207), listed once (R209), and not also
    taken by another entry's ``sources`` selection (R224)."""
    where: JsonPath = ("tables", index, "source")
    if parts is not None:
        for other, selection in selections:
            if selection.matches(f"{parts[0]}.{parts[1]}"):
                document.add(document.position(where), "R224",
                             f"tables[{index}].source: {source} is also selected by "
                             f"tables[{other}].sources, so its rows land in both targets",
                             f"add it to tables[{other}].sources.exclude if it should land "
                             "in one of them only", severity="warning")
    if isinstance(source, str) and parts is None:
        document.add(document.position(where), "R207",
                     f"tables[{index}].source: {source!r} is not database.table",
                     "write the database and the table: source: shop.trips; a name "
                     "with spaces, dots or quotes goes in backticks: "
                     "source: '`my db`.`order items`'")
    if parts is not None:
        source_key = f"{parts[0]}.{parts[1]}".lower()
        if source_key in seen_sources:
            document.add(document.position(where), "R209",
                         f"tables[{index}].source: {source} is already listed as "
                         f"tables[{seen_sources[source_key]}]",
                         "list each source table once; merge the two entries")
        else:
            seen_sources[source_key] = index


def _check_target_name(document: LoadedDocument, index: int, table: dict[str, Any],
                       source: Any, target_table: str, identifier_case: str,
                       seen_targets: dict[str, tuple[int, str]], state_table: Any) -> None:
    """R202: no two entries land in one target table (a log table counts), nor in the
    state table."""
    base: JsonPath = ("tables", index)
    folded = target_identifier(target_table, identifier_case)
    where = (*base, "target") if "target" in table else (*base, "source")
    if folded in seen_targets:
        other, other_name = seen_targets[folded]
        document.add(document.position(where), "R202",
                     f"tables[{index}] lands in target table {folded}, as tables[{other}] "
                     f"({other_name}) does",
                     "give one of them another `target:` name")
    else:
        seen_targets[folded] = (index, str(source))
    if isinstance(state_table, str) and folded == target_identifier(state_table, identifier_case):
        document.add(document.position(where), "R202",
                     f"tables[{index}] lands in {folded}, the pipeline's state table",
                     "give the table another `target:` name")
    if table.get("log_table") is True and table.get("mode", "merge") == "merge":
        log = target_identifier(target_table + LOG_TABLE_SUFFIX, identifier_case)
        if log in seen_targets:
            other, other_name = seen_targets[log]
            document.add(document.position((*base, "log_table")), "R202",
                         f"tables[{index}] keeps its log in {log}, where tables[{other}] "
                         f"({other_name}) lands", "give one of them another `target:` name")
        else:
            seen_targets[log] = (index, f"{source} (log table)")


# A `.` that is neither escaped nor inside a character class, nor followed by a quantifier:
# most likely meant as the database/table separator (`shop_1.orders`), where it matches any
# character. `.*`, `.+`, `.?`, `.{n}` are meant as wildcards.
_BARE_DOT = re.compile(r"(?<!\\)\.(?![*+?{])")


def _bare_dot(pattern: str) -> bool:
    depth = 0
    escaped = False
    for position, char in enumerate(pattern):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        elif char == "." and not depth and _BARE_DOT.match(pattern, position):
            return True
    return False


def _check_sources(document: LoadedDocument, tables: list[Any]) -> list[tuple[int, Any]]:
    """`source:` xor `sources:` (R221), a target for a selection (R222), patterns that compile
    (R220) or hold a bare `.` (R223). Returns the selections that compiled, by entry index."""
    found: list[tuple[int, Any]] = []
    for index, table in enumerate(tables):
        if not isinstance(table, dict):
            continue
        base: JsonPath = ("tables", index)
        has_source, has_sources = "source" in table, "sources" in table
        if has_source and has_sources:
            document.add(document.key_position((*base, "sources")), "R221",
                         f"tables[{index}] has both `source:` and `sources:`",
                         "keep `source: db.table` for one table, or `sources: {include: [...]}` "
                         "to merge every matching table into one target")
        elif not has_source and not has_sources:
            document.add(document.position(base), "R221",
                         f"tables[{index}] names no source table",
                         "add `source: shop.trips`, or `sources: {include: ['shop_[0-9]+\\.orders']}`")
        if not has_sources:
            continue
        if table.get("mode") == "outbox":
            document.add(document.key_position((*base, "sources")), "R221",
                         f"tables[{index}] is an outbox: it reads one table, not a selection",
                         "name the outbox table with `source: db.outbox`")
        if not isinstance(table.get("target"), str):
            document.add(document.key_position((*base, "sources")), "R222",
                         f"tables[{index}] selects its source tables by pattern but names no "
                         "target table", "add `target: ORDERS`: the one table every selected "
                         "source table lands in")
        sources = _dict(table.get("sources"))
        lists: dict[str, list[str]] = {}
        valid = True
        for part in ("include", "exclude"):
            lists[part] = []
            for position, pattern in enumerate(_list(sources.get(part))):
                if not isinstance(pattern, str):
                    valid = False
                    continue  # the schema reported it
                where = document.position((*base, "sources", part, position))
                try:
                    compile_pattern(pattern)
                except PatternError as exc:
                    valid = False
                    document.add(where, "R220", f"tables[{index}].sources.{part}[{position}]: {exc}",
                                 "write a regular expression over database.table, e.g. "
                                 "'shop_[0-9]+\\.orders' (escape literal dots and brackets)")
                    continue
                lists[part].append(pattern)
                if _bare_dot(pattern):
                    document.add(where, "R223",
                                 f"tables[{index}].sources.{part}[{position}]: the `.` in "
                                 f"'{pattern}' matches any character, not just the dot "
                                 "between database and table",
                                 "escape it: '" + re.sub(r"(?<!\\)\.(?![*+?{])", r"\\.", pattern)
                                 + "' (in single quotes, YAML keeps the backslash as written)",
                                 severity="warning")
        if valid and lists["include"]:
            found.append((index, TableSelection(tuple(lists["include"]), tuple(lists["exclude"]))))
    return found


def _check_mode(document: LoadedDocument, base: JsonPath, table: dict[str, Any],
                defaults: dict[str, Any]) -> None:
    """Settings that mean nothing in the table's mode (R214) and track_history (R215)."""
    mode = table.get("mode", "merge")
    if not isinstance(mode, str):
        return  # the schema reported it
    if mode != "merge" and table.get("log_table") is True:
        document.add(document.position((*base, "log_table")), "R214",
                     f"log_table: a {mode} table keeps no separate log",
                     "remove `log_table: true`" + (" (a changelog table is itself the log)"
                                                   if mode == "changelog" else ""))
    if mode != "merge" and table.get("deletes", defaults.get("deletes")) == "soft":
        where = (*base, "deletes") if "deletes" in table else (*base, "mode")
        what = ("a changelog row of a delete has _DELETED = true" if mode == "changelog"
                else "a delete ends the current version (_VALID_TO, _IS_CURRENT = false)")
        document.add(document.position(where), "R214",
                     f"deletes: soft does not apply to a {mode} table: {what}",
                     "remove `deletes: soft` from this table")
    if mode == "changelog" and "metadata" in table:
        document.add(document.position((*base, "metadata")), "R214",
                     "metadata: a changelog table has a fixed set of metadata columns "
                     f"({', '.join(CHANGELOG_COLUMNS)})", "remove `metadata:` from this table")
    track = table.get("track_history")
    if track is None:
        return
    if mode != "scd2":
        document.add(document.position((*base, "track_history")), "R214",
                     f"track_history applies to scd2 tables, this one is {mode}",
                     "add `mode: scd2` or remove `track_history`")
        return
    columns = _dict(table.get("columns"))
    declared = {name.lower(): _dict(spec) for name, spec in columns.items()}
    exhaustive = any("source_type" in spec for spec in declared.values())
    key = {k.lower() for k in _list(table.get("key")) if isinstance(k, str)}
    for position, name in enumerate(_list(track)):
        if not isinstance(name, str):
            continue
        problem = None
        if name.lower() in key:
            problem = ("is a key column: a key change is a new key, not a new version",
                       f"remove {name} from track_history")
        elif declared.get(name.lower(), {}).get("exclude") is True:
            problem = ("is excluded, so it never changes in the target",
                       f"remove {name} from track_history, or stop excluding it")
        elif exhaustive and name.lower() not in declared:
            close = difflib.get_close_matches(name, list(columns), n=1, cutoff=0.6)
            problem = (f"is not among the declared columns of {table.get('source')}",
                       f"did you mean '{close[0]}'?" if close else "list declared source columns")
        if problem:
            document.add(document.position((*base, "track_history", position)), "R215",
                         f"track_history column {name} {problem[0]}", problem[1])


def _check_columns(document: LoadedDocument, base: JsonPath, table: dict[str, Any],
                   defaults: dict[str, Any], identifier_case: Any) -> None:
    columns = _dict(table.get("columns"))
    typed = [name for name, spec in columns.items() if "source_type" in _dict(spec)]
    exhaustive = bool(typed)
    declared = {name.lower(): name for name in columns}
    where_columns = (*base, "columns")

    for name, spec in columns.items():
        spec = _dict(spec)
        path = (*where_columns, name)
        check_identifier(document, path, name, "source column name", key=True)
        source_type = spec.get("source_type")
        if isinstance(source_type, str):
            try:
                MySQLType.parse(source_type)
            except MySQLTypeError as exc:
                document.add(document.position((*path, "source_type")), "R208", str(exc),
                             "write the type as information_schema.COLUMNS.COLUMN_TYPE does: "
                             "int, varchar(255), decimal(38,10), datetime(6)")
        elif (exhaustive and "source_type" not in spec and spec.get("exclude") is not True
              and "expression" not in spec):
            document.add(document.key_position(path), "R211",
                         f"column {name} has no source_type while other columns of this table "
                         "declare theirs", f"add `source_type:` to {name} (plan --offline needs "
                         "every column's type)", severity="warning")
        if "mask" in spec and spec["mask"] is None:
            document.add(document.position((*path, "mask")), "R212",
                         f"{name}: `mask: null` is YAML's null, so no mask is applied",
                         "write `mask: as_null` to replace the values with NULL, or remove it",
                         severity="warning")
        if spec.get("exclude") is True:
            extra = [k for k in ("name", "type", "mask") if spec.get(k) is not None]
            if extra:
                document.add(document.key_position((*path, extra[0])), "R213",
                             f"{name} is excluded, so its {', '.join(extra)} has no effect",
                             "remove `exclude: true` or the other settings", severity="warning")
        if isinstance(spec.get("name"), str):
            check_identifier(document, (*path, "name"), spec["name"], "target column name")

    key = _list(table.get("key"))
    for position, key_column in enumerate(key):
        if not isinstance(key_column, str):
            continue
        key_path = (*base, "key", position)
        spec = _dict(columns.get(declared.get(key_column.lower(), key_column)))
        if exhaustive and key_column.lower() not in declared:
            close = difflib.get_close_matches(key_column, list(columns), n=1, cutoff=0.6)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"declare {key_column} under columns with its source_type, or fix the key")
            document.add(document.position(key_path), "R201",
                         f"key column {key_column} is not among the declared columns of "
                         f"{table.get('source')}", hint)
        if spec.get("exclude") is True:
            document.add(document.position(key_path), "R204",
                         f"key column {key_column} is excluded: target rows could not be matched",
                         f"remove `exclude: true` from {key_column}, or choose another key")
        elif spec.get("mask") in ("redact", "as_null"):
            document.add(document.position(key_path), "R204",
                         f"key column {key_column} is masked with {spec['mask']}: distinct "
                         "keys would collapse into one target row",
                         "use mask: sha256 on a key column (still unique), or no mask")

    _check_target_columns(document, base, table, columns, defaults, identifier_case)


def _check_target_columns(document: LoadedDocument, base: JsonPath, table: dict[str, Any],
                          columns: dict[str, Any], defaults: dict[str, Any],
                          identifier_case: Any) -> None:
    """Two source columns (or a column and a metadata column) landing in one target column."""
    taken: dict[str, str] = {}
    mode = table.get("mode", "merge")
    metadata = table.get("metadata", defaults.get("metadata", list(DEFAULT_METADATA)))
    for item in _list(metadata) if mode != "changelog" else ():
        for column in METADATA_COLUMNS.get(item, ()) if isinstance(item, str) else ():
            taken[target_identifier(column, identifier_case)] = f"the metadata column of `{item}`"
    if mode == "changelog" or table.get("log_table") is True:
        for column in CHANGELOG_COLUMNS:
            taken.setdefault(target_identifier(column, identifier_case), "a changelog column")
    if "sources" in table:
        taken[target_identifier(SOURCE_TABLE_COLUMN, identifier_case)] = (
            "the column that names each row's source table")
    if mode == "scd2":
        for column in SCD2_COLUMNS:
            taken[target_identifier(column, identifier_case)] = "an scd2 column"
    if table.get("deletes", defaults.get("deletes")) == "soft" and mode == "merge":
        for column in SOFT_DELETE_COLUMNS:
            taken[target_identifier(column, identifier_case)] = "a soft-delete column"
    for name, spec in columns.items():
        spec = _dict(spec)
        if spec.get("exclude") is True:
            continue
        target_name: str = spec["name"] if isinstance(spec.get("name"), str) else name
        folded = target_identifier(target_name, identifier_case)
        path = (*base, "columns", name, "name") if "name" in spec else (*base, "columns", name)
        where = document.position(path) if "name" in spec else document.key_position(path)
        if folded in taken:
            document.add(where, "R203",
                         f"{name} lands in target column {folded}, as {taken[folded]} does",
                         "give one of them another `name:`")
        else:
            taken[folded] = f"source column {name}"
