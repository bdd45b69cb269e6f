"""``replicator verify``: prove the target holds what the source holds, key by key.

``verify_pipeline(pipeline, *, tables=None, wait_s=0.0) -> VerifyReport`` compares row
counts and rows per primary-key range through the pipeline's mapping (renames, excluded and
masked columns, row filter, soft deletes, type mapping) and lists every differing key.
"""

from replicator.verify.compare import SEGMENT_ROWS, verify_pipeline
from replicator.verify.report import ColumnDifference, KeyDifference, Lag, TableReport, VerifyReport
from replicator.verify.target_side import VerifyError

__all__ = [
    "SEGMENT_ROWS",
    "ColumnDifference",
    "KeyDifference",
    "Lag",
    "TableReport",
    "VerifyError",
    "VerifyReport",
    "verify_pipeline",
]
