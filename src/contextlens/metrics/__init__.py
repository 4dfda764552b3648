"""The metrics: one core scorer per module, registered by name (see
:mod:`contextlens.metrics.registry`), with its prompts in ``prompts/``."""
