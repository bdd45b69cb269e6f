"""Every supported function, called with the wrong number of arguments (none included), is a
clear ``ExpressionError`` or ``Untranslatable`` naming the problem, never a traceback from
inside the checker: `ceil()`, `floor()` and `initcap()` raised AttributeError once."""

from __future__ import annotations

import pytest

from replicator.plan.expressions.checker import FUNCTIONS, check_expression
from replicator.plan.expressions.errors import ExpressionError
from replicator.plan.expressions.spark_types import BIGINT, DATE, STRING
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.translator import translate

# Functions the parser knows as nodes of their own, besides FUNCTIONS' anonymous ones.
NAMES = sorted(set(FUNCTIONS) | {"ceil", "floor", "initcap", "substring", "substr", "trim",
                                 "ltrim", "rtrim", "upper", "lower", "coalesce", "if", "nullif",
                                 "round", "abs", "concat", "length", "left", "right"})
TYPES = {"s": STRING, "n": BIGINT, "d": DATE}


@pytest.mark.parametrize("name", NAMES)
def test_a_function_with_any_number_of_arguments_is_checked_or_refused_clearly(name: str) -> None:
    for args in ("", "s", "n", "s, n", "d, n, s", "n, n, n, n"):
        text = f"{name}({args})"
        for types in (None, TYPES):
            try:
                check_expression(text, types)
                if types is not None:
                    translate(text, types)
            except (ExpressionError, Untranslatable) as exc:
                assert str(exc).strip(), text  # a message the user can read
