"""Where a study's runs execute: a local pool sized to the host, or an
existing Dask cluster (`--dask ADDRESS`; dask-jobqueue's SLURMCluster on HPC
sites, see docs/studies.md). Both take pipeline.worker.run_task and give futures
with done()/result(); the coordinator does the rest.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pipeline import worker

GUEST_OVERHEAD_MIB = 768   # QEMU, the plugin and the host page cache beside a guest's RAM


def host_memory_mib() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20


def local_size(largest_guest_mib: int) -> int:
    """One worker per host core (a round-robin QEMU uses one), fewer when the
    guests would not fit in memory side by side."""
    cores = len(os.sched_getaffinity(0))
    fit = max(1, host_memory_mib() // (largest_guest_mib + GUEST_OVERHEAD_MIB))
    return max(1, min(cores, fit))


class LocalPool:
    """Threads, each driving one run in its own child process
    (worker.run_task): a dying child loses only its run."""

    def __init__(self, workers: int):
        self.workers = workers
        self._ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vmlab-run")
        self.where = f"local pool of {workers} on {os.uname().nodename}"

    def submit(self, key: str, spec_json: str, workdir: Path):
        """workdir: beside the study's database, so a restarted coordinator
        finds what a task finished after it was killed."""
        return self._ex.submit(worker.run_task, spec_json, str(workdir))

    def close(self, cancel: bool = False) -> None:
        self._ex.shutdown(wait=not cancel, cancel_futures=cancel)


class DaskPool:
    """An existing Dask cluster (or a distributed.LocalCluster in tests).
    Workers need this checkout importable (PYTHONPATH) and vmlab's venv; each
    builds its images once in its own cache (VMLAB_CACHE, or shared storage)."""

    def __init__(self, address):
        from distributed import Client
        self.client = Client(address, timeout="30s")
        n = len(self.client.scheduler_info().get("workers", {}))
        self.workers = max(1, n)
        self.where = f"Dask cluster {self.client.scheduler.address} ({n} workers)"
        self._futures = []

    def submit(self, key: str, spec_json: str, workdir: Path | None = None):
        # The task's files stay on its worker (a temporary directory); only
        # its database and console come back. pure=False: a retried key must run again, not return Dask's cached result.
        f = self.client.submit(worker.run_task, spec_json, None, key=f"vmlab-{key[:16]}-{os.urandom(3).hex()}",
                               pure=False)
        self._futures.append(f)
        return f

    def close(self, cancel: bool = False) -> None:
        if cancel:  # queued tasks never start; a running one finishes on its worker, unmerged
            self.client.cancel([f for f in self._futures if not f.done()])
        self.client.close()
