"""What a planned run of a study should cost this host: the mean wall time of
the study's ok runs of its kind (its axes but the repeat: machine, kernel,
flavor, disk, parameters, block), else of its block's, else unknown.

A study given a stop time (`--stop-by`) starts only the runs that should end
before it, so a campaign on a host it has for a while (a session, a batch
reservation) ends by itself with nothing cut short: a run stopped half-way
is lost whole. Runs of one block can differ by an order of magnitude (000 on
gs1280-8: vanilla minutes, the period set's storm an hour), so a kind's own
pace comes first."""
from __future__ import annotations

import json
import sqlite3
import statistics
import time
from datetime import datetime, timedelta


def kind(axes: dict) -> str:
    return json.dumps({k: v for k, v in axes.items() if k != "repeat"}, sort_keys=True)


class Pace:
    def __init__(self) -> None:
        self.by_kind: dict[str, list[float]] = {}
        self.by_block: dict[str, list[float]] = {}

    def add(self, axes: dict, wall_s: float | None) -> None:
        if not wall_s:  # a run without a wall time says nothing of the pace
            return
        self.by_kind.setdefault(kind(axes), []).append(wall_s)
        if "block" in axes:
            self.by_block.setdefault(str(axes["block"]), []).append(wall_s)

    def expected(self, axes: dict) -> tuple[float | None, str]:
        """(seconds, whose pace: "its kind's" / "its block's"), or (None, "")."""
        if walls := self.by_kind.get(kind(axes)):
            return statistics.mean(walls), "its kind's"
        if walls := self.by_block.get(str(axes.get("block"))):
            return statistics.mean(walls), "its block's"
        return None, ""

    @classmethod
    def of_study(cls, con: sqlite3.Connection, sid: int) -> Pace:
        p = cls()
        for axes, wall in con.execute("SELECT s.axes_json, r.wall_s FROM study_runs s JOIN runs r ON r.id = s.run_id "
                                      "WHERE s.study_id = ? AND r.status = 'ok'", (sid,)):
            p.add(json.loads(axes), wall)
        return p


def parse_stop(text: str, now: datetime | None = None) -> float:
    """A stop time as epoch seconds: HH:MM (the next one, local time), an ISO
    date and time, or +DURATION (+90m, +2h, +1h30m). ValueError says what was expected."""
    now = now or datetime.now().astimezone()
    t = text.strip()
    if t.startswith("+"):
        rest, total, num = t[1:], 0.0, ""
        for ch in rest:
            if ch.isdigit():
                num += ch
            elif ch in "hms" and num:
                total += int(num) * {"h": 3600, "m": 60, "s": 1}[ch]
                num = ""
            else:
                num = "x"
                break
        if num or not rest or total <= 0:
            raise ValueError(f"expected HH:MM, an ISO date and time, or +DURATION such as +90m or +1h30m, got {text!r}")
        return now.timestamp() + total
    try:
        hm = datetime.strptime(t, "%H:%M")
    except ValueError:
        try:
            at = datetime.fromisoformat(t)
        except ValueError:
            raise ValueError(f"expected HH:MM, an ISO date and time, or +DURATION such as +90m or +1h30m, "
                             f"got {text!r}") from None
        return (at if at.tzinfo else at.astimezone()).timestamp()
    at = now.replace(hour=hm.hour, minute=hm.minute, second=0, microsecond=0)
    if at <= now:
        at += timedelta(days=1)  # 01:00 said at 23:00 is tonight's
    return at.timestamp()


def clock(epoch: float) -> str:
    return time.strftime("%H:%M", time.localtime(epoch))
