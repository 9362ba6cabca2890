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
    cmd = qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), swap=tmp_path / "s", data=tmp_path / "d", disk=d),
                                         binary=Path("q"))
    devs = [cmd[i + 1] for i, c in enumerate(cmd) if c == "-device"]
    assert len(devs) == 2
    for dev in devs:
        assert "ioeventfd=off" in dev and "x-vmlab-read-ns=5500000" in dev and "x-vmlab-servers=1" in dev
    plain = qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), swap=tmp_path / "s"), binary=Path("q"))
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


RING6 = Path(__file__).resolve().parent / "data" / "ring6-custom.toml"


def test_a_topology_without_a_disk_gets_its_native_isas_default(tmp_path):
    """A machine written for a run (no [disk]) must not fall back to
    host-timed disks: those do not repeat. x86 machines get the model every
    shipped x86 shape names, Alpha machines the GS1280 shapes' one."""
    assert "[disk]" not in RING6.read_text()
    t = T.load(str(RING6))
    assert t.disk == "ssd-980pro" and t.disk_default
    f = tmp_path / "alpha.toml"
    f.write_text(T.load("gs1280-8").text.replace('[disk]\nmodel = "cheetah-15k4"', ""))
    a = T.load(str(f))
    assert "[disk]" not in a.text and a.disk == "cheetah-15k4" and a.disk_default
    assert not T.load("gs1280-8").disk_default and not T.load("x86-2s").disk_default
    assert all(disks.default_for(isa) in disks.load_all() for isa in T.GUEST_ISAS)


def _prepared(**kw):
    from pipeline import execute
    from pipeline.spec import RunSpec
    prep = execute.prepare(RunSpec(topology=str(RING6), **kw))
    return prep, execute.limitations(prep)


def test_the_default_disk_is_the_runs_and_its_limitations_say_so():
    prep, text = _prepared()
    from pipeline.execute import disk_default
    assert prep.start == "restored" and prep.disk_model.name == "ssd-980pro" and disk_default(prep) == "ssd-980pro"
    assert "deterministic: the same inputs give the same console" in text and "not repeatable" not in text
    assert "default disk model ssd-980pro (the topology names none" in text
    # named on the command line, it is not the default
    prep, text = _prepared(disk="cheetah-15k4")
    assert prep.disk_model.name == "cheetah-15k4" and "default disk model" not in text and "deterministic" in text


@pytest.mark.parametrize("params", [(), (("swap", "zram"),), (("swap", "none"),)])
def test_host_timed_disks_when_asked_and_the_run_then_says_it_does_not_repeat(params):
    """--disk host: no model; a restored run reads its job from a host-timed
    disk even without swap on one, so none of them may claim determinism."""
    prep, text = _prepared(disk="host", params=params)
    assert prep.disk_model is None and prep.start == "restored"
    assert "deterministic" not in text and "not repeatable: its " in text and "job disk" in text
    assert "default disk model" not in text and "not its repeatability" not in text
    assert ("swap disk" in text) == (not params)


def test_a_booted_run_without_disks_repeats_whatever_the_disk_and_debians_never_does():
    _, text = _prepared(disk="host", boot=True, params=(("swap", "none"),))
    assert "deterministic" in text and "not repeatable" not in text
    _, text = _prepared(engine="debian", params=(("swap", "none"),))
    assert "upstream icount" in text and "not repeatable" in text and "deterministic" not in text
