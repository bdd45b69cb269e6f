"""Routing (`sources:`): the table selector, the plan of a routed target, its staging (rows keyed
by _SOURCE_TABLE in every mode), snapshot chunk slots, and schema changes of selected tables."""

from __future__ import annotations

import pickle
import re
import string
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.engine.follow.routing import follow_routed_change
from replicator.engine.state.checkpoint import (
    EPOCH_SPAN,
    SLOT_SPAN,
    StartState,
    routed_chunk_number,
    snapshot_batch_id,
)
from replicator.errors import EngineError, PlanError
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import (
    ColumnMapping,
    DuckDBTarget,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.model.selection import (
    PatternError,
    TableSelection,
    TableSelector,
    as_selector,
    compile_pattern,
)
from replicator.plan import DUCKDB, build_plan, offline_catalog, render_sql
from replicator.source.ddl import replicated_schema_change
from tests.fixtures.row_transforms import stage_events

SHARDS = TableSelection((r"shop_[0-9]+\.orders",), (r"shop_0\.orders",))

# -- the selector ------------------------------------------------------------------------


def test_patterns_match_the_whole_name_case_insensitively():
    assert SHARDS.matches("shop_1.orders") and SHARDS.matches("SHOP_12.Orders")
    assert not SHARDS.matches("shop_0.orders")  # excluded
    assert not SHARDS.matches("shop_1.orders_archive")  # whole name, not a prefix
    assert not SHARDS.matches("old_shop_1.orders")  # nor a suffix
    assert not SHARDS.matches("shop_1xorders")  # the dot is escaped
    assert TableSelection((r"shop_[0-9]+.orders",)).matches("shop_1xorders")  # bare: any char


def test_a_selector_mixes_exact_names_and_selections():
    selector = TableSelector.of(["Billing.Invoices", SHARDS])
    assert "billing.invoices" in selector and selector.matches("BILLING.INVOICES")
    assert selector.matches("shop_3.orders") and not selector.matches("shop_0.orders")
    assert not selector.matches("billing.payments")
    assert as_selector(None) is None and as_selector(selector) is selector
    assert as_selector(["a.b"]).matches("A.B")


def test_a_selector_travels_as_json_and_pickle():
    selector = TableSelector.of(["a.b", SHARDS, TableSelection(("x\\..*",))])
    again = TableSelector.from_json(selector.to_json())
    assert again == selector
    assert pickle.loads(pickle.dumps(selector)) == selector
    assert pickle.loads(pickle.dumps(selector)).matches("shop_5.orders")
    assert TableSelector.from_json('["Shop.Trips"]').matches("shop.trips")  # old option format


def test_a_bad_pattern_says_where():
    with pytest.raises(PatternError) as caught:
        compile_pattern("shop_(eu|us.orders")
    assert caught.value.position == 5 and "at character 6" in str(caught.value)


def test_schema_changes_are_kept_when_they_can_concern_the_selection():
    selector = TableSelector.of(["billing.invoices", SHARDS])
    position = BinlogPosition("mysql-bin.000001", 4)

    def kept(sql, database="other"):
        return replicated_schema_change(sql, database, position, 0, selector) is not None

    assert kept("CREATE TABLE shop_9.orders (id INT PRIMARY KEY)")  # a new shard
    assert kept("CREATE TABLE orders (id INT PRIMARY KEY)", database="shop_9")
    assert kept("RENAME TABLE tmp.o TO shop_9.orders")  # renamed into the selection
    assert kept("ALTER TABLE shop_1.orders ADD COLUMN x INT")
    assert kept("ALTER TABLE billing.payments ADD COLUMN x INT")  # a schema of an exact name
    assert kept("CREATE DATABASE shop_9")  # patterns cannot rule a database out
    assert not kept("CREATE TABLE shop_0.orders (id INT)")  # excluded
    assert not kept("ALTER TABLE shop_1.customers ADD COLUMN x INT")
    exact = TableSelector.of(["billing.invoices"])
    assert replicated_schema_change("CREATE DATABASE x", "x", position, 0, exact) is None


_NAME = st.text(string.ascii_lowercase + string.digits + "_", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(database=_NAME, table=_NAME, other=_NAME)
def test_an_escaped_exact_pattern_selects_exactly_that_table(database, table, other):
    selection = TableSelection((re.escape(f"{database}.{table}"),))
    assert selection.matches(f"{database}.{table}")
    assert selection.matches(f"{database.upper()}.{table.upper()}")
    assert selection.matches(f"{database}.{other}") == (other == table)
    assert not selection.matches(f"{database}.{table}x")


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.tuples(_NAME, _NAME), max_size=8), include=st.sampled_from(
    [r".*", r"[a-m].*\..*", r".*_1\..*", r"a.*"]), exclude=st.sampled_from([None, r".*x.*"]))
def test_selection_is_include_minus_exclude(names, include, exclude):
    selection = TableSelection((include,), (exclude,) if exclude else ())
    for db, table in names:
        name = f"{db}.{table}"
        want = re.fullmatch(include, name, re.I) is not None and not (
            exclude and re.fullmatch(exclude, name, re.I))
        assert selection.matches(name) == want
        assert TableSelector.of([selection]).matches(name) == want


# -- the plan ----------------------------------------------------------------------------


def _column(name, type_text, ordinal, nullable=True):
    return SourceColumn(name, MySQLType.parse(type_text), nullable, ordinal)


def _orders(database, *extra, id_type="bigint", key=("id",)):
    columns = [_column("id", id_type, 1, False), _column("amount", "decimal(12,2)", 2),
               _column("note", "varchar(20)", 3)]
    columns += [_column(name, type_text, 4 + i) for i, (name, type_text) in enumerate(extra)]
    return SourceTable(database, "orders", tuple(columns), key)


def _pipeline(table: TablePipeline | None = None) -> Pipeline:
    table = table or TablePipeline("", "", target_table="ORDERS", selection=SHARDS)
    return Pipeline("shards", MySQLSource(), TargetConfig(DuckDBTarget()), (table,))


CATALOG = Catalog((
    _orders("shop_1"),
    _orders("shop_2", ("region", "varchar(8)")),
    _orders("shop_0", ("secret", "int")),  # excluded: its extra column is not planned
    SourceTable("shop_1", "customers", (_column("id", "int", 1, False),), ("id",)),
))


def test_one_plan_per_target_keyed_by_source_table_first():
    plan = build_plan(_pipeline(), CATALOG)
    (table,) = plan.tables
    assert table.routed and table.sources == ("shop_1.orders", "shop_2.orders")
    assert table.source_key == ("_SOURCE_TABLE", "id")
    assert table.target_key == ("_SOURCE_TABLE", "ID")
    assert [c.target_column for c in table.data_columns] == [
        "_SOURCE_TABLE", "ID", "AMOUNT", "NOTE", "REGION"]
    first = table.data_columns[0]
    assert (first.nullable, first.is_key, DUCKDB.type_name(first.target_type)) == (
        False, True, "VARCHAR")
    assert table.column("REGION").nullable  # shop_1 has no region: NULL for its rows
    assert table.reads("shop_1.orders") and table.reads("SHOP_7.ORDERS")  # created later
    assert not table.reads("shop_0.orders") and not table.reads("shop_1.customers")
    assert plan.table("shop_2.orders") is table and plan.table("ORDERS") is table
    assert plan.source_names() == ["shop_1.orders", "shop_2.orders"]
    sql = render_sql(table, DUCKDB)
    assert "-- sources: shop_1.orders, shop_2.orders" in sql
    assert 'PRIMARY KEY ("_SOURCE_TABLE", "ID")' in sql


def test_metadata_source_table_is_the_key_column_not_a_second_one():
    table = TablePipeline("", "", target_table="ORDERS", selection=SHARDS,
                          metadata=("op", "source_table"))
    (planned,) = build_plan(_pipeline(table), CATALOG).tables
    names = [c.target_column for c in planned.columns]
    assert names.count("_SOURCE_TABLE") == 1 and "_OP" in names


def test_a_type_conflict_names_both_tables_unless_a_type_is_declared():
    catalog = Catalog((_orders("shop_1"), _orders("shop_2", id_type="int")))
    with pytest.raises(PlanError) as caught:
        build_plan(_pipeline(), catalog)
    assert "shop_1.orders" in caught.value.message and "shop_2.orders" in caught.value.message
    assert "'id'" in caught.value.message and "type:" in (caught.value.hint or "")
    declared = TablePipeline("", "", target_table="ORDERS", selection=SHARDS,
                             columns=(ColumnMapping("id", target_type="NUMBER(19,0)"),))
    assert build_plan(_pipeline(declared), catalog).tables[0].column("ID").declared_type


def test_the_tables_must_agree_on_the_key():
    catalog = Catalog((_orders("shop_1"), _orders("shop_2", key=("id", "note"))))
    with pytest.raises(PlanError, match=r"primary key \(id\) but shop_2.orders has \(id, note\)"):
        build_plan(_pipeline(), catalog)
    keyed = TablePipeline("", "", target_table="ORDERS", selection=SHARDS, key=("id",))
    assert build_plan(_pipeline(keyed), catalog).tables[0].source_key == ("_SOURCE_TABLE", "id")
    missing = TablePipeline("", "", target_table="ORDERS", selection=SHARDS, key=("region",))
    with pytest.raises(PlanError, match=r"shop_1\.orders has no key column 'region'"):
        build_plan(_pipeline(missing), Catalog((_orders("shop_1"), _orders("shop_2", ("region", "int")))))


def test_no_matching_table_is_a_plan_error_with_a_hint():
    with pytest.raises(PlanError, match="no source table matches") as caught:
        build_plan(_pipeline(), Catalog((CATALOG.tables[3],)))
    assert "whole database.table" in (caught.value.hint or "")


def test_offline_plan_shows_the_patterns():
    table = TablePipeline("", "", target_table="ORDERS", selection=SHARDS, key=("id",),
                          columns=(ColumnMapping("id", source_type="bigint"),
                                   ColumnMapping("amount", source_type="decimal(12,2)")))
    pipeline = _pipeline(table)
    (planned,) = build_plan(pipeline, offline_catalog(pipeline)).tables
    assert planned.sources == () and planned.source_key == ("_SOURCE_TABLE", "id")
    assert planned.source_name == r"shop_[0-9]+\.orders except shop_0\.orders"
    assert "every table the patterns match at run time" in render_sql(planned, DUCKDB)


# -- staging -----------------------------------------------------------------------------


def _event(table, op, before=None, after=None, pos=4, row_index=0):
    return ChangeEvent(table=table, op=op, position=BinlogPosition("mysql-bin.000001", pos),
                       row_index=row_index, ts_ms=1_700_000_000_000, before=before, after=after)


def _row(i, amount="1.00"):
    return {"id": i, "amount": Decimal(amount), "note": f"n{i}"}


def _staged(mode="merge"):
    table = TablePipeline("", "", target_table="ORDERS", selection=SHARDS, mode=mode)
    (planned,) = build_plan(_pipeline(table), CATALOG).tables
    events = [
        _event("shop_1.orders", "c", after=_row(1), row_index=0),
        _event("shop_2.orders", "c", after=_row(1), row_index=1),  # same id, other shard
        _event("shop_1.orders", "u", before=_row(1), after=_row(1, "2.00"), row_index=2),
        _event("shop_1.orders", "u", before=_row(1, "2.00"), after=_row(1, "3.00"), row_index=3),
        _event("shop_2.orders", "d", before=_row(1), row_index=4),
    ]
    return stage_events(planned, events).to_pylist()


def test_merge_compacts_per_source_table():
    rows = _staged()
    assert [(r["_SOURCE_TABLE"], r["ID"], str(r["AMOUNT"]), r["_REPLICATOR_OP"]) for r in rows] == [
        ("shop_1.orders", 1, "3.00", "u"), ("shop_2.orders", 1, "1.00", "d")]


def test_changelog_and_scd2_rows_carry_the_source_table():
    log = _staged("changelog")
    assert [(r["_SOURCE_TABLE"], r["_OP"]) for r in log] == [
        ("shop_1.orders", "c"), ("shop_2.orders", "c"), ("shop_1.orders", "u"),
        ("shop_1.orders", "u"), ("shop_2.orders", "d")]
    versions = _staged("scd2")
    assert sorted((r["_SOURCE_TABLE"], str(r["AMOUNT"])) for r in versions) == [
        ("shop_1.orders", "1.00"), ("shop_1.orders", "2.00"), ("shop_1.orders", "3.00"),
        ("shop_2.orders", "1.00")]


def test_a_table_that_is_not_routed_is_left_alone():
    single = TablePipeline("shop_1", "orders", target_table="O1")
    (planned,) = build_plan(_pipeline(single), CATALOG).tables
    (staged,) = stage_events(planned, [_event("shop_1.orders", "c", after=_row(1))]).to_pylist()
    assert "_SOURCE_TABLE" not in staged and staged["ID"] == 1


# -- snapshot chunk numbers --------------------------------------------------------------


def test_each_copy_of_a_source_takes_its_own_slot_until_it_completes():
    state = StartState(position=BinlogPosition("mysql-bin.000001", 4), snapshot="pending")
    a = state.routed_slot("main.ORDERS", "shop_1.orders")
    b = state.routed_slot("MAIN.orders", "shop_2.orders")
    assert (a, b) == (0, 1)
    assert state.routed_slot("main.ORDERS", "SHOP_1.orders") == 0  # resumed copy: same slot
    again = StartState.from_json(state.to_json())
    assert again.routed_slot("main.ORDERS", "shop_2.orders") == 1
    state.forget_slots("SHOP_1.orders")  # copy completed: a later copy takes a new slot
    assert state.routed_slot("main.ORDERS", "shop_1.orders") == 2
    assert state.routed_slot("main.OTHER", "shop_9.orders") == 0  # slots are per target


def test_chunk_batch_ids_of_different_slots_never_meet():
    ids = {snapshot_batch_id(0, routed_chunk_number(slot, index))
           for slot in (0, 1, 999_999) for index in (0, 1, SLOT_SPAN - 2, SLOT_SPAN - 1)}
    assert len(ids) == 12
    # The last slot's last chunk still belongs to the epoch.
    assert -snapshot_batch_id(0, routed_chunk_number(999_999, SLOT_SPAN - 1)) - 1 < EPOCH_SPAN


def test_slots_run_out_with_a_hint():
    state = StartState(position=BinlogPosition("mysql-bin.000001", 4), snapshot="pending",
                       slots={"main.orders": EPOCH_SPAN // SLOT_SPAN})
    with pytest.raises(EngineError, match="no chunk numbers left") as caught:
        state.routed_slot("main.ORDERS", "shop_1.orders")
    assert "--snapshot always" in (caught.value.hint or "")


# -- schema changes while streaming ------------------------------------------------------


def test_routed_schema_changes():
    known = {"shop_1.orders", "shop_2.orders"}

    def follow(kind, tables, routed, sql="DDL"):
        return follow_routed_change(kind, tables, routed, known, sql, "mysql-bin.000001:4")

    assert follow("create", ["shop_9.orders"], ["shop_9.orders"])  # a new shard: re-plan
    assert follow("drop", ["shop_2.orders"], ["shop_2.orders"])  # stops being read
    assert follow("rename", ["shop_2.orders", "old.orders"], ["shop_2.orders"])  # renamed away
    assert not follow("alter", ["shop_1.orders"], ["shop_1.orders"])  # the one-table rules
    with pytest.raises(EngineError, match="needs a copy") as caught:
        follow("rename", ["tmp.o", "shop_9.orders"], ["shop_9.orders"])
    assert "run the pipeline again" in (caught.value.hint or "")
    # Once copied, the renamed table is a known source: its replayed RENAME just re-plans.
    assert follow("rename", ["tmp.o", "shop_1.orders"], ["shop_1.orders"])


# -- the per-batch transform -------------------------------------------------------------


class _RecordingSink:
    def __init__(self):
        self.applied = []

    def apply(self, table, batch_id, end_offset, staged, **options):
        from replicator.sink.protocol import ApplyResult, slices_of

        rows = [row for piece in slices_of(staged) for row in piece.to_pylist()]
        self.applied.append((table.target_table, rows))
        return ApplyResult(skipped=False, rows=len(rows), seconds_stage=0.0, seconds_merge=0.0)


def _change_row(table, op, pos, after):
    return _event(table, op, after=after, pos=pos)


def _ddl_row(sql, kind, tables, pos=90):
    from replicator.model.changes import SchemaChange

    return SchemaChange(database="x", sql=sql, kind=kind, tables=tuple(tables),
                        position=BinlogPosition("mysql-bin.000001", pos))


def _apply(applier, items, batch_id):
    """The micro-batch ``batch_id`` holding ``items``, landed as executors land it."""
    from tests.fixtures.landed import land_events

    return applier.apply_manifest(land_events(applier, items, directory=f"batch-{batch_id}"),
                                  batch_id, None)


@pytest.fixture()
def routed_applier(tmp_path):
    from replicator.engine.apply.applier import BatchApplier
    from replicator.engine.state.checkpoint import CheckpointDir

    pipeline = _pipeline()
    covered: list[list[str]] = []
    # As the runner's start state: the shards copied at start are covered, and so is every
    # table the applier reports (streamed from its creation).
    state = {"shop_1.orders", "shop_2.orders"}

    def on_new_sources(names: list[str]) -> None:
        covered.append(names)
        state.update(name.lower() for name in names)

    applier = BatchApplier(pipeline, build_plan(pipeline, CATALOG), _RecordingSink(),
                           CheckpointDir(tmp_path), on_new_sources=on_new_sources,
                           covers=lambda name: name.lower() in state)
    evolved: list[int] = []

    def evolve(created=()) -> None:  # no server here: count the re-plans
        evolved.append(1)
        if created:
            on_new_sources(list(dict.fromkeys(created)))

    applier._evolve = evolve
    return applier, covered, evolved


def test_a_batch_of_many_shards_is_one_apply_keyed_by_shard(routed_applier):
    applier, covered, evolved = routed_applier
    rows = [_change_row("shop_2.orders", "c", 200, _row(1)),
            _change_row("shop_1.orders", "c", 100, _row(1)),
            _change_row("shop_0.orders", "c", 300, _row(1)),  # excluded
            _change_row("shop_1.customers", "c", 300, {"id": 1})]  # not selected
    report = _apply(applier, rows, 0)
    ((target, staged),) = applier.sink.applied
    assert target == "ORDERS" and [(r["_SOURCE_TABLE"], r["ID"]) for r in staged] == [
        ("shop_1.orders", 1), ("shop_2.orders", 1)]
    assert [t.changes for t in report.tables] == [2] and evolved == [] and covered == []


def test_rows_of_an_unplanned_matching_table_re_plan_once(routed_applier):
    applier, _, evolved = routed_applier
    row = _change_row("shop_7.orders", "c", 100, _row(1))  # CREATE ... SELECT: no DDL seen
    _apply(applier, [row], 0)
    _apply(applier, [row], 1)
    assert evolved == [1]
    assert applier.sink.applied[0][1][0]["_SOURCE_TABLE"] == "shop_7.orders"


def test_a_create_re_plans_and_a_rename_into_the_selection_asks_for_a_copy(routed_applier):
    from replicator.engine.follow.routing import SourcesToCopy

    applier, covered, evolved = routed_applier
    _apply(applier, [_ddl_row("CREATE TABLE shop_8.orders LIKE shop_1.orders", "create",
                                 ["shop_8.orders"])], 0)
    assert evolved == [1] and covered == [["shop_8.orders"]]
    covered.clear()
    batch = [
        _ddl_row("CREATE TABLE shop_9.orders LIKE shop_1.orders", "create", ["shop_9.orders"]),
        _ddl_row("RENAME TABLE tmp.o TO shop_5.orders", "rename", ["tmp.o", "shop_5.orders"], 95),
        _change_row("shop_6.orders", "c", 96, _row(1)),  # first rows of a table made in-run
        _change_row("shop_5.orders", "u", 97, _row(1)),  # the renamed one: needs its copy
    ]
    with pytest.raises(SourcesToCopy) as caught:
        _apply(applier, batch, 1)
    assert caught.value.tables == ("shop_5.orders",) and applier.sink.applied == []
    assert covered == [["shop_9.orders", "shop_6.orders"]]  # they stream from the replay on
    applier.copied_sources.add("shop_5.orders")  # what the runner does after copying it
    _apply(applier, batch, 1)  # the replay: the RENAME is known now
    assert {r["_SOURCE_TABLE"] for _, staged in applier.sink.applied for r in staged} == {
        "shop_6.orders", "shop_5.orders"}


def test_a_table_the_live_catalog_shows_before_its_rename_is_streamed_is_still_copied(
        tmp_path, monkeypatch):
    """Issue 21: the plan is re-built from the LIVE catalog, which is ahead of the binlog
    being applied. A CREATE re-plans while a later RENAME into the selection has already run
    on the server: the renamed table is in the new plan, but it is not covered, so its RENAME
    must still ask for a copy (its rows were written under the old name)."""
    from replicator.engine.apply.applier import BatchApplier
    from replicator.engine.follow.routing import SourcesToCopy
    from replicator.engine.state.checkpoint import CheckpointDir

    pipeline = _pipeline()
    ahead = Catalog((*CATALOG.tables, _orders("shop_3"), _orders("shop_4"), _orders("shop_5")))
    state = {"shop_1.orders", "shop_2.orders"}
    covered: list[list[str]] = []

    def on_new_sources(names: list[str]) -> None:
        covered.append(names)
        state.update(name.lower() for name in names)

    applier = BatchApplier(pipeline, build_plan(pipeline, CATALOG), _RecordingSink(),
                           CheckpointDir(tmp_path), on_new_sources=on_new_sources,
                           covers=lambda name: name.lower() in state)
    applier.replan = lambda new_plan: setattr(applier, "plan", new_plan)
    monkeypatch.setattr("replicator.context.Context.read_catalog", lambda context: ahead)
    _apply(applier, [_ddl_row("CREATE TABLE shop_3.orders LIKE shop_1.orders", "create",
                                 ["shop_3.orders"])], 0)
    assert "shop_5.orders" in applier.plan.tables[0].sources  # the catalog is ahead
    assert covered == [["shop_3.orders"]]  # only the table whose CREATE was seen
    rename = _ddl_row("RENAME TABLE tmp.o TO shop_5.orders", "rename",
                      ["tmp.o", "shop_5.orders"], 95)
    with pytest.raises(SourcesToCopy) as caught:
        _apply(applier, [rename, _change_row("shop_5.orders", "u", 97, _row(1))], 1)
    assert caught.value.tables == ("shop_5.orders",)
    # Rows of a planned but uncovered table with no RENAME before them are a CREATE ...
    # SELECT the reader saw no DDL of: covered from here (no copy at the next start).
    _apply(applier, [_change_row("shop_4.orders", "c", 99, _row(2))], 2)
    assert covered == [["shop_3.orders"], ["shop_4.orders"]]


def test_an_alter_of_a_shard_follows_the_one_table_rules(routed_applier):
    applier, _, evolved = routed_applier
    _apply(applier, [_ddl_row("ALTER TABLE shop_1.orders ADD COLUMN x INT", "alter",
                                 ["shop_1.orders"])], 0)
    assert evolved == [1]
    with pytest.raises(EngineError, match="cannot be followed"):
        _apply(applier, [_ddl_row("ALTER TABLE shop_1.orders DROP COLUMN note", "alter",
                                     ["shop_1.orders"])], 1)


def test_routed_check_lists_the_matched_tables():
    from replicator.source.preflight import table_checks

    (result,) = table_checks(_pipeline(), CATALOG)
    assert result.status == "pass" and "2 tables -> ORDERS" in result.detail
    assert "shop_1.orders" in result.detail and "shop_0" not in result.detail
    (missing,) = table_checks(_pipeline(), Catalog((CATALOG.tables[3],)))
    assert missing.status == "fail" and "no source table matches" in missing.detail
