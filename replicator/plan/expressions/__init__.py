"""Computed columns and row filters: Spark SQL expressions over a row's source columns,
type-checked as Spark 4's analyzer does and compiled to Python closures.

The subset, its types and its errors are Spark's (ANSI mode); a differential test
(tests/integration/test_transforms_spark_differential.py) runs every supported function
against a real Spark session. One module per concern, each importing only those above it:

- ``errors``: the supported subset and its two failures (compile time, row time);
- ``spark_types``: Spark types and values, a compiled node, Spark's decimal rules;
- ``casts``: CAST between Spark types, with Spark's errors;
- ``parsing``: the sqlglot tree of an expression and the offsets errors report;
- ``java_patterns``: LIKE, Java regex and replacement, datetime patterns;
- ``operators``: the compiler's core (leaves, operators, CASE, CAST, argument checks);
- ``string_functions``, ``numeric_functions``, ``date_functions``: the function families;
- ``compiler``: the dispatch and the entry points (``compile_expression``,
  ``check_expression``, ``compile_filter``).
"""
