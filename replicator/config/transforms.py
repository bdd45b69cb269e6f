"""validate's checks of transforms: computed columns, row filters and masks (R240-R249).

Expressions and filters are parsed here, without Spark and without a server: a syntax error,
a function outside the supported subset, and (when the YAML declares the table's columns with
``source_type``) an unknown column or a type error are reported at the line and column of the
offending part *inside* the YAML scalar. sqlglot is imported only when a file has an
expression or a filter.

- R240 syntax error in an expression or filter
- R241 a function or construct outside the supported subset
- R242 a column the table does not have (known only when the YAML declares the columns)
- R243 a type error (arithmetic on a string, comparing a date with a number, ...)
- R244 a computed column without `type:`, with settings that only source columns have, named
  like a source column, or used as a key / in track_history
- R245 a mask that cannot apply (truncate on a number, keep_last/truncate on a key column)
"""

from __future__ import annotations

from typing import Any

from replicator.config.loader import JsonPath, LoadedDocument, Position
from replicator.config.schema import render_path
from replicator.model.catalog import MySQLType, MySQLTypeError

_SOURCE_ONLY = ("source_type", "exclude")
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                         "set", "binary", "varbinary", "tinyblob", "blob", "mediumblob",
                         "longblob"})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def scalar_position(document: LoadedDocument, path: JsonPath, offset: int) -> Position:
    """Where character ``offset`` of the string at ``path`` is written in the file: exact for
    plain and single-line quoted scalars and for block scalars (| and >); the scalar's start
    otherwise."""
    start = document.position(path)
    lines = (document.text or "").split("\n")
    if not 1 <= start.line <= len(lines):
        return start
    value: Any = document.data
    for part in path:
        value = value[part] if isinstance(value, (dict, list)) else None
    if not isinstance(value, str) or path in document.interpolated:
        return start
    first = lines[start.line - 1][start.col - 1:start.col]
    before = value[:offset]
    if first in ("|", ">"):
        row = start.line + before.count("\n")  # the block's content starts on the next line
        if row >= len(lines):
            return start
        first_content = lines[start.line] if start.line < len(lines) else ""
        indent = len(first_content) - len(first_content.lstrip(" "))  # the block's indentation
        column = offset - (before.rfind("\n") + 1)
        return Position(row + 1, indent + column + 1)
    if "\n" in before:
        return start
    quote = 1 if first in ("'", '"') else 0
    if first == "'":
        offset += before.count("'")  # '' in a single-quoted scalar is one quote
    return Position(start.line, start.col + quote + offset)


def check_transforms(document: LoadedDocument) -> None:
    data = document.data
    if not isinstance(data, dict):
        return
    tinyint1 = _dict(_dict(data.get("source")).get("mysql")).get("tinyint1", "boolean")
    tables = data.get("tables")
    for index, table in enumerate(tables if isinstance(tables, list) else []):
        if isinstance(table, dict):
            _check_table(document, ("tables", index), table, tinyint1)


def _source_types(document: LoadedDocument, table: dict[str, Any], tinyint1: Any):
    """Source column name -> Spark type, when the YAML declares the table's columns (any
    column with `source_type`); None when only the live catalog knows them."""
    # The planner's package (replicator.plan, ~50 ms) and its expression compiler (~35 ms) stay
    # off validate's start-up: only a file with transforms or filters loads them (in this file).
    from replicator.plan.expressions.spark_types import ANY, spark_type_of

    columns = _dict(table.get("columns"))
    source = {name: _dict(spec) for name, spec in columns.items() if "expression" not in _dict(spec)}
    if not any("source_type" in spec for spec in source.values()):
        return None
    types = {}
    for name, spec in source.items():
        try:
            mysql_type = MySQLType.parse(spec["source_type"]) if isinstance(spec.get("source_type"), str) else None
        except MySQLTypeError:
            mysql_type = None  # R208 reported it
        types[name] = spark_type_of(mysql_type, tinyint1=str(tinyint1)) if mysql_type else ANY
    return types


def _check_table(document: LoadedDocument, base: JsonPath, table: dict[str, Any], tinyint1: Any) -> None:
    columns = _dict(table.get("columns"))
    computed = {name: _dict(spec) for name, spec in columns.items()
                if isinstance(_dict(spec).get("expression"), str)}
    filter_text = table.get("filter")
    masks = {name: spec for name, spec in columns.items() if isinstance(_dict(spec).get("mask"), dict)}
    if not computed and not isinstance(filter_text, str) and not masks:
        return
    types = _source_types(document, table, tinyint1) if (computed or isinstance(filter_text, str)) else None
    lower_sources = {name.lower(): name for name in columns if name not in computed}

    for name, spec in computed.items():
        path = (*base, "columns", name)
        if not isinstance(spec.get("type"), str):
            document.add(document.key_position(path), "R244",
                         f"computed column {name} has no `type:`",
                         "declare its target type: type: NUMBER(14,2) (or VARCHAR, DATE, ...)")
        for key in _SOURCE_ONLY:
            if key in spec:
                document.add(document.key_position((*path, key)), "R244",
                             f"computed column {name}: `{key}` applies to source columns only",
                             f"remove `{key}:` (a computed column is not read from MySQL)")
        other = lower_sources.get(name.lower())
        if other is not None:
            document.add(document.key_position(path), "R244",
                         f"computed column {name} has the name of source column {other}",
                         "give the computed column another name (the key is its target name)")
        _check_expression(document, (*path, "expression"), spec["expression"], types)

    key = table.get("key")
    for position, key_column in enumerate(key if isinstance(key, list) else []):
        if isinstance(key_column, str) and key_column in computed:
            document.add(document.position((*base, "key", position)), "R244",
                         f"key column {key_column} is a computed column",
                         "key: lists source columns (the MERGE matches rows by source values)")
    track = table.get("track_history")
    for position, tracked in enumerate(track if isinstance(track, list) else []):
        if isinstance(tracked, str) and tracked in computed:
            document.add(document.position((*base, "track_history", position)), "R244",
                         f"track_history column {tracked} is a computed column",
                         "list the source columns it is computed from instead")

    if isinstance(filter_text, str):
        _check_filter(document, (*base, "filter"), filter_text, types)
    keys = {k.lower() for k in (key if isinstance(key, list) else []) if isinstance(k, str)}
    for name, spec in masks.items():
        _check_mask(document, (*base, "columns", name), name, _dict(spec), keys)


def _check_expression(document: LoadedDocument, path: JsonPath, text: str, types: Any) -> None:
    from replicator.plan.expressions.checker import check_expression
    from replicator.plan.expressions.errors import ExpressionError
    from replicator.plan.transpile.errors import Untranslatable
    from replicator.plan.transpile.translator import translate

    try:
        check_expression(text, types)
        if types is not None and "any" not in {t.kind for t in types.values()}:
            translate(text, types)  # what the engine cannot run exactly is refused
    except (ExpressionError, Untranslatable) as exc:
        _report_expression(document, path, exc)


def _report_expression(document: LoadedDocument, path: JsonPath, exc: Any) -> None:
    from replicator.plan.problems import expression_code

    document.add(scalar_position(document, path, exc.offset), expression_code(exc.message),
                 f"{_render(path)}: {exc.message}", exc.hint)


def _check_filter(document: LoadedDocument, path: JsonPath, text: str, types: Any) -> None:
    from replicator.plan.expressions.checker import check_filter
    from replicator.plan.expressions.errors import ExpressionError
    from replicator.plan.transpile.errors import Untranslatable
    from replicator.plan.transpile.translator import translate

    try:
        check_filter(text, types)
        if types is not None and "any" not in {t.kind for t in types.values()}:
            translate(text, types)
    except (ExpressionError, Untranslatable) as exc:
        _report_expression(document, path, exc)


def _check_mask(document: LoadedDocument, path: JsonPath, name: str, spec: dict[str, Any],
                keys: set[str]) -> None:
    mask = spec["mask"]
    kind = next(iter(mask), None)
    where = document.position((*path, "mask"))
    if kind == "sha256":
        salt_path = (*path, "mask", "sha256", "salt")
        salt = _dict(mask.get("sha256")).get("salt")
        if isinstance(salt, str) and salt and salt_path not in document.interpolated:
            document.add(document.position(salt_path), "R013",
                         f"{_render(salt_path)} is written in the file",
                         "keep secrets out of files: salt: ${PII_SALT}", severity="warning")
        return
    if kind in ("redact", "truncate") and name.lower() in keys:
        document.add(where, "R245",
                     f"key column {name} is masked with {kind}: distinct keys could collapse into "
                     "one target row", "use mask: sha256 on a key column (still unique), or no mask")
    if kind == "truncate" and isinstance(spec.get("source_type"), str):
        try:
            mysql_type = MySQLType.parse(spec["source_type"])
        except MySQLTypeError:
            return
        if mysql_type.name not in _TEXT_TYPES:
            document.add(where, "R245",
                         f"{name} is {spec['source_type']}: truncate applies to text and binary columns",
                         "use mask: {redact: {keep_last: N}} or a computed column "
                         "(expression: substring(cast(x AS STRING), 1, N))")


def _render(path: JsonPath) -> str:
    return render_path(path)
