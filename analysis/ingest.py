"""What every run's console holds, into the core tables: the raw records
(kept verbatim), the machine the guest saw, the vmstat / per-node / kswapd /
swap snapshots, and the records any reproducer may send through the guest
library (experiments/lib): metric, sanity, kswapd_sample, lockstat. Each
experiment's own records go to its results module (experiments/<name>/
results.py), called last, in the same transaction."""
from __future__ import annotations

import json

import experiments
from analysis import experiment_results
from analysis.rows import insert, metric


def ingest(con, run_id: int, parsed, topo) -> None:
    insert(con, "records", [{"run_id": run_id, "lineno": r.lineno, "type": r.type, "body": json.dumps(r.body)}
                            for r in parsed.records], replace=False)
    for i, err in enumerate(parsed.errors):
        metric(con, run_id, f"ingest_error_{i}", text=err)
    _machine(con, run_id, parsed, topo)
    _snapshots(con, run_id, parsed)
    exp = con.execute("SELECT experiment FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    _reproducer_records(con, run_id, parsed, exp)
    experiment_results.results(exp).ingest(con, run_id, parsed, topo)


def _machine(con, run_id, parsed, topo) -> None:
    m = parsed.first("machine")
    if not m:
        return
    b = m.body
    insert(con, "guest_nodes", [{"run_id": run_id, "node": nd.get("node"), "cpus": nd.get("cpus", ""),
                                 "mem_total_kib": nd.get("mem_total_kib"),
                                 "hmat_read_latency_ns": nd.get("hmat_read_latency_ns")}
                                for nd in b.get("nodes", [])])
    slit = topo.slit()
    inside = lambda i, j: i < topo.nodes and j < topo.nodes
    insert(con, "guest_distances", [{"run_id": run_id, "src": i, "dst": j, "distance": d,
                                     "expected": slit[i][j] if inside(i, j) else -1,
                                     "hops": topo.hops[i][j] if inside(i, j) else -1}
                                    for i, row in enumerate(b.get("distances", [])) for j, d in enumerate(row)])
    # every scalar the guest reported about itself (release, sysctls, swaps ...)
    insert(con, "metrics", [{"run_id": run_id, "name": f"guest.{k}", "text": str(v)} for k, v in b.items()
                            if k != "type" and isinstance(v, (str, int, float))])


def _snapshots(con, run_id, parsed) -> None:
    for r in parsed.of("vmstat"):
        insert(con, "vmstat", [{"run_id": run_id, "phase": r.body.get("phase"), "counter": k, "value": v}
                               for k, v in r.body.get("counters", {}).items()])
    for r in parsed.of("nodemem"):
        insert(con, "node_mem", [{"run_id": run_id, "phase": r.body.get("phase"), "node": nd["node"], "field": k,
                                  "kib": v} for nd in r.body.get("nodes", []) for k, v in nd.items()
                                 if k != "node" and isinstance(v, int)])
    for r in parsed.of("nodestat"):
        insert(con, "node_stat", [{"run_id": run_id, "phase": r.body.get("phase"), "node": n, "counter": k,
                                   "value": v} for n, counters in enumerate(r.body.get("nodes", []))
                                  for k, v in counters.items()])
    for r in parsed.of("kswapd"):
        tck = r.body.get("clk_tck") or 100
        insert(con, "kswapd", [{"run_id": run_id, "phase": r.body.get("phase"), "node": int(n), "cpu_s": t / tck}
                               for n, t in r.body.get("kswapd", {}).items()])
    for r in parsed.of("swap"):
        metric(con, run_id, f"swap_used_{r.body.get('phase')}", r.body.get("used_kib"), "KiB")
    for r in parsed.of("patch"):  # a patch set announcing itself at boot: proof the kernel had it
        metric(con, run_id, f"patch_live.{r.body.get('name')}", 1)
    for r in parsed.of("init"):
        metric(con, run_id, f"init.{r.body.get('step')}", r.body.get("ok"))


def _reproducer_records(con, run_id, parsed, exp: str) -> None:
    declared = experiments.load(exp) if exp in experiments.available() else None
    for r in parsed.of("metric"):
        name = r.body.get("name")
        if isinstance(name, str):
            metric(con, run_id, name, r.body.get("value"), r.body.get("unit"))
            # every figure is declared once, in the manifest (experiments/metrics.py): a guest
            # program that sends another, or in another unit, is a drift the run row shows
            m = declared.metric(name) if declared else None
            if declared and m is None:
                metric(con, run_id, f"ingest_error_metric.{name}",
                       text=f"metric {name!r} is not declared in experiments/{exp}/manifest.toml [metrics]")
            elif m is not None and (r.body.get("unit") or "") != m.unit:
                metric(con, run_id, f"ingest_error_metric.{name}",
                       text=f"metric {name!r} came in {r.body.get('unit')!r}, its manifest declares {m.unit!r}")
    for r in parsed.of("sanity"):
        insert(con, "repro_sanity", [{"run_id": run_id, "experiment": exp, "check_name": c.get("name"),
                                      "ok": c.get("ok"), "value": c.get("value"), "expect": c.get("expect")}
                                     for c in r.body.get("checks", [])])
        metric(con, run_id, f"{exp}.sanity_ok", r.body.get("ok"), "bool")
    samples = parsed.of("kswapd_sample")
    for r in samples:
        tck = r.body.get("clk_tck") or 100
        insert(con, "repro_kswapd_samples", [{"run_id": run_id, "seq": r.body.get("seq"), "t_ms": r.body.get("t_ms"),
                                              "node": n, "cpu_s": t / tck}
                                             for n, t in enumerate(r.body.get("ticks", []))])
    share = kswapd_share(samples)
    if share:
        metric(con, run_id, f"{exp}.kswapd_share_peak", share["peak"], "CPU")
        metric(con, run_id, f"{exp}.kswapd_share_mean", share["mean"], "CPU")
    for r in parsed.of("lockstat"):
        insert(con, "repro_lockstat", [{"run_id": run_id, "phase": r.body.get("phase"), "rank": i + 1,
                                        **{k: c.get(k) for k in ("class", "contentions", "con_bounces",
                                                                 "wait_total_us", "wait_max_us", "acquisitions",
                                                                 "hold_total_us")}}
                                       for i, c in enumerate(r.body.get("top", []))])


def kswapd_share(samples) -> dict | None:
    """kswapd CPU share between consecutive samples (1.0 = one CPU busy the
    whole interval, the seed's '100 %'): the busiest node's peak interval,
    and all kswapds together over the sampled span."""
    pts = [(s.body.get("t_ms"), [t / (s.body.get("clk_tck") or 100) for t in s.body.get("ticks", [])])
           for s in samples if s.body.get("t_ms") is not None]
    if len(pts) < 2:
        return None
    peak = 0.0
    for (t0, a), (t1, b) in zip(pts, pts[1:]):
        dt = (t1 - t0) / 1e3
        if dt > 0:
            peak = max([peak] + [(y - x) / dt for x, y in zip(a, b)])
    span = (pts[-1][0] - pts[0][0]) / 1e3
    mean = (sum(pts[-1][1]) - sum(pts[0][1])) / span if span > 0 else 0.0
    return {"peak": round(peak, 4), "mean": round(mean, 4)}
