"""`./run.py report (--study N | --runs ID ...)`: one self-contained HTML page
of a study's (or some runs') figures and tables, written beside the database
(report/<db>-study-N/index.html) with a PNG and an SVG of every figure.

The page says where each run executed, draws only runs that ended ok (the
failed ones are listed), and prints under every figure the run ids and the SQL
that produced its data. Kernel comparisons are compare-kernels tables built
from analysis/compare.py's own figures. A small script records on <body>
whether every image loaded, so a headless browser can check the page.
"""
from __future__ import annotations

import argparse
import html
import sqlite3
import sys
import time
from pathlib import Path

from analysis import compare, db, headlines, pages, plot_kit, plots, profile_report

# Runs that agree on these and differ in patch_set form one kernel comparison.
GROUP = ("topology_sha256", "experiment", "params_json", "seed", "kernel_flavor", "timing_mode")

RUNS_SQL = ("SELECT r.id, r.status, r.topology, r.experiment, r.patch_set, r.kernel_flavor, r.timing_mode, "
            "r.wall_s, (SELECT s.executed_on FROM study_runs s WHERE s.run_id = r.id{study} "
            "ORDER BY s.updated_at DESC LIMIT 1) AS executed_on, r.host, r.reason "
            "FROM runs r WHERE r.id IN ({ids}) ORDER BY r.id")

# Sets data-images on <body> once the page (so every image) has loaded or failed.
IMAGES_SCRIPT = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.dataset.images = ok + "/" + imgs.length + " loaded";
  if (ok === imgs.length) document.body.dataset.imagesOk = "1";
});
</script>"""

STYLE = """<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1240px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 2px 8px; } th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td, tr.aborted td, tr.running td { background: #fdecec; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 13px; } pre { background: #f6f6f6; padding: .5em; overflow-x: auto; font-size: 12px;
white-space: pre-wrap; } .warn { color: #a40000; } .meta { color: #555; }
</style>"""


class ReportError(ValueError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # bad input is one line and exit 2, as everywhere in vmlab
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="./run.py report", description=(
        "Write an HTML report (plots, runs table, kernel comparisons) of a study's runs or of given runs."))
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--study", type=int, metavar="N", help="a study's runs (./run.py study)")
    g.add_argument("--runs", type=int, nargs="+", metavar="ID", help="these runs")
    db.add_option(p)
    p.add_argument("--out", help="folder for index.html and the figures (default: report/<db>-study-N/ or "
                                 "report/<db>-runs-FIRST-LAST/ beside the database)")
    p.add_argument("--page", metavar="FILE", help="instead of the HTML report, a Markdown results page (e.g. "
                                                  "docs/results/NAME.md): how the runs were produced, the runs, "
                                                  "the headline figures (analysis/pages.py)")
    return p


def markdown_page(con, db_path, study, ids: list[int], path: Path, command: str) -> Path:
    runs = con.execute(f"SELECT * FROM runs WHERE id IN ({plot_kit.id_list(ids)}) ORDER BY id").fetchall()
    title = f"Results: study {study['id']} ({study['name']})" if study is not None else "Results: runs"
    body = ["", "## Runs", "", "`wall s`: the run's wall time; `of it boot s`: its boot, or for a restored run its "
            "restore, job pull and setup, up to the guest's first record (`runs.wall_s`, `runs.boot_wall_s`).", "",
            "| run | status | machine | experiment | kernel | timing | start | wall s | of it boot s | reason |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    sec = lambda v: "-" if v is None else f"{v:.1f}"
    for r in runs:
        body.append(f"| {r['id']} | {r['status']} | {r['topology']} | {r['experiment']} | {plot_kit.kernel_label(r)} | "
                    f"{r['timing_mode']} | {r['start']} | {sec(r['wall_s'])} | {sec(r['boot_wall_s'])} | "
                    f"{(r['reason'] or '').replace('|', '/')} |")
    heads = pages.headline_tables(con, runs)
    if heads:
        body += ["", "## Headline figures", "", "Each experiment's headline figures as its manifest declares them "
                 "(docs/reference/metrics.md), a row per configuration, repeats aggregated as declared with "
                 "their range and count.", *heads]
    body += pages.experiment_figures(con, runs)
    return pages.write(path, title, pages.provenance(runs, command, db_path, study), body)


def select(con, db_path, study: int | None, run_ids: list[int] | None):
    """(study row or None, run ids) or ReportError naming what is missing."""
    if study is not None:
        s = con.execute("SELECT * FROM studies WHERE id = ?", (study,)).fetchone()
        if s is None:
            raise ReportError(f"{db_path}: no study {study}")
        ids = [x[0] for x in con.execute("SELECT run_id FROM study_runs WHERE study_id = ? AND run_id IS NOT NULL "
                                         "ORDER BY position", (study,))]
        if not ids:
            raise ReportError(f"{db_path}: study {study} ({s['name']}) has no runs yet")
        return s, list(dict.fromkeys(ids))
    ids = list(dict.fromkeys(run_ids))
    for rid in ids:
        if not con.execute("SELECT 1 FROM runs WHERE id = ?", (rid,)).fetchone():
            raise ReportError(f"{db_path}: no run {rid}")
    return None, ids


def default_out(db_path, study: int | None, ids: list[int]) -> Path:
    return db.beside(db_path, "report", f"study-{study}" if study is not None else f"runs-{ids[0]}-{ids[-1]}")


def compare_groups(runs) -> list[list]:
    """ok runs that differ only in the kernel, two patch sets or more per
    group; the baseline (vanilla when there is one, else the first run) leads."""
    groups: dict[tuple, list] = {}
    for r in runs:
        if r["status"] == "ok":
            groups.setdefault(tuple(r[c] for c in GROUP), []).append(r)
    return [sorted(g, key=lambda r: (r["patch_set"] != "vanilla", r["id"]))
            for g in groups.values() if len({r["patch_set"] for r in g}) > 1]


# --- HTML --------------------------------------------------------------------------
e = html.escape


def _cell(v, num=False) -> str:
    if v is None:
        return "<td>-</td>"
    if isinstance(v, float):
        v = f"{v:.1f}"
    return f"<td class=num>{e(str(v))}</td>" if num else f"<td>{e(str(v))}</td>"


def _sql(stmts) -> str:
    return "<pre class=sql>" + e(";\n".join(stmts)) + ";</pre>" if stmts else ""


def runs_section(con, ids, study) -> str:
    sql = RUNS_SQL.format(ids=plot_kit.id_list(ids), study=f" AND s.study_id = {int(study['id'])}" if study else "")
    rows = con.execute(sql).fetchall()
    ok = sum(r["status"] == "ok" for r in rows)
    head = ("run", "status", "topology", "experiment", "patch set", "timing", "wall s", "executed on", "host",
            "reason")
    body = "".join(
        f"<tr class={e(r['status'])}>" + _cell(r["id"], True) + _cell(r["status"]) + _cell(r["topology"])
        + _cell(r["experiment"]) + _cell(plot_kit.kernel_label(r)) + _cell(r["timing_mode"]) + _cell(r["wall_s"], True)
        + _cell(r["executed_on"]) + _cell(r["host"]) + _cell(r["reason"]) + "</tr>" for r in rows)
    return (f"<h2>Runs</h2><p>{len(rows)} runs, {ok} ok; only ok runs are drawn. <i>executed on</i>: the worker "
            "the study ran it on (study_runs.executed_on); <i>host</i>: the machine that ran QEMU (runs.host).</p>"
            f"<table id=runs><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>{body}</table>"
            f"<details><summary>SQL</summary>{_sql([sql])}</details>")


def figure_html(n: int, f: plot_kit.Figure) -> str:
    return (f"<figure id={e(f.name)}><img src=\"{e(f.name)}.png\" alt=\"{e(f.title)}\">"
            f"<figcaption><b>Figure {n}.</b> {e(f.title)}. {e(f.caption)} "
            f"Runs: {', '.join(map(str, f.run_ids))}. <a href=\"{e(f.name)}.svg\">SVG</a>"
            f"{_sql(f.sql)}</figcaption></figure>")


def compare_html(con, n: int, group) -> str:
    """compare-kernels for one group, as compare.render computes it: one row
    per figure of compare.figures, % against the first run (compare.pct)."""
    ids = [r["id"] for r in group]
    with plot_kit.sql_log(con) as log:
        table = compare.lines(con, group)
    r0 = group[0]
    head = "<th>figure</th>" + "".join(
        f"<th>{e(r['patch_set'])} (run {r['id']})</th>" + ("<th>%</th>" if i else "") for i, r in enumerate(group))
    rows = []
    for ln in table:
        changes = ln.change_cells()
        cells = "".join(_cell(compare._fmt(v), True) + (_cell(changes[i - 1], True) if i else "")
                        for i, v in enumerate(ln.values))
        name = f"<b>{e(ln.name)}</b>" if ln.headline else e(ln.name)
        rows.append(f"<tr><td>{name}{f' [{e(ln.unit)}]' if ln.unit else ''}</td>{cells}</tr>")
    bad = compare.mismatches(group)
    warn = (f"<p class=warn>The runs also differ in {e(', '.join(bad))}: this compares more than the kernels.</p>"
            if bad else "")
    return (f"<section class=compare id=compare-{n}><h3>Table {n}. {e(r0['experiment'])} on {e(r0['topology'])} "
            f"({e(r0['topology_shape'])}), flavor {e(r0['kernel_flavor'])}, seed {r0['seed']}, timing "
            f"{e(r0['timing_mode'])}: kernels side by side, % against {e(r0['patch_set'])}</h3>{warn}"
            f"<table><tr>{head}</tr>{''.join(rows) or '<tr><td>no figures: nothing numeric</td></tr>'}</table>"
            f"{profile_report.moved_html(con, group)}"
            f"<p>Runs: {', '.join(map(str, ids))}. Figures from analysis/compare.py (metrics, vmstat deltas, "
            f"kswapd CPU, the experiment's compare_figures); headline figures (bold) and better/worse as the "
            f"experiment's manifest declares them; same table as <code>./run.py compare "
            f"{' '.join(map(str, ids))}</code>.</p>{_sql(log)}</section>")


def headlines_html(con, runs) -> str:
    """Each experiment's headline figures (analysis/headlines.py): a row per
    configuration, its repeats aggregated as the manifest declares."""
    out = []
    for t in headlines.tables(con, runs):
        keys = pages.differing([conf["params"] for conf, _, _ in t.rows])  # what tells the rows apart, if any
        head = "<th>machine</th><th>kernel</th>" + ("<th>parameters</th>" if keys else "") + "<th>runs</th>" + "".join(
            f"<th>{e(f)} [{e(t.units[f])}], {e(t.aggregates[f])}</th>" for f in t.figures)
        rows = []
        for conf, ids, cells in t.rows:
            shown = "".join(_cell(c.text(), True) for c in cells)
            values = ", ".join(f"{k}={conf['params'].get(k, '-')}" for k in keys)
            params = f"<td>{e(values)}</td>" if keys else ""
            rows.append(f"<tr><td>{e(conf['topology'])}</td><td>{e(conf['patch_set'])}</td>{params}"
                        f"<td>{e(', '.join(map(str, ids)))}</td>{shown}</tr>")
        out.append(f"<section class=headlines><h3>{e(t.experiment)}: headline figures</h3><table><tr>{head}</tr>"
                   f"{''.join(rows)}</table></section>")
    if not out:
        return ""
    return ("<h2>Headline figures</h2><p>Each experiment's headline figures as its manifest declares them "
            "(<code>[metrics]</code>; docs/reference/metrics.md), a row per configuration; several runs of one "
            "configuration (a study's repeats) are aggregated as declared, with their range and count.</p>"
            + "".join(out))


def page(db_path, study, runs_part: str, before, tables, after, notes: list[str], heads: str = "",
         profiles: str = "") -> str:
    if study is not None:
        title = f"vmlab report: study {study['id']} ({study['name']})"
        about = (f"study file {e(study['path'] or '-')} (sha256 {e(study['sha256'][:12])}), created "
                 f"{e(study['created_at'])}")
    else:
        title = "vmlab report: runs"
        about = "runs chosen by id"
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>{STYLE}</head><body>",
             f"<h1>{e(title)}</h1><p class=meta>{about}; database {e(str(Path(db_path).resolve()))}; written "
             f"{e(time.strftime('%Y-%m-%d %H:%M:%S %z'))}</p>"]
    parts += [f"<p class=warn>{e(x)}</p>" for x in notes]
    if study is not None:
        parts.append(f"<details><summary>study file</summary><pre>{e(study['toml'])}</pre></details>")
    parts.append(runs_part)
    if heads:
        parts.append(heads)
    parts.append("<h2>Figures</h2>")
    n = 0
    for f in before:
        n += 1
        parts.append(figure_html(n, f))
    if tables:
        parts.append("<h2>Kernel comparisons</h2>")
        parts += tables
    for f in after:
        n += 1
        parts.append(figure_html(n, f))
    if not (before or after or tables):
        parts.append("<p>No figures: no ok run of memeater, latprobe, kvio or forkstorm, and no runs that differ "
                     "only in the kernel.</p>")
    if profiles:
        parts.append(profiles)
    parts.append(IMAGES_SCRIPT + "</body></html>\n")
    return "\n".join(parts)


def write(con, db_path, study, ids: list[int], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("fig-*"):
        if old.suffix in (".png", ".svg"):
            old.unlink()  # a figure of an earlier report that no longer applies must not linger
    runs = con.execute(f"SELECT * FROM runs WHERE id IN ({plot_kit.id_list(ids)}) ORDER BY id").fetchall()
    notes = []
    if study is not None:
        waiting = con.execute("SELECT status, COUNT(*) FROM study_runs WHERE study_id = ? AND run_id IS NULL "
                              "GROUP BY status ORDER BY status", (study["id"],)).fetchall()
        if waiting:
            notes.append("Study entries without a run yet: "
                         + ", ".join(f"{c} {s}" for s, c in waiting) + " (not in this report).")
    runs_part = runs_section(con, ids, study)
    before = plots.build(con, runs, out, plots.BEFORE_COMPARE)
    tables = [compare_html(con, i, g) for i, g in enumerate(compare_groups(runs), 1)]
    after = plots.build(con, runs, out, plots.AFTER_COMPARE)
    index = out / "index.html"
    profiles = profile_report.html_sections(con, runs, out)
    index.write_text(page(db_path, study, runs_part, before, tables, after, notes, headlines_html(con, runs),
                          profiles))
    return index


def main(argv: list[str]) -> int:
    try:
        a = parser().parse_args(argv)
    except SystemExit as x:  # bad options (one line already printed) or --help
        return int(x.code or 0)
    try:
        con = db.connect(a.db, readonly=True)
        study, ids = select(con, a.db, a.study, a.runs)
        if a.page:
            sel = f"--study {a.study}" if a.study is not None else "--runs " + " ".join(map(str, a.runs))
            index = markdown_page(con, a.db, study, ids, Path(a.page),
                                  f"./run.py report {sel} --db {a.db} --page {a.page}")
        else:
            index = write(con, a.db, study, ids, Path(a.out) if a.out else default_out(a.db, a.study, ids))
    except (db.SchemaError, ReportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as err:  # not a database, or one from before studies (schema < 8)
        print(f"error: {a.db}: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(index)
    return 0
