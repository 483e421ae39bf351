"""The reading order holds: a chapter uses only what chapters before it (in the index's reading order) built.

Read from the notebooks themselves: each chapter's `#| default_exp` names the module it builds, and each chapter's code
cells name the modules they import (`from llmpt_nb.X import`, `import llmpt_nb.X`, or `from .X import` in exported
code). A chapter importing a module that a later chapter builds asks the reader to trust code not yet taught.
"""
import json, re
import pytest
from conftest import ROOT

NBS = ROOT / "nbs"
IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:llmpt_nb\.|\.{1,2})([\w.]+)", re.M)


def cells(stem): return json.loads((NBS / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]


def reading_order():
    "The chapters linked from the index's 'Reading order' section, in order."
    text = "\n".join("".join(c["source"]) for c in cells("index") if c["cell_type"] == "markdown")
    return [n[:-6] for n in re.findall(r"\]\(([\w.-]+\.ipynb)\)", text.split("## Reading order")[1].split("\n## ")[0])]


def builders(stems):
    "Module name -> the chapter whose `#| default_exp` builds it."
    out = {}
    for s in stems:
        for c in cells(s):
            m = re.search(r"^#\|\s*default_exp\s+(\S+)", "".join(c["source"]), re.M)
            if m: out[m.group(1)] = s
    return out


def uses_of_later_chapters(order, built_by, source_of):
    "(chapter, later chapter) pairs: `chapter` imports a module that `later chapter` builds."
    found = set()
    for i, stem in enumerate(order):
        for mod in IMPORT.findall(source_of(stem)):
            owner = built_by.get(mod) or built_by.get(mod.split(".")[0])
            if owner in order and order.index(owner) > i: found.add((stem, owner))
    return found


def code_of(stem): return "\n".join("".join(c["source"]) for c in cells(stem) if c["cell_type"] == "code")


def test_every_chapter_is_in_the_reading_order():
    chapters = sorted(p.stem for p in NBS.glob("[0-9][0-9]*.ipynb"))
    assert sorted(reading_order()) == chapters, set(chapters) ^ set(reading_order())


def test_chapters_use_only_earlier_chapters():
    order = reading_order()
    found = uses_of_later_chapters(order, builders(order), code_of)
    assert not found, ("these chapters import what a later chapter builds; move the code (or the use) so that each "
                       f"chapter uses only earlier ones: {sorted(found)}")


def test_the_reading_order_is_the_name_order():
    "The docs site lists chapters by name: numbering them in reading order keeps the two the same."
    order = reading_order()
    assert order == sorted(order), f"renumber these chapters: {[s for s, t in zip(order, sorted(order)) if s != t]}"


def test_the_check_sees_a_use_of_a_later_chapter():
    order = ["a", "b", "c"]
    src = {"a": "from llmpt_nb.beta import f\n", "b": "from .alpha import g\nimport llmpt_nb.gamma.x\n", "c": ""}
    built = {"alpha": "a", "beta": "b", "gamma": "c"}
    assert uses_of_later_chapters(order, built, src.get) == {("a", "b"), ("b", "c")}
    assert uses_of_later_chapters(order, built, {"a": "", "b": "from llmpt_nb.alpha import g", "c": ""}.get) == set()
