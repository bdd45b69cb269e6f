"""Shared test settings.

Fixtures that start real components live in ``tests/fixtures/``: the throwaway MariaDB
(``mariadb.py``) and the local Spark session (``spark.py``). Unit tests use neither.
"""

import importlib.util
import os

# Tests must not depend on the developer's terminal.
os.environ.setdefault("NO_COLOR", "1")

pytest_plugins = [
    name
    for name in ("tests.fixtures.mariadb", "tests.fixtures.spark", "tests.fixtures.spark_cluster")
    if importlib.util.find_spec(name) is not None
]


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/<pipeline>/<dialect>/<table>.sql from the current plans",
    )
