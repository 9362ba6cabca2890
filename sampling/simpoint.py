"""SimPoint 3.2's clustering, our own implementation (numpy and
scikit-learn; SimPoint's code is never vendored: shared/probes/simpoint.md
says what its code does, and this follows it step by step):

1. every interval's basic-block vector (a `T:id:count ...` line) normalised
   to sum 1; with fixed-length intervals every one weighs 1/N;
2. a random projection to `dim` dimensions (a D x dim matrix uniform in
   [-1, 1), from the seed);
3. k-means (Lloyd, `seeds` random starts from k intervals, at most 100
   iterations, weighted) for every k from 1 to max_k, keeping per k the
   start with the best BIC (SimPoint's formula: the spherical Gaussian's
   log-likelihood less half its parameters times ln R);
4. SimPoint 3.2 tries k = 1, max_k, then halves its way (a binary search);
   this tries every k up to max_k, so it may find a smaller k that passes;
5. the smallest k whose BIC reaches 90 % of the way from the lowest to the
   highest;
6. per cluster the interval nearest its centroid (the simulation point),
   weighted by the cluster's share of the intervals.

Files: `.bb` in (one line per interval, ids from 1; SimPoint's parser limits
kept: a line under 1 MiB, the last one ending in a newline), `.simpoints`
(`<interval> <cluster>`) and `.weights` (`<weight> <cluster>`) out, as
SimPoint 3.2 writes them, so its picks and ours can be set side by side.

`./run.py simpoint FILE.bb [--max-k K] [--out PREFIX]`: bad input gets one
line and exit 2, and nothing is written.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAX_LINE = 1 << 20     # SimPoint 3.2's parser aborts on a line this long
DIM = 15
SEEDS = 5              # k-means starts per k, as SimPoint's -numInitSeeds
ITERATIONS = 100
THRESHOLD = 0.9


class SimpointError(ValueError):
    """Bad input: the message is one line naming the file and what was expected."""


@dataclass
class Vectors:
    """Intervals x blocks, sparse as (row, block, count) triplets."""
    path: str
    rows: np.ndarray       # interval index per entry
    cols: np.ndarray       # block id - 1 per entry
    counts: np.ndarray     # instructions per entry
    n: int                 # intervals
    dims: int              # largest block id

    def normalised(self):
        """Each interval's vector scaled to sum 1, sparse (intervals x blocks:
        a long run's vectors would not fit dense)."""
        from scipy.sparse import csr_matrix
        sums = np.bincount(self.rows, weights=self.counts, minlength=self.n)
        return csr_matrix((self.counts / sums[self.rows], (self.rows, self.cols)), shape=(self.n, self.dims))

    def instructions(self) -> np.ndarray:
        return np.bincount(self.rows, weights=self.counts, minlength=self.n)

    def first(self, n: int) -> Vectors:
        """The first n intervals only."""
        keep = self.rows < n
        return Vectors(self.path, self.rows[keep], self.cols[keep], self.counts[keep], n, self.dims)


def read_bb(path: Path) -> Vectors:
    """Parses a SimPoint .bb file; SimpointError on anything SimPoint 3.2 would
    misread (an empty file or interval, a malformed pair, a line of 1 MiB or
    more, a last line without its newline: SimPoint drops it)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise SimpointError(f"{path}: cannot read: {e.strerror}") from None
    if not data.strip():
        raise SimpointError(f"{path}: empty: expected one 'T:id:count ...' line per interval")
    if not data.endswith(b"\n"):
        raise SimpointError(f"{path}: truncated: the last line has no newline (SimPoint 3.2 would drop it)")
    rows, cols, counts = [], [], []
    for i, line in enumerate(data.split(b"\n")[:-1]):
        where = f"{path}: line {i + 1}"
        if len(line) + 1 >= MAX_LINE:
            raise SimpointError(f"{where}: {len(line) + 1} bytes; SimPoint 3.2 reads lines under {MAX_LINE}")
        text = line.decode("ascii", "replace").strip()
        if not text.startswith("T"):
            raise SimpointError(f"{where}: expected 'T:id:count ...', got {text[:40]!r}")
        pairs = text[1:].split()
        if not pairs:
            raise SimpointError(f"{where}: an empty interval (SimPoint 3.2 stops reading there)")
        for p in pairs:
            f = p.split(":")
            if len(f) != 3 or f[0] or not (f[1].isdigit() and f[2].isdigit()) or int(f[1]) < 1:
                raise SimpointError(f"{where}: expected ':id:count' with id >= 1 and a count, got {p[:40]!r}")
            rows.append(i)
            cols.append(int(f[1]) - 1)
            counts.append(int(f[2]))
    n = rows[-1] + 1
    return Vectors(str(path), np.array(rows), np.array(cols), np.array(counts, dtype=float), n, max(cols) + 1)


def read_slices(path: Path) -> list[dict]:
    """bbv.global.slices (timing/plugin_bbv.c): per machine-wide slice its
    length, spin and dropped instructions, its end marker (the vCPU whose
    block crossed the boundary, that block's pc and execution count), every
    vCPU's instruction count at its end and, from a detailed run, every
    vCPU's modeled clock at its end (`cpu_time_ps`) and at the first
    slice's start (`start_ps`, on every row); the machine's clock at its
    end (`machine_ps`, 0: unknown) and idle time in it (`idle_ps`), and
    its cache-filter misses by hop class (`miss_hops`, a sampled profile's)
    and how far into the slice a checkpoint of its start boundary could be
    taken (`point_late`, -1: not within it; None: not written), where the
    plugin wrote them."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise SimpointError(f"{path}: cannot read: {e.strerror}") from None
    if not lines or not lines[0].startswith("# slice"):
        raise SimpointError(f"{path}: expected a '# slice ...' header line")
    names = lines[0][2:].split()
    start = None
    out = []
    for i, ln in enumerate(lines[1:], 2):
        if ln.startswith("# start"):
            start = [int(x) for x in ln.split()[2:]]
            continue
        f = ln.split()
        if len(f) != len(names):
            raise SimpointError(f"{path}: line {i}: {len(f)} fields, the header names {len(names)}")
        try:
            row = dict(zip(names, (int(x, 16) if n == "marker_pc" else int(x) for n, x in zip(names, f))))
        except ValueError:
            raise SimpointError(f"{path}: line {i}: expected whole numbers (the marker's pc in hex)") from None
        out.append({**{n: row[n] for n in names[:7]},
                    "cpu_insns": [row[n] for n in names if n.startswith("insns_cpu")],
                    "cpu_time_ps": [row[n] for n in names if n.startswith("time_ps_cpu")], "start_ps": start,
                    "machine_ps": row.get("machine_ps"), "idle_ps": row.get("idle_ps", 0),
                    "miss_hops": [row[n] for n in names if n.startswith("miss_hop")],
                    "point_late": row.get("point_late")})
    return out


def mem_features(slices: list[dict], latency_ns: list[float]) -> np.ndarray | None:
    """Per slice, its cache-filter misses by hop class (a profile's
    `miss_hopH` columns) as the time they would cost: misses per
    instruction x the class's latency (latency_ns[h]), in units of the
    run's mean slice's (so 1 is an average slice's memory time, whatever
    the machine); None where the slices have none. A chase over a cached, a
    local and a remote buffer runs the same blocks and differs only here;
    weighted by time, a slice that pays 50x the others' memory time cannot
    share their cluster, while cheap slices differ here by little and are
    told apart by their blocks."""
    if not slices or not slices[0]["miss_hops"]:
        return None
    counts = np.array([s["miss_hops"] for s in slices], dtype=float)
    insns = np.array([max(s["insns"], 1) for s in slices], dtype=float)
    t = counts / insns[:, None] * np.asarray(latency_ns[:counts.shape[1]], dtype=float)[None, :]
    mean = t.sum(axis=1).mean()
    return t / mean if mean > 0 else t


def slice_costs(slices: list[dict]) -> tuple[list[int], list[int]]:
    """Per slice of a detailed run: the machine's elapsed modeled time (the
    latest vCPU clock's advance) and the vCPUs' modeled time summed."""
    prev = slices[0]["start_ps"]
    if not prev or not slices[0]["cpu_time_ps"]:
        raise SimpointError("the slices carry no modeled clocks: vectors of a --timing detailed run are needed")
    elapsed, total = [], []
    for s in slices:
        now = s["cpu_time_ps"]
        elapsed.append(max(now) - max(prev))
        total.append(sum(now) - sum(prev))
        prev = now
    return elapsed, total


def estimate(picks: Picks, slices: list[dict]) -> dict:
    """The whole run's modeled time from its simulation points' slices alone
    (each point's cost times its cluster's share of the slices), beside the
    run's own: the clustering's and weighting's error, with every slice's
    cost as a full detailed run priced it (no warm-up error in it)."""
    elapsed, total = slice_costs(slices)
    n = len(slices)
    out = {"slices": n, "points": sum(1 for p in picks.points if p >= 0)}
    for name, cost in (("elapsed", elapsed), ("cpu_time", total)):
        est = n * sum(w * cost[p] for p, w in zip(picks.points, picks.weights) if p >= 0)
        act = sum(cost)
        out[name] = {"estimated_ps": est, "actual_ps": act, "error_pct": 100.0 * (est - act) / act if act else 0.0}
    return out


@dataclass
class Picks:
    k: int
    points: list[int]              # per cluster: its simulation point (interval index)
    weights: list[float]           # per cluster: share of the intervals
    labels: np.ndarray             # per interval: its cluster
    bic: dict[int, float] = field(default_factory=dict)   # k -> BIC of the best clustering with k


def project(x, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(x @ rng.uniform(-1.0, 1.0, size=(x.shape[1], dim)))


def bic(x: np.ndarray, w: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> float:
    """SimPoint 3.2's BIC of a clustering (shared/probes/simpoint.md step 6)."""
    r, d = x.shape
    k = centers.shape[0]
    wsum = w.sum()
    dist = w * ((x - centers[labels]) ** 2).sum(axis=1)
    s2 = dist.sum() / w.mean() / (d * r) if r > 0 else 0.0
    s2 = max(s2, 1e-300)   # every interval on its centroid: a perfect fit, not a division by zero
    wc = np.bincount(labels, weights=w, minlength=k)
    loglik = r * (-d / 2 * (math.log(2 * math.pi * s2) + 1) - math.log(wsum)
                  + float(np.sum((w / wsum) * np.log(np.maximum(wc[labels], 1e-300)))))
    params = (k - 1) + k * d + 1
    return loglik - params / 2 * math.log(r)


def cluster(vec: Vectors, max_k: int, dim: int = DIM, seed: int = 1, seeds: int = SEEDS, k: int | None = None,
            extra: np.ndarray | None = None) -> Picks:
    """k: cluster into exactly k (SimPoint's -k K) instead of choosing k by the BIC.
    extra: per interval, more dimensions appended to the projected vectors
    (ours, not SimPoint's: a sampled run's memory accesses per instruction by
    hop class, mem_features), so that intervals running the same blocks on
    data at other distances fall apart."""
    from sklearn.cluster import KMeans

    if not 1 <= max_k <= vec.n:
        raise SimpointError(f"{vec.path}: max_k: expected 1..{vec.n} (the number of intervals), got {max_k}")
    x = project(vec.normalised(), dim, seed)
    if extra is not None:
        if extra.shape[0] != vec.n:
            raise SimpointError(f"{vec.path}: {extra.shape[0]} rows of extra dimensions for {vec.n} intervals")
        x = np.hstack([x, extra])
    w = np.full(vec.n, 1.0 / vec.n)   # fixed-length intervals: each weighs the same
    runs = {}
    fixed = k
    for k in ([fixed] if fixed else range(1, max_k + 1)):
        # `seeds` starts from k random intervals each; as SimPoint does, the one with the best BIC is kept
        # (not the one with the least distortion, which is what k-means' own restarts would keep)
        for s in range(seeds):
            km = KMeans(n_clusters=k, init="random", n_init=1, max_iter=ITERATIONS, algorithm="lloyd",
                        random_state=seed * 1000 + s).fit(x, sample_weight=w)
            score = bic(x, w, km.labels_, km.cluster_centers_)
            if k not in runs or score > runs[k][2]:
                runs[k] = (km.labels_, km.cluster_centers_, score)
    scores = {k: r[2] for k, r in runs.items()}
    lo, hi = min(scores.values()), max(scores.values())
    k = fixed or min(k for k, s in scores.items() if s >= lo + THRESHOLD * (hi - lo))
    labels, centers, _ = runs[k]
    # clusters numbered as they are found; an empty one (k-means can leave one) gets no point
    points, weights = [], []
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if len(members) == 0:
            points.append(-1)
            weights.append(0.0)
            continue
        d = ((x[members] - centers[c]) ** 2).sum(axis=1)
        points.append(int(members[np.argmin(d)]))
        weights.append(len(members) / vec.n)
    return Picks(k, points, weights, labels, scores)


def write(picks: Picks, prefix: Path) -> tuple[Path, Path]:
    """`<prefix>.simpoints` and `<prefix>.weights`, as SimPoint 3.2 writes them,
    both or neither (each written whole, then renamed)."""
    sp, wt = Path(f"{prefix}.simpoints"), Path(f"{prefix}.weights")
    keep = [c for c in range(picks.k) if picks.points[c] >= 0]
    texts = {sp: "".join(f"{picks.points[c]} {c}\n" for c in keep),
             wt: "".join(f"{picks.weights[c]:.6f} {c}\n" for c in keep)}
    for p, t in texts.items():
        p.with_name(p.name + ".partial").write_text(t)
    for p in texts:
        p.with_name(p.name + ".partial").replace(p)
    return sp, wt


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.py simpoint",
                                description="Pick simulation points from a basic-block vector file (SimPoint 3.2's "
                                            "algorithm, our implementation) and write .simpoints and .weights.")
    p.add_argument("bb", help="a .bb file (one 'T:id:count ...' line per interval), or a run's id: its "
                              "machine-wide vectors (bbv.global.bb of a --timing fast run), the picks stored in "
                              "the database (table simpoint_picks)")
    p.add_argument("--vectors", default="global", help="with a run: global, or cpuN for one vCPU's vectors")
    from analysis import db
    db.add_option(p)
    p.add_argument("--max-k", type=int, default=30, help="largest number of clusters tried (default 30)")
    p.add_argument("--k", type=int, help="cluster into exactly K instead of choosing k by the BIC (SimPoint's -k)")
    p.add_argument("--dim", type=int, default=DIM, help=f"dimensions of the random projection (default {DIM})")
    p.add_argument("--seed", type=int, default=1, help="seed of the projection and of k-means (default 1)")
    p.add_argument("--out", type=Path, help="prefix of the files written (default: the .bb file's, without .bb)")
    return p


def run_vectors(db_path: str, run_id: int, vectors: str) -> Path:
    """The vector file of a stored run (its run directory is its console's)."""
    from analysis import db
    if vectors != "global" and not (vectors.startswith("cpu") and vectors[3:].isdigit()):
        raise SimpointError(f"--vectors: expected global or cpuN, got {vectors!r}")
    try:
        con = db.connect(db_path, readonly=True)
        try:
            row = con.execute("SELECT log_path, timing_mode FROM runs WHERE id = ?", (run_id,)).fetchone()
        finally:
            con.close()
    except (db.SchemaError, OSError) as e:
        raise SimpointError(str(e)) from None
    if not row:
        raise SimpointError(f"{db_path}: no run {run_id}")
    path = Path(row["log_path"]).parent / f"bbv.{vectors}.bb"
    if not path.exists():
        raise SimpointError(f"run {run_id}: no {path.name} in its directory (vectors come from --timing fast runs; "
                            f"machine-wide ones under --qemu-mode icount), got timing {row['timing_mode']}")
    return path


def store(db_path: str, run_id: int, vectors: str, max_k: int, seed: int, picks: Picks,
          est: dict | None = None) -> None:
    from analysis import db
    from analysis.rows import insert
    con = db.connect(db_path)
    with con:  # all of a clustering's rows or none
        if est:  # the estimate's error against the run's own figures (metrics simpoint.*)
            insert(con, "metrics", [{"run_id": run_id, "name": f"simpoint.{n}_error_pct",
                                     "value": est[n]["error_pct"], "unit": "%"} for n in ("elapsed", "cpu_time")]
                   + [{"run_id": run_id, "name": "simpoint.points", "value": est["points"], "unit": "slices"},
                      {"run_id": run_id, "name": "simpoint.slices", "value": est["slices"], "unit": "slices"}])
        store_picks(con, run_id, vectors, max_k, seed, picks)
    con.close()


def store_picks(con, run_id: int, vectors: str, max_k: int, seed: int, picks: Picks) -> None:
    """A clustering's picks into simpoint_picks, replacing the same clustering's (the caller's transaction)."""
    from analysis.rows import insert
    con.execute("DELETE FROM simpoint_picks WHERE run_id = ? AND vectors = ? AND max_k = ? AND seed = ?",
                (run_id, vectors, max_k, seed))
    insert(con, "simpoint_picks", [{"run_id": run_id, "vectors": vectors, "max_k": max_k, "k": picks.k,
                                    "seed": seed, "cluster": c, "interval": picks.points[c],
                                    "weight": picks.weights[c]} for c in range(picks.k) if picks.points[c] >= 0])


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    run_id = int(a.bb) if a.bb.isdigit() else None
    try:
        if a.dim < 1:
            raise SimpointError(f"--dim: expected a positive number of dimensions, got {a.dim}")
        bb = run_vectors(a.db, run_id, a.vectors) if run_id is not None else Path(a.bb)
        vec = read_bb(bb)
        if a.k is not None and not 1 <= a.k <= vec.n:
            raise SimpointError(f"{bb}: --k: expected 1..{vec.n} (the number of intervals), got {a.k}")
        picks = cluster(vec, a.max_k if a.k is None else a.k, a.dim, a.seed, k=a.k)
    except SimpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    est = None
    slices_path = bb.with_name("bbv.global.slices")
    if run_id is not None and a.vectors == "global" and slices_path.exists():
        try:
            slices = read_slices(slices_path)
            if len(slices) != vec.n:
                raise SimpointError(f"{slices_path}: {len(slices)} slices for {vec.n} vectors")
            est = estimate(picks, slices) if slices[0]["cpu_time_ps"] else None
        except SimpointError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    prefix = a.out or bb.with_suffix("")
    sp, wt = write(picks, prefix)
    if run_id is not None:
        store(a.db, run_id, a.vectors, a.max_k, a.seed, picks, est)
    how = "fixed by --k" if a.k else f"BIC over k = 1..{a.max_k}"
    print(f"{vec.n} intervals, {vec.dims} blocks: k = {picks.k} ({how}); wrote {sp} and {wt}")
    for c in range(picks.k):
        if picks.points[c] >= 0:
            print(f"  cluster {c}: interval {picks.points[c]}, weight {picks.weights[c]:.4f}")
    if est:
        print(f"the run's modeled time from its {est['points']} points' slices alone (of {est['slices']}), against "
              f"all its slices (a full detailed run's, so without a warm-up's error):")
        for n, label in (("elapsed", "elapsed (the latest vCPU clock)"), ("cpu_time", "all vCPUs' time")):
            e = est[n]
            print(f"  {label}: {e['estimated_ps'] / 1e9:.3f} ms estimated, {e['actual_ps'] / 1e9:.3f} ms, "
                  f"{e['error_pct']:+.2f} %")
    return 0
