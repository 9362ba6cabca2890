"""C built for the host by the fast tests (the guest library and programs,
the C /init, the timing model, harnesses of tests/c/): one gcc command, one
base flag set, every warning an error; each build adds what it needs."""
import subprocess
from pathlib import Path

from tests import bootstrapped

BASE = ("-O2", "-Wall", "-Wextra", "-Werror")
# The guest code's own exceptions to -Wextra, as the image build compiles it
# (build/SConstruct, GUEST_CFLAGS).
GUEST = ("-Wno-sign-compare", "-Wno-unused-parameter")
# A shared library to load with ctypes.
SHARED = ("-fPIC", "-shared")


def gcc(out: Path, *sources, flags=(), include=(), libs=()) -> Path:
    """gcc BASE FLAGS -I<each include> -o OUT SOURCES LIBS (libraries after
    the sources that use them); fails the test on any warning. Returns out."""
    bootstrapped.apt("build-essential")  # gcc
    subprocess.run(["gcc", *BASE, *flags, *(f"-I{d}" for d in include), "-o", str(out), *map(str, sources), *libs],
                   check=True)
    return out
