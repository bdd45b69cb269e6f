"""``python -m bench.fakesnow_run run PIPELINE.yaml ...``: the replicator CLI against fakesnow.

fakesnow replaces ``snowflake.connector.connect`` in the process that calls it; the Snowflake
sink runs in the driver process, so patching the driver is enough (Spark's Python workers
only read the binlog). ``BENCH_FAKESNOW_DB`` keeps the fake warehouse in a directory.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    import fakesnow

    from replicator.cli.main import main as replicator_main

    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True,
                        db_path=os.environ.get("BENCH_FAKESNOW_DB") or None):
        sys.argv = ["replicator", *sys.argv[1:]]
        replicator_main()


if __name__ == "__main__":
    main()
