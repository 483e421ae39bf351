"""Prose that matches its outputs: a figure in a chapter's markdown (a decimal, a number with thousands separators, a
percentage) is printed by that chapter (its stored outputs, or its code when the figure is a setting), or the sentence
that quotes it names where it was measured (the README, a file of `benchmarks/`, another chapter, a results `.json`).
The same holds for a duration (`28 s`, `14 minutes`): a run's time is read from its output, never from a sentence
written after an earlier run.

Version numbers (MindSpore 2.10, YAML 1.2), formulas (`$\\ln 64 = 4.16$`) and code (backticks) are not figures.

A lesson carries no engineering history ("as of commit 64a9cc2", "not re-run since", "before this change", a dated
measurement): that goes to benchmarks/README.md.

Two more counts must be the real ones: how many chapters and notebooks the index page and the README say there are,
and how many steps an exercise says the chapter's run took (the run's `max_steps`, or the total of its log lines).
"""
import json, re
import pytest
from conftest import ROOT

# a decimal (4.476), a number with thousands separators (3,141) or a percentage (45%, 10.6%)
DECIMAL = re.compile(r"(?<![\w.$\\{^_-])(?:\d[\d,]*\.\d+|\d{1,3}(?:,\d{3})+)(?![\w.]*\d|[eE][-+]?\d)|(?<![\w.$\\{^_-])\d+(?:\.\d+)?(?=\s?%)")
# a sentence ends at . ! ? before a capital, a blank line, or a list item or table row
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`*])|\n\s*\n|\n(?=\s*[-*|] |\s*\d+\. )")
VERSION = re.compile(r"(?:MindSpore|transformers|Python|PyTorch|YAML|torch|NumPy|nbdev|License|version)[ =<>]*\d+(?:\.\d+)+")
SOURCE = re.compile(r"README|benchmarks/|[Cc]hapters?\s+\d\d|\]\(\d\d\w*_\w+\.ipynb|\.json\b")
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
    """(figure, its sentence) for each figure of the markdown that nothing of the chapter shows and that its own sentence
    names no source for (a source named elsewhere in the cell covers only its own sentence)."""
    shown, out = printed(nb), []
    for c in nb["cells"]:
        if c["cell_type"] != "markdown": continue
        for sentence in SENTENCE.split("".join(c["source"])):
            if SOURCE.search(sentence): continue
            text = VERSION.sub("", re.sub(r"\$[^$]*\$|`[^`]*`", "", sentence))
            out += [(m, sentence.strip()[:90]) for m in DECIMAL.findall(text) if m.replace(",", "") not in shown]
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
    assert [f for f, _ in unshown_figures(nb)] == ["7.17"]          # the source names its own sentence only
    nb["cells"][-1]["source"] = "A run of 9 min 45 s ended at 7.17 (the README)."
    assert unshown_figures(nb) == []
    nb["cells"].append(cell("markdown", "It reads 3,141 tokens/s, 45% of them padding."))
    assert [f for f, _ in unshown_figures(nb)] == ["3,141", "45"]


# ---- durations -------------------------------------------------------------------------------------------------------

UNITS = {"ms": r"ms|milliseconds?", "s": r"s|sec|seconds?", "min": r"min|minutes?", "h": r"h|hours?"}
DURATION = re.compile(r"(?<![\w.$\\{^_-])(\d[\d,]*(?:\.\d+)?)(?:\s|-)?(?:" + "|".join(UNITS.values()) + r")(?![\w/])")


def unshown_durations(nb):
    """(duration, the start of its cell) for each duration of the markdown (`28 s`, `8 min`) whose number nothing of the
    chapter shows (its outputs, or its code when the number is a setting such as a timeout) and no source is named for."""
    shown, out = printed(nb), []
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] != "markdown" or SOURCE.search(src): continue
        text = VERSION.sub("", re.sub(r"\$[^$]*\$|`[^`]*`", "", src))
        for m in DURATION.finditer(text):
            if not re.search(rf"(?<![\w.]){re.escape(m.group(1).replace(',', ''))}(?![\w]|\.\d)", shown):
                out.append((m.group(0), src[:70]))
    return out


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_prose_durations_are_printed_or_sourced(nb):
    found = unshown_durations(json.loads(nb.read_text(encoding="utf-8")))
    assert not found, (f"{nb.name}: durations in the prose that no output of the chapter shows and no source is named "
                       f"for (point at the output that prints the time, or name the README / benchmarks file that "
                       f"measured it): {found}")


def test_the_check_sees_an_unshown_duration():
    nb = {"cells": [{"cell_type": "code", "source": "run()", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "loss 7.94 -> 6.55; done in 48 s\n"}]},
        {"cell_type": "markdown", "source": "The run above took 48 s; a poll every `0.2 s` is code."}]}
    assert unshown_durations(nb) == []
    nb["cells"].append({"cell_type": "markdown", "source": "The whole run took 28 s (14 minutes in full, 1,558 sec)."})
    assert [d for d, _ in unshown_durations(nb)] == ["28 s", "14 minutes", "1,558 sec"]
    nb["cells"][-1]["source"] += " Measured in benchmarks/README.md."
    assert unshown_durations(nb) == []


# ---- counts of chapters and notebooks --------------------------------------------------------------------------------

COUNT = re.compile(r"(?<![\w.,-])(\d+) (chapters|notebooks)\b")


def wrong_counts(texts, chapters, notebooks):
    "(what a text says, the real number) for each `N chapters` / `N notebooks` of `texts` that is not the real count."
    real = {"chapters": chapters, "notebooks": notebooks}
    return [(m.group(0), real[m.group(2)]) for t in texts for m in COUNT.finditer(t) if int(m.group(1)) != real[m.group(2)]]


def test_index_and_readme_count_the_real_chapters():
    "Chapters: the numbered notebooks; notebooks: every page the index links to, that is every notebook but itself."
    index = json.loads((ROOT / "nbs" / "index.ipynb").read_text(encoding="utf-8"))
    texts = [(ROOT / "README.md").read_text(encoding="utf-8")] + ["".join(c["source"]) for c in index["cells"]]
    texts += ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
              for c in index["cells"] for o in c.get("outputs", [])]
    chapters = sum(p.name[0].isdigit() for p in CHAPTERS)
    notebooks = sum(p.stem != "index" for p in CHAPTERS)
    found = wrong_counts(texts, chapters, notebooks)
    assert not found, (f"the index page or the README states counts that are not the real ones ({chapters} chapters, "
                       f"{notebooks} notebooks besides the index): {found}; re-run the index (tools/refresh_outputs.py "
                       "nbs/index.ipynb) or correct the sentence")


def test_the_check_sees_a_stale_count():
    said = ["30 chapters in the reading order, 32 notebooks linked from this page", "see chapters 03b, 07 and 11"]
    assert wrong_counts(said, chapters=30, notebooks=32) == []
    assert wrong_counts(said, chapters=31, notebooks=32) == [("30 chapters", 31)]


# ---- step counts in exercises ----------------------------------------------------------------------------------------

RUN_STEPS = re.compile(r"\b(?:its|the (?:first |whole )?run's|of the (?:first )?run)\s+(\d[\d,]*)\s+(?:optimizer\s+)?steps\b")


def run_steps(nb):
    "The step counts a chapter's runs take: every `max_steps` its code sets, and the totals of its `step k/N` log lines."
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return {int(n) for n in re.findall(r"max_steps\W{1,4}(\d+)", code) + re.findall(r"\bstep \d+/(\d+)", printed(nb))}


def misstated_steps(nb):
    "(phrase, the chapter's step counts) for each `its N steps` of an exercise whose N no run of the chapter takes."
    steps, out, exercises = run_steps(nb), [], False
    for c in nb["cells"]:
        if c["cell_type"] != "markdown": continue
        src = "".join(c["source"])
        for h in re.findall(r"^(##?) (.*)$", src, re.M):
            exercises = h[1].strip().lower().startswith("exercise")
        if exercises:
            out += [(m.group(0), sorted(steps)) for m in RUN_STEPS.finditer(src) if int(m.group(1).replace(",", "")) not in steps]
    return out


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_exercises_count_the_steps_the_chapter_runs(nb):
    found = misstated_steps(json.loads(nb.read_text(encoding="utf-8")))
    assert not found, f"{nb.name}: an exercise names a step count that no run of the chapter takes: {found}"


def test_the_check_sees_a_stale_step_count():
    nb = {"cells": [
        {"cell_type": "code", "source": 'cfg = load_config(overrides=["--runner_config.max_steps=150"])', "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "step 150/150 loss 6.5435\n"}]},
        {"cell_type": "markdown", "source": "## Exercises\n\nThe check compares the rates the run logged at each of its 150 steps."}]}
    assert misstated_steps(nb) == []
    nb["cells"].append({"cell_type": "markdown", "source": "### Exercise 2\n\nCompare with each of its\n60 steps."})
    assert [p for p, _ in misstated_steps(nb)] == ["its\n60 steps"]
    nb["cells"].insert(1, {"cell_type": "markdown", "source": "## A first run\n\nLater, its 60 steps again."})  # not an exercise
    assert [p for p, _ in misstated_steps(nb)] == ["its\n60 steps"]


# ---- engineering history -----------------------------------------------------------------------------------------------

HISTORY = re.compile(r"as of commit|not (?:been )?re-?run since|before this change|\bcommit [0-9a-f]{7,40}\b"
                     r"|\b(?:19|20)\d\d-[01]\d-[0-3]\d\b", re.I)


def history(nb):
    "(phrase, the start of its cell) for each piece of engineering history in the markdown (code in backticks aside)."
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    return [(m.group(0), src[:70]) for src in cells for m in HISTORY.finditer(re.sub(r"`[^`]*`", "", src))]


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_prose_tells_no_history(nb):
    found = history(json.loads(nb.read_text(encoding="utf-8")))
    assert not found, (f"{nb.name}: engineering history in the prose (a commit, a date, 'not re-run since'): move it to "
                       f"benchmarks/README.md and let the chapter point at its outputs: {found}")


def test_the_check_sees_history():
    md = lambda src: {"cell_type": "markdown", "source": src}
    nb = {"cells": [md("The run below prints its time; `date +%F` prints `2026-12-02`."), md("Chapter 05 trains it.")]}
    assert history(nb) == []
    nb["cells"] += [md("Measured on 2026-12-02 against commit 64a9cc2."), md("As of commit a1b2c3d, not re-run since.")]
    assert [h for h, _ in history(nb)] == ["2026-12-02", "commit 64a9cc2", "As of commit", "not re-run since"]
