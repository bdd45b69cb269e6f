"""Loading YAML: positions of every node, duplicate keys, YAML 1.1 booleans, interpolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.config.loader import Position, load_document
from replicator.errors import UsageError


def load(text: str, environ: dict[str, str] | None = None, tmp: Path | None = None):
    return load_document("p.yaml", environ=environ or {}, content=text.encode())


def test_positions_of_keys_and_values() -> None:
    doc = load("version: 1\ntables:\n  - source: shop.trips\n    key: [a, b]\n")
    assert doc.values[("version",)] == Position(1, 10)
    assert doc.keys[("tables",)] == Position(2, 1)
    assert doc.values[("tables", 0)] == Position(3, 5)
    assert doc.keys[("tables", 0, "source")] == Position(3, 5)
    assert doc.values[("tables", 0, "source")] == Position(3, 13)
    assert doc.values[("tables", 0, "key", 1)] == Position(4, 14)
    # an unknown path falls back to its nearest ancestor
    assert doc.position(("tables", 0, "key", 7)) == Position(4, 10)


def test_duplicate_key_names_both_positions() -> None:
    doc = load("a: 1\nb: 2\na: 3\n")
    [diagnostic] = doc.diagnostics
    assert (diagnostic.code, diagnostic.line, diagnostic.col) == ("R005", 3, 1)
    assert "line 1, column 1" in diagnostic.message
    assert doc.data == {"a": 1, "b": 2}  # the first one is kept; the second is reported


def test_yaml11_boolean_value_is_remembered_and_keys_stay_text() -> None:
    doc = load("password: yes\ncolumns:\n  on: {}\n  'off': {}\nflag: true\n")
    assert doc.data["password"] is True  # what every YAML 1.1 reader sees
    assert doc.yaml11_booleans == {("password",): "yes"}  # true is not flagged
    assert set(doc.data["columns"]) == {"on", "off"}
    warning = [d for d in doc.diagnostics if d.code == "R006"]
    assert [(d.line, d.col, d.severity) for d in warning] == [(3, 3, "warning")]


def test_plain_interpolated_scalars_are_read_as_yaml_quoted_ones_stay_text() -> None:
    doc = load(
        'port: ${PORT:-3306}\nquoted: "${PORT:-3306}"\npassword: ${PW}\nratio: ${R}\nflag: ${F}\n',
        {"PW": "yes", "R": "0.5", "F": "false"},
    )
    assert doc.data == {"port": 3306, "quoted": "3306", "password": "yes", "ratio": 0.5,
                        "flag": False}
    assert doc.interpolated == {("port",), ("quoted",), ("password",), ("ratio",), ("flag",)}
    assert doc.diagnostics == []


def test_reference_errors_point_at_the_reference() -> None:
    doc = load('a: x ${NOPE}\nb: "  ${ALSO}"\nc: |\n  ${THIRD}\n')
    assert [(d.code, d.line, d.col) for d in doc.diagnostics] == [
        ("R010", 1, 6), ("R010", 2, 7), ("R010", 3, 4)]  # block scalar: its start


def test_merge_keys_are_supported() -> None:
    doc = load("base: &b {host: h, port: 1}\nsrc:\n  <<: *b\n  port: 2\n")
    assert doc.data["src"] == {"host": "h", "port": 2}


def test_timestamps_stay_text() -> None:
    assert load("start: 2024-01-02\n").data == {"start": "2024-01-02"}


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"", "R002"),
        (b"   \n\n", "R002"),
        (b"# only a comment\n", "R002"),
        (b"\xff\xfeh\x00i\x00", "R001"),  # UTF-16
        (b"name: caf\xe9\n", "R001"),  # Latin-1
        (b"\x00\x01\x02binary", "R001"),
        (b"a: [1, 2\n", "R003"),
        (b"a: 'unclosed\n", "R003"),
        (b"--- a\n--- b\n", "R003"),  # two documents
        (b"[1, 2]\n", "R004"),
        (b"just text\n", "R004"),
        (b"? [a, b]\n: 1\n", "R003"),  # a key that is a list
    ],
)
def test_bad_content_is_a_diagnostic_not_an_exception(content: bytes, code: str) -> None:
    doc = load_document("p.yaml", environ={}, content=content)
    assert doc.data is None or code == "R003"
    assert code in {d.code for d in doc.diagnostics}


def test_latin1_byte_position() -> None:
    doc = load_document("p.yaml", content=b"a: 1\nname: caf\xe9\n")
    [diagnostic] = doc.diagnostics
    assert (diagnostic.line, diagnostic.col) == (2, 10)


def test_utf8_bom_is_accepted() -> None:
    doc = load_document("p.yaml", content="\ufeffa: 1\n".encode())
    assert doc.data == {"a": 1} and doc.diagnostics == []


def test_missing_file_and_directory_raise_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as missing:
        load_document(tmp_path / "nope.yaml")
    assert missing.value.exit_code == 2
    with pytest.raises(UsageError):
        load_document(tmp_path)
