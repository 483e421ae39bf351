"""Part I, "the whole path, small" (nbs/pN_*.ipynb): short notebooks a learner reads in an afternoon, each idea built
small in plain MindSpore and NumPy, each ending with a check that the package computes the same thing.

What holds for every Part I notebook, read from the notebook itself:
- it is short where a reader reads it: code cells of at most 20 lines, a median of at most 10 (tools/chapter_stats.py);
- it draws at least one figure and has at least two exercises, each with a folded solution;
- it exports nothing, and imports none of the engine's production concerns (signals, widgets, settings classes,
  barriers, MFU, ZeRO, the Trainer) outside its last cell;
- its last section is "Proven equal to the package", and its last code cell compares with `llmpt_nb` in an assert.
The checks themselves are checked on notebooks made to break them.
"""
import json, re, sys
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from chapter_stats import part_one_stats  # noqa: E402

PART_ONE = sorted((ROOT / "nbs").glob("p[0-9]_*.ipynb"))
# what Part II adds for production, kept out of the first course (the last cell may build a Trainer to compare with)
ENGINE = re.compile(r"^\s*(?:import|from)\s+[^\n]*\b(signal|ipywidgets|\w*Settings|barrier|mfu|metrics|zero|parallel|trainer|"
                    r"LivePlot|GracefulStop)\b", re.M)
SOLUTION = re.compile(r"^#\|\s*solution\b", re.M)


def code(nb): return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def problems(nb, stats):
    "What keeps a notebook from being a Part I notebook: a list of sentences, empty when none."
    out, cells = [], code(nb)
    if stats["largest_cell"] > 20: out.append(f"a code cell of {stats['largest_cell']} lines (at most 20)")
    if stats["median_cell"] > 10: out.append(f"median code cell {stats['median_cell']} lines (at most 10)")
    if stats["figures"] < 1: out.append("no stored figure")
    if stats["exercises"] < 2 or sum(bool(SOLUTION.search(c)) for c in cells) < 2:
        out.append(f"{stats['exercises']} exercises with {sum(bool(SOLUTION.search(c)) for c in cells)} solutions (at least 2)")
    if any(re.search(r"^#\|\s*(default_exp|exports?)\b", c, re.M) for c in cells): out.append("exports code")
    engine = sorted({m for c in cells[:-1] for m in ENGINE.findall(c)})
    if engine: out.append(f"imports the engine's {engine} before its last cell")
    headings = [l for c in nb["cells"] if c["cell_type"] == "markdown" for l in "".join(c["source"]).splitlines()
                if l.startswith("## ")]
    if not headings or headings[-1].strip() != "## Proven equal to the package":
        out.append(f"its last section is {headings[-1:]}, not '## Proven equal to the package'")
    last = cells[-1] if cells else ""
    if "llmpt_nb" not in last or "assert" not in last: out.append("its last code cell does not assert agreement with llmpt_nb")
    return out


@pytest.mark.parametrize("nb", PART_ONE, ids=[p.stem for p in PART_ONE])
def test_part_one_notebook(nb):
    found = problems(json.loads(nb.read_text(encoding="utf-8")), part_one_stats(nb))
    assert not found, f"{nb.name}: " + "; ".join(found)


def test_there_are_six_part_one_notebooks():
    assert [p.stem.split("_")[0] for p in PART_ONE] == [f"p{i}" for i in range(1, 7)], [p.name for p in PART_ONE]


def test_the_checks_see_a_notebook_that_is_not_part_one():
    md = lambda s: {"cell_type": "markdown", "source": s}
    cd = lambda s: {"cell_type": "code", "source": s}
    good = {"cells": [cd("x = 1"), md("## Exercises\n### Exercise 1: a\n### Exercise 2: b"), cd("#| solution\nx = 2"),
                      cd("#| solution\nx = 3"), md("## Proven equal to the package"),
                      cd("from llmpt_nb.data import pack_documents\nassert (mine == pack_documents(d)).all()")]}
    stats = dict(largest_cell=2, median_cell=1, figures=1, exercises=2)
    assert problems(good, stats) == []
    bad = {"cells": [cd("#| export\nimport signal\nfrom llmpt_nb.trainer import TrainSettings")] + good["cells"][1:-2]
           + [cd("print(1)")]}
    found = problems(bad, dict(stats, largest_cell=25, median_cell=12, figures=0))
    assert [f.split(" ")[0] for f in found] == ["a", "median", "no", "exports", "imports", "its", "its"], found
    assert "['TrainSettings', 'signal']" in found[4], found
