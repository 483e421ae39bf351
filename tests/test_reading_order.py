"""The reading order holds: a chapter uses only what chapters before it (in the index's reading order) built.

Read from the notebooks themselves: each chapter's `#| default_exp` names the module it builds, and each chapter's code
cells name the modules they import (`from llmpt_nb.X import`, `import llmpt_nb.X`, or `from .X import` in exported
code). A chapter importing a module that a later chapter builds asks the reader to trust code not yet taught.

The index's "Reading order" lists the lessons, then, under `### Reference`, the chapters a lesson sends the reader to
look up (a tool, not a step of the path); each is numbered where a lesson first uses it, so the book's order, lessons
and reference chapters together by number, is the order the dependency check follows.
"""
import json, re, sys
import pytest
from conftest import ROOT

NBS = ROOT / "nbs"
IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:llmpt_nb\.|\.{1,2})([\w.]+)", re.M)


def cells(stem): return json.loads((NBS / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]


# the chapters the book treats as reference, not lessons: a tool to look up (the index lists them under `### Reference`)
# (the infrastructure chapters, atomic writes and figure fonts, are here too: they are tools, not the path)
REFERENCE = {"00_atomic", "00_figures", "04_mindformers_keys", "04a_import_config", "06a_testing", "10a_cli", "10b_api"}


PART_ONE, PART_TWO = "### Part I:", "### Part II:"


def order_section():
    """(Part I, Part II's lessons, reference) parts of the markdown of the index's 'Reading order' section: the
    headings `### Part I: ...`, `### Part II: ...` and `### Reference` divide it."""
    text = "\n".join("".join(c["source"]) for c in cells("index") if c["cell_type"] == "markdown")
    section = text.split("## Reading order")[1].split("\n## ")[0]
    rest, _, reference = section.partition("### Reference")
    before, _, lessons = rest.partition(PART_TWO)
    return before.partition(PART_ONE)[2], lessons, reference


def linked(text): return [n[:-6] for n in re.findall(r"\]\(([\w.-]+\.ipynb)\)", text)]


def part_one():
    "The notebooks of Part I, 'the whole path, small', as the index lists them, in order."
    return linked(order_section()[0])


def reading_order():
    "The lessons of Part II linked from the index's 'Reading order' section, in order (the reference chapters left out)."
    return linked(order_section()[1])


def reference_chapters():
    "The chapters the index lists under `### Reference` in its 'Reading order' section, in order."
    return linked(order_section()[2])


def book_order():
    "Lessons and reference chapters together, in name order: where each sits in the book."
    return sorted(reading_order() + reference_chapters())


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
    "Each chapter is listed once: as a lesson, or as a reference chapter."
    chapters = sorted(p.stem for p in NBS.glob("[0-9][0-9]*.ipynb"))
    listed = reading_order() + reference_chapters()
    assert sorted(listed) == chapters, set(chapters) ^ set(listed)
    assert len(set(listed)) == len(listed), f"listed twice: {sorted(s for s in listed if listed.count(s) > 1)}"


def test_reference_chapters_are_grouped_apart_from_the_lessons():
    "The reference chapters are listed under `### Reference`, and none of them among the lessons."
    assert set(reference_chapters()) == REFERENCE, set(reference_chapters()) ^ REFERENCE
    among = REFERENCE & set(reading_order())
    assert not among, f"reference chapters listed among the lessons of the reading order: {sorted(among)}"


def test_the_grouping_check_sees_a_reference_chapter_among_the_lessons(monkeypatch):
    m = sys.modules[__name__]
    lessons = "| [04 Config](04_config.ipynb) | ... |\n| [10a The `llmpt` command](10a_cli.ipynb) | ... |\n"
    reference = "".join(f"| [{s}]({s}.ipynb) |\n" for s in sorted(REFERENCE))          # listed as reference too
    monkeypatch.setattr(m, "order_section", lambda: ("", lessons, reference))
    with pytest.raises(AssertionError, match=r"among the lessons.*10a_cli"):
        m.test_reference_chapters_are_grouped_apart_from_the_lessons()


def test_chapters_use_only_earlier_chapters():
    order = book_order()
    found = uses_of_later_chapters(order, builders(order), code_of)
    assert not found, ("these chapters import what a later chapter builds; move the code (or the use) so that each "
                       f"chapter uses only earlier ones: {sorted(found)}")


def test_the_reading_order_is_the_name_order():
    "The docs site lists chapters by name: numbering them in reading order keeps the two the same."
    for order in (reading_order(), reference_chapters()):
        assert order == sorted(order), f"renumber these chapters: {[s for s, t in zip(order, sorted(order)) if s != t]}"


def test_the_check_sees_a_use_of_a_later_chapter():
    order = ["a", "b", "c"]
    src = {"a": "from llmpt_nb.beta import f\n", "b": "from .alpha import g\nimport llmpt_nb.gamma.x\n", "c": ""}
    built = {"alpha": "a", "beta": "b", "gamma": "c"}
    assert uses_of_later_chapters(order, built, src.get) == {("a", "b"), ("b", "c")}
    assert uses_of_later_chapters(order, built, {"a": "", "b": "from llmpt_nb.alpha import g", "c": ""}.get) == set()


def test_part_one_comes_first_and_lists_its_notebooks():
    "Part I's notebooks (nbs/pN_*.ipynb) are listed, in name order, under the index's `### Part I:` heading, before Part II."
    notebooks = sorted(p.stem for p in NBS.glob("p[0-9]_*.ipynb"))
    assert notebooks and part_one() == notebooks, (part_one(), notebooks)
    text = "\n".join("".join(c["source"]) for c in cells("index") if c["cell_type"] == "markdown")
    section = text.split("## Reading order")[1]
    assert section.index(PART_ONE) < section.index(PART_TWO) < section.index("### Reference"), "Part I, Part II, Reference: in that order"
