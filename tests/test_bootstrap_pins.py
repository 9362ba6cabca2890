"""The bootstrap's pinned Debian packages (bootstrap/apt-packages.txt,
"package=version"): a guest kernel's source at another version than its pin
is missing, so a new machine installs the pinned one (a kernel build's key
holds its source's version: an unpinned update re-keys every run)."""
from bootstrap import bootstrap
from images import variants


def test_the_guest_kernels_sources_are_pinned_and_installed_at_their_pins():
    pins = {p.partition("=")[0]: p.partition("=")[2] for p, _, _ in bootstrap.apt_requirements()}
    for pkg in ("linux-source-6.1", "linux-source-6.12"):
        assert pins.get(pkg), f"{pkg}: not pinned in bootstrap/apt-packages.txt"
        assert bootstrap._version(pkg) == pins[pkg], f"{pkg}: installed at another version than its pin"
    assert variants.SOURCE_PACKAGE in pins


def test_a_pinned_package_at_another_version_is_missing(monkeypatch):
    monkeypatch.setattr(bootstrap, "_version", lambda pkg: {"src": "1.0-3"}.get(pkg, ""))
    assert bootstrap._pin_differs("src=1.0-2")
    assert not bootstrap._pin_differs("src=1.0-3")
    assert not bootstrap._pin_differs("src")  # unpinned: any version
