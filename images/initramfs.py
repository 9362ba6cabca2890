"""Guest userland: an uncompressed newc initramfs with the experiment's
static programs, vmlab-probe and /init: on x86_64 static busybox and the
shell /init; on Alpha (no busybox package) our own static C /init (init.c),
which does the same steps and reports the same records.

The archive is written here rather than with cpio(1) so that it needs no
root (the /dev/console node) and is byte-for-byte reproducible (mtime 0,
sorted entries): the same inputs give the same hash in every run record.
"""
from __future__ import annotations

import hashlib
import stat
from pathlib import Path

HERE = Path(__file__).resolve().parent
INIT = HERE / "initramfs" / "init"
PROBE_SRC = HERE / "initramfs" / "probe.c"
INIT_C = HERE / "initramfs" / "init.c"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static

# Guest C compiler and extra flags per arch. Alpha: static glibc binaries
# crash in __ctype_init unless linked without relaxation (measured).
GUEST_CC = {
    "x86_64": ("gcc", ""),
    "alpha": ("alpha-linux-gnu-gcc", " -Wl,--no-relax"),
}
# The archiver for the guest library (experiments/lib -> libvmlab.a) per arch.
GUEST_AR = {"x86_64": "ar", "alpha": "alpha-linux-gnu-ar"}
GUEST_NM = {"x86_64": "nm", "alpha": "alpha-linux-gnu-nm"}


def text_base(arch: str, program: str) -> int | None:
    """Where an experiment's program is linked on x86-64 (None: the
    linker's default): static programs all start at 0x400000, so a profile
    could not tell them apart by address; each is moved to its own 16 MiB
    slot above 256 MiB, from its name (the same every build), clear of
    busybox and vmlab-probe at the default (timing/plugin_prof.c looks the
    user text up by address alone), and below 2 GiB, where the small code
    model's absolute relocations (crt1.o's) reach."""
    if arch != "x86_64":
        return None
    import zlib
    return 0x10000000 + (zlib.crc32(program.encode()) % 96) * 0x1000000


def symbol_table(arch: str, programs: dict[str, Path]) -> str:
    """The programs' text symbols as "start end name program" lines (hex),
    what the profile names user time by (timing/plugin_prof.c): kept beside
    the initramfs by the build. A program without symbols has no lines:
    its time is the profile's [user]."""
    import subprocess
    out = ["# start end symbol program (timing/plugin_prof.c)"]
    for name, path in sorted(programs.items()):
        r = subprocess.run([GUEST_NM[arch], "-S", "--defined-only", str(path)], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in "TtWw":
                start, size = int(f[0], 16), int(f[1], 16)
                if size:
                    out.append(f"{start:x} {start + size:x} {f[3]} {name}")
    return "\n".join(out) + "\n"


def shell_init(arch: str) -> bool:
    """Whether the arch's /init is the busybox shell script (else init.c)."""
    return arch == "x86_64"

DIRS = ("bin", "dev", "proc", "sys", "tmp", "vmlab", "mnt")


def _entry(name: str, mode: int, data: bytes = b"", ino: int = 0, rdev=(0, 0)) -> bytes:
    name_b = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0]
    hdr = b"070701" + b"".join(f"{x:08x}".encode() for x in fields)
    out = hdr + name_b
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def cpio(files: dict[str, tuple[int, bytes]], devices: dict[str, tuple[int, int, int]] | None = None,
         dirs: tuple[str, ...] = ()) -> bytes:
    """files: path -> (mode bits, content); devices: path -> (mode, major, minor)."""
    parts, ino = [], 1
    for d in sorted(dirs):
        parts.append(_entry(d, stat.S_IFDIR | 0o755, ino=ino))
        ino += 1
    for path, (mode, major, minor) in sorted((devices or {}).items()):
        parts.append(_entry(path, mode, ino=ino, rdev=(major, minor)))
        ino += 1
    for path in sorted(files):
        mode, data = files[path]
        parts.append(_entry(path, stat.S_IFREG | mode, data, ino=ino))
        ino += 1
    parts.append(_entry("TRAILER!!!", 0))
    blob = b"".join(parts)
    return blob + b"\0" * (-len(blob) % 512)


def shell_init_script() -> bytes:
    """The shell /init with the record tag of experiments/lib/vmlab_facts.h
    (VMLAB_TAG) put in, so the guest's C code, its shell and the host share
    one definition."""
    from protocol import facts
    text = INIT.read_text()
    if "@VMLAB_TAG@" not in text:
        raise ValueError(f"{INIT}: expected the placeholder @VMLAB_TAG@ for the record tag")
    return text.replace("@VMLAB_TAG@", facts.TAG).encode()


def base_archive(binaries: dict[str, Path], arch: str = "x86_64") -> bytes:
    """The experiment's archive: /init (with busybox where the arch uses the
    shell /init; else the compiled `init` among the binaries) and the given
    static programs under /bin."""
    binaries = dict(binaries)
    if shell_init(arch):
        if not BUSYBOX.is_file():
            raise FileNotFoundError(f"{BUSYBOX} missing: install it with `apt-get install busybox-static`")
        files = {"init": (0o755, shell_init_script()), "bin/busybox": (0o755, BUSYBOX.read_bytes())}
    else:
        files = {"init": (0o755, Path(binaries.pop("init")).read_bytes())}
    for name, path in binaries.items():
        files[f"bin/{name}"] = (0o755, Path(path).read_bytes())
    devices = {"dev/console": (stat.S_IFCHR | 0o600, 5, 1)}
    return cpio(files, devices, DIRS)


def run_archive(files: dict[str, str]) -> bytes:
    """The per-run part (files under /vmlab), appended to the cached archive
    (Linux unpacks concatenated archives in order), so parameters never
    force a rebuild."""
    return cpio({f"vmlab/{name}": (0o644, text.encode()) for name, text in files.items()})


def entries_end(blob: bytes) -> int:
    """Offset of a newc archive's trailer entry (where its entries end)."""
    off = 0
    while True:
        if blob[off:off + 6] != b"070701":
            raise ValueError(f"not a newc cpio archive at offset {off}")
        namesize, filesize = int(blob[off + 94:off + 102], 16), int(blob[off + 54:off + 62], 16)
        name = blob[off + 110:off + 110 + namesize - 1]
        if name == b"TRAILER!!!":
            return off
        off += 110 + namesize
        off += -off % 4
        off += filesize + (-filesize % 4)


def join(first: bytes, second: bytes) -> bytes:
    """One archive of both: the kernel unpacks concatenated archives, a
    user-space cpio -i stops at the first trailer (a restored guest's job)."""
    return first[:entries_end(first)] + second


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
