"""Fixtures and marks for the whole suite. pytest.ini puts the checkout on
sys.path (pythonpath), so tests import the project's packages and tests.*."""
import os

import pytest

from tests.e2e import environment

# The kinds of test that take minutes (pytest.ini describes each): all of
# them are `slow` too, so `-m "not slow"` is the fast suite whatever kinds
# there are. browser is a kind, but a fast one.
SLOW_KINDS = ("engine", "boot", "study")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)


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
