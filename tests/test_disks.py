"""Disk models (topologies/disks.toml) and how they reach our QEMU."""
from pathlib import Path

import pytest

import topologies as T
from engine import qemu
from pipeline.execute import solid_state_knobs
from topologies import disks


def test_shipped_models_are_cited_and_sane():
    m = disks.load_all()
    old, new = m["cheetah-15k4"], m["ssd-980pro"]
    assert old.servers == 1 and old.read_ns == 5_500_000        # seek + half a turn at 15k rpm
    assert new.read_ns < old.read_ns / 100 and new.mbps > 50 * old.mbps
    assert T.load("gs1280-32").disk == "cheetah-15k4" and T.load("x86-2s").disk == "ssd-980pro"


@pytest.mark.parametrize("field,value,match", [
    ("read_ns", "-5", "read_ns.*whole number"),
    ("mbps", "inf", "mbps.*whole number"),
    ("mbps", "nan", "mbps.*whole number"),
    ("servers", "0", "servers"),
    ("write_ns", '"fast"', "write_ns"),
    ("rotational", "1", "rotational.*true or false"),
])
def test_bad_figures_are_one_line_naming_file_and_field(tmp_path, field, value, match):
    text = disks.FILE.read_text()
    bad = text.replace(f"\n{field} = ", f"\n{field} = {value}\nx_{field} = ", 1)
    f = tmp_path / "disks.toml"
    f.write_text(bad.replace(f"x_{field} = ", "# "))
    with pytest.raises(disks.DiskError, match=match) as e:
        disks.load_all(f)
    assert str(e.value).startswith(str(f)) and "\n" not in str(e.value)


def test_unknown_model_names_the_choices():
    with pytest.raises(disks.DiskError, match="cheetah-15k4.*ssd-980pro.*'floppy'"):
        disks.get("floppy")


def test_a_topology_naming_an_unknown_disk_is_refused(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text(T.load("gs1280-8").text.replace('model = "cheetah-15k4"', 'model = "tape"'))
    with pytest.raises(T.TopologyError, match="disk.model"):
        T.load(str(f))


def test_the_model_goes_on_every_virtio_blk_disk_with_ioeventfd_off(tmp_path):
    t = T.load("gs1280-8")
    d = disks.get(t.disk)
    cmd = qemu.command_line(t, Path("k"), Path("i"), binary=Path("q"), swap_image=tmp_path / "s",
                            data_image=tmp_path / "d", disk=d)
    devs = [cmd[i + 1] for i, c in enumerate(cmd) if c == "-device"]
    assert len(devs) == 2
    for dev in devs:
        assert "ioeventfd=off" in dev and "x-vmlab-read-ns=5500000" in dev and "x-vmlab-servers=1" in dev
    plain = qemu.command_line(t, Path("k"), Path("i"), binary=Path("q"), swap_image=tmp_path / "s")
    assert not any("x-vmlab" in a for a in plain)


def test_only_solid_state_models_tell_the_guest_their_disks_are_not_rotational():
    ssd, scsi = disks.get("ssd-980pro"), disks.get("cheetah-15k4")
    assert not ssd.rotational and scsi.rotational and ssd.label().endswith("non-rotational")
    assert solid_state_knobs(ssd, ["/dev/vda", "/dev/vdb"]) == [
        ("nonrot_vda", "/sys/block/vda/queue/rotational", 0), ("nonrot_vdb", "/sys/block/vdb/queue/rotational", 0)]
    # zram, no disk, a rotational model, host-timed disks: nothing (those runs' initramfs stays byte for byte)
    assert solid_state_knobs(ssd, ["zram:64", ""]) == []
    assert solid_state_knobs(scsi, ["/dev/vda", "/dev/vdb"]) == [] and solid_state_knobs(None, ["/dev/vda"]) == []


def test_a_model_without_rotational_is_refused(tmp_path):
    f = tmp_path / "disks.toml"
    f.write_text(disks.FILE.read_text().replace("rotational = false\n", "", 1))
    with pytest.raises(disks.DiskError, match="ssd-980pro.rotational"):
        disks.load_all(f)
