import pytest

from replicator.model.catalog import MySQLType, MySQLTypeError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bigint(20) unsigned", MySQLType("bigint", length=20, unsigned=True)),
        ("BIGINT UNSIGNED", MySQLType("bigint", unsigned=True)),
        ("decimal(38,10)", MySQLType("decimal", precision=38, scale=10)),
        ("numeric", MySQLType("decimal", precision=10, scale=0)),
        ("datetime(6)", MySQLType("datetime", fsp=6)),
        ("timestamp", MySQLType("timestamp", fsp=0)),
        ("tinyint(1)", MySQLType("tinyint", length=1)),
        ("boolean", MySQLType("tinyint", length=1)),
        ("double precision", MySQLType("double")),
        ("enum('a','it''s','')", MySQLType("enum", values=("a", "it's", ""))),
        ("set('x','y')", MySQLType("set", values=("x", "y"))),
        ("varchar(255)", MySQLType("varchar", length=255)),
        ("bit(1)", MySQLType("bit", length=1)),
        ("json", MySQLType("json")),
        ("longblob", MySQLType("longblob")),
    ],
)
def test_parse(text, expected):
    assert MySQLType.parse(text) == expected


@pytest.mark.parametrize("text", ["", "varchr(10)", "decimal(a,b)", "int int"])
def test_parse_rejects(text):
    with pytest.raises(MySQLTypeError):
        MySQLType.parse(text)


def test_str_round_trips():
    for text in ["decimal(38,10) unsigned", "enum('a','it''s')", "datetime(6)", "varchar(5)"]:
        assert str(MySQLType.parse(text)) == text
