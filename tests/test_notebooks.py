"""Every chapter in nbs/ runs top to bottom, each in its own process (MindSpore keeps global state)."""
import json, subprocess
import pytest
from conftest import ROOT, bin_path

NOTEBOOKS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith(("_", ".")))


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 7, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_chapter_opens_without_a_kernel_dialog(nb):
    "A stored Python 3 kernelspec: JupyterLab opens the chapter without asking which kernel to use."
    spec = json.loads(nb.read_text(encoding="utf-8")).get("metadata", {}).get("kernelspec", {})
    assert spec.get("name") == "python3" and spec.get("language") == "python", (nb.name, spec)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(nb, run_chapter):
    "As `nbdev-test NB`; the outputs of this run are kept for tests/test_outputs.py (conftest's `run_chapter`)."
    r, _ = run_chapter(nb)
    assert r.returncode == 0 and "Success." in r.stdout, r.stdout[-3000:] + r.stderr[-6000:]


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_slow_cells(nb, env):
    "Cells flagged `#| slow` run here (python -m pytest -m slow)."
    r = subprocess.run([bin_path("nbdev-test"), str(nb), "--flags", "slow", "--cell-timeout", "3000"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=3600)  # chapter 10 trains the packaged default in a slow cell
    assert r.returncode == 0 and "Success." in r.stdout, r.stdout[-3000:] + r.stderr[-6000:]
