"""Typed run rows (analysis/runrow.py) for tests that store runs without QEMU."""
from dataclasses import replace

from analysis.runrow import RunEnd, RunStart


def run_start(topo, **over) -> RunStart:
    row = RunStart(started_at="now", host="h", vmlab_version="test", topology=topo.name,
                   topology_sha256=topo.sha256, topology_toml=topo.text, topology_shape=topo.shape(),
                   nodes=topo.nodes, cpus=topo.cpus, memory_mib_per_node=topo.memory_mib, scale=topo.scale,
                   native_isa=topo.native_isa, guest_isa=topo.guest_isa, experiment="memeater", params_json="{}",
                   seed=0, kernel_arch="x86_64", kernel_release="6.1", kernel_source="linux-source-6.1",
                   patch_set="vanilla", kernel_flavor="default", kernel_config_sha256="c", kernel_sha256="k",
                   initramfs_sha256="i", engine="qemu-tcg", engine_version="10.0.2", qemu_mode="icount",
                   timing_mode="off", clock_model="per-vCPU clocks", quantum_ns=1000, disk_model=None,
                   timing_plugin=None, command_line="qemu", log_path="console.log", limitations="x")
    return replace(row, **over)


def run_end(**over) -> RunEnd:
    return replace(RunEnd(status="ok", reason=None, ended_at="later", wall_s=3.0, boot_wall_s=1.0, log_sha256=None,
                          qemu_maxrss_kib=None), **over)
