from protocol import records as R


def test_records_among_kernel_noise_and_garbage():
    text = "\n".join([
        "[    0.000000] Linux version 6.1.192-vmlab",
        '@@VMLAB {"type":"machine","nodes":[{"node":0}]}',
        "random console junk",
        '@@VMLAB {"type":"chunk","cycle":0,',           # truncated
        '[    1.2] printk @@VMLAB {"type":"chunk","cycle":0,"chunk":1}\r',  # shares a line with the kernel
        '@@VMLAB ["not","an","object"]',
        '@@VMLAB {"no_type": 1}',
        "\xff\xfe binary",
        '@@VMLAB {"type":"end","rc":0}',
    ])
    p = R.parse_text(text)
    assert [r.type for r in p.records] == ["machine", "chunk", "end"]
    assert [r.lineno for r in p.records] == [2, 5, 9]
    assert p.records[1].body["chunk"] == 1
    assert len(p.errors) == 3
    assert p.errors[0].startswith("line 4: malformed record")
    assert p.errors[1].startswith("line 6:") and p.errors[2].startswith("line 7:")


def test_invalid_utf8_does_not_stop_ingest():
    data = b'\xff\xfe\n@@VMLAB {"type":"end","rc":3}\n'
    p = R.parse_bytes(data)
    assert p.first("end").body["rc"] == 3 and not p.errors


def test_guest_probe_output_parses(tmp_path):
    """The real guest-side C emitter, compiled for the host, produces valid records."""
    import subprocess

    import experiments
    from tests.cbuild import GUEST, gcc
    from tests.e2e import REPO
    exe = gcc(tmp_path / "probe", REPO / "images/initramfs/probe.c", *experiments.lib_sources(), flags=GUEST,
              include=[REPO / "experiments/lib"])
    out = subprocess.run([str(exe), "snapshot", "before"], capture_output=True, text=True, check=True).stdout
    out += subprocess.run([str(exe), "machine"], capture_output=True, text=True, check=True).stdout
    p = R.parse_text(out)
    assert not p.errors
    assert {r.type for r in p.records} == {"vmstat", "nodemem", "nodestat", "kswapd", "swap", "machine"}
    assert p.first("vmstat").body["counters"]["pgfault"] > 0
    node0 = p.first("nodestat").body["nodes"][0]
    assert "numa_hit" in node0 and "nr_vmscan_write" in node0 and "nr_dirty" not in node0
    m = p.first("machine").body
    assert len(m["distances"]) == len(m["nodes"]) >= 1 and m["distances"][0][0] == 10
