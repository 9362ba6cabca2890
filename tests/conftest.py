"""Fixtures and marks for the whole suite. pytest.ini puts the checkout on
sys.path (pythonpath), so tests import the project's packages and tests.*."""
import os

import pytest

from tests.e2e import environment

# The kinds of test that take minutes (pytest.ini describes each): all of
# them are `slow` too, so `-m "not slow"` is the fast suite whatever kinds
# there are. browser is a kind, but a fast one.
SLOW_KINDS = ("engine", "boot", "study")


# Modules that start a kernel tree (6.1's with seed 002's pair, Alpha,
# every patch set, 6.12) go first: builds hold both cores, so the suite
# ends soonest when the build chain is done early and the short tests fill
# the other worker's time at the end (longest first). The first two build different
# trees (6.1's default, Alpha), so both workers compile from the start;
# every patch set then builds in the 6.1 tree the first left. `./run.py
# test` keeps this order for xdist (--no-loadscope-reorder).
BUILDS_FIRST = ("test_seed002_e2e.py", "test_alpha.py", "test_patches_e2e.py", "test_cxl_e2e.py",
                "test_tiering_e2e.py")


def _order(item) -> tuple:
    name = item.path.name
    first = BUILDS_FIRST.index(name) if name in BUILDS_FIRST else len(BUILDS_FIRST)
    return (first, not item.get_closest_marker("slow"))


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_order)  # stable: a module's tests keep their order


@pytest.fixture(scope="session")
def vmlab_env(tmp_path_factory):
    """The environment for ./run.py in end-to-end tests (tests.e2e.environment).
    In CI (CI=true) every end-to-end module shares one cold cache for the
    whole session, so CI proves a new machine can build the images (kernels,
    ccache, plugin) while building each of them only once."""
    if os.environ.get("CI") == "true" and "VMLAB_CACHE" not in os.environ:
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            # one cold cache for the whole session, shared by every worker: the
            # build and snapshot locks make each artifact be built once
            root = root.parent
        cache = root / "cold-cache"
        cache.mkdir(exist_ok=True)
        return environment(str(cache))
    return environment()
