"""Re-run chapters and keep their outputs, the way the notebooks are committed: executed top to bottom in their own
folder with IN_TEST=1 (tiny configs, `#| slow` cells skipped the way nbdev-test skips them), MindSpore's log lines
and this machine's temporary paths left out, the state of the widgets an output shows kept, then `nbdev-clean`.

    python tools/refresh_outputs.py nbs/05_train.ipynb [nbs/10_pretrain.ipynb ...]
    python tools/refresh_outputs.py --slow nbs/10_pretrain.ipynb   # `#| slow` cells run too (their outputs are kept)

The kept outputs are checked by tests/test_outputs.py, which compares them with a fresh run through `comparable`
below (the one place that says what "the same output" means):

- texts (stdout, stderr, the text of results and displays) after `tidy`: equal, except for the last digits of
  decimal numbers (`same_number`: one unit in the last printed place, or 1e-5 relative), because two CPUs' float sums
  differ there; integers (counts, sizes, table values) must be equal;
- a cell that prints float-noise-sized numbers (a difference against a reference) says below what size they are
  noise: `#| varies: below 1e-5` compares every number under 1e-5 as equal to any other under it (the cell's own
  assert checks the tolerance) and everything else as above;
- a cell that prints the result of many training steps says how far apart two CPUs bring it: `#| varies: within 5%`
  compares its decimals within 5% of each other (float sums that differ in the last bit grow over a run; the kept
  figures are one CPU's), integers and words as above;
- images and widgets: the same number in the cell, not the same bytes (fonts and pixels differ between machines);
- a cell whose output is variable by nature says so in its source: `#| varies` compares only its images and
  widgets; `#| varies: timing` masks durations, rates and dates (`0.21 s`, `35 ms`, `1,200 tok/s`, `2026-11-30`) and
  compares the rest;
  `#| varies: live` (a live training view) compares nothing: what it shows while training depends on the runner.
"""
import json, os, re, subprocess, sys, tempfile
from pathlib import Path
import nbformat
from nbclient import NotebookClient

LOG_LINE = re.compile(r"^\[(WARNING|ERROR|INFO)\] [A-Z_]+\(\d+[,:].*$\n?", re.M)  # MindSpore's C++/Python log format
TMP_PATH = re.compile(re.escape(tempfile.gettempdir()) + r"/[\w.-]+")
SKIP_FLAGS = ("#| slow", "#| notest", "#|slow", "#|notest")
VARIES = re.compile(r"^#\|\s*varies\b:?[ \t]*([^\s#]*)[ \t]*([^\s#]*)", re.M)  # `#| varies`, `#| varies: timing`, `... below 1e-5`
TIMING = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e-?\d+)?\s*(?:[kMG] )?(?:[a-zA-Z]+/s|ns|µs|us|ms|s|sec|min|h)\b"
                    r"|\b\d{4}-\d\d-\d\d\b")
NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?!\w|\.\d)")  # not inside names or versions (2.10.0)
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
WIDGET = "application/vnd.jupyter.widget-view+json"


CONTINUED = re.compile(r"^(?:\s|\[\s*[-\d\[]|.*Tensor\(shape=)")  # the lines a multi-line log record goes on with


def drop_logs(text):
    "`text` without MindSpore's log records: each header line and the lines that continue it (indented, array dumps)."
    out, in_record = [], False
    for line in text.splitlines(keepends=True):
        if LOG_LINE.match(line): in_record = True
        elif not (in_record and CONTINUED.match(line)): in_record = False; out.append(line)
    return "".join(out)


def tidy(text):
    "An output's text without MindSpore log records, with temporary folders as <tmp> and the home folder as ~."
    text = drop_logs(text)
    text = TMP_PATH.sub("<tmp>", text)
    return text.replace(str(Path.home()), "~")


def _text(v): return "".join(v) if isinstance(v, list) else (v or "")


def comparable(cell):
    """What of a code cell's outputs must stay the same between runs (a dict), or None for a cell the tests do not
    run (`#| slow`, `#| notest`). Streams are joined per name: a kernel interleaves them with displays in time
    order, nbdev-test puts them first, and both are the same output."""
    src = _text(cell.get("source"))
    if src.lstrip().startswith(SKIP_FLAGS): return None
    m = VARIES.search(src)
    mode = None if m is None else (m.group(1) or "all")
    argued = mode in ("below", "within")
    if (mode not in (None, "all", "timing", "live", "below", "within") or argued != bool(m and m.group(2))
            or mode == "within" and not re.fullmatch(r"\d+(\.\d+)?%", m.group(2))):
        raise ValueError(f"unknown `{m.group(0)}` in cell {src[:60]!r}: write `#| varies` (only images and widgets "
                         "counted), `#| varies: timing` (durations and rates masked), `#| varies: below 1e-5` (numbers "
                         "under 1e-5 are float noise), `#| varies: within 5%` (decimals within 5%) or "
                         "`#| varies: live` (not compared)")
    if mode == "live": return {}
    outs = cell.get("outputs", [])
    res = {"images": sum(any(k in o.get("data", {}) for k in IMAGES) for o in outs),
           "widgets": sum(WIDGET in o.get("data", {}) for o in outs)}
    if mode == "below": res["noise below"] = float(m.group(2))
    if mode == "within": res["within"] = float(m.group(2)[:-1]) / 100
    if mode == "all": return res
    norm = lambda t: TIMING.sub("<time>", tidy(t)) if mode == "timing" else tidy(t)
    for name in ("stdout", "stderr"):
        res[name] = norm("".join(_text(o.get("text")) for o in outs if o["output_type"] == "stream"  # a kernel may
                                 and o.get("name") == name)).rstrip("\n")  # keep a stream's last newline, or not
    res["results"] = [norm(_text(o["data"].get("text/html", o["data"].get("text/plain"))))
                      for o in outs if o["output_type"] in ("execute_result", "display_data")
                      and not any(k in o["data"] for k in IMAGES + (WIDGET,))]
    res["errors"] = [o.get("ename") for o in outs if o["output_type"] == "error"]
    return res


def _ulp(literal):
    "One unit in the last printed place of a decimal literal (`6.5600` -> 1e-4, `1.49e-07` -> 1e-9); None for an integer."
    mantissa, _, exp = literal.lower().partition("e")
    if "." not in mantissa and not exp: return None
    return 10.0 ** (int(exp or 0) - len(mantissa.partition(".")[2]))


def same_number(a, b, noise=0.0, within=1e-5):
    """Two printed numbers are the same output: equal integers; decimals within one unit of the last printed place or
    `within` relative (1e-5: another CPU's float sums; `#| varies: within 5%`: a training run's); any two numbers both
    under `noise` (`#| varies: below`)."""
    if a == b: return True
    x, y = float(a), float(b)
    if abs(x) < noise and abs(y) < noise: return True
    ulps = [u for u in (_ulp(a), _ulp(b)) if u is not None]
    if len(ulps) < 2: return False
    return abs(x - y) <= max(ulps) * 1.001 + within * max(abs(x), abs(y))


def same_text(a, b, noise=0.0, within=1e-5):
    "The same words and punctuation, and numbers that are `same_number`."
    pa, pb = NUMBER.split(a), NUMBER.split(b)  # text, number, text, number, ..., text
    return len(pa) == len(pb) and pa[::2] == pb[::2] and all(same_number(x, y, noise, within)
                                                             for x, y in zip(pa[1::2], pb[1::2]))


def mismatches(kept, fresh):
    "The keys of two cells' `comparable` outputs that differ (kept: the committed cell, fresh: a new run of it)."
    a, b = comparable(kept), comparable(fresh)
    if a is None or b is None: return [] if a == b else ["skipped"]
    noise, within = a.get("noise below", 0.0), a.get("within", 1e-5)
    def same(x, y):
        if isinstance(x, str) and isinstance(y, str): return same_text(x, y, noise, within)
        if isinstance(x, list) and isinstance(y, list): return len(x) == len(y) and all(map(same, x, y))
        return x == y
    return [k for k in a if not same(a[k], b.get(k))] + [k for k in b if k not in a]


def drop_unused_widget_state(nb):
    """Keep only the widget models an output still shows (and the models they refer to): a live view that replaced
    itself by a static figure (chapter 05's `LivePlot`) leaves its closed models behind in the kernel's state."""
    key = "application/vnd.jupyter.widget-state+json"
    state = nb.metadata.get("widgets", {}).get(key, {}).get("state", {})
    todo = [o["data"][WIDGET]["model_id"] for c in nb.cells for o in c.get("outputs", []) if WIDGET in o.get("data", {})]
    used = set()
    while todo:
        mid = todo.pop()
        if mid in used or mid not in state: continue
        used.add(mid)
        todo += re.findall(r"IPY_MODEL_(\w+)", json.dumps(state[mid]))
    if used: nb.metadata["widgets"][key]["state"] = {k: v for k, v in state.items() if k in used}
    else: nb.metadata.pop("widgets", None)


def refresh(path, slow=False):
    nb = nbformat.read(path, as_version=4)
    flags = tuple(f for f in SKIP_FLAGS if not (slow and "slow" in f))
    skipped = [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith(flags)]
    for c in skipped:  # run as nbdev-test runs: flagged cells keep their source and stay unexecuted
        c.metadata["tags"] = c.metadata.get("tags", []) + ["skip-execution"]
    os.environ["IN_TEST"] = "1"
    # the kernel leaves C-level output (MindSpore's compiler log) on its own stdout/stderr: ipykernel's capture of
    # those can deadlock when a long compile fills the pipe while holding the GIL
    NotebookClient(nb, timeout=3600 if slow else 900, kernel_name="python3", resources={"metadata": {"path": str(Path(path).parent)}},
                   store_widget_state=True, skip_cells_with_tag="skip-execution",
                   extra_arguments=["--IPKernelApp.capture_fd_output=False"]).execute()
    for c in skipped:
        c.metadata["tags"].remove("skip-execution")
        if not c.metadata["tags"]:
            del c.metadata["tags"]
    for c in nb.cells:
        for out in c.get("outputs", []):
            if "text" in out:
                out["text"] = tidy(out["text"])
            for mime in ("text/plain", "text/html"):
                if mime in out.get("data", {}):
                    out["data"][mime] = tidy(out["data"][mime])
        if c.cell_type == "code":
            c.outputs = [o for o in c.outputs if not (o.output_type == "stream" and not o.text.strip())]
    drop_unused_widget_state(nb)
    nbformat.write(nb, path)
    subprocess.run(["nbdev-clean", "--fname", str(path)], check=True)


if __name__ == "__main__":
    slow = "--slow" in sys.argv
    for p in (a for a in sys.argv[1:] if a != "--slow"):
        print("refreshing", p, "(slow cells too)" if slow else "", flush=True)
        refresh(p, slow)
