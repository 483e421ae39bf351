"""The outputs a chapter keeps (tools/refresh_outputs.py) are what the chapter prints now.

A reader sees the kept outputs on GitHub and on the docs site without running anything, so a kept output that the
code no longer prints is a false statement. The comparison reuses the run of tests/test_notebooks.py (conftest's
`run_chapter`: each chapter runs once per session; run alone, this file runs the chapters itself). What counts as
"the same output" is `comparable` in tools/refresh_outputs.py, the script that writes the kept outputs: texts after
the same clean-up (MindSpore log lines, temporary folders), images and widgets by number; a cell whose output is
variable by nature says so in its source (`#| varies`, or `#| varies: timing` for durations and rates).
"""
import json, re, sys
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from refresh_outputs import comparable, mismatches, NUMBER  # noqa: E402

CHAPTERS = sorted((ROOT / "nbs").glob("[0-9][0-9]*.ipynb")) + sorted((ROOT / "nbs").glob("p[0-9]_*.ipynb"))  # Part II, Part I
# chapters with nothing to show (name: why); every other chapter keeps at least one output
NOTHING_TO_SHOW = {}


def code_cells(path):
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]


def differences(kept_cells, fresh_cells):
    "Human-readable differences between the kept and the fresh outputs of the same notebook's code cells."
    if len(kept_cells) != len(fresh_cells):
        return [f"{len(kept_cells)} code cells kept, {len(fresh_cells)} run: the chapter changed during the run?"]
    out = []
    for i, (k, f) in enumerate(zip(kept_cells, fresh_cells)):
        keys = mismatches(k, f)
        if not keys: continue
        a, b = comparable(k) or {}, comparable(f) or {}
        first = "".join(k["source"]).splitlines()[:2]
        diff = {key: (a.get(key), b.get(key)) for key in keys}
        out.append(f"code cell {i} ({' / '.join(first)!r}): " +
                   "; ".join(f"{key}: kept {x!r}, now {y!r}" for key, (x, y) in diff.items()))
    return out


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_keeps_outputs(nb):
    "A chapter keeps its small outputs; one that keeps none is listed in NOTHING_TO_SHOW with the reason."
    kept = sum(len(c.get("outputs", [])) for c in code_cells(nb))
    if nb.stem in NOTHING_TO_SHOW:
        assert kept == 0, f"{nb.name} keeps outputs now: remove it from NOTHING_TO_SHOW"
    else:
        assert kept, (f"{nb.name} keeps no outputs: run `python tools/refresh_outputs.py nbs/{nb.name}` (or list it in "
                      "NOTHING_TO_SHOW in tests/test_outputs.py with the reason it has nothing to show)")


def test_nothing_to_show_names_chapters():
    assert set(NOTHING_TO_SHOW) <= {p.stem for p in CHAPTERS}, NOTHING_TO_SHOW
    assert all(isinstance(why, str) and why for why in NOTHING_TO_SHOW.values()), NOTHING_TO_SHOW


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_kept_outputs_are_current(nb, run_chapter):
    r, executed = run_chapter(nb)
    if executed is None:
        pytest.fail(f"{nb.name} does not run (see test_notebooks.py::test_notebook[{nb.stem}]):\n" + r.stderr[-3000:])
    diffs = differences(code_cells(nb), code_cells(executed))
    assert not diffs, (f"{nb.name}: kept outputs differ from what the chapter prints now. Refresh them with "
                       f"`python tools/refresh_outputs.py nbs/{nb.name}`, or, for output that changes from run to run, "
                       "put `#| varies` (or `#| varies: timing`) in the cell:\n" + "\n".join(diffs))


def test_a_changed_output_is_caught():
    "The comparison itself: a kept output edited by hand differs; log lines, temporary paths and images do not."
    import tempfile
    cell = lambda src, outs: {"cell_type": "code", "source": src, "outputs": outs}
    out = lambda t: {"output_type": "stream", "name": "stdout", "text": t}
    png = lambda b: {"output_type": "display_data", "metadata": {}, "data": {"image/png": b, "text/plain": "<Figure>"}}
    kept = [cell("print(n)", [out("19,500 lines\n")]), cell("plot()", [png("AAAA")])]
    assert differences(kept, [cell("print(n)", [out("19,500 lines\n")]), cell("plot()", [png("BBBB")])]) == []
    noisy = "[WARNING] ME(123:456,MainProcess):2025 some log\n19,500 lines\n"
    assert differences(kept, [cell("print(n)", [out(noisy)]), kept[1]]) == []
    assert differences([cell("p", [out("<tmp> made\n")])], [cell("p", [out(tempfile.gettempdir() + "/tmpab_1 made\n")])]) == []
    assert differences(kept, [cell("print(n)", [out("19,501 lines\n")]), kept[1]])
    assert differences(kept, [kept[0], cell("plot()", [])]), "a lost image must be caught"
    timed = [cell("#| varies: timing\nprint(n)", [out("19,500 lines in 0.21 s\n")])]
    assert differences(timed, [cell("#| varies: timing\nprint(n)", [out("19,500 lines in 0.35 s\n")])]) == []
    assert differences(timed, [cell("#| varies: timing\nprint(n)", [out("19,400 lines in 0.21 s\n")])])
    assert differences([cell("#| varies\nprint(t)", [out("a\n")])], [cell("#| varies\nprint(t)", [out("b\n")])]) == []
    assert differences([cell("#| slow\ntrain()", [out("loss 2.1\n")])], [cell("#| slow\ntrain()", [])]) == []
    live = {"output_type": "display_data", "data": {"application/vnd.jupyter.widget-view+json": {}, "text/plain": "VBox"}}
    plot = {"output_type": "display_data", "data": {"image/png": "", "text/plain": "Figure"}}
    assert differences([cell("#| varies: live\nfit()", [live, live])], [cell("#| varies: live\nfit()", [plot])]) == []
    assert differences([cell("#| varies\nfit()", [live, live])], [cell("#| varies\nfit()", [plot])])


def _perturbed(cell, shift):
    "The cell with every printed decimal moved by `shift` units in its last place, and float noise (`#| varies: below`) redrawn."
    import copy, random
    from refresh_outputs import _ulp
    noise = (comparable(cell) or {}).get("noise below", 0.0)
    rnd = random.Random(0)
    def move(m):
        s = m.group(1); u = _ulp(s)
        if u is None: return s
        mantissa, e, exp = s.lower().partition("e")
        if abs(float(s)) < noise:  # any other number under the noise level, printed the same way
            return f"{noise * rnd.uniform(0.01, 0.99):.{len(mantissa.partition('.')[2])}e}" if e else s
        digits = len(mantissa.partition(".")[2])
        new = float(mantissa) + shift * 10.0 ** -digits
        return f"{new:.{digits}f}" + (e + exp if e else "")
    out = copy.deepcopy(cell)
    for o in out.get("outputs", []):
        if "text" in o:
            o["text"] = NUMBER.sub(move, "".join(o["text"]))
        for mime in ("text/plain", "text/html"):
            if mime in o.get("data", {}):
                o["data"][mime] = NUMBER.sub(move, "".join(o["data"][mime]))
    return out


def test_another_cpus_float_noise_is_tolerated():
    """Every kept output, with each printed decimal moved by one unit in its last place (the noise another CPU's float
    sums give) and each number under a cell's `#| varies: below` level redrawn, still compares equal; a real change
    (a difference above the level, a count, a decimal moved by 3 units) does not."""
    printed = 0
    for nb in CHAPTERS:
        kept = code_cells(nb)
        for shift in (-1, 1):
            assert differences(kept, [_perturbed(c, shift) for c in kept]) == [], (nb.name, shift)
        printed += sum(len(NUMBER.findall(json.dumps(c.get("outputs", [])))) for c in kept)
    assert printed > 1000, printed  # the perturbation had numbers to move
    cell = lambda src, text: {"cell_type": "code", "source": src, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": text}]}
    kept = [cell("#| varies: below 1e-5\nprint(d)", "max |diff| 8.34e-07 on logits up to 1.09; 165/165\n")]
    assert differences(kept, [cell(kept[0]["source"], "max |diff| 2.38e-07 on logits up to 1.09; 165/165\n")]) == []
    assert differences(kept, [cell(kept[0]["source"], "max |diff| 3.10e-05 on logits up to 1.09; 165/165\n")])
    assert differences(kept, [cell(kept[0]["source"], "max |diff| 8.34e-07 on logits up to 1.09; 164/165\n")])
    assert differences(kept, [cell(kept[0]["source"], "max |diff| 8.34e-07 on logits up to 1.12; 165/165\n")])
    assert differences(kept, [cell(kept[0]["source"], "max |diff| 8.34e-07 on logits up to 1.10; 165/165\n")]) == []
    plain = [cell("print(d)", "max |diff| 8.34e-07\n")]
    assert differences(plain, [cell("print(d)", "max |diff| 7.75e-07\n")]), "without the cell's level, a float is a float"
    with pytest.raises(ValueError, match="varies: below"):
        comparable(cell("#| varies: below\nprint(d)", "x\n"))


def test_a_training_runs_spread_is_tolerated_where_the_cell_says_so():
    "`#| varies: within 5%`: decimals within 5% compare equal, one 6% away does not; integers and words still must match."
    cell = lambda src, text: {"cell_type": "code", "source": src, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": text}]}
    src = "#| varies: within 5%\nprint(run())"
    kept = [cell(src, "loss 7.625 -> 6.483 at step 150; ppl 647.267\n")]
    assert differences(kept, [cell(src, "loss 7.625 -> 6.512 at step 150; ppl 669.172\n")]) == []
    assert differences(kept, [cell(src, "loss 7.625 -> 6.900 at step 150; ppl 647.267\n")]), "6% away"
    assert differences(kept, [cell(src, "loss 7.625 -> 6.483 at step 151; ppl 647.267\n")]), "an integer"
    assert differences(kept, [cell(src, "loss 7.625 -> 6.483 at epoch 150; ppl 647.267\n")]), "a word"
    assert differences([cell("print(run())", kept[0]["outputs"][0]["text"])],
                       [cell("print(run())", "loss 7.625 -> 6.512 at step 150; ppl 669.172\n")]), "not without the flag"
    for bad in ("#| varies: within\n", "#| varies: within 5\n"):
        with pytest.raises(ValueError, match="varies: within 5%"):
            comparable(cell(bad + "print(d)", "x\n"))


def _stdout(cell): return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o["output_type"] == "stream")


def test_the_kept_full_run_beats_its_bigram():
    """Chapter 10 keeps the packaged default's full run (`#| slow` cells, not re-run by the default test command): what
    it stores must say what the chapter claims: held-out below the bigram, below the unigram, the curve and the
    attention maps drawn, a sample from each checkpoint."""
    cells = code_cells(ROOT / "nbs" / "10_pretrain.ipynb")
    run = next(c for c in cells if "full = json.loads" in "".join(c["source"]))
    m = re.search(r"held-out ([\d.]+) nats/token; bigram ([\d.]+), unigram ([\d.]+)", _stdout(run))
    assert m, "chapter 10 keeps no full-run result (run `python tools/refresh_outputs.py --slow nbs/10_pretrain.ipynb`)"
    held, bigram, unigram = map(float, m.groups())
    assert held < 0.92 * bigram < unigram, (held, bigram, unigram)
    samples = [l for c in cells for l in _stdout(c).splitlines() if re.match(r"step +[\d,]+ \(held-out", l)]
    assert len(samples) == 4 and all(l.split(": ", 1)[1].startswith("中国") for l in samples), samples
    slow = [c for c in cells if "".join(c["source"]).startswith("#| slow")]
    assert sum(comparable({**c, "source": ""})["images"] for c in slow) >= 1, "the curve of the full run"
    maps = next(c for c in cells if "def attention_maps(" in "".join(c["source"]))   # from the packaged step-2,000 weights
    assert comparable({**maps, "source": ""})["images"] == 1, "the attention maps"


def test_multiline_mindspore_logs_are_dropped():
    "A MindSpore log record that goes on over several lines (a tensor dump) is dropped whole; what follows it stays."
    from refresh_outputs import tidy
    record = ("[WARNING] ME(27600:1,MainProcess):2026-12-01-16:18:25.765.349 [parallel.py:12] Got (Tensor(shape=[3, 5], "
              "value=\n[[ 1.29e+00,  1.00e+00],\n [-4.22e-01,  2.13e-01]]), Tensor(shape=[7], dtype=Float32, value= [-1.6])) .\n")
    assert tidy(record) == ""
    assert tidy(record + "loss 4.431\n") == "loss 4.431\n"
    assert tidy("[[1, 2], [3, 4]]\n") == "[[1, 2], [3, 4]]\n"              # an array a cell prints is kept
