"""The quickstart's demo: a schema with awkward values, a workload, a source-vs-target check.

Also used by the end-to-end tests, so the quickstart shows exactly what the tests prove.
"""
