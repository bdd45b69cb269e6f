"""``pytest --update-golden`` (or ``UPDATE_GOLDEN=1 pytest``) rewrites the golden SQL files
from the plans; the option itself is declared in ``tests/conftest.py`` so it works from the
repository root. Review the diff before committing it."""

import os

import pytest


@pytest.fixture()
def update_golden(request) -> bool:
    try:
        flag = request.config.getoption("--update-golden")
    except ValueError:
        flag = False
    return bool(flag) or os.environ.get("UPDATE_GOLDEN") == "1"
