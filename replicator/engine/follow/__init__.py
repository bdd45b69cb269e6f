"""Schema-change following: what a DDL means for the pipeline, and how it reaches the target
(in a micro-batch, for routed tables, or written while no run followed it)."""
