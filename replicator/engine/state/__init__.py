"""The run's state: the checkpoint directory (start position, batch ids, copies), the
pipeline's lease in the target, and what a run tells ``replicator status``."""
