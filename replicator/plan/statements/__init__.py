"""One function per statement the sinks run, rendered for one dialect.

Templates, with every identifier through ``identifiers.quote_identifier`` and every value a
bind parameter (``dialect.parameter``): no value ever enters SQL text. The only literals are
replicator's own constants ('d' for a delete, TRUE/FALSE for the soft-delete flag).

One module per statement family, each importing only those below it:

- ``names``: qualified table names, the state tables' column-name policy, MERGE aliases;
- ``tables``: CREATE of the target, log and staging tables, the PRIMARY KEY and its rebuild;
- ``loading``: loading staging from Parquet files, a stage or the transform's query;
- ``ddl``: what follows the source's DDL (ADD/ALTER/RENAME/DROP COLUMN, TRUNCATE);
- ``bookkeeping``: the state, dead-letter and lease tables;
- ``merging``: a merged table's MERGE, the INSERT of a copy into an empty target, a
  re-copy's closing DELETE;
- ``history``: changelog appends and scd2 versions;
- ``batch``: what one batch runs, per table mode.
"""
