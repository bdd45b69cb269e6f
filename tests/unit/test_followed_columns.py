"""The YAML's settings follow their column through renames and drops (issue 29): pins never
bind, binding entries move with their column, ambiguity stops with the exact edit."""

from __future__ import annotations

import tempfile

from replicator.config import load_pipeline
from replicator.context import Context
from replicator.engine.follow.intent import classify
from replicator.engine.follow.schema_changes import decide
from replicator.model.followed import followed_drop, followed_rename, with_followed

YAML = """version: 1
name: p
source: {mysql: {host: h}}
target: {duckdb: {path: x.duckdb}}
engine: {checkpoint: %s}
tables:
  - source: shop.orders
    key: [id]
    track_history: [qty, note]
    mode: scd2
    columns:
      id: {source_type: int}
      qty: {source_type: int}
      email: {mask: sha256}
      card: {name: CARD_TOKEN, exclude: true}
      note: {source_type: varchar(10)}
      total: {expression: "qty * 2", type: "NUMBER(10,0)"}
"""


def _pipeline(tmp_path):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(YAML % (tmp_path / "checkpoint"))
    return load_pipeline(handle.name, environ={})


def _spec(pipeline):
    return pipeline.tables[0]


def _names(pipeline):
    return {m.source_column: m for m in _spec(pipeline).columns}


def test_pins_do_not_bind_and_binding_entries_do(tmp_path):
    mappings = _names(_pipeline(tmp_path))
    assert not mappings["qty"].binding and not mappings["note"].binding
    assert mappings["email"].binding and mappings["card"].binding and mappings["total"].binding


def test_a_rename_moves_every_declared_name_and_a_chain_keeps_the_yaml_name(tmp_path):
    spec = _spec(_pipeline(tmp_path))
    followed = followed_rename({}, spec, "email", "mail")
    followed = followed_rename(followed, spec, "mail", "contact")
    assert followed == {"email": "contact"}
    assert followed_rename(followed, spec, "mail", "contact") == followed  # a replay
    assert followed_rename({}, spec, "unlisted", "other") == {}  # the YAML does not name it
    assert followed_drop(followed, spec, "contact") == {"email": None}


def test_the_pipeline_with_followed_columns_applies_settings_under_the_new_names(tmp_path):
    pipeline = _pipeline(tmp_path)
    effective = with_followed(pipeline, {"shop.orders": {"email": "contact", "id": "order_id",
                                                         "note": None, "qty": "quantity"}})
    mappings = _names(effective)
    assert mappings["contact"].mask == "sha256" and "email" not in mappings
    assert "note" not in mappings  # dropped: nothing left to apply it to
    assert _spec(effective).key == ("order_id",)
    assert _spec(effective).track_history == ("quantity",)
    assert with_followed(effective, effective.followed) == effective  # applied once only
    assert with_followed(effective, {}) is pipeline  # a record cleared: the YAML as it is
    assert effective.declared is pipeline


def test_context_records_followed_columns_in_the_checkpoint(tmp_path):
    context = Context(_pipeline(tmp_path))
    assert context.follow_column("shop.orders", "email", "contact")
    assert not context.follow_column("shop.orders", "email", "contact")  # nothing new
    assert "contact" in _names(context.pipeline)
    again = Context(_pipeline(tmp_path))  # a later command reads the record
    assert _names(again.pipeline)["contact"].mask == "sha256"
    assert (tmp_path / "checkpoint" / "followed_columns.json").is_file()


def test_a_renamed_masked_column_is_followed_not_stopped(tmp_path):
    pipeline = _pipeline(tmp_path)
    decision = decide(classify("ALTER TABLE shop.orders RENAME COLUMN email TO contact"),
                      pipeline, "shop.orders", None)
    assert [s.action for s in decision.steps] == ["follow"]


def test_a_rename_onto_a_configured_column_gone_from_mysql_stops_naming_both(tmp_path):
    context = Context(_pipeline(tmp_path))
    context.follow_column("shop.orders", "card", None)  # DROP COLUMN card
    decision = decide(classify("ALTER TABLE shop.orders RENAME COLUMN note TO card"),
                      context.pipeline, "shop.orders", None)
    stop = decision.stop
    assert stop is not None and not stop.by_policy
    assert "card" in stop.why and "note" in stop.why and "name: CARD_TOKEN" in stop.why


def test_an_expression_naming_a_renamed_or_dropped_column_stops_with_the_edit(tmp_path):
    pipeline = _pipeline(tmp_path)
    for sql, edit in (("ALTER TABLE shop.orders RENAME COLUMN qty TO quantity",
                       "name quantity instead"),
                      ("ALTER TABLE shop.orders DROP COLUMN qty", "no longer use qty")):
        stop = decide(classify(sql), pipeline, "shop.orders", None).stop
        assert stop is not None, sql
        assert "computed column total" in stop.why and edit in stop.why


def test_a_pinned_primary_key_feeds_plan_offline_and_binds_nothing(tmp_path):
    from replicator.plan import build_plan, offline_catalog

    text = (YAML % (tmp_path / "checkpoint")).replace("    key: [id]\n", "    primary_key: [id]\n")
    text = text.replace("    mode: scd2\n", "").replace("    track_history: [qty, note]\n", "")
    text = text.replace("{mask: sha256}", "{mask: sha256, source_type: varchar(50)}")
    text = text.replace("      card: {name: CARD_TOKEN, exclude: true}\n", "")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    pipeline = load_pipeline(path, environ={})
    assert pipeline.tables[0].key is None and pipeline.tables[0].primary_key == ("id",)
    plan = build_plan(pipeline, offline_catalog(pipeline))
    assert plan.tables[0].source_key == ("id",) and plan.tables[0].key_origin == "primary key"


def test_any_sequence_of_renames_and_drops_keeps_each_entry_on_its_column(tmp_path):
    """Property: MySQL's columns are simulated by identity; after any sequence of renames
    and drops (chains, swaps through a free name, names reused by a later rename), every
    binding entry of the YAML applies to the very column it was declared on, or is gone with
    it; replaying any prefix of the record changes nothing."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    spec = _spec(_pipeline(tmp_path))
    declared = ["id", "qty", "email", "card", "note"]

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.booleans(), st.integers(0, 9), st.integers(0, 9)), max_size=12))
    def check(steps):
        columns = {name: name for name in declared}  # identity (its first name) -> name now
        followed: dict[str, str | None] = {}
        for drop, which, to in steps:
            alive = sorted(i for i, n in columns.items() if n is not None)
            if not alive:
                break
            identity = alive[which % len(alive)]
            old = columns[identity]
            if drop:
                columns[identity] = None
                followed = followed_drop(followed, spec, old)
                assert followed_drop(followed, spec, old) == followed
                continue
            new = (declared + [f"c{n}" for n in range(5)])[to]  # YAML names reused too
            if new in columns.values():
                continue  # MySQL refuses a rename onto a live column
            columns[identity] = new
            followed = followed_rename(followed, spec, old, new)
            assert followed_rename(followed, spec, old, new) == followed
        for name in declared:
            assert followed.get(name, name) == columns[name], (steps, followed)

    check()
