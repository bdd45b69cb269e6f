"""``config.refresh``: stale entries rewritten in place, every other byte kept; and
``config.stale.find_stale`` on hand-built catalogs (the live cases are in
tests/integration/test_init_refresh.py)."""

from __future__ import annotations

import pytest

from replicator.config import check_document
from replicator.config.build import build_pipeline
from replicator.config.refresh import RefreshError, refresh_text
from replicator.config.stale import StaleEntry, find_stale
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable

PIPELINE = """\
# yaml-language-server: $schema=../schemas/pipeline.schema.json
version: 1
name: shop
source:
  mysql:
    host: 127.0.0.1
    password: ${MYSQL_PASSWORD}
    start: initial   # snapshot every table, then stream the binlog
target:
  duckdb: {path: ./warehouse.duckdb}
tables:
  - source: shop.orders
    key: [id]   # the primary key
    columns:
      id: {source_type: "bigint(20) unsigned"}
      qty: {source_type: "int(11)"}   # how many
      # the price, in cents
      price: {source_type: 'decimal(12,2)'}
      email: {source_type: "varchar(40)", mask: sha256}
      note:   # shown as remark
        source_type: "varchar(40)"
        name: remark
      # below the last entry
  - source: shop.lines
    key: ["n", o]
    columns:
      "n": {source_type: "int(11)"}
      o: {source_type: "int(11)"}
"""


def entry(declared: str, kind: str, **more) -> StaleEntry:
    return StaleEntry(source_table="shop.orders", table_index=more.pop("table", 0),
                      section=more.pop("section", "columns"), declared=declared, kind=kind,
                      problem="...", edit="...", **more)


def column(name: str, mysql_type: str, ordinal: int) -> SourceColumn:
    return SourceColumn(name, MySQLType.parse(mysql_type), ordinal=ordinal)


def pipeline_of(text: str, tmp_path):
    path = tmp_path / "shop.yaml"
    path.write_text(text)
    document = check_document(path, environ={"MYSQL_PASSWORD": "x"})
    assert [d for d in document.diagnostics if d.is_error] == []
    return build_pipeline(document.data, path=path), document


def test_each_kind_is_rewritten_in_place_and_the_rest_kept():
    refreshed = refresh_text(PIPELINE, [
        entry("qty", "renamed", live_name="quantity"),
        entry("price", "dropped"),
        entry("email", "retyped", live_type="varchar(80)"),
        entry("note", "renamed", live_name="first name"),
        entry("id", "renamed", live_name="order_id", section="key", index=0),
        entry("shipped", "added", live_name="shipped", live_type="tinyint(1)", after="quantity"),
        entry("zeroth", "added", live_name="zeroth", live_type="int(11)", after=None),
        entry("last", "added", live_name="yes", live_type="int(11)", after="first name"),
    ])
    assert refreshed.text == PIPELINE.replace(
        "    key: [id]   # the primary key\n", "    key: [order_id]   # the primary key\n",
    ).replace(
        '      id: {source_type: "bigint(20) unsigned"}\n',
        '      zeroth: {source_type: "int(11)"}\n      id: {source_type: "bigint(20) unsigned"}\n',
    ).replace(
        # the end-of-line comment keeps its distance; the comment lines below an entry stay
        # below it when a pin is added after it
        '      qty: {source_type: "int(11)"}   # how many\n',
        '      quantity: {source_type: "int(11)"}   # how many\n'
        '      shipped: {source_type: "tinyint(1)"}\n',
    ).replace(
        "      price: {source_type: 'decimal(12,2)'}\n", "",
    ).replace(
        '"varchar(40)", mask: sha256}', '"varchar(80)", mask: sha256}',
    ).replace(
        "      note:   # shown as remark\n", '      "first name":   # shown as remark\n',
    ).replace(
        "        name: remark\n", '        name: remark\n      "yes": {source_type: "int(11)"}\n',
    )


def test_a_removed_first_entry_keeps_the_comment_lines_below_it():
    text = ("tables:\n  - source: shop.orders\n    columns:\n      gone: {source_type: int}"
            "   # its own comment\n      # about kept\n      kept: {source_type: int}\n")
    refreshed = refresh_text(text, [entry("gone", "dropped")])
    assert refreshed.text == ("tables:\n  - source: shop.orders\n    columns:\n"
                              "      # about kept\n      kept: {source_type: int}\n")


def test_quoting_follows_the_file_and_stays_valid():
    text = ("tables:\n  - source: shop.orders\n    key: ['id']\n    columns:\n"
            "      id: {source_type: int}\n      price: {source_type: 'decimal(10,2)'}\n")
    refreshed = refresh_text(text, [
        entry("id", "retyped", live_type="decimal(20,0) unsigned"),  # a comma: quoted
        entry("price", "retyped", live_type="decimal(12,2)"),
        entry("id", "renamed", live_name="on", section="key", index=0),  # a YAML 1.1 word
    ])
    assert refreshed.text == text.replace(
        "id: {source_type: int}", 'id: {source_type: "decimal(20,0) unsigned"}').replace(
        "'decimal(10,2)'", "'decimal(12,2)'").replace("key: ['id']", "key: ['on']")


@pytest.mark.parametrize("text", [
    "tables:\n- source: a.b\n  columns:\n    x: {source_type: int}\n    y: {source_type: int}\n",
    "tables:\n    -   source: a.b\n        columns:\n            x: {source_type: int}\n"
    "            y: {source_type: int}\n",
    "---\ntables:\n  - source: a.b\n    columns:\n      x: {source_type: int}\n"
    "      y: {source_type: int}\n",
])
def test_the_files_own_indentation_is_kept(text):
    refreshed = refresh_text(text, [entry("x", "renamed", live_name="xx")])
    assert refreshed.text == text.replace("x: {", "xx: {")


def test_a_file_no_layout_writes_back_is_refused_not_reformatted():
    text = ("source:\n    mysql: {host: h}\ntables:\n  - source: a.b\n    columns:\n"
            "      x: {source_type: int}\n")
    with pytest.raises(RefreshError, match="cannot be rewritten"):
        refresh_text(text, [entry("x", "renamed", live_name="xx")])


def test_blocking_entries_are_left_and_nothing_else_is_read():
    left = entry("secret", "missing", blocking=True, refreshable=False)
    refreshed = refresh_text("not: [yaml", [left])  # nothing to write: the file is not parsed
    assert refreshed.text == "not: [yaml" and refreshed.left == (left,)


def test_find_stale_names_each_kind_at_its_line(tmp_path):
    pipeline, document = pipeline_of(PIPELINE, tmp_path)
    live = Catalog((
        SourceTable("shop", "orders", (
            column("id", "bigint(20) unsigned", 1), column("quantity", "int", 2),
            column("shipped", "tinyint(1)", 3), column("email", "varchar(80)", 4),
            column("note", "varchar(40)", 5)), primary_key=("id",)),
        SourceTable("shop", "lines", (column("n", "int(11)", 1), column("o", "int(11)", 2)),
                    primary_key=("n", "o")),
    ))
    followed = {"shop.orders": {"qty": "quantity", "price": None}}
    stale = find_stale(pipeline, followed, live, document=document)
    found = [(e.setting, e.kind, e.line) for e in stale]
    # int(11) and int are one type (display width); tinyint(1) is not tinyint
    assert found == [("columns.qty", "renamed", 16), ("columns.shipped", "added", 16),
                     ("columns.price", "dropped", 18), ("columns.email", "retyped", 19)]
    assert stale[0].text() == (
        f"{tmp_path / 'shop.yaml'}:16: shop.orders columns.qty: renamed to quantity in MySQL: "
        f"rename the entry to quantity (or run: replicator init --refresh "
        f"{tmp_path / 'shop.yaml'})")
    # A table that lists only some columns (not every entry pinned) gets no pins added.
    partial = PIPELINE.replace("      note:   # shown as remark\n        source_type: "
                               '"varchar(40)"\n', "      note:   # shown as remark\n")
    pipeline, document = pipeline_of(partial, tmp_path)
    assert "added" not in {e.kind for e in find_stale(pipeline, followed, live)}


def test_two_entries_for_one_column_a_pin_goes_a_binding_entry_is_left(tmp_path):
    text = ("version: 1\nsource:\n  mysql: {host: h}\ntarget:\n  duckdb: {path: w.duckdb}\n"
            "tables:\n  - source: shop.t\n    columns:\n"
            "      a: {source_type: int}\n      b: {source_type: int}\n"
            "      c: {source_type: int, mask: md5}\n      d: {source_type: int, mask: md5}\n")
    pipeline, document = pipeline_of(text, tmp_path)
    live = Catalog((SourceTable("shop", "t", (column("b", "int", 1), column("d", "int", 2))),))
    # a was renamed to b, c to d, while b and d kept entries of their own (a column re-added
    # under an old name): whose settings apply is a human's call for a binding entry.
    stale = find_stale(pipeline, {"shop.t": {"a": "b", "c": "d"}}, live, document=document)
    assert [(e.setting, e.kind, e.blocking, e.refreshable) for e in stale] == [
        ("columns.a", "dropped", False, True), ("columns.c", "conflict", True, False)]
    assert refresh_text(text, stale).text == text.replace("      a: {source_type: int}\n", "")


def test_the_primary_key_pin_follows_mysqls_primary_key(tmp_path):
    text = ("version: 1\nsource:\n  mysql: {host: h}\ntarget:\n  duckdb: {path: w.duckdb}\n"
            "tables:\n  - source: shop.t\n    primary_key: [id]   # pinned for plan --offline\n"
            "    columns:\n      id: {source_type: int}\n      n: {source_type: int}\n"
            "  - source: shop.u\n    primary_key: [\"n\"]\n")
    pipeline, document = pipeline_of(text, tmp_path)
    live = Catalog((
        SourceTable("shop", "t", (column("t_id", "int", 1), column("n", "int", 2)),
                    primary_key=("t_id", "n")),
        SourceTable("shop", "u", (column("n", "int", 1),)),  # no primary key any more
    ))
    stale = find_stale(pipeline, {"shop.t": {"id": "t_id"}}, live, document=document)
    found = [(e.source_table, e.setting, e.kind, e.line, e.refreshable) for e in stale]
    assert found == [("shop.t", "primary_key", "changed", 8, True),
                     ("shop.t", "columns.id", "renamed", 10, True),
                     ("shop.u", "primary_key", "changed", 13, False)]
    assert stale[0].edit == 'write primary_key: [t_id, "n"]'  # a YAML 1.1 word: quoted
    assert refresh_text(text, stale).text == text.replace(
        "primary_key: [id]   # pinned", 'primary_key: [t_id, "n"]   # pinned').replace(
        "      id: {", "      t_id: {")
