"""The C /init (images/initramfs/init.c, the Alpha guests' init), compiled
for the host: its swap header must be the one util-linux's mkswap writes,
and its command-line splitting must agree with sh's quoting (shlex)."""
import shlex
import struct
import subprocess

import pytest

import experiments
from images import initramfs
from tests import bootstrapped
from tests.cbuild import GUEST, gcc

REPO_LIB = experiments.LIB


@pytest.fixture(scope="module")
def init_bin(tmp_path_factory):
    return gcc(tmp_path_factory.mktemp("init") / "init", initramfs.INIT_C, *experiments.lib_sources(),
               flags=GUEST, include=[REPO_LIB])


def header(path, pagesz=4096):
    page = path.read_bytes()[:pagesz]
    version, last_page, nbad = struct.unpack_from("<III", page, 1024)
    return page, version, last_page, nbad


def test_swap_header_fields(init_bin, tmp_path):
    img = tmp_path / "swap.img"
    img.write_bytes(b"\xff" * (4 << 20))  # old content must be cleared
    subprocess.run([str(init_bin), "mkswap", str(img)], check=True)
    page, version, last_page, nbad = header(img)
    assert page[-10:] == b"SWAPSPACE2"
    assert (version, last_page, nbad) == (1, (4 << 20) // 4096 - 1, 0)
    assert page[:1024] == bytes(1024) and page[1036:-10] == bytes(4096 - 1046)


def test_swap_header_matches_util_linux_mkswap(init_bin, tmp_path):
    mkswap = str(bootstrapped.apt("util-linux"))
    ours, theirs = tmp_path / "ours.img", tmp_path / "theirs.img"
    for p in (ours, theirs):
        p.write_bytes(bytes(3 << 20))
    subprocess.run([str(init_bin), "mkswap", str(ours)], check=True)
    subprocess.run([mkswap, str(theirs)], check=True, capture_output=True)
    a, b = bytearray(ours.read_bytes()[:4096]), bytearray(theirs.read_bytes()[:4096])
    a[1036:1052] = b[1036:1052] = bytes(16)  # the UUID: util-linux draws a random one
    assert a == b


def test_swap_of_a_given_size_on_a_larger_device(init_bin, tmp_path):
    """A restored machine's swap disk has the snapshot's fixed size; the run
    uses its first VMLAB_SWAP_KIB, as busybox's `mkswap DEV KBYTES` does."""
    img = tmp_path / "swap.img"
    img.write_bytes(bytes(8 << 20))
    subprocess.run([str(init_bin), "mkswap", str(img), "2048"], check=True)
    assert header(img)[2] == (2 << 20) // 4096 - 1
    subprocess.run([str(init_bin), "mkswap", str(img), "99999999"], check=True)  # past the device: all of it
    assert header(img)[2] == (8 << 20) // 4096 - 1


def test_the_job_unpacks_as_the_host_packed_it(init_bin, tmp_path):
    """A restored Alpha guest unpacks its job (one newc archive: the
    experiment's and the run's files) with the C /init's own reader."""
    from images import initramfs
    exe = init_bin.read_bytes()
    job = initramfs.join(initramfs.cpio({"bin/prog": (0o755, exe), "bin/empty": (0o644, b"")},
                                        {"dev/console": (0o20600, 5, 1)}, ("bin", "dev", "vmlab")),
                         initramfs.run_archive({"run.conf": "VMLAB_CMD=prog\n", "knobs": ""}))
    (tmp_path / "job.cpio").write_bytes(job)
    root = tmp_path / "root"
    root.mkdir()
    (root / "bin").mkdir()
    (root / "bin" / "prog").write_bytes(b"old")  # replaced, as a running program would be
    subprocess.run([str(init_bin), "unpack", str(tmp_path / "job.cpio"), str(root)], check=True)
    assert (root / "bin" / "prog").read_bytes() == exe and (root / "bin" / "prog").stat().st_mode & 0o777 == 0o755
    assert (root / "bin" / "empty").read_bytes() == b""
    assert (root / "vmlab" / "run.conf").read_text() == "VMLAB_CMD=prog\n"
    assert not (root / "dev" / "console").exists()  # device nodes: the guest's /dev is devtmpfs
    (tmp_path / "cut.cpio").write_bytes(job[:len(job) // 2])
    assert subprocess.run([str(init_bin), "unpack", str(tmp_path / "cut.cpio"), str(root)]).returncode == 1


def test_swap_header_refuses_a_tiny_device(init_bin, tmp_path):
    img = tmp_path / "tiny.img"
    img.write_bytes(bytes(4096))
    assert subprocess.run([str(init_bin), "mkswap", str(img)]).returncode == 1


@pytest.mark.parametrize("cmd", [
    "memeater --chunk-mib 16 --chunks 4 --cycles 2 --cpu 0 --sample-pages 16",
    "prog 'a b' \"c  d\" e\\ f '' x",
    "prog --name=\"it's\" 'say \"hi\"'",
])
def test_command_words_match_sh_quoting(init_bin, cmd):
    r = subprocess.run([str(init_bin), "argv", cmd], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.split("\n")[:-1] == shlex.split(cmd)


@pytest.mark.parametrize("cmd,code", [("a | b", 2), ("a && b", 2), ("a > f", 2), ("a 'open", 1)])
def test_command_needing_a_shell_is_refused(init_bin, cmd, code):
    assert subprocess.run([str(init_bin), "argv", cmd], capture_output=True).returncode == code


def test_c_init_reports_the_patches_the_shell_init_reports(init_bin, tmp_path):
    """Alpha runs prove their kernel's patch sets too: the C /init's `patch`
    records from a kernel log are the shell /init's (its dmesg | sed)."""
    from protocol import facts, records
    log = tmp_path / "kmsg"
    log.write_text("[    0.000000] Linux version 6.1\n"
                   "[    0.120000] vmlab-patch: rmap-lock-blocking (anon_vma lock as 2009's)\n"
                   "[    0.130000] something else: vmlab-patch: ptl-trylock.v2 on\n"
                   "[    0.140000] vmlab-patch: \n")
    out = subprocess.run([str(init_bin), "patches", str(log)], capture_output=True, text=True, check=True).stdout
    parsed = records.parse_text(out)
    assert not parsed.errors
    got = [{"type": r.type, **r.body} for r in parsed.records]
    shell = subprocess.run(["sed", "-n", r"s/.*vmlab-patch: \([a-z0-9.-]*\).*/\1/p", str(log)],
                           capture_output=True, text=True, check=True).stdout.split()
    assert [(r["type"], r["name"]) for r in got] == [("patch", n) for n in shell] == [
        ("patch", "rmap-lock-blocking"), ("patch", "ptl-trylock.v2")]
    assert all(ln.startswith(facts.TAG) for ln in out.splitlines())


def test_the_shell_init_takes_its_record_tag_from_the_facts_header():
    from protocol import facts
    packed = initramfs.shell_init_script().decode()
    assert f"TAG='{facts.TAG}'" in packed and "@VMLAB_TAG@" not in packed
    assert facts.TAG.strip() not in initramfs.INIT.read_text()  # held once, in vmlab_facts.h
