"""Guest-to-host records: one tagged JSON object per console line.

The guest writes `@@VMLAB {"type": ..., ...}`. Kernel messages may share the
serial line, so the tag is searched anywhere in a line; everything that is
not a record stays in the log and is ignored here. A malformed record is
reported with its line number and never stops the ingest.

The protocol between guest and host, beside the facts it uses
(protocol/facts.py), below every stage: the engine (engine/qemu.py)
reads records as the guest writes them, the results stage stores them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from protocol import facts

TAG = facts.TAG  # experiments/lib/vmlab_facts.h (VMLAB_TAG)


@dataclass
class Record:
    lineno: int
    type: str
    body: dict
    host_s: float | None = None  # host seconds since QEMU started, when the record arrived


@dataclass
class Parsed:
    records: list[Record] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # "line N: why"

    def of(self, typ: str) -> list[Record]:
        return [r for r in self.records if r.type == typ]

    def first(self, typ: str) -> Record | None:
        for r in self.records:
            if r.type == typ:
                return r
        return None


def parse_line(line: str, lineno: int, out: Parsed) -> None:
    at = line.find(TAG)
    if at < 0:
        return
    payload = line[at + len(TAG):].strip()
    try:
        body = json.loads(payload)
    except json.JSONDecodeError as e:
        out.errors.append(f"line {lineno}: malformed record ({e.msg} at column {e.colno})")
        return
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        out.errors.append(f"line {lineno}: record without a string 'type'")
        return
    out.records.append(Record(lineno, body["type"], body))


def parse_text(text: str) -> Parsed:
    out = Parsed()
    for n, line in enumerate(text.splitlines(), 1):
        parse_line(line.replace("\r", ""), n, out)
    return out


def parse_bytes(data: bytes) -> Parsed:
    # A serial line can carry stray bytes (an interrupted escape sequence);
    # they must not cost the records around them.
    return parse_text(data.decode("utf-8", errors="replace"))
