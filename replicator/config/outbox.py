"""Semantic checks of outbox tables (``mode: outbox``): codes R230-R239.

Like the rest of ``semantic``, every lookup tolerates values of the wrong type (the schema
reported those) and every problem is reported, each at the line and column that fixes it.
"""

from __future__ import annotations

from typing import Any

from replicator.config.identifiers import check_identifier
from replicator.config.loader import JsonPath, LoadedDocument, Position
from replicator.errors import PlanError
from replicator.model.catalog import MySQLType, MySQLTypeError
from replicator.model.identifiers import target_identifier
from replicator.model.jsonpath import PathError, parse_path
from replicator.model.pipeline import (
    CHANGELOG_COLUMNS,
    DEFAULT_METADATA,
    METADATA_COLUMNS,
    SOFT_DELETE_COLUMNS,
)

# Table settings that belong to an outbox's routes, not to the outbox table itself.
ROUTE_SETTINGS = ("target", "key", "deletes", "metadata", "log_table", "track_history", "filter")
RESERVED_PREFIX = "_REPLICATOR_"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def check_outbox(document: LoadedDocument, base: JsonPath, table: dict[str, Any],
                 defaults: dict[str, Any], identifier_case: Any,
                 seen_targets: dict[str, tuple[int, str]], state_table: Any) -> None:
    """Everything about one table entry that has ``mode: outbox`` or an ``outbox:`` block."""
    mode = table.get("mode", "merge")
    outbox = table.get("outbox")
    if mode != "outbox":
        if outbox is not None:
            document.add(document.key_position((*base, "outbox")), "R230",
                         f"outbox: settings on a {mode} table",
                         "add `mode: outbox` to the table, or remove the `outbox:` block")
        return
    if outbox is None:
        document.add(document.position((*base, "mode")), "R230",
                     "mode: outbox needs an `outbox:` block",
                     "add outbox: {type_column: aggregate_type, payload_column: payload, "
                     "routes: {...}} (docs/modes.md)")
    for setting in ROUTE_SETTINGS:
        if setting in table:
            document.add(document.key_position((*base, setting)), "R231",
                         f"{setting}: an outbox table does not land anywhere itself; its "
                         "routes do", f"move `{setting}:` into the routes under "
                         "outbox.routes, or remove it")
    columns = _dict(table.get("columns"))
    for name, spec in columns.items():
        for setting in ("name", "type", "mask", "exclude"):
            if setting in _dict(spec):
                document.add(document.key_position((*base, "columns", name, setting)), "R231",
                             f"columns.{name}.{setting}: the columns of an outbox table only "
                             "declare their source_type", "declare target columns under the "
                             "routes: outbox.routes.<type>.columns")
    if not isinstance(outbox, dict):
        return
    where = (*base, "outbox")
    _check_outbox_columns(document, where, outbox, columns)
    routes = _dict(outbox.get("routes"))
    for route_name, route in routes.items():
        if isinstance(route, dict):
            _check_route(document, (*where, "routes", route_name), str(route_name), route,
                         defaults, identifier_case, seen_targets, state_table, base,
                         str(table.get("source")), columns)


def _check_outbox_columns(document: LoadedDocument, where: JsonPath, outbox: dict[str, Any],
                          columns: dict[str, Any]) -> None:
    """R238: the type and payload columns, against the declared outbox columns if any."""
    type_column = outbox.get("type_column")
    payload_column = outbox.get("payload_column")
    if isinstance(type_column, str) and isinstance(payload_column, str) \
            and type_column.lower() == payload_column.lower():
        document.add(document.position((*where, "payload_column")), "R238",
                     f"type_column and payload_column are both {payload_column!r}",
                     "the type and the payload are two different columns of the outbox table")
        return
    declared = {name.lower(): _dict(spec).get("source_type") for name, spec in columns.items()}
    if not any(isinstance(t, str) for t in declared.values()):
        return  # the live catalog decides (plan, check)
    # The planner (replicator.plan, ~50 ms) stays off validate's start-up: only an outbox needs it.
    from replicator.plan.outbox import PAYLOAD_TYPES, TYPE_COLUMN_TYPES

    for setting, name, allowed, wanted in (
        ("type_column", type_column, TYPE_COLUMN_TYPES, "a string or integer type"),
        ("payload_column", payload_column, PAYLOAD_TYPES, "JSON or a text type"),
    ):
        if not isinstance(name, str):
            continue
        if name.lower() not in declared:
            document.add(document.position((*where, setting)), "R238",
                         f"{setting} {name!r} is not among the declared columns of the outbox "
                         "table", f"declare it: columns: {{{name}: {{source_type: ...}}}}, or "
                         "fix the name")
            continue
        source_type = declared[name.lower()]
        try:
            mysql_type = MySQLType.parse(source_type) if isinstance(source_type, str) else None
        except MySQLTypeError:
            continue  # R208 reported it
        if mysql_type is not None and mysql_type.name not in allowed:
            document.add(document.position((*where, setting)), "R238",
                         f"{setting} {name!r} is declared {source_type}, not {wanted}",
                         f"point {setting} at the column that holds {wanted}")


def _check_route(document: LoadedDocument, where: JsonPath, route_name: str,
                 route: dict[str, Any], defaults: dict[str, Any], identifier_case: Any,
                 seen_targets: dict[str, tuple[int, str]], state_table: Any, base: JsonPath,
                 source: str, outbox_columns: dict[str, Any]) -> None:
    mode = route.get("mode", "merge")
    label = f"{source}[{route_name}]"
    target = route.get("target")
    if isinstance(target, str):
        check_identifier(document, (*where, "target"), target, "target table name")
        folded = target_identifier(target, identifier_case)
        if folded in seen_targets:
            other, other_name = seen_targets[folded]
            document.add(document.position((*where, "target")), "R235",
                         f"route {route_name} lands in target table {folded}, as tables[{other}] "
                         f"({other_name}) does", "give one of them another `target:` name")
        elif isinstance(state_table, str) and folded == target_identifier(state_table, identifier_case):
            document.add(document.position((*where, "target")), "R235",
                         f"route {route_name} lands in {folded}, the pipeline's state table",
                         "give the route another `target:` name")
        else:
            seen_targets[folded] = (int(base[-1]), label)

    if mode == "changelog":
        for setting, why in (("deletes", "a changelog row of a delete has _DELETED = true"),
                             ("metadata", "a changelog route has the fixed changelog columns")):
            if setting in route and (setting != "deletes" or route[setting] == "soft"):
                document.add(document.key_position((*where, setting)), "R237",
                             f"{setting}: does not apply to a changelog route: {why}",
                             f"remove `{setting}:` from route {route_name}")

    columns = _dict(route.get("columns"))
    key = [k for k in _list(route.get("key")) if isinstance(k, str)]
    for position, name in enumerate(_list(route.get("key"))):
        if isinstance(name, str) and name not in columns:
            import difflib

            close = difflib.get_close_matches(name, list(columns), n=1, cutoff=0.6)
            document.add(document.position((*where, "key", position)), "R232",
                         f"key column {name} is not among the columns of route {route_name}",
                         f"did you mean '{close[0]}'?" if close else
                         f"declare it: columns: {{{name}: {{path: $.{name}, type: ...}}}}")

    taken = _taken_columns(route, mode, defaults, identifier_case)
    for name, spec in columns.items():
        spec = _dict(spec)
        path = (*where, "columns", name)
        check_identifier(document, path, name, "target column name", key=True)
        folded = target_identifier(name, identifier_case)
        if folded.upper().startswith(RESERVED_PREFIX):
            document.add(document.key_position(path), "R236",
                         f"column {name} starts with {RESERVED_PREFIX}, which replicator reserves",
                         "give the column another name")
        elif folded in taken:
            document.add(document.key_position(path), "R236",
                         f"column {name} lands in target column {folded}, as {taken[folded]} does",
                         "give one of them another name")
        else:
            taken[folded] = f"column {name}"
        _check_value_source(document, path, name, spec, outbox_columns)
        if isinstance(spec.get("path"), str):
            _check_path(document, (*path, "path"), spec["path"])
        if isinstance(spec.get("type"), str):
            from replicator.plan.types import parse_target_type  # off validate's start-up

            try:
                parse_target_type(spec["type"])
            except PlanError as exc:
                document.add(document.position((*path, "type")), "R234",
                             f"column {name}: {exc.message}", exc.hint)
        if name in key and "on_error" in spec and spec["on_error"] in ("null", None):
            document.add(document.position((*path, "on_error")), "R232",
                         f"key column {name} cannot load NULL: a target row needs its key",
                         "remove `on_error: null` from the key column (an event whose key "
                         "does not convert stops the pipeline)")
    if isinstance(route.get("delete_when"), str):
        _check_path(document, (*where, "delete_when"), route["delete_when"])


def _check_value_source(document: LoadedDocument, path: JsonPath, name: str,
                        spec: dict[str, Any], outbox_columns: dict[str, Any]) -> None:
    """R239: a route column reads exactly one of `path` (payload) or `column` (outbox row),
    and `column` names a declared outbox column (when the outbox declares its columns)."""
    has_path, has_column = "path" in spec, "column" in spec
    if has_path == has_column:
        where = document.key_position((*path, "column")) if has_column else \
            document.key_position(path)
        document.add(where, "R239",
                     f"column {name} needs exactly one of `path` (a payload value) and "
                     f"`column` (a column of the outbox row), {'not both' if has_path else 'not neither'}",
                     "write path: $.field for a payload value, or column: id for the outbox "
                     "row's own column")
        return
    declared = {n.lower() for n, s in outbox_columns.items()
                if isinstance(_dict(s).get("source_type"), str)}
    column = spec.get("column")
    if declared and isinstance(column, str) and column.lower() not in declared:
        document.add(document.position((*path, "column")), "R239",
                     f"column {name}: {column!r} is not among the declared columns of the "
                     "outbox table", f"declare it: columns: {{{column}: {{source_type: ...}}}}, "
                     "or fix the name")


def _taken_columns(route: dict[str, Any], mode: Any, defaults: dict[str, Any],
                   identifier_case: Any) -> dict[str, str]:
    taken: dict[str, str] = {}
    if mode == "changelog":
        for column in CHANGELOG_COLUMNS:
            taken[target_identifier(column, identifier_case)] = "a changelog column"
        return taken
    metadata = route.get("metadata", defaults.get("metadata", list(DEFAULT_METADATA)))
    for item in _list(metadata):
        for column in METADATA_COLUMNS.get(item, ()) if isinstance(item, str) else ():
            taken[target_identifier(column, identifier_case)] = f"the metadata column of `{item}`"
    if route.get("deletes", defaults.get("deletes")) == "soft":
        for column in SOFT_DELETE_COLUMNS:
            taken[target_identifier(column, identifier_case)] = "a soft-delete column"
    return taken


def _check_path(document: LoadedDocument, path: JsonPath, text: str) -> None:
    """R233 at the offending character of the path (its start when that cannot be known)."""
    try:
        parse_path(text)
    except PathError as exc:
        document.add(_char_position(document, path, text, exc.offset), "R233", exc.message,
                     exc.hint)


def _char_position(document: LoadedDocument, path: JsonPath, text: str,
                   offset: int) -> Position:
    start = document.position(path)
    style = document.quoted.get(path)
    before = text[:offset]
    if path in document.interpolated or "\n" in before:
        return start
    if (style == "'" and "'" in before) or (style == '"' and ('"' in before or "\\" in before)):
        return start  # escapes in the YAML text: the offsets differ
    return Position(start.line, start.col + (1 if style else 0) + offset)
