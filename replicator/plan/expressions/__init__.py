"""Computed columns and row filters: Spark SQL expressions over a row's source columns,
parsed and type-checked as Spark 4's analyzer does. Nothing here evaluates them: the engine
does (``plan.transpile`` writes the DuckDB SQL the transform step runs, and DuckDB folds
constant parts itself; issue 17).

The subset, its types and its errors are Spark's (ANSI mode); a differential test
(tests/integration/test_transforms_spark_differential.py) runs every supported function
against a real Spark session. One module per concern, each importing only those above it:

- ``errors``: the supported subset, a check's failure and a row's (raised by the engine);
- ``spark_types``: Spark types, a checked node (``Typed``), Spark's decimal rules;
- ``casts``: which CASTs Spark allows, and the date and timestamp text of a literal;
- ``parsing``: the sqlglot tree of an expression and the offsets errors report;
- ``java_patterns``: checks of LIKE patterns, Java regexes and replacements, datetime patterns;
- ``operators``: the checker's core (leaves, operators, CASE, CAST, argument checks);
- ``string_functions``, ``numeric_functions``, ``date_functions``: the function families;
- ``checker``: the dispatch and the entry points (``check_expression``, ``check_filter``).
"""
