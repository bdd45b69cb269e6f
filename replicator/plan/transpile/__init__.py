"""Spark SQL -> DuckDB SQL: filters and computed columns as the transform step runs them.

The user writes Spark SQL (one dialect for ``filter:`` and ``expression:``); ``plan.expressions``
parses and type-checks it (Spark 4's analyzer types, ANSI mode). This package writes the same
expression as a DuckDB expression that gives Spark's value in Spark's type on every row, so the
transform step (``transform.stage``) evaluates it vectorized inside its one statement:

- every node is CAST to the DuckDB type of its Spark type (decimal results keep Spark's
  precision and scale; Spark's HALF_UP rounding is DuckDB's half-away-from-zero);
- where Spark (ANSI) fails and DuckDB would not, the SQL calls ``error('[ERROR_CLASS] ...')``
  in the branch Spark fails in (division by zero, invalid casts); DuckDB raises on integer
  and decimal overflow by itself;
- a construct with no exact DuckDB form raises ``Untranslatable``: ``validate`` and ``plan``
  refuse it (R241), so what runs is what the differential test
  (tests/integration/test_transforms_spark_differential.py) proves equal to Spark.

Literals the user wrote are part of the expression and rendered as SQL literals; row values
never enter SQL text. Nothing is folded here: ``1 + 1`` is written as DuckDB's sum of two
literals, which DuckDB folds when it runs (a constant's error, such as an overflow or an
invalid CAST, is its run-time error, raised as Spark's). One module per concern, each importing only those above it:

- ``errors``: ``Untranslatable``;
- ``base``: what both dialects share (the dispatch over node types, comparisons, CASE,
  TRIM, the conditional functions, mod/pmod, the date parts), each dialect a subclass giving
  its types, literals, casts and the hooks where its SQL differs;
- ``values``: the value forms both dialects write alike (literals, re-typing casts, a
  value's text, the guarded CAST), given a dialect's type names and escapes;
- ``casts``: DuckDB types, literals, Spark's CAST as DuckDB SQL;
- ``operators``: the DuckDB dialect (its data and hooks, arithmetic, argument forms);
- ``string_functions``, ``numeric_functions``, ``date_functions``: the DuckDB function families;
- ``translator``: the DuckDB translator and the entry points (``translate``, ``result_type``,
  ``describe_transforms``);
- ``snowflake_casts`` and ``snowflake``: the same typed tree as Snowflake SQL, for the
  external-stage path (``plan.statements.stage_expressions``; docs/decisions/
  snowflake-expressions.md).
"""
