"""Shared test settings. Fixtures for the throwaway MariaDB and Spark live in
``tests/integration/conftest.py``; unit tests need neither."""

import os

# Tests must not depend on the developer's terminal.
os.environ.setdefault("NO_COLOR", "1")
