"""Facts shared by the guest's C, the timing plugin and the host, read from
the C headers that define them, so each is written once.

experiments/lib/vmlab_facts.h holds the record tag, the phase-marker magic,
the phase ids and names, and the reclaim counters the guest reports
(TAG, MAGIC, PHASES, RECLAIM_COUNTERS here, read once on first use);
protocol/records.py reads the tagged records built on TAG;
timing/__init__.py reads the model's own facts from timing/model_int.h with
the same reader (defines, integer, xmacro).

The reader knows only what those headers use: `#define NAME VALUE` with a
string or integer literal, and X-macro lists `#define NAME(X) X(a, b) ...`
whose arguments are integers, identifiers or string literals. Anything it
cannot read is a one-line FactsError naming the file and the macro.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

# the guest library's header (the guest programs include it beside vmlab.h)
HEADER = Path(__file__).resolve().parent.parent / "experiments" / "lib" / "vmlab_facts.h"


class FactsError(ValueError):
    pass


_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\([^)]*\))?[ \t]*(.*)$", re.M)
_STRING = r'"[^"\\]*"'   # no escapes: none of the facts needs one
_INT = r"(0[xX][0-9a-fA-F]+|0|[1-9][0-9]*)[uUlL]*"  # hex or decimal (no octal)
_IDENT = r"[A-Za-z_]\w*"
_ENTRY = re.compile(rf"X\(\s*((?:(?:{_STRING}|[^()\"])*))\)")


@functools.cache
def defines(path: Path) -> dict[str, str]:
    """NAME -> the macro's body (comments removed, continuation lines joined)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise FactsError(f"{path}: cannot read the shared facts: {e.strerror}") from None
    text = _COMMENT.sub(" ", text).replace("\\\n", " ")
    return {m.group(1): m.group(3).strip() for m in _DEFINE.finditer(text)}


def _body(path: Path, name: str) -> str:
    d = defines(path)
    if name not in d:
        raise FactsError(f"{path}: expected a #define {name}")
    return d[name]


def _value(tok: str):
    """A literal's value: int, or str for a string literal or an identifier;
    None if it is none of these."""
    if re.fullmatch(_STRING, tok):
        return tok[1:-1]
    if m := re.fullmatch(_INT, tok):
        return int(m.group(1), 0)
    if re.fullmatch(_IDENT, tok):
        return tok
    return None


def integer(path: Path, name: str) -> int:
    body = _body(path, name)
    m = re.fullmatch(_INT, body)
    if not m:
        raise FactsError(f"{path}: #define {name}: expected an integer literal, got {body!r}")
    return int(m.group(1), 0)


def string(path: Path, name: str) -> str:
    body = _body(path, name)
    if not re.fullmatch(_STRING, body):
        raise FactsError(f"{path}: #define {name}: expected a string literal without escapes, got {body!r}")
    return body[1:-1]


def xmacro(path: Path, name: str, arity: int) -> list[tuple]:
    """The entries of `#define NAME(X) X(...) X(...)`, each a tuple of its
    `arity` arguments (int for an integer, str for a string or an identifier)."""
    body = _body(path, name)
    entries = _ENTRY.findall(body)
    if not entries or _ENTRY.sub("", body).strip():
        raise FactsError(f"{path}: #define {name}(X): expected a list of X(...) entries, got {body[:60]!r}")
    out = []
    for e in entries:
        args = [_value(a.strip()) for a in re.findall(rf"\s*(?:{_STRING}|[^,]+)", e)]
        if len(args) != arity or None in args:
            raise FactsError(f"{path}: #define {name}(X): expected {arity} literal argument(s) in X({e})")
        out.append(tuple(args))
    return out


@dataclass(frozen=True)
class Facts:
    tag: str                          # a record's console line starts here
    magic: int                        # phase marker: rax = magic << 8 | op
    phases: MappingProxyType          # phase id -> name
    reclaim_counters: tuple[str, ...]  # /proc/vmstat counters every reproducer reports per phase


@functools.cache
def load(path: Path = HEADER) -> Facts:
    tag, magic = string(path, "VMLAB_TAG"), integer(path, "VMLAB_PHASE_MAGIC")
    phases = {}
    for pid, _sym, pname in xmacro(path, "VMLAB_PHASES", 3):
        if not isinstance(pid, int) or pid in phases or pname in phases.values():
            raise FactsError(f"{path}: VMLAB_PHASES: expected unique integer ids and names, got X({pid}, {pname})")
        phases[pid] = pname
    counters = tuple(c for (c,) in xmacro(path, "VMLAB_RECLAIM_COUNTERS", 1))
    return Facts(tag, magic, MappingProxyType(phases), counters)


def phase_id(name: str) -> int:
    """The id of a phase by its name ("latprobe.chase")."""
    for pid, n in load().phases.items():
        if n == name:
            return pid
    raise FactsError(f"{HEADER}: VMLAB_PHASES: no phase named {name!r}")


_ATTRS = {"TAG": "tag", "MAGIC": "magic", "PHASES": "phases", "RECLAIM_COUNTERS": "reclaim_counters"}


def __getattr__(name: str):
    # TAG, MAGIC, PHASES, RECLAIM_COUNTERS: read from the header on first use
    if name in _ATTRS:
        return getattr(load(), _ATTRS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
