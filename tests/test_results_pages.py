"""docs/results/ holds only generated pages (analysis/pages.py), each naming
the command that re-makes it, and the guides carry no pasted banners: a
page made on an older engine or timing model says so in its own header
(its `made on` row), not a note typed above a guide.

Checked here: every page under docs/results has the generated marker and a
`command` row that makes that very page (`./run.py report ... --page
docs/results/NAME.md` or `./run.py seeds ... --page docs/results/NAME.md`),
every study a page names is a file under studies/; the header's `made on`
and `timing model` rows; no guide (docs/*.md, README.md) carries a banner."""
import re

import pytest

from analysis import pages
from tests.e2e import REPO

RESULTS = REPO / "docs" / "results"
PAGES = sorted(RESULTS.glob("*.md"))
GUIDES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
# a pasted banner: a blockquote opening with a bold stale-or-model note, or the words anywhere
BANNER = re.compile(r"^> \*\*(Stale|Timing model|Model \d|Series patch|Measured on booted)|stale since series patch",
                    re.IGNORECASE)


def test_docs_results_has_pages():
    assert PAGES, "docs/results/ has no page"
    assert not [p.name for p in RESULTS.iterdir() if p.suffix != ".md"], "docs/results holds only pages"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_results_page_is_generated_by_the_command_it_names(page):
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# Results: "), page.name
    assert pages.GENERATED in lines[:4], f"{page.name}: no generated marker: a hand-written page in docs/results"
    commands = [ln for ln in lines if ln.startswith("| command | ")]
    assert len(commands) == 1, f"{page.name}: expected one command row"
    want = re.compile(r"^\| command \| `\./run\.py (report|seeds) .*--page docs/results/" + re.escape(page.name)
                      + r"` \|$")
    assert want.match(commands[0]), f"{page.name}: its command does not make docs/results/{page.name}: {commands[0]}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_study_a_page_names_is_shipped(page):
    for ln in page.read_text().splitlines():
        if ln.startswith("| study | "):
            m = re.search(r" from `([^`]+)`", ln)
            assert m, f"{page.name}: its study row names no file: {ln}"
            path = m.group(1)
            parts = path.replace("\\", "/").split("/")
            assert len(parts) >= 2 and parts[-2] == "studies", f"{page.name}: study {path} is not under studies/"
            assert (REPO / "studies" / parts[-1]).is_file(), f"{page.name}: study {path} is not in studies/"


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_guide_carries_a_pasted_banner(guide):
    bad = [f"{n}: {ln[:80]}" for n, ln in enumerate(guide.read_text().splitlines(), 1) if BANNER.search(ln)]
    assert not bad, f"{guide.relative_to(REPO)}: a pasted banner (a page made on an older engine says so in its " \
                    f"own provenance header; a guide links it): {bad}"


# --- the header ------------------------------------------------------------------------------
def _run(**kw):
    row = {"status": "ok", "started_at": "2026-11-28T08:00:00+0000", "engine": "qemu-tcg",
           "engine_version": "QEMU 10.0.2 (Debian qemu_10.0.2+ds.orig.tar.xz) + vmlab series 418ac09ff237",
           "timing_plugin": "vmlab_timing model 4 sha256 0123456789ab, built against QEMU 10.0.2",
           "kernel_source": "linux-source-6.1", "kernel_release": "6.1.192-vmlab", "kernel_config_sha256": "c2caf21b",
           "patch_set": "vanilla", "kernel_flavor": "default", "topology": "x86-2s", "topology_shape": "2 sockets",
           "cpus": 8, "topology_sha256": "75904d09", "scale": 1 / 768, "clock_model": "per-vCPU clocks",
           "timing_mode": "detailed", "start": "restored", "host": "vm", "vmlab_version": "abc"}
    return {**row, **kw}


def _header(runs, current):
    return {ln.split(" | ")[0][2:]: ln.split(" | ", 1)[1] for ln in
            pages.provenance(runs, "./run.py report --study 1 --page docs/results/x.md", "/tmp/x.db",
                             current=current)[2:]}


def test_the_header_names_the_timing_model_and_the_engine_series():
    rows = _header([_run(), _run(timing_plugin=None, timing_mode="off")], ("418ac09ff237", 4))
    assert rows["timing model"].startswith("model 4 (plugin sha256 0123456789ab) (1); no timing plugin (1)")
    assert "vmlab series 418ac09ff237" in rows["engine"]
    assert rows["made on"].startswith("engine series 418ac09ff237, timing model 4 (the checkout that wrote this "
                                      "page: series 418ac09ff237, model 4: the same)")


def test_a_page_made_on_an_older_engine_or_model_says_so():
    older = _header([_run()], ("fedcba987654", 4))["made on"]
    assert "engine series 418ac09ff237" in older and "series fedcba987654, model 4: not the same" in older
    assert "not the same" in _header([_run()], ("418ac09ff237", 5))["made on"]
    # runs without the plugin compare by the engine alone
    off = _header([_run(timing_plugin=None)], ("418ac09ff237", 5))["made on"]
    assert "no timing model (timing off)" in off and ": the same)" in off


def test_the_header_compares_with_this_checkout_by_default():
    series, model = pages.checkout()
    assert re.fullmatch(r"[0-9a-f]{12}", series) and model == __import__("timing").MODEL_VERSION
    made = _header([_run()], None)["made on"]
    assert f"(the checkout that wrote this page: series {series}, model {model}" in made


def test_the_seeds_page_is_the_campaign_this_checkout_plans():
    """docs/results/seeds.md is made from runs whose keys this checkout would
    still give them (the key covers the engine series, the timing model, the
    kernel build and the guest programs), and it counts the campaign's runs it
    does not have yet: a change to any of those, or to studies/seeds.toml,
    without re-making the page (`./run.py seeds --db ...`, then its command)
    fails here, like a stale reference page."""
    from pipeline import seedscli, study
    from seeds import page
    text = (RESULTS / "seeds.md").read_text()
    planned = {r.key[:page.KEY_CHARS]: r.axes["block"] for r in study.load(seedscli.SEEDS_STUDY).runs}
    keys = re.findall(r"^\| \d+ \| [^|]+ \|.*\| `([0-9a-f]+)` \|(?: [^|]+ \|)?$", text, re.M)  # then its status
    assert keys, "docs/results/seeds.md lists no run"
    stale = [k for k in keys if k not in planned]
    assert not stale, (f"docs/results/seeds.md: {len(stale)} of its {len(keys)} runs have keys this checkout would "
                       "not give them (the engine series, timing model, a kernel build or a guest program changed): "
                       "re-run the campaign and re-make the page")
    m = re.search(r"^(\d+) of the (\d+) runs `studies/seeds\.toml` plans at this checkout are on this page; "
                  r"to run: (\d+)", text, re.M)
    assert m, "docs/results/seeds.md does not count the campaign's runs"
    assert (int(m[1]), int(m[2]), int(m[3])) == (len(set(keys)), len(planned), len(set(planned) - set(keys))), \
        "docs/results/seeds.md counts another campaign than studies/seeds.toml plans: re-make the page"
