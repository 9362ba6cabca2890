"""The workload stage's one error: every experiments module raises it, so it
lives apart from them (a leaf: none needs another to raise it)."""
from __future__ import annotations


class ExperimentError(ValueError):
    pass
