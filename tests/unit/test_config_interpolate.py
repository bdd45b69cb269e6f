"""``${VAR}`` interpolation: every form, nested defaults, ``$$``, and where errors point."""

from __future__ import annotations

import pytest

from replicator.config.interpolate import interpolate

ENV = {"HOST": "db.internal", "EMPTY": "", "PORT": "3307"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("${HOST}", "db.internal"),
        ("mysql://${HOST}:${PORT}/shop", "mysql://db.internal:3307/shop"),
        ("${MISSING:-127.0.0.1}", "127.0.0.1"),
        ("${EMPTY:-fallback}", "fallback"),  # :- also replaces an empty value
        ("${EMPTY-fallback}", ""),  # - replaces only an unset one
        ("${MISSING-fallback}", "fallback"),
        ("${HOST:-unused}", "db.internal"),
        ("${MISSING:-${HOST}}", "db.internal"),  # nested default
        ("${MISSING:-${ALSO_MISSING:-deep}}", "deep"),
        ("${MISSING:-}", ""),
        ("${HOST:?must be set}", "db.internal"),
        ("price $$5", "price $5"),
        ("$${HOST}", "${HOST}"),  # escaped: not a reference
        ("a $ alone and $HOST stay", "a $ alone and $HOST stay"),
        ("no references", "no references"),
    ],
)
def test_forms(text: str, value: str) -> None:
    result = interpolate(text, ENV)
    assert result.problems == []
    assert result.value == value


def test_reference_count_tells_literal_from_interpolated() -> None:
    assert interpolate("hunter2", ENV).references == 0
    assert interpolate("${HOST}", ENV).references == 1
    assert interpolate("$${HOST}", ENV).references == 0


def test_unset_variable_is_an_error_with_its_offset_and_a_hint() -> None:
    result = interpolate("host=${NOPE}", ENV)
    [problem] = result.problems
    assert problem.code == "R010"
    assert problem.offset == 5
    assert "NOPE" in problem.message
    assert problem.hint is not None and "${NOPE:-" in problem.hint


def test_set_but_empty_is_fine_for_plain_reference() -> None:
    assert interpolate("${EMPTY}", ENV).problems == []


@pytest.mark.parametrize("text", ["${MISSING:?set it to the host}", "${EMPTY:?set it to the host}"])
def test_required_variable_carries_the_users_message(text: str) -> None:
    [problem] = interpolate(text, ENV).problems
    assert problem.code == "R011"
    assert "set it to the host" in problem.message


def test_question_without_colon_accepts_empty() -> None:
    assert interpolate("${EMPTY?needed}", ENV).problems == []
    assert interpolate("${MISSING?needed}", ENV).problems[0].code == "R011"


def test_error_inside_a_nested_default_points_inside_it() -> None:
    text = "${A:-${B}}"
    [problem] = interpolate(text, ENV).problems
    assert problem.code == "R010"
    assert text[problem.offset :].startswith("${B}")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("${HOST", "unclosed"), ("${1ABC}", "variable name"), ("${}", "variable name"),
     ("${HOST:+x}", "unexpected")],
)
def test_malformed_references(text: str, fragment: str) -> None:
    [problem] = interpolate(text, ENV).problems
    assert problem.code == "R012"
    assert fragment in problem.message


def test_every_problem_is_collected() -> None:
    result = interpolate("${A}/${B}/${C:?c please}", {})
    assert [p.code for p in result.problems] == ["R010", "R010", "R011"]
