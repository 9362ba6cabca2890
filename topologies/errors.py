"""The machine stage's one error: every topologies module raises it (core.py
is handed it), so it lives apart from the loader they serve."""
from __future__ import annotations


class TopologyError(ValueError):
    """One line: which file, which field, what was expected."""

    def __init__(self, path, field_name: str, expected: str):
        self.path, self.field_name, self.expected = str(path), field_name, expected
        super().__init__(f"{path}: field '{field_name}': {expected}")
