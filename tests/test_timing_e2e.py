"""End to end with the timing plugin: the guest measures the topology
(latprobe) and the model's figures match the topology file; fast mode
gives per-CPU counts, basic-block vectors and per-chunk phases. The model's
stalls reach the guest: its own clock sees the topology. Slow: builds our
QEMU and the plugin, and boots guests."""
from pathlib import Path

import pytest

import topologies as T
from experiments.latprobe import results as latprobe_results
from sampling import simpoint
from tests.e2e import db, vmlab


@pytest.fixture(scope="module", params=["gs1280-8", "x86-2s"])
def latprobe(request, vmlab_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("latprobe")
    r = vmlab(vmlab_env, tmp, "--topology", request.param, "--exp", "latprobe", "--timing", "detailed",
              # c2c_kib 256: 4,096 dependent loads a case, so that one event in the interval (about 15 us
              # on gs1280-8 under model 4, 2026-11-28: +15 ns a load over 1,024 loads, +7 over 4,096; its
              # cause not traced) does not move the mean by 10 %
              "--param", "swap=none,buf_frac=0.125,laps=1,increments=300,c2c_kib=256")
    return request.param, tmp, r


@pytest.mark.boot
def test_pointer_chase_latency_matches_the_topology_within_5_percent(latprobe):
    name, tmp, r = latprobe
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    topo = T.load(name)
    chase, _ = latprobe_results.rows(db(tmp), 1)
    # one probe per distance class the guest sees, all of them
    assert sorted({c["hops"] for c in chase}) == sorted(set(topo.hops[0]))
    for c in chase:
        assert c["on_node"] >= 0.95, c            # the buffer really was on that node
        assert c["model_ns"] == pytest.approx(topo.latency_ns(0, c["node"]), rel=0.05), c
        # the stalls reach the guest: its own clock_gettime sees the topology
        assert c["guest_ns"] == pytest.approx(topo.latency_ns(0, c["node"]), rel=0.05), c


@pytest.mark.boot
def test_lock_pingpong_cost_grows_with_distance_as_the_model_says(latprobe):
    name, tmp, _ = latprobe
    topo = T.load(name)
    _, pp = latprobe_results.rows(db(tmp), 1)
    assert pp and all(p["model_ns"] is not None for p in pp)
    for p in pp:
        # 5 % of a 50 ns hand-off inside a socket is under 3 ns: a few of the test's 600 transfers that
        # come from memory or another state move the mean that much, so 10 %
        assert p["model_ns"] == pytest.approx(p["formula_ns"], rel=0.10), p
        assert 0.9 <= p["per_increment"] <= 1.5, p   # about one line transfer per increment
        # the guest's own round trip: two hand-offs of the line, as the machine would take, and at most
        # one spin-loop PAUSE more per side (a line can arrive while its waiter is in one: on a socket's
        # 50 ns hand-off that is most of the difference)
        pause_ns = topo.pause_cycles * topo.cycle_ps / 1000.0
        assert 2 * p["formula_ns"] * 0.9 <= p["guest_rtt_ns"] <= 2 * (p["formula_ns"] + pause_ns) * 1.1, p
    by_hops = sorted((p["hops"], p["model_ns"]) for p in pp)
    assert all(a[1] < b[1] for a, b in zip(by_hops, by_hops[1:]) if b[0] > a[0])
    assert len({h for h, _ in by_hops}) == len(set(topo.hops[0])) - (1 if topo.cpus_per_node == 1 else 0)


@pytest.mark.boot
def test_cache_to_cache_reads_cost_what_the_model_says_on_the_guest_clock(latprobe):
    name, tmp, _ = latprobe
    topo = T.load(name)
    cc = latprobe_results.c2c_rows(db(tmp), 1, topo)
    # a remote writer with the line homed on its side and on ours; a same-node writer where there is one
    assert {"writer", "reader"} <= {c["case"] for c in cc}
    assert ("socket" in {c["case"] for c in cc}) == (topo.cpus_per_node > 1)
    for c in cc:
        assert c["ns_per_load"] == pytest.approx(c["formula_ns"], rel=0.10), c


@pytest.mark.boot
def test_timing_results_land_and_every_cpu_is_told_apart(latprobe):
    name, tmp, r = latprobe
    c = db(tmp)
    run = c.execute("SELECT timing_mode, timing_plugin, limitations FROM runs").fetchone()
    assert run["timing_mode"] == "detailed" and "vmlab series" in run["timing_plugin"]
    assert "stalls are charged to the vCPU clocks" in run["limitations"]
    assert c.execute("SELECT address_map FROM timing_run").fetchone()[0].endswith("agree with the guest's SRAT")
    topo = T.load(name)
    cpus = c.execute("SELECT cpu, insns FROM timing_cpu ORDER BY cpu").fetchall()
    assert len(cpus) == topo.cpus and all(x["insns"] > 0 for x in cpus)
    # the ping-pong partners ran their own phases on their own CPUs (upstream QEMU
    # reports the translating vCPU under icount; the series' patch 0008 fixes it)
    partners = {x[0] for x in c.execute("SELECT DISTINCT cpu FROM timing_phases WHERE phase_id = 3")}
    assert len(partners) >= 2
    assert c.execute("SELECT COUNT(*) FROM timing_matrix WHERE misses > 0").fetchone()[0] >= topo.nodes
    assert c.execute("SELECT COUNT(*) FROM timing_symbols WHERE symbol = 'clear_page_rep' OR "
                     "symbol LIKE 'clear_page%'").fetchone()[0] >= 1
    # the summary's per-symbol lines are the profile's share of the CPUs' busy time (the run keeps one)
    assert "remote share of misses" in r.stdout and "top symbols by share of the CPUs' busy time" in r.stdout


@pytest.mark.boot
def test_fast_mode_counts_instructions_and_writes_basic_block_vectors(vmlab_env, tmp_path):
    r = vmlab(vmlab_env, tmp_path, "--topology", "gs1280-8", "--exp", "memeater", "--timing", "fast",
              "--param", "chunks=4,cycles=2,swap=none")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    assert c.execute("SELECT mode FROM timing_run").fetchone()[0] == "fast"
    assert c.execute("SELECT COUNT(*) FROM timing_cpu WHERE insns > 0").fetchone()[0] == 8
    rows = c.execute("SELECT cycle, chunk, guest_ms, modeled_ms, insns FROM v_timing_chunks "
                     "ORDER BY cycle, chunk").fetchall()
    assert [(x["cycle"], x["chunk"]) for x in rows] == [(cy, ch) for cy in range(2) for ch in range(4)]
    assert all(x["guest_ms"] > 0 and x["insns"] > 0 for x in rows)
    rdir = Path(c.execute("SELECT log_path FROM runs").fetchone()[0]).parent
    bb = sorted(rdir.glob("bbv.cpu*.bb"))
    assert bb and bb[0].read_text().startswith("T:")
    # machine-wide slices (plugin_bbv.c): SimPoint-readable, one slices line per vector line, each
    # vCPU's count only growing, the marker a block of the vCPU that crossed the boundary
    vec = simpoint.read_bb(rdir / "bbv.global.bb")
    slices = simpoint.read_slices(rdir / "bbv.global.slices")
    assert vec.n == len(slices) >= 2 and [s["slice"] for s in slices] == list(range(vec.n))
    assert all(len(s["cpu_insns"]) == 8 for s in slices)
    assert all(a <= b for s, t in zip(slices, slices[1:]) for a, b in zip(s["cpu_insns"], t["cpu_insns"]))
    assert all(s["insns"] >= 100_000_000 and s["marker_count"] >= 1 and s["marker_cpu"] < 8 for s in slices[:-1])
    # every instruction is in one slice, in its vector or its spin count (PAUSE loops, kept out of vectors)
    assert sum(s["insns"] + s["spin_insns"] for s in slices) == sum(slices[-1]["cpu_insns"])
    assert max(len(ln) for ln in (rdir / "bbv.global.bb").read_bytes().split(b"\n")) < 1 << 20
    picks = simpoint.cluster(vec, max_k=min(5, vec.n))
    assert 1 <= picks.k <= 5 and sum(picks.weights) == pytest.approx(1.0)


@pytest.mark.engine  # refused before a build or a boot
def test_detailed_needs_icount_and_bad_maps_fail_before_boot(vmlab_env, tmp_path):
    r = vmlab(vmlab_env, tmp_path, "--topology", "gs1280-8", "--timing", "detailed", "--qemu-mode", "mttcg")
    assert r.returncode == 2 and "needs --qemu-mode icount" in r.stderr
    bad = tmp_path / "odd.toml"
    bad.write_text(T.load("gs1280-8").text.replace("memory_mib = 64", "memory_mib = 63"))
    r = vmlab(vmlab_env, tmp_path, "--topology", str(bad), "--timing", "detailed")
    assert r.returncode == 2 and "2 MiB" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists() or \
        db(tmp_path).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
