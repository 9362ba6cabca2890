"""`./run.py seeds --table-only` without QEMU: runs of every seed's experiment
stored through the real ingest path (console records -> analysis.ingest),
then each seed's table: its rows and units, % against the first kernel, the
published figures checked against the seed documents' text, repeats as mean
(min-max), the direction line following our data, and bad input."""
import json
import math
import os
import re
import shutil
import statistics
import tomllib
from pathlib import Path

import pytest

import topologies as T
from analysis import compare, db, pages
from analysis.profile import KERNEL
from analysis.rows import insert
from seeds import (
    kit as seed_kit,
    page as seed_page,
    report as seeds,
    runs as seed_runs,
    table002,
    table004,
    tables as seed_tables,
)
from tests.e2e import REPO
from tests.test_report import rec, store

# The seed documents: shared/seeds/ beside the repository (CI clones it with a copy of shared/ beside it)
DOCS = REPO.parent / "shared" / "seeds"
STUDY_TOML = """name = "seeds-test"
[[matrix]]
name = "000"
axes.topology = ["gs1280-8"]
axes.experiment = ["mlockchurn"]
axes.kernel = ["vanilla", "mlocked-on-lru", "mlocked-on-lru-kswapd-sleeps"]
[[matrix]]
name = "001"
axes.topology = ["x86-2s"]
axes.experiment = ["kvio"]
axes.kernel = ["vanilla", "scan-balance-3.9"]
params.duration_s = 3
[[matrix]]
name = "002"
axes.topology = ["x86-2s-small", "x86-2s"]
axes.experiment = ["forkstorm"]
axes.kernel = ["vanilla", "rmap-lock-blocking"]
[[matrix]]
name = "003"
axes.topology = ["gs1280-8"]
axes.experiment = ["qsbench"]
axes.kernel = ["vanilla", "allocators-reclaim"]
repeats = 3
[[matrix]]
name = "004"
axes.topology = ["gs1280-32"]
axes.experiment = ["memeater"]
axes.kernel = ["vanilla", "zone-reclaim-auto"]
[[matrix]]
name = "004-zone-reclaim-5"
axes.topology = ["gs1280-32"]
axes.experiment = ["memeater"]
axes.kernel = ["vanilla"]
params.zone_reclaim_mode = 5
"""


def snap(phase, t_ms, **counters) -> str:
    return rec("vmstat", phase=phase, t_ms=t_ms, counters=counters)


def metric(name, value, unit="") -> str:
    return rec("metric", name=name, value=value, unit=unit)


def kswapd_samples(nodes: int, busiest_share: float, seconds: int = 4) -> list[str]:
    """Node 0's kswapd busy `busiest_share` of each second, the others a tenth of it."""
    return [rec("kswapd_sample", seq=t, t_ms=1000.0 * t, clk_tck=100,
                ticks=[round(100 * busiest_share * t)] + [round(10 * busiest_share * t)] * (nodes - 1))
            for t in range(seconds + 1)]


def mlockchurn_lines(chunk_ms: list[float], kswapd: float) -> list[str]:
    out = [snap("before", 0, pswpout=0)]
    out += [rec("mlock_chunk", chunk=i, slot=i % 2, steps=115, ok=1, mlock_ms=ms * 0.9, step_median_ms=1,
                step_max_ms=3, wall_ms=ms, t_ms=sum(chunk_ms[:i + 1]), majflt=100 * i, minflt=5,
                # the machine's busy time: half the chunk in free memory (2 slots), all of it once reclaiming
                cpu_ms=ms / 4, busy_ms=ms * (0.5 if i < 2 else 1.0),
                kswapd_s=0.1, pgscan_kswapd=1000, pgscan_direct=0, pgsteal_kswapd=900, pgsteal_direct=0,
                free_kib=[4096] * 8) for i, ms in enumerate(chunk_ms)]
    out += kswapd_samples(8, kswapd)
    out += [metric("mlockchurn.elapsed_s", sum(chunk_ms) / 1e3, "s"), metric("mlockchurn.pgscan", 9000, "pages"),
            metric("mlockchurn.pgsteal", 8100, "pages"), metric("mlockchurn.reclaim_efficiency", 0.9, "ratio"),
            snap("after", 5000, pswpout=0)]
    return out


def kvio_lines(ops: list[float], majflt: list[int], writes: int, swapout: int) -> list[str]:
    out = [snap("before", 1000, pgscan_kswapd=0, pgsteal_kswapd=0, pswpout=0, pswpin=0, nr_vmscan_write=0,
                pgscan_direct=0, pgsteal_direct=0, pgpgin=0, pgpgout=0)]
    for lv, (f, o, mj) in enumerate(zip((0, 0.2, 0.6, 1.0), ops, majflt)):
        out.append(rec("kvio_level", level=lv, io_frac=f, io_mib=int(f * 512), io_ok=1, io_ms=2000 * f, ops=int(o),
                       elapsed_ms=1000, ops_s=o, kswapd_s=0.1,
                       vmstat={"pswpout": swapout // 4, "pswpin": 10 * lv, "pgmajfault": mj, "pgfault": 900 + mj,
                               "pgscan_kswapd": 2000, "pgsteal_kswapd": 1500, "pgscan_direct": 0,
                               "pgsteal_direct": 0}))
    out.append(snap("after", 11000, pgscan_kswapd=8000, pgsteal_kswapd=6000, pswpout=swapout, pswpin=60,
                    nr_vmscan_write=writes, pgscan_direct=0, pgsteal_direct=0, pgpgin=40, pgpgout=9000))
    return out


def forkstorm_lines(sys_share: float, anon_vma: int | None) -> list[str]:
    out = [metric("forkstorm.sys_share", sys_share, "ratio"), metric("forkstorm.user_share", 0.9 - sys_share, "ratio"),
           metric("forkstorm.jobs_per_min", 600, "jobs/min"), metric("forkstorm.kswapd_s", 1.5, "s"),
           # stored by the run from QEMU's exit report, not by the guest: same table, same name
           metric("engine.pause_cpu_s", 10 * sys_share, "s")]
    locks = {} if anon_vma is None else {"locks": {"anon_vma": {"contentions": anon_vma, "wait_total_us": 9000.0},
                                                   "ptl": {"contentions": anon_vma // 2, "wait_total_us": 1500.0}}}
    return out + [rec("forkstorm_done", jobs=30, jobs_per_min=600, per_worker=[3, 3], **locks)]


def qsbench_lines(user, sys_, elapsed, majflt, kswapd) -> list[str]:
    return [metric("qsbench.user_s", user, "s"), metric("qsbench.sys_s", sys_, "s"),
            metric("qsbench.elapsed_s", elapsed, "s"), metric("qsbench.majflt", majflt, "faults"),
            metric("qsbench.kswapd_s", kswapd, "s")]


def memeater_lines(topo, chunks: int, swap_from: int | None, cycles: int = 2) -> list[str]:
    """16 MiB chunks filling nodes in hop order from node 0, three to a node
    (60 MiB free each); swap in use from chunk `swap_from` of cycle 0 on."""
    order = sorted(range(topo.nodes), key=lambda n: (topo.hops[0][n], n))
    free = [60 * 1024] * topo.nodes
    home, out, swap = [], [snap("before", 0, pswpout=0)], 0
    for c in range(cycles):
        for i in range(chunks):
            if c == 0:
                node = next(n for n in order if free[n] >= 16 * 1024)
                free[node] -= 16 * 1024
                home.append(node)
            swapping = swap_from is not None and (c > 0 or i >= swap_from)
            swap += 4096 if swapping else 0
            ms = 200.0 if swapping and c == 0 else 5.0 + 2 * topo.hops[0][home[i]]
            out.append(rec("chunk", cycle=c, chunk=i, wall_ms=ms, cpu_ms=ms, t_ms=0, minflt=4096, majflt=0,
                           placement={str(home[i]): 16}, absent=0, sampled=16, free_kib=list(free),
                           swap_used_kib=swap))
        out.append(rec("memeater_cycle", cycle=c, wall_ms=100.0, swap_used_kib=swap, vmstat={"pswpout": swap // 4}))
    return out + [snap("after", 9000, pswpout=swap // 4), rec("memeater_done", total_ms=1000.0)]


def add_study(con, name: str, entries: list[tuple[int, dict]]) -> int:
    with con:
        sid = con.execute("INSERT INTO studies (name, path, sha256, toml, created_at) "
                          "VALUES (?, 's.toml', ?, ?, 'now')", (name, name, STUDY_TOML)).lastrowid
        for pos, (rid, axes) in enumerate(entries):
            insert(con, "study_runs", {"study_id": sid, "key": f"k{pos}", "position": pos,
                                       "axes_json": json.dumps(axes), "spec_json": "{}", "status": "ok",
                                       "run_id": rid, "attempts": 1})
    return sid


def profile(con, rid, symbols) -> None:
    """The run's profile on the guest clock: (symbol, dso, time_ps[, pause_ps]) on CPU 0, phase 0."""
    with con:
        insert(con, "profile_symbols", [
            {"run_id": rid, "cpu": 0, "phase": 0, "phase_name": None, "phase_instance": None, "symbol": x[0],
             "dso": x[1], "insns": 1, "insn_ps": 0, "core_ps": 0, "mem_ps": 0, "lock_ps": 0, "fetch_ps": 0,
             "pause_ps": x[3] if len(x) > 3 else 0, "pauses": 0, "time_ps": x[2]} for x in symbols])


def build(path: Path) -> dict:
    con = db.connect(path)
    gs8, gs32, x2 = T.load("gs1280-8"), T.load("gs1280-32"), T.load("x86-2s")
    small = T.load(str(REPO / "tests/data/x86-2s-small.toml"))  # 4 CPUs beside x86-2s's 8
    ids: dict = {}
    entries = []

    def add(key, topo, exp, kernel, lines, block=None, **over):
        ids[key] = store(con, topo, lines, experiment=exp, patch_set=kernel, run_key=key, **over)
        entries.append((ids[key], {"topology": topo.name, "experiment": exp, "kernel": kernel,
                                   **({"block": block} if block else {})}))

    ml = json.dumps({"slots": 2})
    add("m_van", gs8, "mlockchurn", "vanilla", mlockchurn_lines([1000, 1000, 1200, 1400], 0.30), params_json=ml)
    add("m_nb", gs8, "mlockchurn", "mlocked-on-lru", mlockchurn_lines([1000, 1000, 2000, 2600], 0.95),
        params_json=ml)
    add("m_fix", gs8, "mlockchurn", "mlocked-on-lru-kswapd-sleeps", mlockchurn_lines([1000, 1000, 1500, 1700], 0.40),
        params_json=ml)
    kp = json.dumps({"duration_s": 3.0})
    add("k_van", x2, "kvio", "vanilla", kvio_lines([50000, 48000, 45000, 40000], [0, 2, 4, 8], 800, 400),
        params_json=kp)
    add("k_nb", x2, "kvio", "scan-balance-3.9", kvio_lines([50000, 46000, 30000, 20000], [0, 20, 40, 80], 3000, 1200),
        params_json=kp)
    for topo in (small, x2):
        add(f"f_van_{topo.cpus}", topo, "forkstorm", "vanilla", forkstorm_lines(0.6, 100 * topo.cpus),
            kernel_flavor="lockstat")
        add(f"f_rb_{topo.cpus}", topo, "forkstorm", "rmap-lock-blocking", forkstorm_lines(0.85, 400 * topo.cpus),
            kernel_flavor="lockstat")
    for rep, (el, us) in enumerate(((10.0, 6.0), (12.0, 6.5), (14.0, 7.0))):
        add(f"q_van_{rep}", gs8, "qsbench", "vanilla", qsbench_lines(us, 1.0, el, 1000 + rep, 2.0))
        add(f"q_nb_{rep}", gs8, "qsbench", "allocators-reclaim", qsbench_lines(us, 2.0, el * 1.5, 1500, 3.0))
        # the profile's user time: system on the guest clock is 1.25 s and 2.5 s (CPU time less it)
        profile(con, ids[f"q_van_{rep}"], (("quicksort", "qsbench", int((us - 0.25) * 1e12)),))
        profile(con, ids[f"q_nb_{rep}"], (("quicksort", "qsbench", int((us - 0.5) * 1e12)),))
    # the period kernel's third run died (the guest's OOM killer took the sort): said under the table
    add("q_oom", gs8, "qsbench", "allocators-reclaim", [snap("before", 0, oom_kill=0), snap("after", 9000, oom_kill=1)],
        status="failed", reason="experiment exited with status 1")
    mp = json.dumps({"cpu": 0, "chunk_mib": 16, "chunks": 16, "cycles": 2, "fill_frac": 0.125})  # 16 x 16 of 2048 MiB
    add("e_van", gs32, "memeater", "vanilla", memeater_lines(gs32, 16, None), params_json=mp)
    add("e_zra", gs32, "memeater", "zone-reclaim-auto", memeater_lines(gs32, 16, 5), params_json=mp)
    # zone_reclaim_mode=5 on vanilla: a column of its own (a parameter, not a kernel)
    add("e_zrm5", gs32, "memeater", "vanilla", memeater_lines(gs32, 16, 2, cycles=1), block="004-zone-reclaim-5",
        params_json=json.dumps({**json.loads(mp), "zone_reclaim_mode": 5}))
    # a run another block of the study asked for (block named): not the seed's, though its axes match
    add("e_other", gs32, "memeater", "vanilla", memeater_lines(gs32, 16, 1), block="numa-cost", params_json=mp)
    ids["study"] = add_study(con, "seeds-test", entries)
    # outside the study: a failed run, and runs that flip directions
    ids["k_flip"] = store(con, x2, kvio_lines([50000, 49000, 47000, 44000], [0, 1, 1, 1], 800, 400),
                          experiment="kvio", patch_set="scan-balance-3.9", run_key="k_flip_key", params_json=kp)
    ids["k_long"] = store(con, x2, kvio_lines([9, 9, 9, 9], [0, 0, 0, 0], 0, 0), experiment="kvio",  # not the seed's
                          patch_set="scan-balance-3.9", run_key="k_long", params_json='{"duration_s": 5}')
    ids["k_failed"] = store(con, x2, kvio_lines([1, 1, 1, 1], [0, 0, 0, 0], 0, 0), status="failed", reason="panic",
                            experiment="kvio", patch_set="scan-balance-3.9", run_key="k_nb", params_json=kp)
    ids["f_flip"] = store(con, x2, forkstorm_lines(0.4, 50 * x2.cpus), experiment="forkstorm",
                          patch_set="rmap-lock-blocking", kernel_flavor="lockstat", run_key="f_flip")
    # the seed's fix on top of the period set: lower system time and anon_vma contention
    ids["f_try"] = store(con, x2, forkstorm_lines(0.7, 200 * x2.cpus), experiment="forkstorm",
                         patch_set="rmap-lock-blocking-ptl-trylock", kernel_flavor="lockstat", run_key="f_try")
    # vanilla with the multi-generational LRU (the mglru flavor): today's answer beside the seed's kernels
    ids["q_mglru"] = store(con, gs8, qsbench_lines(6.0, 0.5, 9.0, 900, 1.0), experiment="qsbench", patch_set="vanilla",
                           kernel_flavor="mglru", run_key="q_mglru")
    # a detailed-timing forkstorm run: its modeled stall per kernel symbol
    ids["f_timed"] = store(con, x2, forkstorm_lines(0.9, 800), experiment="forkstorm", patch_set="rmap-lock-blocking",
                           timing_mode="detailed", run_key="f_timed")
    # the profile on the guest clock: kernel time per symbol, and a program's (left out of "% of kernel")
    profile(con, ids["f_timed"], (("native_queued_spin_lock_slowpath", KERNEL, 600), ("_raw_spin_lock", KERNEL, 150),
                                  ("page_vma_mapped_walk", KERNEL, 100), ("clear_page_erms", KERNEL, 150),
                                  ("main", "forkstorm", 5000)))
    con.close()
    return ids


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeds") / "r.db"
    ids = build(path)
    return path, ids, db.connect(path, readonly=True)


def table(con, seed, ids) -> str:
    return seeds.render(con, seed, ids)


CLOCK_SYS = "system on the guest clock (CPU time less the profile's user time)"  # seed 003's headline row


def cells(text: str, name: str) -> list[str]:
    """The cells of the row that starts with `name [`: columns are two spaces apart or more."""
    line = next(x for x in text.splitlines() if x.startswith(name + " ["))
    return re.split(r"\s{2,}", line.strip())


def study_tables(built) -> dict[str, str]:
    path, ids, con = built
    return {s: table(con, s, seed_runs.select_runs(con, s, ids["study"])) for s in seed_tables.SEEDS}


def test_each_seed_table_has_the_seeds_rows_and_units(built):
    path, ids, con = built
    texts = study_tables(built)
    for sid, s in seed_tables.SEEDS.items():
        text = texts[sid]
        assert text.startswith(f"seed {sid}: ") and s.doc in text
        for t in s.tables:
            rows = t.rows if isinstance(t.rows, tuple) else t.rows(con, seed_runs.select_runs(con, sid, ids["study"]))
            for row in rows:
                shown = f"{row.name} [{row.unit}]" in text
                listed = re.search(r"^not (measured by us|in these runs \(.*?\)): .*" + re.escape(row.name), text, re.M)
                run_ids = seed_runs.select_runs(con, sid, ids["study"])
                blank = row.value and all(row.value(con, r) is None for r in run_ids)  # e.g. a hop no chunk landed at
                assert shown or listed or (blank and not seeds.PUBLISHED.get(sid, {}).get(row.key)), (sid, row.name)
                pub = seeds.PUBLISHED.get(sid, {}).get(row.key, {})
                assert all(p.unit == row.unit for p in pub.values()), (sid, row.key)
    assert "Ops memcachetest-4246M [ops/s]" in texts["001"] and "Kswapd velocity [pages/s]" in texts["001"]
    assert "_spin_lock [% of kernel]" in texts["002"] and "elapsed [s]" in texts["003"]
    spin = cells(texts["002"], "spin-wait (PAUSE) time, whole run")
    assert [float(x) for x in spin[1:3]] == [6.0, 8.5], spin  # vanilla 10 x 0.6, the period set 10 x 0.85
    assert "nodes filled when swapping began [nodes]" in texts["004"]
    # hop rows from the runs: 16 chunks fill node 0 and its four 1-hop neighbours, one chunk lands 2 hops away
    assert "ms per quarter node 2 hops from home, first cycle [ms]" in texts["004"]
    assert "ms per quarter node 3 hops" not in texts["004"] and "free memory per node 6 hops from home" in texts["004"]
    assert "swap used after cycle 1 [MiB]" in texts["004"]


def test_percent_against_the_first_kernel(built):
    path, ids, con = built
    text = table(con, "001", seed_runs.select_runs(con, "001", ids["study"]))
    head = cells(text, "row")
    assert head[1:4] == ["vanilla", "scan-balance-3.9", "%"]
    row = cells(text, "Ops memcachetest-4246M")
    assert row[1:4] == ["40000", "20000", "-50.00%"]
    assert cells(text, "Ops majorfaults-749M")[1:4] == ["2", "20", "+900.00%"]
    # whole-run vmstat from the snapshots: velocity over the 10 guest seconds between them
    assert cells(text, "Kswapd velocity")[1:4] == ["800", "800", "0.00%"]
    assert cells(text, "Page writes file")[1:4] == ["400", "1800", "+350.00%"]  # nr_vmscan_write - pswpout
    assert "Page writes file-<level>M" in re.search(r"^not measured by us: .*", text, re.M).group(0)
    # 002: columns are kernel x machine, each % against the first kernel on the same machine
    fork = table(con, "002", seed_runs.select_runs(con, "002", ids["study"]))
    assert cells(fork, "row")[1:7] == ["vanilla (lockstat)", "rmap-lock-blocking (lockstat)", "%"] * 2
    machines = next(x for x in fork.splitlines() if x.startswith("machine "))
    assert re.split(r"\s{2,}", machines.strip()) == ["machine", "x86-2s-small, 4 CPUs", "x86-2s, 8 CPUs"]
    assert machines.index("x86-2s, 8 CPUs") > fork.splitlines()[fork.splitlines().index(machines) + 1].index("%")
    assert cells(fork, "anon_vma lock contentions")[1:7] == ["400", "1600", "+300.00%", "800", "3200", "+300.00%"]
    sys_ = cells(fork, "system time")
    assert sys_[1] == "66.67" and sys_[2] == "94.44" and sys_[3] == compare.pct(600 / 9, 85 / 0.9)


WORDS = ["one", "two", "three", "four", "five", "six"]


def written(raw) -> set[float]:
    """The numbers a figure's text can mean: as written, minutes in s, seconds in ms, m:ss in s."""
    out = set()
    for tok in raw:
        if re.fullmatch(r"\d+:\d+(\.\d+)?", tok):
            m, sec = tok.split(":")
            out.add(60 * int(m) + float(sec))
        words = re.findall(r"\b(one|two|three|four|five|six)\b", tok)
        for x in [*map(float, re.findall(r"\d+(?:\.\d+)?", tok)), *(WORDS.index(w) + 1.0 for w in words)]:
            out |= {x, 60 * x if "minute" in tok else x, 1000 * x if "second" in tok else x}
    return out


def test_published_figures_are_the_seed_documents(built):
    # the documents sit beside the repository, not in it: a user's clone elsewhere has none to
    # check against, CI's clone (beside them) must
    if not DOCS.is_dir() and os.environ.get("CI") != "true":
        pytest.skip(f"{DOCS}: the seed documents are not beside this clone (shared/seeds/)")
    assert DOCS.is_dir(), f"{DOCS}: the seed documents are missing (shared/seeds/ beside the repository)"
    norm = lambda s: " ".join(s.split())
    docs = {s: norm((DOCS / d.doc).read_text(errors="replace")) for s, d in seed_tables.SEEDS.items()}
    n = 0
    for sid, rows in seeds.PUBLISHED.items():
        for key, by_col in rows.items():
            for col, p in by_col.items():
                assert col in seed_tables.SEEDS[sid].columns, (sid, key, col)
                assert norm(p.source) in docs[sid], (sid, key, p.source)
                assert p.raw and all(r in p.source for r in p.raw), (sid, key, p.raw)
                if not p.note.startswith("derived"):  # a figure as written (or in s / ms): its value is the text's
                    assert all(any(abs(v - c) < 1e-9 for c in written(p.raw)) for v in p.values), (sid, key, p)
                n += 1
    assert n > 150
    # figures as the documents print them, and the seeds' own % from them
    assert re.search(r"Ops memcachetest-4246M +2355\.00 .* 12619\.00 \(435\.84%\)",
                     (DOCS / seed_tables.S001.doc).read_text())
    ops = seeds.PUBLISHED["001"]["ops-3"]
    assert ops["vanilla"].values == (2355,) and ops["limitprio-v1r8"].values == (12619,)
    assert compare.pct(2355, 12619) == "+435.84%"
    assert seeds.PUBLISHED["003"]["elapsed"]["2.4.10-ac9"].values == (197.94, 242.93, 247.94)
    assert "71.760u 3.170s 4:02.93 30.8%" in docs["003"]
    assert seeds.PUBLISHED["002"]["spin_lock"]["no trylock (2009)"].values == (75.1,)
    assert seeds.PUBLISHED["000"]["kswapd_steady"]["2.4.9 + kswapd-sleeps"].values == (35,)
    assert seeds.PUBLISHED["000"]["kswapd_steady"]["2.4.9"].values == (100,)
    # which kernel a figure belongs to: 002 published the 2009 kernel only, 003 one block per kernel
    assert {c for by_col in seeds.PUBLISHED["002"].values() for c in by_col} == {"no trylock (2009)"}
    qs = seeds.PUBLISHED["003"]["system"]
    assert qs["2.4.10-ac9"].source.startswith("Linux-2.4.10-ac9:\n") and qs["2.4.10-ac9"].values == (2.56, 3.17, 3.08)
    assert qs["2.4.10-ac9 + smooth"].source.startswith("Linux-2.4.10-ac9 + Rik's smooth patch:")
    assert [k for k, by_col in seeds.PUBLISHED["004"].items() if "Tru64 patched (May 2005)" in by_col] == ["touched"]
    # ... and in the table, beside ours, with the % for the same kernel pair
    path, ids, con = built
    text = table(con, "001", seed_runs.select_runs(con, "001", ids["study"]))
    assert cells(text, "row")[4:] == ["seed: tidy-v1r8", "seed: vanilla", "%"]
    assert cells(text, "Ops memcachetest-4246M")[4:] == ["10904", "2355", "-78.40%"]
    assert cells(text, "Kswapd efficiency")[4:] == ["17", "10", "-41.18%"]


def test_repeats_give_mean_and_spread(built):
    path, ids, con = built
    run_ids = seed_runs.select_runs(con, "003", ids["study"])
    assert len(run_ids) == 6 and ids["q_oom"] not in run_ids
    failed = seed_runs.failed_runs(con, "003", ids["study"])
    assert [r["id"] for r in failed] == [ids["q_oom"]]
    assert [r["id"] for r in seed_runs.failed_runs(con, "003", ids["study"], run_ids)] == [ids["q_oom"]]
    text = seeds.render(con, "003", run_ids, failed)
    assert (f"failed, not in the table: run {ids['q_oom']} (allocators-reclaim on gs1280-8): experiment exited "
            "with status 1; the guest's OOM killer killed 1 process") in text
    assert seed_runs.failed_runs(con, "001", ids["study"]) == []  # 001's failed run is outside the study
    assert cells(text, "elapsed")[1:] == ["12 (10-14)", "18 (15-21)", "+50.00%",
                                          "229.60 (197.94-247.94)", "226.87 (201.65-240.86)", "-1.19%"]
    # summed over the repeats, as the seed read kswapd's time once after its three runs
    assert cells(text, "kswapd CPU time, the runs together")[1:4] == ["6", "9", "+50.00%"]
    assert cells(text, "major faults")[1] == "1001 (1000-1002)"
    # the seed's elapsed means differ by 1.2 %, well inside its runs' 198-248 s: no direction to match
    assert re.search(r"^direction, elapsed: ours \+50\.00% .*: the seed shows no clear change", text, re.M)
    # the repeats agree exactly on each side: two a kernel would tell them apart
    assert cells(text, CLOCK_SYS)[1:4] == ["1.25 (1.25-1.25)", "2.50 (2.50-2.50)", "+100.00%"]
    assert re.search(r"^direction, system time \(guest clock\): ours \+100\.00% .*: same direction as the seed "
                     r"\(repeats a kernel to tell these two apart at 5 % with 80 % power, from their spread: 2; "
                     r"3 here\)$", text, re.M)


def test_direction_line_follows_our_data(built):
    path, ids, con = built
    same = table(con, "001", [ids["k_van"], ids["k_nb"]])
    line = re.search(r"^direction, ops/s at the top IO level: .*", same, re.M).group(0)
    assert line == ("direction, ops/s at the top IO level: ours -50.00% vanilla→scan-balance-3.9; seed -78.40% for "
                    "the same pair (tidy-v1r8→vanilla), in the seed's order +363.01% vanilla→tidy-v1r8: "
                    "same direction as the seed, from one run on a side: not judged yet")
    flipped = table(con, "001", [ids["k_van"], ids["k_flip"]])
    assert re.search(r"^direction, ops/s at the top IO level: ours \+10\.00% .*: OPPOSITE to the seed, from one run on "
                     r"a side: not judged yet$", flipped, re.M)
    # 002: the seed published one side only; its claim gives the direction
    fork = table(con, "002", seed_runs.select_runs(con, "002", ids["study"]))
    assert "direction, system time: ours +41.67% vanilla (lockstat)→rmap-lock-blocking (lockstat) at 8 CPUs " \
           "(x86-2s); seed: no figure for both sides; it says the trylock lowers it: same direction as the seed" in fork
    # one run a side: the finding is said, and left out of the verdict
    assert "verdict: not compared yet" in fork
    # the claim is about the period set -> the fix: a fall is the seed's way (2026-11-25 the
    # table called the trylock's -56 % OPPOSITE); vanilla -> the fix is no pair the seed spoke of
    f3 = table(con, "002", [ids["f_van_8"], ids["f_rb_8"], ids["f_try"]])
    assert re.search(r"^direction, anon_vma contention: ours -50\.00% rmap-lock-blocking \(lockstat\)→"
                     r"rmap-lock-blocking-ptl-trylock \(lockstat\) .*: same direction as the seed, from one run on a "
                     r"side: not judged yet$", f3, re.M), f3
    assert re.search(r"^direction, anon_vma contention: ours \+100\.00% vanilla \(lockstat\)→"
                     r"rmap-lock-blocking-ptl-trylock \(lockstat\) .*: no seed direction to compare$", f3, re.M), f3
    f2 = table(con, "002", [ids["f_van_8"], ids["f_flip"]])
    assert re.search(r"^direction, system time: ours -33\.33% .*: OPPOSITE to the seed, from one", f2, re.M)
    # 004: computed from the chunks: nothing swapped on vanilla (all 4 nodes' worth touched), 1.5 on zone-reclaim-auto
    mem = table(con, "004", seed_runs.select_runs(con, "004", ids["study"]))
    # columns: vanilla, vanilla with zone_reclaim_mode=5 (a parameter column), zone-reclaim-auto
    assert cells(mem, "row")[1:6] == ["vanilla", "vanilla, zone_reclaim_mode=5", "%", "zone-reclaim-auto", "%"]
    assert "WARNING" not in mem  # the parameter column differs on purpose
    assert cells(mem, "memory touched before swapping began (all, if none)")[1:] == [
        "4", "0.75", "-81.25%", "1.50", "-62.50%", "22.50", "4", "-82.22%"]
    # swapping from chunk 5: node 0 (chunks 0-2) and its first 1-hop neighbour (3-5) filled, 30 nodes free
    assert cells(mem, "nodes filled when swapping began")[1:4] == ["-", "1", "2"]
    assert cells(mem, "nodes with free memory when swapping began")[1:4] == ["-", "31", "30"]
    assert cells(mem, "free memory when swapping began")[3] == f"{100 * (32 * 60 - 6 * 16) / 2048:.2f}"
    # zone_reclaim_mode=5 on vanilla stands for the seed's Tru64 5.1B-PK4 (local reclaim and swap, as its RADs)
    assert ("ours -81.25% vanilla→vanilla, zone_reclaim_mode=5 at 32 CPUs (gs1280-32); seed -82.22% for the same "
            "pair (Tru64 patched (May 2005)→Tru64 5.1B-PK4)") in mem
    assert "vanilla, zone_reclaim_mode=5 stands for the seed's Tru64 5.1B-PK4" in mem
    assert mem.count("direction, ") == 2  # each against vanilla; no pair twice
    ours = mem.splitlines()[1]  # "ours: ... run N; ...": only the runs the seed's blocks asked for
    assert re.search(rf"\b{ids['e_zrm5']}\b", ours) and not re.search(rf"\b{ids['e_other']}\b", ours)
    assert seed_runs.block_names(STUDY_TOML, "004") == ["004", "004-zone-reclaim-5"]
    assert seed_runs.block_names(STUDY_TOML, "00") == []
    assert "direction, memory touched before swapping began: ours -62.50% vanilla→zone-reclaim-auto" in mem
    assert "same direction as the seed" in mem


def test_each_seed_gets_a_verdict_from_its_direction_lines(built, tmp_path):
    """reproduced when every direction compared is the seed's, partly when
    some are, not when none are; the figures that were not, named. A
    direction from one run on a side is said and not judged: one run has no
    spread to tell a change from noise by."""
    path, ids, con = built
    verdict = lambda text: next(x for x in text.splitlines() if x.startswith("verdict: "))
    thin = verdict(table(con, "001", [ids["k_van"], ids["k_nb"]]))
    assert thin.startswith("verdict: not compared yet (no pair of kernels with a seed direction has runs here, "
                           "2 a side or more); from one run on a side, not judged yet: ops/s at the top IO level, "
                           "vanilla→scan-balance-3.9; major faults"), thin
    # the same runs twice a side (repeats that agree): judged
    two = db.connect(tmp_path / "two.db")
    x2, kp = T.load("x86-2s"), json.dumps({"duration_s": 3.0})
    runs = {k: [store(two, x2, kvio_lines(*args), experiment="kvio", patch_set=kernel, run_key=f"{k}{rep}",
                      params_json=kp) for rep in range(2)]
            for k, kernel, args in (("van", "vanilla", ([50000, 48000, 45000, 40000], [0, 2, 4, 8], 800, 400)),
                                    ("nb", "scan-balance-3.9", ([50000, 46000, 30000, 20000], [0, 20, 40, 80], 3000,
                                                                1200)),
                                    ("flip", "scan-balance-3.9", ([50000, 49000, 47000, 44000], [0, 1, 1, 1], 800,
                                                                  400)))}
    same = verdict(table(two, "001", runs["van"] + runs["nb"]))
    assert same.startswith("verdict: partly reproduced: 2 of 3 directions the seed's (ops/s at the top IO level, "
                           "vanilla→scan-balance-3.9; major faults"), same
    assert same.endswith("not: kswapd pages scanned, vanilla→scan-balance-3.9 (no clear change)"), same
    flipped = verdict(table(two, "001", runs["van"] + runs["flip"]))
    assert flipped.startswith("verdict: not reproduced: 0 of 3") and "(opposite)" in flipped
    assert "not judged" not in same + flipped
    # one side judged, the other from one run: the first counts, the second is named apart
    mixed = verdict(table(two, "001", runs["van"] + runs["nb"][:1]))
    assert mixed.startswith("verdict: not compared yet") and "not judged yet: ops/s" in mixed
    # MGLRU has no seed direction: a table of vanilla and its MGLRU column is not compared
    alone = verdict(table(con, "003", [ids["q_mglru"]]))
    assert alone.startswith("verdict: not compared yet")


def test_each_column_says_how_its_runs_were_made(built):
    path, ids, con = built
    text = table(con, "002", [ids["f_van_8"], ids["f_rb_8"]])
    assert "every column made with: timing off, no timing plugin, series none, booted" in text.splitlines()
    mixed = table(con, "002", [ids["f_rb_8"], ids["f_timed"]]).splitlines()
    made = [x for x in mixed if x.startswith("columns made differently: ")]
    assert len(made) == 2 and any("timing detailed" in x for x in made) and any("timing off" in x for x in made)


def test_a_warning_is_per_comparison_not_per_machine(tmp_path):
    """A machine's columns in two timing modes are two comparisons, each
    within its mode, each column saying how it was made (002: the lock_stat block is
    functional beside detailed blocks): no warning. Runs whose % are against
    the same column and were made differently: warned, once, naming that
    column. A machine's runs that differ in what they ran: warned, whatever
    comparison they are in."""
    con2 = db.connect(tmp_path / "w.db")
    x2 = T.load("x86-2s")
    fork = {"experiment": "forkstorm", "kernel_flavor": "lockstat"}
    van = store(con2, x2, forkstorm_lines(0.6, 800), patch_set="vanilla", run_key="a", **fork)
    per = store(con2, x2, forkstorm_lines(0.85, 3200), patch_set="rmap-lock-blocking", run_key="b", **fork)
    timed = [store(con2, x2, forkstorm_lines(0.9, 800), experiment="forkstorm", patch_set=k, timing_mode="detailed",
                   timing_plugin="detailed sha256 0123", run_key=k) for k in ("vanilla", "rmap-lock-blocking")]
    two = table(con2, "002", [van, per, *timed]).splitlines()
    assert not [x for x in two if x.startswith("WARNING")]
    assert sum(x.startswith("columns made differently: ") for x in two) == 4
    other = store(con2, x2, forkstorm_lines(0.85, 3200), patch_set="rmap-lock-blocking", engine_version="10.0.3",
                  run_key="c", **fork)
    warned = [x for x in table(con2, "002", [van, other]).splitlines() if x.startswith("WARNING")]
    assert warned == ["WARNING: the runs compared with vanilla (lockstat) on x86-2s, 8 CPUs differ in engine_version: "
                      "this compares more than the kernels"]
    # what a run was (here its parameters) must agree across all of a machine's columns, comparisons apart
    half = [store(con2, x2, forkstorm_lines(0.9, 800), experiment="forkstorm", patch_set=k, timing_mode="detailed",
                  timing_plugin="detailed sha256 0123", params_json='{"duration_s": 0.5}', run_key=f"half-{k}")
            for k in ("vanilla", "rmap-lock-blocking")]
    warned = [x for x in table(con2, "002", [van, per, *half]).splitlines() if x.startswith("WARNING")]
    assert warned == ["WARNING: the runs on x86-2s, 8 CPUs differ in params_json: this compares more than the kernels"]


def test_a_seeds_blocks_are_the_blocks_the_study_runner_reads():
    """One reader of study files (analysis/studyfile.py): the top level's
    axes, params and repeats under each block, as the runner expands them;
    a file the runner refuses has no blocks."""
    from pipeline import study
    text = ('name = "x"\nrepeats = 2\n[params]\nswap = "none"\n[axes]\nkernel = ["vanilla"]\n'
            '[[matrix]]\nname = "001"\naxes.topology = ["x86-2s"]\n[[matrix]]\nname = "001-b"\nrepeats = 1\n'
            '[[matrix]]\nname = "0011"\n')
    got = seed_runs.blocks(text, "001")
    assert [g["name"] for g in got] == ["001", "001-b"] and [g["repeats"] for g in got] == [2, 1]
    assert got[0]["axes"] == {"kernel": ["vanilla"], "topology": ["x86-2s"]} and got[0]["params"] == {"swap": "none"}
    assert got == [g for g in study._groups(Path("x.toml"), tomllib.loads(text)) if g["name"] in ("001", "001-b")]
    assert seed_runs.blocks('name = "x"\nbogus = 1\n[[matrix]]\nname = "001"\n', "001") == []
    assert seed_runs.blocks("not [toml", "001") == []


def test_timing_and_lockstat_rows_only_when_the_runs_have_them(built):
    path, ids, con = built
    timed = table(con, "002", [ids["f_van_8"], ids["f_timed"]])
    # the kernel's busy time only (the program's left out): spin locks 750 of 1000 ps
    # default-flavor columns come first; a timed run with no default-flavor vanilla beside it has no %
    assert cells(timed, "row")[1:3] == ["rmap-lock-blocking [timing detailed]", "vanilla (lockstat)"]
    assert cells(timed, "_spin_lock")[1:3] == ["75", "-"]
    assert "direction, system time: no two kernels on the same machine, flavor and timing here" in timed
    # idle: what system and user time leave (0.6 + 0.3 of the timed run's time; 0.9 in all)
    assert cells(timed, "CPU idle")[1] == "10.00"
    # lock_stat's wait totals in ms, from each storm's record (9,000 and 1,500 us)
    assert cells(timed, "anon_vma lock wait")[1:3] == ["9", "9"] and cells(timed, "pte lock wait")[1:3] == ["1.50"] * 2
    assert (f"top kernel symbols by share of the kernel's busy time, run {ids['f_timed']} (rmap-lock-blocking, "
            "8 CPUs): native_queued_spin_lock_slowpath 60.0 %, _raw_spin_lock 15.0 %, clear_page_erms 15.0 %") in timed
    untimed = table(con, "000", seed_runs.select_runs(con, "000", ids["study"]))
    assert re.search(r"^not in these runs \(needs a run with the plugin's profile.*\): refill_inactive_scan", untimed,
                     re.M)
    # vanilla 6.1 stands for no seed column: the seed's % are against its first published kernel (2.4.9)
    assert cells(untimed, "kswapd CPU, busiest node over the run")[1:] == ["30", "95", "+216.67%", "40", "+33.33%",
                                                                         "100", "35", "-65.00%"]
    assert cells(untimed, "real time over the free-memory pace")[1:4] == ["15.00", "65.00", "+333.33%"]
    # busy 500 + 500 + 1200 + 1400 ms against 4 x 500 (vanilla), 500 + 500 + 2000 + 2600 (the period set)
    assert cells(untimed, "CPU time over ideal (the machine's, kswapd included)")[1:4] == ["80", "180.00", "+125.00%"]
    # the seed's own before/after is re-enacted: period set -> period set + the seed's fix
    assert ("direction, kswapd CPU: ours -57.89% mlocked-on-lru→mlocked-on-lru-kswapd-sleeps at 8 CPUs (gs1280-8); "
            "seed -65.00% for the same pair (2.4.9→2.4.9 + kswapd-sleeps): same direction as the seed") in untimed
    assert "direction, kswapd CPU: ours +216.67% vanilla→mlocked-on-lru at 8 CPUs (gs1280-8); seed: no figure for " \
        "this pair" in untimed


def test_default_selection_latest_ok_runs_per_column(built, tmp_path, monkeypatch):
    path, ids, con = built
    study = tmp_path / "seeds.toml"
    study.write_text(STUDY_TOML)
    monkeypatch.setattr(seed_runs, "SEEDS_STUDY", study)
    # kvio: the newest ok run per kernel with the block's parameters; the failed one is skipped
    assert seed_runs.select_runs(con, "001") == [ids["k_van"], ids["k_flip"]]
    # the block's three repeats per kernel, and the one run of vanilla's MGLRU flavor (a column of its own)
    assert len(seed_runs.select_runs(con, "003")) == 7
    fork = seed_runs.select_runs(con, "002")                    # kernel x machine x flavor x timing
    assert ids["f_timed"] in fork and ids["f_flip"] in fork and ids["f_rb_8"] not in fork


def test_default_selection_takes_one_start_per_column(tmp_path, monkeypatch):
    """Booted and restored runs of the same inputs are other runs of the
    machine, not repeats: a column takes the runs of its newest run's start."""
    study = tmp_path / "seeds.toml"
    study.write_text(STUDY_TOML.replace("params.duration_s = 3\n", "params.duration_s = 3\nrepeats = 3\n"))
    monkeypatch.setattr(seed_runs, "SEEDS_STUDY", study)
    con = db.connect(tmp_path / "r.db")
    x2, kp = T.load("x86-2s"), json.dumps({"duration_s": 3.0})

    def kvio(kernel, start, key):
        return store(con, x2, kvio_lines([50000, 48000, 45000, 40000], [0, 2, 4, 8], 800, 400), experiment="kvio",
                     patch_set=kernel, run_key=key, params_json=kp, start=start)

    old = [kvio("vanilla", "booted", f"b{i}") for i in range(2)]
    new = kvio("vanilla", "restored", "r0")
    period = [kvio("scan-balance-3.9", "booted", f"p{i}") for i in range(2)]
    picked = seed_runs.select_runs(con, "001")
    assert new in picked and not set(old) & set(picked)  # vanilla: its newest start only
    assert set(period) <= set(picked) and len(picked) == 3  # up to the block's three repeats


def test_cli_prints_the_tables_and_bad_input_is_one_line(built, capsys, tmp_path, monkeypatch):
    path, ids, con = built
    assert seed_page.print_tables(str(path), ["001", "003"], ids["study"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nseed ") + out.startswith("seed ") == 2 and "seed 003:" in out

    def bad(dbpath, wanted=(), study=None) -> str:
        assert seed_page.print_tables(str(dbpath), list(wanted), study) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
        return err

    assert "unknown seed '007'" in bad(path, ["007"])
    assert "no study 99" in bad(path, ["001"], 99)
    assert "no results database" in bad(tmp_path / "none.db")
    empty = tmp_path / "empty.db"
    db.connect(empty).close()
    assert "seed 000: no ok mlockchurn runs" in bad(empty, ["000"])
    # all five asked for, one has runs: one line naming the others
    one = tmp_path / "one.db"
    con1 = db.connect(one)
    store(con1, T.load("x86-2s"), kvio_lines([5, 4, 3, 2], [0, 1, 2, 3], 10, 10), experiment="kvio")
    con1.close()
    monkeypatch.setattr(seed_runs, "SEEDS_STUDY", tmp_path / "absent.toml")  # no block: any machine
    assert "no ok runs for seeds 000 002 003 004 in" in bad(one)
    assert seed_page.print_tables(str(one), ["001"]) == 0 and "seed 001:" in capsys.readouterr().out


def test_the_tables_become_a_generated_page_that_says_how_they_were_made(built, capsys, tmp_path):
    path, ids, con = built
    page = tmp_path / "docs" / "seeds.md"
    assert seed_page.print_tables(str(path), ["001", "003"], ids["study"], page=(page, "./run.py seeds CMD")) == 0
    printed, text = capsys.readouterr().out, page.read_text()
    assert text.startswith("# Results: the seeds' tables\n") and pages.GENERATED in text
    assert "| command | `./run.py seeds CMD` |" in text and f"`{path.resolve()}`" in text
    runs = con.execute("SELECT * FROM runs WHERE id IN (SELECT run_id FROM study_runs WHERE study_id = ?)",
                       (ids["study"],)).fetchall()
    engines = {f"{r['engine']} {r['engine_version']}" for r in runs}
    assert any(e in text for e in engines)  # the engine and its series, from the rows
    # the very tables the command printed, seed by seed
    for block in ("\n\n" + printed.strip()).split("\n\nseed ")[1:]:
        assert ("seed " + block.strip()) in text
    assert "## Seed 001" in text and "## Seed 003" in text
    # bad input writes no page
    other = tmp_path / "other.md"
    assert seed_page.print_tables(str(path), ["007"], None, page=(other, "x")) == 2 and not other.exists()


def test_the_page_lists_its_runs_keys_and_counts_what_the_campaign_has_not_run(built, capsys, tmp_path):
    """With the campaign as the checkout plans it, the page names every run's
    key, counts the planned runs it does not have, and a seed with no run yet
    is a section saying so rather than an error."""
    path, ids, con = built
    shown = seed_runs.select_runs(con, "001", ids["study"])
    keys = [con.execute("SELECT run_key FROM runs WHERE id = ?", (i,)).fetchone()[0] for i in shown]
    planned = [(k, "001") for k in keys] + [("f" * 64, "001-mglru"), ("e" * 64, "000")]
    page = tmp_path / "seeds.md"
    assert seed_page.print_tables(str(path), [], ids["study"], page=(page, "CMD"), planned=planned) == 0
    text = page.read_text()
    assert f"{len(keys)} of the {len(planned)} runs `studies/seeds.toml` plans at this checkout are on this page; " \
           "to run: 2 (001-mglru: 1, 000: 1)." in text
    listed = re.findall(r"^\| (\d+) \| ([^|]+) \|.*\| `([^`]+)` \| ok \|$", text, re.M)
    assert {k[:16] for k in keys} <= {k for _, _, k in listed}
    assert {str(i) for i in shown} <= {r for r, _, _ in listed}
    # what the runs on the page cost, all blocks together: the campaign's wall time so far
    walls = [con.execute("SELECT wall_s FROM runs WHERE id = ?", (int(r),)).fetchone()[0] or 0 for r, _, _ in listed]
    # the rest: 001-mglru's and 000's runs belong to blocks with no run yet, so no projection
    assert f"| all | {len(planned)} | {len(listed)} | {sum(walls) / 3600:.2f} | | 0.00 and 2 runs of blocks with " \
        "none yet |" in text
    # one more planned run of the first listed run's block:
    # the rest is one run at that block's mean so far
    block = listed[0][1].strip()
    timed = tmp_path / "timed.db"
    shutil.copy(path, timed)
    w = []
    with db.connect(timed) as rw:
        for r, b, _ in listed:
            rw.execute("UPDATE runs SET wall_s = ? WHERE id = ?", (600.0 * int(r), int(r)))
            w += [600.0 * int(r)] if b.strip() == block else []
    more = planned + [("d" * 64, block)]
    assert seed_page.print_tables(str(timed), [], ids["study"], page=(page, "CMD"), planned=more) == 0
    row = next(x for x in page.read_text().splitlines() if x.startswith(f"| {block} |"))
    assert row.endswith(f" | {sum(w) / len(w) / 3600:.2f} |")


def test_a_run_without_a_study_row_takes_its_repeat_from_the_plan(built, tmp_path):
    """A run loaded from the archive has no study row naming its block and
    repeat: the page takes them from the planned run with its key, not a dash."""
    path, ids, con = built
    shown = seed_runs.select_runs(con, "001", ids["study"])
    keys = {i: con.execute("SELECT run_key FROM runs WHERE id = ?", (i,)).fetchone()[0] for i in shown}
    bare = tmp_path / "archive-only.db"
    shutil.copy(path, bare)
    with db.connect(bare) as rw:  # the study rows' axes without block and repeat, as a merged run has none
        for rid, axes in rw.execute("SELECT run_id, axes_json FROM study_runs").fetchall():
            kept = {k: v for k, v in json.loads(axes).items() if k not in ("block", "repeat")}
            rw.execute("UPDATE study_runs SET axes_json = ? WHERE run_id = ?", (json.dumps(kept), rid))
    # repeats the plan gives, unlike any the study row held
    planned = [(k, "001-plan", "kind", 7 + n) for n, k in enumerate(keys.values())]
    page = tmp_path / "seeds.md"
    assert seed_page.print_tables(str(bare), ["001"], ids["study"], page=(page, "CMD"), planned=planned) == 0
    rows = {int(m[1]): (m[2].strip(), m[3].strip()) for m in re.finditer(
        r"^\| (\d+) \| ([^|]+) \|[^|]+\|[^|]+\|[^|]+\| ([^|]+) \| `", page.read_text(), re.M)}
    assert {i: rows[i] for i in shown} == {i: ("001-plan", str(7 + n)) for n, i in enumerate(keys)}


def test_a_key_settled_by_a_failure_in_the_restored_guest_is_run_on_the_page(built, tmp_path):
    """A restored guest's own failure (the sort OOM-killed) is that key's
    result: the page counts the key as run and lists the run with its
    reason; the same failure on a booted start leaves the key to run."""
    path, ids, con = built
    shown = seed_runs.select_runs(con, "003", ids["study"])
    keys = [con.execute("SELECT run_key FROM runs WHERE id = ?", (i,)).fetchone()[0] for i in shown]
    oom_id, oom_key = con.execute("SELECT id, run_key FROM runs WHERE reason = 'experiment exited with status 1'"
                                  ).fetchone()
    planned = [(k, "003") for k in keys + [oom_key]]
    page = tmp_path / "seeds.md"
    for start, counted in (("booted", False), ("restored", True)):
        copy = tmp_path / f"{start}.db"
        shutil.copy(path, copy)
        with db.connect(copy) as rw:
            rw.execute("UPDATE runs SET start = ? WHERE id = ?", (start, oom_id))
        assert seed_page.print_tables(str(copy), ["003"], ids["study"], page=(page, "CMD"), planned=planned) == 0
        text = page.read_text()
        assert (f"{len(planned) - (0 if counted else 1)} of the {len(planned)} runs" in text), start
        row = [x for x in text.splitlines() if x.startswith(f"| {oom_id} |")]
        assert bool(row) == counted and (not row or row[0].endswith(
            "| failed in the guest: experiment exited with status 1 |")), row


def test_the_rest_of_a_block_is_costed_at_the_pace_of_each_runs_kind():
    """A block whose kernels cost very different wall times (000 on gs1280-8:
    vanilla minutes, the period set's storm an hour) is costed run by run at
    its kind's mean, not at the block's: two slow runs to do cost two slow
    runs, and a kind with nothing done yet falls back to the block's mean."""
    from seeds import campaign
    runs = [{"run_key": "a0", "wall_s": 600.0, "b": "000-g"}, {"run_key": "a1", "wall_s": 300.0, "b": "000-g"},
            {"run_key": "s0", "wall_s": 3600.0, "b": "000-g"}, {"run_key": "x0", "wall_s": 60.0, "b": "002"}]
    fast, slow, new = "vanilla", "mlocked-on-lru", "mlocked-on-lru-kswapd-sleeps"
    planned = [("a0", "000-g", fast), ("a1", "000-g", fast), ("a2", "000-g", fast),
               ("s0", "000-g", slow), ("s1", "000-g", slow), ("s2", "000-g", slow),
               ("n0", "000-g", new), ("x0", "002", "x")]
    lines = campaign.section(runs, planned, lambda r: r["b"])
    row = next(x for x in lines if x.startswith("| 000-g |"))
    # a2 at vanilla's 450 s, s1 and s2 at the storm's 3600 s, n0 at the block's mean (1500 s)
    assert row == f"| 000-g | 7 | 3 | 1.25 | 5.0-60.0 | {(450 + 2 * 3600 + 1500) / 3600:.2f} |"
    # the old way, every run at the block's mean, would say 4 x 1500 s
    assert f"{4 * 1500 / 3600:.2f} |" not in row
    assert next(x for x in lines if x.startswith("| 002 |")).endswith(" | 0.00 |")
    assert any("3 of 4" in x for x in lines)  # how many were costed by their kind
    # a run that failed in the guest after 10 s is run, and costs what it cost, but paces nothing:
    # a2 at 450 s, s2 still at the storm's 3600 s and n0 at the ok runs' 1500 s
    failed = runs[:3] + [{"run_key": "s1", "wall_s": 10.0, "b": "000-g", "status": "failed"}] + runs[3:]
    row = next(x for x in campaign.section(failed, planned, lambda r: r["b"]) if x.startswith("| 000-g |"))
    assert row == f"| 000-g | 7 | 4 | {(4500 + 10) / 3600:.2f} | 0.2-60.0 | {(450 + 3600 + 1500) / 3600:.2f} |"
    # without kinds (key, block), the block's mean as before
    plain = campaign.section(runs, [p[:2] for p in planned], lambda r: r["b"])
    assert next(x for x in plain if x.startswith("| 000-g |")).endswith(f" | {4 * 1500 / 3600:.2f} |")


def test_a_planned_run_made_outside_the_study_counts_in_its_block(built, tmp_path):
    """A run made by ./run.py with a block's spec and merged into the
    campaign's database has the block's key but no study row naming the
    block: the page puts it in that block (by its key), not in one of its
    own."""
    path, ids, con = built
    shown = seed_runs.select_runs(con, "001", ids["study"])
    keys = {i: con.execute("SELECT run_key FROM runs WHERE id = ?", (i,)).fetchone()[0] for i in shown}
    loose = tmp_path / "loose.db"
    shutil.copy(path, loose)
    with db.connect(loose) as rw:
        rw.execute("UPDATE study_runs SET axes_json = '{}' WHERE run_id = ?", (shown[0],))
    page = tmp_path / "seeds.md"
    assert seed_page.print_tables(str(loose), ["001"], ids["study"], page=(page, "CMD"),
                              planned=[(k, "001") for k in keys.values()]) == 0
    listed = dict(re.findall(r"^\| (\d+) \| ([^|]+) \|", page.read_text(), re.M))
    assert listed[str(shown[0])].strip() == "001"
    assert not any(line.startswith("| - |") for line in page.read_text().splitlines())


def test_a_run_under_a_key_the_checkout_does_not_plan_is_left_out_and_counted(built, capsys, tmp_path):
    """A run whose key the checkout would no longer make (its kernel's source
    moved, say) is not in the table, so a column never mixes two kernel
    builds unawares; the tables and the page say how many were left out."""
    path, ids, con = built
    shown = seed_runs.select_runs(con, "001", ids["study"])
    keys = {con.execute("SELECT run_key FROM runs WHERE id = ?", (i,)).fetchone()[0] for i in shown}
    gone = con.execute("SELECT run_key FROM runs WHERE id = ?", (shown[0],)).fetchone()[0]
    planned = [(k, "001") for k in keys - {gone}]
    page = tmp_path / "seeds.md"
    assert seed_page.print_tables(str(path), ["001"], ids["study"], page=(page, "CMD"), planned=planned) == 0
    out = capsys.readouterr().out
    ours = next(line for line in out.splitlines() if line.startswith("ours:"))
    assert f"run {shown[0]}," not in ours + "," and f" {shown[0]}," not in ours + ","
    assert "left out: 1 ok run of these seeds' blocks under keys this checkout does not plan" in out
    assert "Left out: 1 ok run" in page.read_text()
    assert seed_runs.select_runs(con, "001", ids["study"], keys - {gone}) == shown[1:]
    # every key planned: nothing left out, no line
    assert seed_page.print_tables(str(path), ["001"], ids["study"], planned=[(k, "001") for k in keys]) == 0
    assert "left out" not in capsys.readouterr().out


def test_seeds_command_runs_every_block_of_a_seed(monkeypatch, tmp_path, capsys):
    """`./run.py seeds 004` asks the study runner for 004's blocks ("004" and
    "004-..."), then prints the tables of that study; a seed without a block
    is one line and exit 2."""
    from pipeline import seedscli, studycli
    asked = {}

    def run(path, dbpath, groups=None, **kw):
        asked["groups"] = groups
        asked["topologies"] = kw.get("topologies")
        return 7, None

    monkeypatch.setattr(studycli, "run", run)
    monkeypatch.setattr(seed_page, "print_tables", lambda dbpath, wanted, study=None, page=None, planned=None:
                        asked.setdefault("tables", (wanted, study)) and 0)
    assert seedscli.main(["004", "--db", str(tmp_path / "r.db")]) == 0
    assert asked["groups"] == seed_runs.block_names(seedscli.SEEDS_STUDY.read_text(), "004")
    assert asked["groups"][0] == "004" and len(asked["groups"]) >= 2
    assert asked["tables"] == (["004"], 7) and asked["topologies"] is None
    assert seedscli.main(["000", "--topology", "x86-1s-2c", "--db", str(tmp_path / "r.db")]) == 0
    assert asked["topologies"] == ["x86-1s-2c"]
    assert asked["groups"] == seed_runs.block_names(seedscli.SEEDS_STUDY.read_text(), "000")
    assert {"000", "000-mglru", "000-memory"} <= set(asked["groups"])
    study = tmp_path / "s.toml"
    study.write_text('name = "x"\n[[matrix]]\nname = "001"\naxes.experiment = ["kvio"]\n')
    monkeypatch.setattr(seedscli, "SEEDS_STUDY", study)
    assert seedscli.main(["004", "--db", str(tmp_path / "r.db")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_mglru_column_against_the_default_flavors_vanilla(built):
    """The MGLRU flavor's column is compared with vanilla of the default
    flavor on the same machine (not with itself), and its direction is no
    seed's: no seed's kernel had MGLRU."""
    path, ids, con = built
    text = table(con, "003", [ids["q_van_0"], ids["q_van_1"], ids["q_van_2"], ids["q_mglru"]])
    assert cells(text, "row")[1:4] == ["vanilla", "vanilla (mglru)", "%"]
    # elapsed: vanilla's three runs 10 / 12 / 14 s (mean 12), MGLRU's 9 s
    assert cells(text, "elapsed")[1:4] == ["12 (10-14)", "9", "-25.00%"]
    assert ("direction, elapsed: ours -25.00% vanilla→vanilla (mglru) at 8 CPUs (gs1280-8); seed: no such kernel "
            "(the mglru flavor is today's reclaim, not the seed's): no seed direction to compare") in text


def test_a_parameter_away_from_its_default_makes_a_column_of_its_own():
    """004: zone_reclaim_mode=5 and a page cache filled first are columns of
    their own; the same parameter at its default (a knob left to the kernel,
    no page cache) is not."""
    s = seed_tables.SEEDS["004"]
    row = {"patch_set": "vanilla", "cpus": 32, "nodes": 32, "topology": "gs1280-32", "disk_model": "",
           "kernel_flavor": "default", "timing_mode": "detailed"}
    col = lambda **p: seed_kit.column(s, {**row, "params_json": json.dumps({"cpu": 0, **p})})[5][2]
    assert col() == () and col(zone_reclaim_mode="kernel", cache_frac=0.0) == ()
    assert col(zone_reclaim_mode=5) == ("zone_reclaim_mode=5",)
    assert col(cache_frac=0.25, zone_reclaim_mode="kernel") == ("cache_frac=0.25",)


def test_fork_page_work_per_job_and_its_correlation_with_jobs(tmp_path):
    """002's explanation of a kernel pair's jobs/min: the guest CPU time in
    fork's and exit's page work per job, and its correlation with jobs/min
    across the runs of a CPU count (in the notes)."""
    con = db.connect(tmp_path / "r.db")
    x2 = T.load("x86-2s")
    rids = []
    # jobs/min 600, 900, 1200 over 1 s: 10, 15, 20 jobs; page work 40, 30, 10 us a job
    for i, (rate, work_us) in enumerate(((600, 40), (900, 30), (1200, 10))):
        lines = [metric("forkstorm.jobs_per_min", rate, "jobs/min"), metric("forkstorm.elapsed_s", 1.0, "s"),
                 metric("forkstorm.sys_share", 0.9, "ratio"), metric("forkstorm.user_share", 0.05, "ratio")]
        rid = store(con, x2, lines, experiment="forkstorm", patch_set="vanilla", timing_mode="detailed",
                    run_key=f"f{i}")
        jobs = rate / 60
        profile(con, rid, (("copy_page_range", KERNEL, work_us * jobs * 1e6 / 2),
                           ("release_pages", KERNEL, work_us * jobs * 1e6 / 2),
                           ("copy_page_range", "forkstorm", 7e9),  # a program's symbol of the same name: not counted
                           ("_raw_spin_lock", KERNEL, 5e9)))
        rids.append(rid)
    ro = db.connect(tmp_path / "r.db", readonly=True)
    assert [round(table002._page_work_us(ro, r), 6) for r in rids] == [40, 30, 10]
    notes = table002._fork_notes(ro, rids)
    line = next(n for n in notes if n.startswith("jobs/min against fork and exit page work"))
    assert "8 CPUs (x86-2s, timing detailed), 3 runs" in line and "Pearson r = -0.98" in line
    # the whole run's page work: 400, 450, 200 us x jobs against 600, 900, 1200 jobs/min
    assert f"not per job: r = {statistics.correlation([600, 900, 1200], [400, 450, 200]):+.2f}" in line
    # two runs are too few for a correlation
    assert not any(n.startswith("jobs/min against") for n in table002._fork_notes(ro, rids[:2]))


def test_the_seeds_fix_by_memory_size_is_a_note_under_000(tmp_path):
    """Block 000-memory: the period set and the seed's fix on two memory
    sizes; the note lists the fix's effect on kswapd smallest memory first,
    and needs both kernels on at least two machines."""
    con = db.connect(tmp_path / "r.db")
    small, big = (T.load(str(REPO / "studies" / "machines" / f"x86-2s-2x{m}m.toml")) for m in (64, 112))
    ml = json.dumps({"slots": 2})
    rids = [store(con, topo, mlockchurn_lines([1000, 1000, 2000, 2600], 0.5) +
                  [metric("mlockchurn.kswapd_sleeping_busiest", share, "CPU")], experiment="mlockchurn",
                  patch_set=kernel, run_key=f"{topo.name}-{kernel}", params_json=ml)
            for topo, kernel, share in ((big, "mlocked-on-lru", 0.80), (big, "mlocked-on-lru-kswapd-sleeps", 0.70),
                                        (small, "mlocked-on-lru", 0.80), (small, "mlocked-on-lru-kswapd-sleeps", 0.30))]
    # the seed's own shape (one node, 2 CPUs): a machine of another shape, no size to set it beside
    one = T.load("x86-1s-2c")
    others = [store(con, one, mlockchurn_lines([1000, 1000, 2000, 2600], 0.5) +
                    [metric("mlockchurn.kswapd_sleeping_busiest", 0.9, "CPU")], experiment="mlockchurn",
                    patch_set=kernel, run_key=f"one-{kernel}", params_json=ml)
              for kernel in ("mlocked-on-lru", "mlocked-on-lru-kswapd-sleeps")]
    ro = db.connect(tmp_path / "r.db", readonly=True)
    [line] = seed_tables._memory_notes(ro, rids + others)
    assert line.startswith("the seed's fix by memory size (4 CPUs, 2 nodes, timing off, the default sleep)")
    assert ("x86-2s-2x64m (128 MiB): 80 → 30 % (-62 %); x86-2s-2x112m (224 MiB): 80 → 70 % (-12 %)") in line
    assert "while the program sleeps" in line and "(the seed: 100 → 18 % on 2 GB" in line
    assert seed_tables._memory_notes(ro, rids[:3]) == []  # the fix on one machine only: nothing to set beside
    assert line in seeds.render(ro, "000", rids)


def test_where_the_period_sets_kernel_time_goes_is_a_note_per_machine(tmp_path):
    """003: the kernel symbols whose guest CPU time grew most from vanilla to
    allocators-reclaim, means over each kernel's runs, with the spin-wait part
    and the machine's PAUSE price; a machine with one kernel only gets none."""
    con = db.connect(tmp_path / "r.db")
    m140, m1 = (T.load(str(REPO / "studies" / "machines" / f"x86-1s-2c-256m{x}.toml")) for x in ("", "-pause1"))
    rids = []
    for topo, kernel, grow in ((m140, "vanilla", (0, 0)), (m140, "vanilla", (0, 0)),
                               (m140, "allocators-reclaim", (300, 100)), (m140, "allocators-reclaim", (500, 100)),
                               (m1, "vanilla", (0, 0))):
        rid = store(con, topo, qsbench_lines(6.0, 1.0, 10.0, 1000, 1.0), experiment="qsbench", patch_set=kernel,
                    timing_mode="detailed", run_key=f"q{len(rids)}")
        profile(con, rid, (("shrink_folio_list", KERNEL, (1000 + grow[0]) * 1e9),
                           ("_raw_spin_lock", KERNEL, (200 + grow[1]) * 1e9, grow[1] * 0.5e9),
                           ("clear_page_erms", KERNEL, 50e9),
                           ("qsort", "qsbench", (9000 + grow[0]) * 1e9)))  # the program's: not kernel time
        rids.append(rid)
    ro = db.connect(tmp_path / "r.db", readonly=True)
    [line] = seed_tables._qs_notes(ro, rids)
    assert line.startswith("where allocators-reclaim's kernel time goes, x86-1s-2c-256m, ")
    assert ", PAUSE 140 cycles (2 and 2 runs): +500 ms over vanilla; most grown: shrink_folio_list +400 ms, " \
        "_raw_spin_lock +100 ms; spin-wait (PAUSE) in the kernel +50 ms" in line
    assert line in seeds.render(ro, "003", rids)


def test_004s_chunk_times_are_per_quarter_node_whatever_the_chunk(tmp_path):
    """The zone_reclaim_mode=5 blocks take 1 MiB chunks: their ms per chunk
    becomes ms per quarter node (the seed's 1 GB chunk on 4 GB RADs), so a
    column of 1 MiB chunks sits beside one of 16 MiB chunks."""
    con = db.connect(tmp_path / "r.db")
    gs32 = T.load("gs1280-32")
    one = store(con, gs32, memeater_lines(gs32, 16, None, cycles=1), experiment="memeater", patch_set="vanilla",
                run_key="one", params_json=json.dumps({"cpu": 0, "chunk_mib": 1, "chunks": 16, "cycles": 1}))
    sixteen = store(con, gs32, memeater_lines(gs32, 16, None, cycles=1), experiment="memeater", patch_set="vanilla",
                    run_key="sixteen", params_json=json.dumps({"cpu": 0, "chunk_mib": 16, "chunks": 16, "cycles": 1,
                                                               "fill_frac": 0.125}))
    ro = db.connect(tmp_path / "r.db", readonly=True)
    before = table004._ms(True)
    assert before(ro, one) == pytest.approx(16 * before(ro, sixteen))
    assert table004._ms_at_hop(0)(ro, one) == pytest.approx(16 * table004._ms_at_hop(0)(ro, sixteen))
    # neither swapped: the run that filled what memeater's fill_frac asks bounds the swap point from below
    # (all it touched, 4 nodes' worth); 16 MiB of a shortened run bounds nothing
    assert table004._touched(ro, sixteen) == 4.0 and table004._touched(ro, one) is None


def test_repeats_needed_to_tell_two_kernels_apart():
    """The power estimate under a direction line: 2 (z_0.975 + z_0.8)^2 s^2 / d^2
    runs a kernel from the pooled spread; none from one run or a sum."""
    agg = seeds.Agg
    a, z = agg([10.0, 12.0, 14.0], "mean"), agg([15.0, 17.0, 19.0], "mean")  # pooled variance 4, means 5 apart
    assert seeds.repeats_needed(a, z) == math.ceil(2 * 7.849 * 4 / 25)
    assert seeds.repeats_needed(a, agg([12.5, 13.0, 13.5], "mean")) > 10  # means 1 apart: many more runs
    assert seeds.repeats_needed(a, agg([15.0], "mean")) is None
    assert seeds.repeats_needed(a, agg([1.0, 2.0], "sum")) is None


def test_a_pair_on_one_machine_with_two_disks_names_the_disk(tmp_path):
    """003 runs one machine with swap on two disks: each disk's pair is a
    direction of its own, and its line (and the verdict) says which disk;
    a machine with one disk keeps its place short."""
    con = db.connect(tmp_path / "r.db")
    gs8, ids = T.load("gs1280-8"), []
    for d, slow in (("cheetah-15k4: 5500/6000 us", 2.0), ("ssd-980pro: 80/20 us", 1.2)):
        for rep, el in enumerate((10.0, 11.0, 12.0)):
            ids.append(store(con, gs8, qsbench_lines(6.0, 1.0, el, 1000 + rep, 2.0), experiment="qsbench",
                             patch_set="vanilla", disk_model=d, run_key=f"v{d[:3]}{rep}"))
            profile(con, ids[-1], (("quicksort", "qsbench", 6 * 10 ** 12),))
            ids.append(store(con, gs8, qsbench_lines(6.0, slow, el, 1000 + rep, 2.0), experiment="qsbench",
                             patch_set="allocators-reclaim", disk_model=d, run_key=f"a{d[:3]}{rep}"))
            profile(con, ids[-1], (("quicksort", "qsbench", 6 * 10 ** 12),))
    text = table(con, "003", ids)
    lines = [x for x in text.splitlines() if x.startswith("direction, system time (guest clock)")]
    assert len(lines) == 2, lines
    assert "at 8 CPUs (gs1280-8, cheetah-15k4)" in lines[0] + lines[1]
    assert "at 8 CPUs (gs1280-8, ssd-980pro)" in lines[0] + lines[1]
    verdict = next(x for x in text.splitlines() if x.startswith("verdict: "))
    assert "cheetah-15k4" in verdict and "ssd-980pro" in verdict, verdict
    one = table(con, "003", ids[:6])
    assert "at 8 CPUs (gs1280-8)" in one and "gs1280-8, cheetah" not in one.split("verdict")[1]


def test_003_judges_system_time_on_the_guest_clock_not_by_the_tick_split(tmp_path):
    """The sorters' CPU time is exact; its split into user and system is by
    100 Hz ticks, some 50 of them system. The headline takes system time as
    that CPU time less the profile's user time: here the split says the
    period set cut system time, the guest clock says it grew, and the
    direction follows the clock. A run without a profile has no such value."""
    con = db.connect(tmp_path / "q.db")
    gs8, ids = T.load("gs1280-8"), {}
    for rep in range(3):
        for kern, sys_, user_clock in (("vanilla", 1.0, 6.2), ("allocators-reclaim", 0.9, 5.9)):
            rid = store(con, gs8, qsbench_lines(6.0, sys_, 10.0 + rep, 1000, 2.0), experiment="qsbench",
                        patch_set=kern, run_key=f"{kern}{rep}")
            profile(con, rid, (("quicksort", "qsbench", int(user_clock * 1e12)),
                               ("shrink_folio_list", KERNEL, 10 ** 9)))
            ids[kern, rep] = rid
    text = table(con, "003", list(ids.values()))
    split = cells(text, "system (getrusage: the split by 100 Hz ticks)")
    assert split[1:4] == ["1 (1-1)", "0.90 (0.90-0.90)", "-10.00%"]
    assert cells(text, CLOCK_SYS)[1:4] == ["0.80 (0.80-0.80)", "1 (1-1)", "+25.00%"]
    line = next(x for x in text.splitlines() if x.startswith("direction, system time (guest clock)"))
    assert line.startswith("direction, system time (guest clock): ours +25.00% vanilla→allocators-reclaim")
    assert "same direction as the seed" in line
    # the split's own line stays on the page, for audit, and out of the verdict
    aside = next(x for x in text.splitlines() if x.startswith("direction, system time (getrusage)"))
    assert "-10.00%" in aside and "not counted in the verdict: getrusage's split is sampled" in aside
    assert next(x for x in text.splitlines() if x.startswith("verdict: ")).startswith(
        "verdict: reproduced: 1 of 1 directions the seed's")
    bare = store(con, gs8, qsbench_lines(6.0, 1.0, 10.0, 1000, 2.0), experiment="qsbench", patch_set="vanilla",
                 run_key="bare")
    clock = next(r for r in seed_tables.SEEDS["003"].tables[0].rows if r.key == "system_clock")
    assert clock.value(con, bare) is None


def test_002_names_the_locks_each_lock_stat_column_fought_over(tmp_path):
    """lock_stat's most contended classes, contentions and wait summed over a
    column's runs and divided by its runs (a class outside one run's top ten
    counts 0 there), three a column, vanilla first, the storm's phase only;
    a default-flavor run adds no line."""
    con = db.connect(tmp_path / "l.db")
    x2 = T.load("x86-2s")

    def storm(kernel, flavor, classes, key):
        top = [{"class": c, "contentions": n, "wait_total_us": w} for c, n, w in classes]
        return store(con, x2, [*forkstorm_lines(0.6, 100), rec("lockstat", phase="run", top=top),
                               rec("lockstat", phase="boot", top=[{"class": "boot_only", "contentions": 10 ** 9}])],
                     experiment="forkstorm", patch_set=kernel, kernel_flavor=flavor, run_key=key)
    ids = [storm("rmap-lock-blocking", "lockstat", [("swap", 900, 0), ("anon_vma-W", 300, 8e6), ("ptl", 30, 0),
                                                     ("zone", 3, 0)], "a"),
           storm("vanilla", "lockstat", [("swap", 1000, 4000), ("ptl", 20, 0)], "b"),
           storm("vanilla", "lockstat", [("swap", 500, 2000), ("lru", 40, 0)], "c"),
           storm("vanilla", "default", [("x", 5, 0)], "d")]
    notes = [x for x in table(con, "002", ids).splitlines() if x.startswith("most contended")]
    assert [x.split(": ", 1)[1].split(" (lock_stat")[0] for x in notes] == [
        "swap 750 (wait 3 ms), lru 20 (wait 0 ms), ptl 10 (wait 0 ms)",
        "swap 900 (wait 0 ms), anon_vma-W 300 (wait 8,000 ms), ptl 30 (wait 0 ms)"]
    assert notes[0].startswith("most contended lock classes over the storm, vanilla (lockstat, timing off), 8 CPUs "
                               "(x86-2s), mean of 2 runs: ")
