"""``pytest tests/golden --update-golden`` rewrites the golden SQL files from the plans.

(``UPDATE_GOLDEN=1 pytest ...`` does the same from any directory: pytest only reads this
option when tests/golden is on the command line.)
"""

import os

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/<pipeline>/<dialect>/<table>.sql from the current plans",
    )


@pytest.fixture()
def update_golden(request) -> bool:
    try:
        flag = request.config.getoption("--update-golden")
    except ValueError:
        flag = False
    return bool(flag) or os.environ.get("UPDATE_GOLDEN") == "1"
