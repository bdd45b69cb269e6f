"""The fast binlog decoding path (issue 11): the same ``ChangeEvent``s as
``source.binlog.read_changes``, decoded ~10x faster.

- ``reader.read_changes_fast`` — same signature as ``read_changes``; our own event loop over
  the raw replication packets (``stream``), Table_maps cached by their bytes (``tablemap``),
  row decoders generated per table map (``codec``, ``cells``), the library for whatever the
  fast path does not decode (``library``), counted (``counters``);
- ``columnar.read_change_batches`` — the same rows as Arrow change batches: with the compiled
  row decoder (``native``, ``compiled.pyx``) when it is built, else the generated Python
  decoders, which stay its reference (``REPLICATOR_DECODER=python`` forces them);
- ``measure`` — the rows/s of the library, ``read_changes`` and this path on one workload.

Like ``source.binlog``, this package imports pymysqlreplication and pymysql (lazily, in the
functions that read).
"""

from __future__ import annotations

from replicator.source.fast.counters import FastDecodeCounters
from replicator.source.fast.reader import read_changes_fast

read_changes = read_changes_fast  # the name bench/ looks for

__all__ = ["FastDecodeCounters", "read_changes", "read_changes_fast"]
