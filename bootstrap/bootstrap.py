"""Host setup, standard library only: Debian packages (with bookworm-backports
for QEMU 10), then a virtual environment with the pinned Python packages,
then re-exec inside it. Each step is skipped when already done, so a warm
start costs a few dpkg look-ups.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
APT_LIST = HERE / "apt-packages.txt"
BACKPORTS_FILE = Path("/etc/apt/sources.list.d/vmlab-bookworm-backports.sources")
BACKPORTS = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def cache_dir() -> Path:
    return Path(os.environ.get("VMLAB_CACHE", Path.home() / ".cache" / "vmlab"))


def say(msg: str) -> None:
    print(f"bootstrap: {msg}", file=sys.stderr, flush=True)


def apt_requirements() -> list[tuple[str, str, str]]:
    """(package, proof, suite); a package may be pinned as "package=version"."""
    out = []
    for line in APT_LIST.read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if line:
            out.append((line[0], line[1], line[2] if len(line) > 2 else ""))
    return out


def _version(pkg: str) -> str:
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True).stdout.strip()


def _pin_differs(req: str) -> bool:
    """A pinned package ("name=version") installed at another version."""
    name, _, want = req.partition("=")
    return bool(want) and _version(name) != want


def _installed(pkg: str) -> bool:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.endswith("installed")


# Packages whose bookworm version is too old: the backports one is needed.
MIN_VERSIONS = {"qemu-system-x86": "1:10.0", "meson": "1.5"}


def _too_old(pkg: str) -> bool:
    want = MIN_VERSIONS.get(pkg)
    if not want:
        return False
    have = _version(pkg)
    return bool(have) and subprocess.run(["dpkg", "--compare-versions", have, "lt", want]).returncode == 0


def missing_packages() -> list[tuple[str, str]]:
    """(package, suite) for each requirement not yet satisfied."""
    out = []
    for pkg, proof, suite in apt_requirements():
        ok = _installed(pkg.partition("=")[0]) if proof == "-" else Path(proof).exists()
        if ok and (_too_old(pkg) or _pin_differs(pkg)):
            ok = False
        if not ok:
            out.append((pkg, suite))
    return out


def _has_backports() -> bool:
    for f in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]:
        try:
            if "bookworm-backports" in f.read_text():
                return True
        except OSError:
            pass
    return False


def install_command(missing) -> str:
    plain = [p for p, s in missing if not s]
    bpo = [p for p, s in missing if s]
    parts = []
    if bpo:
        parts.append("(add bookworm-backports to apt's sources) apt-get install -t bookworm-backports " + " ".join(bpo))
    if plain:
        parts.append("apt-get install " + " ".join(plain))
    return "; ".join(parts)


def ensure_packages() -> None:
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        say(f"missing Debian packages and not root; install them with: {install_command(missing)}")
        sys.exit(2)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if any(s for _, s in missing) and not _has_backports():
        say(f"adding bookworm-backports ({BACKPORTS_FILE})")
        BACKPORTS_FILE.write_text(BACKPORTS)
    say("apt-get update")
    subprocess.run(["apt-get", "update", "-q"], env=env, check=False, stdout=subprocess.DEVNULL)
    for suite in sorted({s for _, s in missing}):
        pkgs = [p for p, s in missing if s == suite]
        say(f"installing {' '.join(pkgs)}" + (f" from {suite}" if suite else ""))
        cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "--allow-downgrades"] + (
            ["-t", suite] if suite else []) + pkgs  # a pin may name an older version than installed
        r = subprocess.run(cmd, env=env)
        if r.returncode:
            say(f"apt-get failed; install by hand: {install_command([(p, suite) for p in pkgs])}")
            sys.exit(2)
        pinned = [p.partition("=")[0] for p in pkgs if "=" in p]
        if pinned:  # an upgrade (unattended or by hand) must not move a pin under the campaign
            subprocess.run(["apt-mark", "hold", *pinned], env=env, check=False, stdout=subprocess.DEVNULL)
    still = missing_packages()
    if still:
        say(f"still missing after apt-get: {install_command(still)}")
        sys.exit(2)


def venv_dir() -> Path:
    h = hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:12]
    return cache_dir() / f"venv-{h}"


def ensure_venv() -> Path:
    venv = venv_dir()
    py = venv / "bin" / "python"
    marker = venv / ".vmlab-complete"
    if marker.exists():
        return py
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    say(f"creating the Python environment {venv}")
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)])
    if r.returncode:
        say("python3 -m venv failed; install it with: apt-get install python3-venv")
        sys.exit(2)
    say("installing pinned Python packages (bootstrap/requirements.txt)")
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)])
    if r.returncode:
        say("pip install failed (see above); PyPI must be reachable")
        sys.exit(2)
    marker.write_text("ok\n")
    return py


def ensure(argv: list[str], script: str) -> None:
    """Make the host ready, then continue inside the venv (re-exec once)."""
    if sys.version_info < (3, 11):  # noqa: UP036 (run by whatever python3 the host has: says what is needed)
        say(f"Python 3.11 or later is needed (tomllib); this is {sys.version.split()[0]}: apt-get install python3")
        sys.exit(2)
    if os.environ.get("VMLAB_IN_VENV") == "1":
        return
    ensure_packages()
    py = ensure_venv()
    os.environ["VMLAB_IN_VENV"] = "1"
    os.execv(str(py), [str(py), script, *argv])
