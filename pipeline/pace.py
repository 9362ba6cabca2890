"""What a planned run of a study should cost this host: the mean wall time of
the study's ok runs of its kind (its axes but the repeat: machine, kernel,
flavor, disk, parameters, block), else of its block's, else the slowest
kind's so far, else unknown.

A study given a stop time (`--stop-by`) starts only the runs that should end
before it, so a campaign on a host it has for a while (a session, a batch
reservation) ends by itself with nothing cut short: a run stopped half-way
is lost whole. Runs of one block can differ by an order of magnitude (000 on
gs1280-8: vanilla minutes, the period set's storm an hour), so a kind's own
pace comes first."""
from __future__ import annotations

import json
import re
import sqlite3
import statistics
import time
from datetime import datetime, time as dtime, timedelta


def kind(axes: dict) -> str:
    return json.dumps({k: v for k, v in axes.items() if k != "repeat"}, sort_keys=True)


class Pace:
    """Wall times of a study's ok runs by kind and by block, this host's
    apart: another host's (a run merged from an archive) may be faster or
    slower, so it counts only where this host has none. A run's wall time is
    its own (restore, guest, its records), not an image build or a first
    snapshot it waited for."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host
        self.walls: dict[tuple[str, str, bool], list[float]] = {}  # (by, what, this host's) -> walls

    def add(self, axes: dict, wall_s: float | None, host: str | None = None) -> None:
        if not wall_s:  # a run without a wall time says nothing of the pace
            return
        here = self.host is None or host == self.host
        self.walls.setdefault(("kind", kind(axes), here), []).append(wall_s)
        if "block" in axes:
            self.walls.setdefault(("block", str(axes["block"]), here), []).append(wall_s)

    def expected(self, axes: dict) -> tuple[float | None, str]:
        """(seconds, whose pace: "its kind's runs" or "its block's runs", either
        "on other hosts", or the slowest kind's when it has neither), or (None, "")
        when the study has no ok run with a wall time."""
        for by, what in (("kind", kind(axes)), ("block", str(axes.get("block")))):
            for here in (True, False):
                if walls := self.walls.get((by, what, here)):
                    return statistics.mean(walls), f"its {by}'s runs" + ("" if here else " on other hosts")
        # none of its kind or block yet: the slowest kind so far, not nothing (a block of hour-long runs
        # started minutes before the stop would be cut short)
        for here in (True, False):
            means = [statistics.mean(w) for (by, _, h), w in self.walls.items() if by == "kind" and h == here]
            if means:
                return max(means), "the slowest kind's runs (none of its own yet)"
        return None, ""

    @classmethod
    def of_study(cls, con: sqlite3.Connection, sid: int, host: str | None = None) -> Pace:
        p = cls(host)
        for axes, wall, h in con.execute("SELECT s.axes_json, r.wall_s, r.host FROM study_runs s "
                                         "JOIN runs r ON r.id = s.run_id WHERE s.study_id = ? AND r.status = 'ok'",
                                         (sid,)):
            p.add(json.loads(axes), wall, h)
        return p


EXPECTED = "expected HH:MM, an ISO date and time, or +DURATION such as +90m or +1h30m"


def parse_stop(text: str, now: datetime | None = None) -> float:
    """A stop time as epoch seconds: HH:MM (the next one, local time), an ISO
    date and time (local unless it names its offset), or +DURATION (+90m,
    +2h, +1h30m). now: naive local time (tests). ValueError says what was
    expected, or that the time is already past."""
    now = now or datetime.now()
    t = text.strip()
    if m := re.fullmatch(r"\+(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", t):
        total = sum(int(x or 0) * k for x, k in zip(m.groups(), (3600, 60, 1)))
        if total <= 0:
            raise ValueError(f"{EXPECTED}, got {text!r}")
        return now.timestamp() + total
    if m := re.fullmatch(r"(\d{1,2}):(\d{2})", t):
        h, mi = int(m[1]), int(m[2])
        if h > 23 or mi > 59:
            raise ValueError(f"{EXPECTED}, got {text!r}")
        at = datetime.combine(now.date(), dtime(h, mi))  # naive local: the zone's own rules (DST) apply
        if at <= now:
            at = datetime.combine(now.date() + timedelta(days=1), dtime(h, mi))  # 01:00 said at 23:00 is tonight's
        return at.timestamp()
    try:
        at = datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(f"{EXPECTED}, got {text!r}") from None
    if "T" not in t and " " not in t:
        raise ValueError(f"{EXPECTED} (a date alone is not a time), got {text!r}")
    stamp = at.timestamp()  # naive: local time
    if stamp <= now.timestamp():
        raise ValueError(f"{text!r} is already past (now {now:%Y-%m-%d %H:%M})")
    return stamp


def when(epoch: float) -> str:
    """A stop time as the user should see it once resolved: date, time and zone."""
    return time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(epoch))


def clock(epoch: float) -> str:
    return time.strftime("%H:%M", time.localtime(epoch))
