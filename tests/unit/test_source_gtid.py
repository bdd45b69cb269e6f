"""GTID states and host lists, without a server (the failover itself: test_failover_gtid)."""

from __future__ import annotations

import pytest

from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import candidates, several_hosts
from replicator.source.gtid import behind_domains, parse_state, same_state


def test_a_state_is_per_domain_and_order_free():
    assert parse_state("0-1-100, 2-5-7") == {0: (1, 100), 2: (5, 7)}
    assert same_state("2-5-7,0-1-100", "0-1-100,2-5-7")
    assert not same_state("0-1-100", "0-2-100")  # another server's transaction 100


def test_behind_names_the_gtids_the_server_has_not_reached():
    assert behind_domains("0-1-100,1-1-5", "0-2-101,1-1-4") == ["1-1-5"]
    assert behind_domains("0-1-100,3-1-1", "0-1-100") == ["3-1-1"]
    assert behind_domains("0-1-100", "0-1-100") == []


def test_a_malformed_state_is_a_clear_error():
    with pytest.raises(SourceError) as error:
        parse_state("0-1")
    assert "domain-server-sequence" in (error.value.hint or "")


def test_offsets_carry_the_gtid_only_when_known_and_it_does_not_change_equality():
    plain = BinlogPosition("mysql-bin.000002", 4)
    assert plain.to_offset() == {"file": "mysql-bin.000002", "pos": 4}
    with_gtid = BinlogPosition.from_offset({"file": "mysql-bin.000002", "pos": 4, "gtid": "0-1-9"})
    assert with_gtid.gtid == "0-1-9" and with_gtid == plain
    assert BinlogPosition.from_offset(with_gtid.to_offset()).gtid == "0-1-9"


def test_host_lists_give_one_source_per_host_with_the_default_port():
    source = MySQLSource(host="db1:3307, db2", port=3306)
    assert several_hosts(source) and not several_hosts(MySQLSource(host="db1"))
    assert [(s.host, s.port) for s in candidates(source)] == [("db1", 3307), ("db2", 3306)]
    with pytest.raises(SourceError, match="not a host"):
        candidates(MySQLSource(host="db1:x,db2"))
