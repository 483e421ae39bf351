"""Prose that matches its outputs: a decimal figure in a chapter's markdown is printed by that chapter (its stored
outputs, or its code when the figure is a setting), or the cell that quotes it names where it was measured (the
README, a file of `benchmarks/`, another chapter, a results `.json`).

Version numbers (MindSpore 2.10, YAML 1.2), formulas (`$\\ln 64 = 4.16$`) and code (backticks) are not figures.
"""
import json, re
import pytest
from conftest import ROOT

DECIMAL = re.compile(r"(?<![\w.$\\{^_-])\d[\d,]*\.\d+(?![\w.]*\d)")
VERSION = re.compile(r"(?:MindSpore|transformers|Python|PyTorch|YAML|torch|NumPy|nbdev|License|version)[ =<>]*\d+(?:\.\d+)+")
SOURCE = re.compile(r"README|benchmarks/|[Cc]hapters? \d\d|\]\(\d\d\w*_\w+\.ipynb|\.json\b")
CHAPTERS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith(("_", ".")))


def printed(nb):
    "Everything a notebook shows besides its markdown: stored output texts and its code, commas dropped."
    parts = []
    for c in nb["cells"]:
        if c["cell_type"] == "code": parts.append("".join(c["source"]))
        for o in c.get("outputs", []):
            parts.append("".join(o.get("text", "")))
            parts += ["".join(o.get("data", {}).get(k, "")) for k in ("text/plain", "text/html", "text/markdown")]
    return "\n".join(parts).replace(",", "")


def unshown_figures(nb):
    "(figure, the start of its cell) for each decimal figure of the markdown that nothing shows or names."
    shown, out = printed(nb), []
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] != "markdown" or SOURCE.search(src): continue
        text = VERSION.sub("", re.sub(r"\$[^$]*\$|`[^`]*`", "", src))
        out += [(m, src[:70]) for m in DECIMAL.findall(text) if m.replace(",", "") not in shown]
    return out


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_prose_figures_are_printed_or_sourced(nb):
    found = unshown_figures(json.loads(nb.read_text(encoding="utf-8")))
    assert not found, (f"{nb.name}: figures in the prose that no cell of the chapter prints and no source is named "
                       f"for (print them, or name the README / benchmarks file / chapter that measured them): {found}")


def test_the_check_sees_an_unshown_figure():
    cell = lambda kind, src, text=None: {"cell_type": kind, "source": src, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": text}] if text else []}
    nb = {"cells": [cell("code", "print(loss)", "held-out 4.431\n"), cell("markdown", "It ends at 4.431, then 4.43.")]}
    assert unshown_figures(nb) == []
    nb["cells"].append(cell("markdown", "A run of 9 min 45 s ended at 7.17 (MindSpore 2.10, $\\ln 64 = 4.16$)."))
    assert [f for f, _ in unshown_figures(nb)] == ["7.17"]
    nb["cells"][-1]["source"] += " Measured in the README."
    assert unshown_figures(nb) == []
