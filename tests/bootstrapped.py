"""What the project's bootstrap installs on every machine it sets up
(bootstrap/apt-packages.txt, bootstrap/requirements.txt). A test that needs
one of these fails when it is missing, never skips: a broken bootstrap must
not pass CI. Tools bootstrap does not install are no business of this module."""
import importlib
from pathlib import Path

import pytest

from bootstrap import bootstrap


def apt(package: str) -> Path:
    """The file proving `package` is installed (its line in apt-packages.txt);
    the calling test fails when it is absent."""
    proofs = {pkg.partition("=")[0]: proof for pkg, proof, _ in bootstrap.apt_requirements()}
    assert proofs.get(package, "-") != "-", f"{package}: not in bootstrap/apt-packages.txt with a file proving it"
    proof = Path(proofs[package])
    if not proof.exists():
        pytest.fail(f"{proof} is missing, though bootstrap installs {package} (bootstrap/apt-packages.txt): "
                    f"this machine's bootstrap is broken (`./run.py` installs it)", pytrace=False)
    return proof


def pip(module: str, dist: str):
    """Import `module` of `dist`, a pinned requirement; the calling test fails
    when it cannot be imported."""
    pinned = {line.split("==")[0].strip().lower() for line in bootstrap.REQUIREMENTS.read_text().splitlines()
              if "==" in line and not line.lstrip().startswith("#")}
    assert dist.lower() in pinned, f"{dist}: not pinned in bootstrap/requirements.txt"
    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.fail(f"{module} cannot be imported ({e}), though bootstrap installs {dist} "
                    f"(bootstrap/requirements.txt): this environment's bootstrap is broken", pytrace=False)
