import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# Environment for tests that call ./run.py: the suite already runs inside the
# bootstrapped venv. In CI (CI=true) every end-to-end module shares one cold
# cache for the whole session, so CI proves a new machine can build the
# images (kernels, ccache, plugin) while building each of them only once.
VMLAB_ENV = dict(os.environ, VMLAB_IN_VENV="1")


@pytest.fixture(scope="session")
def vmlab_env(tmp_path_factory):
    if os.environ.get("CI") == "true" and "VMLAB_CACHE" not in VMLAB_ENV:
        VMLAB_ENV["VMLAB_CACHE"] = str(tmp_path_factory.mktemp("cold-cache"))
    return VMLAB_ENV
