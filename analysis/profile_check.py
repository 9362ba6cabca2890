"""The profile's check (analysis/profile.py; docs/timing.md, "The
profile"): per CPU, its symbols' time + idle + drift against its modeled
clock over the profile, and the instructions attributed against the
profile's own count and the engine's (vcpu_clocks). The rule: within 0.1 %
(TOLERANCE); drift is what the columns do not explain."""
from __future__ import annotations

from dataclasses import dataclass

TOLERANCE = 0.001


@dataclass
class CpuCheck:
    """One CPU's profile against its clock and instruction count."""
    cpu: int
    clock_ps: int | None     # its modeled time over the profile: clock at exit - start_ps (None: not reported)
    symbols_ps: int          # its symbols' time
    idle_ps: int
    drift_ps: int
    insns: int               # attributed: its symbols' instructions
    counted_insns: int       # the plugin's own count (profile_cpus.insns)
    vcpu_insns: int | None   # the engine's count at exit (vcpu_clocks): the vCPU's whole life
    whole_life: bool         # the profile saw the whole life (a booted run), so insns should equal vcpu_insns

    @property
    def time_error(self) -> float | None:
        """(symbols + idle - clock) / clock: minus the drift's share when the rows add up."""
        return (self.symbols_ps + self.idle_ps - self.clock_ps) / self.clock_ps if self.clock_ps else None

    @property
    def rows_gap_ps(self) -> int | None:
        """clock - symbols - idle - drift: 0 when the stored rows add up."""
        return None if self.clock_ps is None else self.clock_ps - self.symbols_ps - self.idle_ps - self.drift_ps

    def problems(self, tol: float = TOLERANCE) -> list[str]:
        out = []
        if self.clock_ps is None:
            out.append(f"cpu {self.cpu}: no clock at exit to check against")
        else:
            if self.rows_gap_ps:
                out.append(f"cpu {self.cpu}: symbols + idle + drift miss the clock by {self.rows_gap_ps:,} ps")
            if self.clock_ps and abs(self.time_error) > tol:
                out.append(f"cpu {self.cpu}: symbols + idle are {100 * self.time_error:+.3f} % off the clock "
                           f"(drift {self.drift_ps:,} ps)")
        if self.insns != self.counted_insns:
            out.append(f"cpu {self.cpu}: {self.insns:,} instructions attributed, the profile counted "
                       f"{self.counted_insns:,}")
        if self.vcpu_insns is not None:
            if self.whole_life and abs(self.insns - self.vcpu_insns) > tol * max(self.vcpu_insns, 1):
                out.append(f"cpu {self.cpu}: {self.insns:,} instructions attributed, the engine counted "
                           f"{self.vcpu_insns:,}")
            elif self.insns > self.vcpu_insns:
                out.append(f"cpu {self.cpu}: {self.insns:,} instructions attributed, more than the engine's "
                           f"{self.vcpu_insns:,}")
        return out

    def ok(self, tol: float = TOLERANCE) -> bool:
        return not self.problems(tol)


def check(con, run_id: int) -> list[CpuCheck]:
    """Per CPU of the run's profile: its symbols + idle + drift against its
    modeled clock over the profile, and the instructions attributed against
    the engine's count (equal on a booted run; a restored run's engine count
    also holds the snapshot's life before the profile)."""
    booted = (con.execute("SELECT start FROM runs WHERE id = ?", (run_id,)).fetchone() or ["booted"])[0] == "booted"
    out = []
    for c in con.execute(
            "SELECT c.*, v.insns AS vcpu_insns, COALESCE(s.t, 0) AS symbols_ps, COALESCE(s.i, 0) AS attributed "
            "FROM profile_cpus c LEFT JOIN vcpu_clocks v ON v.run_id = c.run_id AND v.cpu = c.cpu "
            "LEFT JOIN (SELECT cpu, SUM(time_ps) t, SUM(insns) i FROM profile_symbols WHERE run_id = ? "
            "GROUP BY cpu) s ON s.cpu = c.cpu WHERE c.run_id = ? ORDER BY c.cpu", (run_id, run_id)):
        out.append(CpuCheck(c["cpu"], None if c["clock_ps"] is None else c["clock_ps"] - c["start_ps"],
                            c["symbols_ps"], c["idle_ps"], c["drift_ps"], c["attributed"], c["insns"],
                            c["vcpu_insns"], booted))
    return out
