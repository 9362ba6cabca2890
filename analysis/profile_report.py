"""The profile's part of the HTML report and of comparisons
(analysis/profile.py holds the profile itself): per run its top symbols and
a flame graph of its sampled kernel call paths (or, on a run without them,
of its symbols under their DSOs), and between runs the symbols whose share
of CPU time moved most."""
from __future__ import annotations

from html import escape as e
from pathlib import Path

from analysis import profile
from analysis.flamegraph import flamegraph_svg
from analysis.kit import text_table


# --- comparisons -----------------------------------------------------------------------------
def shares(con, run_id: int) -> dict[tuple[str, str], float]:
    """(symbol, dso) -> % of the run's CPU time (all CPUs and phases), with
    [idle] and [drift]; {} without a profile."""
    if not profile.present(con):
        return {}
    tot = profile.totals(con, profile.Selection(run_id, None, None, ""))
    if not tot["total"]:
        return {}
    out = {(r[0], r[1]): 100.0 * r[2] / tot["total"] for r in con.execute(
        "SELECT symbol, dso, SUM(time_ps) FROM profile_symbols WHERE run_id = ? GROUP BY symbol, dso", (run_id,))}
    out[("[idle]", "-")] = 100.0 * tot["idle"] / tot["total"]
    out[("[drift]", "-")] = 100.0 * tot["drift"] / tot["total"]
    return out


def moved(con, run_ids: list[int], top: int = 10) -> list[tuple[str, str, list[float]]]:
    """The top symbols by the largest absolute change of their share of CPU
    time against the first run: (symbol, dso, [its share in each run]); []
    unless every run has a profile."""
    each = [shares(con, r) for r in run_ids]
    if len(each) < 2 or not all(each):
        return []
    vals = {k: [s.get(k, 0.0) for s in each] for k in set().union(*each)}
    change = {k: max(abs(x - v[0]) for x in v[1:]) for k, v in vals.items()}
    ranked = sorted((k for k in vals if change[k] >= 0.005), key=lambda k: (-change[k], k))  # visible at 0.01
    return [(k[0], k[1], vals[k]) for k in ranked[:top]]


def _run_label(r) -> str:
    return f"{r['patch_set']} (run {r['id']})"


def moved_lines(con, runs, top: int = 10) -> list[str]:
    """moved() as `./run.py compare`'s section (runs: their rows, the first
    the baseline); [] unless every run has a profile."""
    rows = moved(con, [r["id"] for r in runs], top)
    if not rows:
        return []
    head = ["symbol", "dso"] + [x for i, r in enumerate(runs) for x in [_run_label(r)] + (["change"] if i else [])]
    table = [[s, d] + [x for i, v in enumerate(vals) for x in [f"{v:.2f}%"] + ([f"{v - vals[0]:+.2f} pp"] if i else [])]
             for s, d, vals in rows]
    return ["", f"symbols whose share of CPU time moved most (their profiles; the top {top} by absolute change "
                "against the first run, pp: percentage points):", *text_table(head, table, {0, 1})]


def moved_html(con, runs, top: int = 10) -> str:
    rows = moved(con, [r["id"] for r in runs], top)
    if not rows:
        return ""
    head = "<th>symbol</th><th>dso</th>" + "".join(
        f"<th>{e(_run_label(r))}</th>" + ("<th>change</th>" if i else "") for i, r in enumerate(runs))
    body = "".join(
        f"<tr><td>{e(s)}</td><td>{e(d)}</td>" + "".join(
            f"<td class=num>{v:.2f}%</td>" + (f"<td class=num>{v - vals[0]:+.2f} pp</td>" if i else "")
            for i, v in enumerate(vals)) + "</tr>" for s, d, vals in rows)
    return (f"<p>Symbols whose share of CPU time moved most (their profiles; the top {top} by absolute change "
            f"against the first run, pp: percentage points):</p><table class=moved><tr>{head}</tr>{body}</table>")


# --- the HTML report -------------------------------------------------------------------------
def _table_html(con, run_id: int, top: int) -> str:
    sel = profile.select(con, run_id)
    tot = profile.totals(con, sel)
    ranked, stacks = profile.symbols(con, sel)
    pct = lambda ps: f"{100.0 * ps / tot['total']:.2f}" if tot["total"] else "-"
    ms = lambda ps: f"{ps / 1e9:,.3f}"
    head = ["self %"] + (["children %"] if stacks else []) + ["symbol", "dso", "time ms", "instructions"] + [
        f"{h} ms" for h in profile.COLUMNS.values()]
    rows = []
    for s in ranked[:top]:
        kids = [pct(s["children"]) if s["children"] is not None else "-"] if stacks else []
        cells = [pct(s["time_ps"]), *kids, s["symbol"], s["dso"], ms(s["time_ps"]), f"{s['insns']:,}",
                 *(ms(s[k]) for k in profile.COLUMNS)]
        rows.append(cells)
    for name, ps in (("[idle]", tot["idle"]), ("[drift]", tot["drift"])):
        rows.append([pct(ps)] + ([""] if stacks else []) + [name, "-", ms(ps)] + [""] * (1 + len(profile.COLUMNS)))
    text = {1 + stacks, 2 + stacks}
    return (f"<table class=profile><tr>{''.join(f'<th>{e(h)}</th>' for h in head)}</tr>" + "".join(
        "<tr>" + "".join(f"<td>{e(c)}</td>" if i in text else f"<td class=num>{e(c)}</td>" for i, c in enumerate(r))
        + "</tr>" for r in rows) + "</table>")


def html_sections(con, runs, out: Path, top: int = 15) -> str:
    """The report's "Profiles": per ok run with a profile its top symbols and
    a flame graph, inline (its tooltips work there) and as
    fig-profile-run-N.svg in out; "" when no run has one."""
    parts = []
    for r in runs if profile.present(con) else ():
        if r["status"] != "ok" or not con.execute("SELECT 1 FROM profile_cpus WHERE run_id = ? LIMIT 1",
                                                  (r["id"],)).fetchone():
            continue
        rid = r["id"]
        stacks = profile.has_stacks(con, rid)
        lines = profile.folded(con, rid)
        what = ("sampled call paths (the kernel's; a user sample under its program), root at the bottom, each "
                "frame as wide as the vCPU time of the samples through it" if stacks else
                "no call paths sampled (they are in detailed mode): each symbol under its DSO, as wide as its time")
        svg = flamegraph_svg(lines, title=f"run {rid}: {r['experiment']} on {r['topology']}, {r['patch_set']}")
        name = f"fig-profile-run-{rid}.svg"
        (out / name).write_text(svg + "\n")
        parts.append(
            f"<section class=profile id=profile-{rid}><h3>Run {rid}: {e(r['experiment'])} on {e(r['topology'])}, "
            f"kernel {e(r['patch_set'])}, timing {e(r['timing_mode'])}</h3>"
            f"<p>The {top} symbols with the most CPU time (all CPUs and phases; <code>./run.py profile {rid}</code> "
            f"prints the whole table, <code>--cpu N</code>, <code>--phase P</code> and <code>--callers SYMBOL</code> "
            f"narrow it).</p>{_table_html(con, rid, top)}"
            f"<figure class=flamegraph>{svg}<figcaption>Flame graph of run {rid}: {e(what)}. "
            f"<a href=\"{e(name)}\">SVG</a>; the folded stacks: <code>./run.py profile {rid} --folded</code>."
            "</figcaption></figure></section>")
    if not parts:
        return ""
    return ("<h2>Profiles</h2><p>Each CPU's modeled time on the guest clock split over the symbols its instructions "
            "belonged to (analysis/profile.py, docs/timing.md \"The profile\"): <i>self %</i> is a symbol's share of "
            "all CPUs' time, <i>children %</i> the share of the sampled call paths through it, and a symbol's "
            "time is its instructions at the core's best case, the core's further charges, memory, lock hand-offs, "
            "fetch and PAUSE time.</p>" + "".join(parts))
