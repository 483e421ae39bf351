"""The workbook as a reader meets it, in a real browser (headless Chromium driven by Selenium):

1. chapter 00a opened in JupyterLab starts its Python 3 kernel without asking, and Run > Run All Cells finishes with
   no error or warning in any output and its figures (RoPE, the causal tiles, the attention heatmap) drawn as images
   by the cells that store them;
2. `pretrain(..., live=True)` redraws its loss plot while it trains and leaves exactly one figure behind;
3. the docs site (mkdocs build) lists the chapters on its index page, and chapter 00a's page shows the heatmap;
   both pages load their stylesheets, with no broken image and no console error of the site;
4. on every page with figures no image is wider than its column, and the figures drawn for the column (the attention
   heads of chapter 10, the packing diagram of chapter 02, ...) are shown at the size they were drawn, not shrunk.
A notebook that warns, writes to stderr and raises on purpose shows that the output checks can fail.

Part of the default `python -m pytest` (about 1.5 min on 2 cores); `python -m pytest -m browser` runs only these.
Skipped unless Chromium and ChromeDriver are installed (Debian/Ubuntu: `apt-get install chromium chromium-driver`;
.ci/run installs them); Selenium comes with the test extras (`pip install -e ".[test]"`).
JupyterLab works on copies of the notebooks in a temporary folder; nothing in nbs/ is changed. On a failure, a
screenshot, the page's HTML and the browser's console are saved to a temporary folder named in the message.
"""
import contextlib, difflib, hashlib, json, os, re, secrets, shutil, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest
from conftest import ROOT, docs_hooks

pytestmark = pytest.mark.browser

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytestmark = [pytestmark, pytest.mark.skip(reason="needs Chromium and ChromeDriver on PATH "
                                                      "(Debian/Ubuntu: apt-get install chromium chromium-driver)")]

CHAPTER = "00a_attention.ipynb"
LIVE = "live_training.ipynb"
BAD = "errors_on_purpose.ipynb"   # the output checks must see errors and warnings: a notebook that makes them
STEPS = 12                        # LivePlot redraws every 5 steps and at the last: steps 5, 10 and 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url, proc, timeout, log, headers=None):
    "Poll `url` until it answers 200; fail early if `proc` exits."
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode} before answering:\n{Path(log).read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
                if r.status == 200: return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {timeout} s:\n{Path(log).read_text()[-4000:]}")


@contextlib.contextmanager
def server(cmd, cwd, env, log, url, timeout, headers=None):
    "A server subprocess in its own process group, ready when `url` answers; stopped (and its group) at exit."
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_http(url, proc, timeout, log, headers)
        yield proc
    finally:
        proc.terminate()                    # jupyter server shuts its kernels down on SIGTERM
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)          # anything of this group still alive (a kernel that did not stop)
        proc.wait(30)


# ---- fixtures ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    return tmp_path_factory.mktemp("browser-evidence")


@pytest.fixture(scope="module")
def browser(evidence):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("Selenium is not installed: pip install -e '.[test]'")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000",
              "--no-first-run", "--disable-extensions", "--disable-background-networking",
              # only this machine: any other host name fails at once (the docs pages name a MathJax CDN)
              "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # explicit binaries: Selenium Manager is never asked to download a browser or a driver
    service = Service(executable_path=CHROMEDRIVER, log_output=str(evidence / "chromedriver.log"))
    driver = webdriver.Chrome(options=opts, service=service)
    driver.set_page_load_timeout(180)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()


@contextlib.contextmanager
def keep_evidence(driver, folder, name, *logs):
    "On any failure inside, save a screenshot, the page's HTML and the console log, and name them in the error."
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception): driver.save_screenshot(str(folder / f"{name}.png"))
        with contextlib.suppress(Exception): (folder / f"{name}.html").write_text(driver.page_source, encoding="utf-8")
        with contextlib.suppress(Exception):
            (folder / f"{name}.console.txt").write_text("\n".join(map(str, driver.get_log("browser"))))
        for log in logs:
            with contextlib.suppress(Exception): shutil.copy(log, folder)
        print(f"browser evidence (screenshot, page source, console log, server log) saved in {folder}")
        raise
    else:
        with contextlib.suppress(Exception): driver.save_screenshot(str(folder / f"{name}-passed.png"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory, env):
    """JupyterLab on a free port with a token, serving a copy of the project's notebooks: a temporary folder with
    pyproject.toml (the chapters end with `nbdev_export()`, which must find a project) and nbs/. The kernel is the
    project's Python, so it imports the installed llmpt_nb."""
    work = tmp_path_factory.mktemp("lab")
    proj = work / "project"
    (proj / "nbs").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", proj)
    for name in (CHAPTER, "p1_attention.ipynb"):
        shutil.copy(ROOT / "nbs" / name, proj / "nbs")
    kernelspec = json.loads((ROOT / "nbs" / CHAPTER).read_text(encoding="utf-8"))["metadata"]["kernelspec"]
    def notebook(name, *sources):   # a notebook as the project stores them: Python 3 kernelspec, no outputs
        cells = [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {}, "outputs": [],
                  "source": src} for i, src in enumerate(sources)]
        nb = {"cells": cells, "metadata": {"kernelspec": kernelspec}, "nbformat": 4, "nbformat_minor": 5}
        (proj / "nbs" / name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    notebook(LIVE, "from llmpt_nb.pipeline import pretrain\n"
                   f"tmp = {str(work)!r}\n"
                   f's = pretrain(smoke=True, overrides=[f"--output_dir={{tmp}}/run", "--runner_config.max_steps={STEPS}"], live=True)\n'
                   'print("steps trained:", s["steps"])')
    notebook(BAD, "import warnings\n"     # what matplotlib says when a font lacks a character
                  'warnings.warn("Glyph 25105 (\\N{CJK UNIFIED IDEOGRAPH-6211}) missing from font(s) DejaVu Sans.")',
             'import sys\nprint("a line on stderr", file=sys.stderr)',
             'raise RuntimeError("raised on purpose")')
    # JupyterLab's own settings, not the user's: it does not ask about fetching news (a toast over the page)
    settings = work / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))

    e = {k: v for k, v in env.items() if k not in ("MPLBACKEND", "IN_TEST", "JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR")}
    e.update(JUPYTER_CONFIG_DIR=str(work / "config"), JUPYTER_RUNTIME_DIR=str(work / "runtime"),
             JUPYTERLAB_SETTINGS_DIR=str(work / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"))
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={proj}",
           "--ServerApp.allow_root=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = work / "jupyterlab.log"
    base = f"http://127.0.0.1:{port}"
    with server(cmd, proj, e, log, f"{base}/api/status", 300, {"Authorization": f"token {token}"}):
        yield dict(base=base, token=token, proj=proj, run_dir=work / "run", log=log)


# ---- JupyterLab ----------------------------------------------------------------------------------------------------

def wait(driver, timeout, what, poll=0.5):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=poll).until(what)


STATE_JS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
if (!panel) return null;
const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
const dialogs = Array.from(document.querySelectorAll('.jp-Dialog')).map(d => d.textContent);
const cells = Array.from(panel.querySelectorAll('.jp-Notebook .jp-CodeCell')).map(c => ({
  prompt: (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '',
  outputs: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => ({
    mime: o.getAttribute('data-mime-type') || '', text: o.textContent})),
  images: Array.from(c.querySelectorAll('.jp-OutputArea img')).map(i => ({
    src: i.getAttribute('src') || '', ok: i.complete && i.naturalWidth > 0}))}));
const kernel = panel.querySelector('.jp-Toolbar-kernelName');
return {status: ind ? ind.getAttribute('data-status') : null, dialogs: dialogs,
        kernel: kernel ? kernel.textContent : null, cells: cells};
"""


def lab_state(driver):
    return driver.execute_script(STATE_JS)


def executed(prompt):
    return re.fullmatch(r"\s*\[\d+\]:\s*", prompt) is not None


def open_notebook(driver, lab, name, n_code_cells):
    "Open nbs/NAME in JupyterLab; wait until its cells are shown and its kernel is idle, or a dialog is up."
    from selenium.common.exceptions import TimeoutException
    # a workspace of its own: JupyterLab does not reopen (and start a kernel for) the notebook of the previous test
    driver.get(f"{lab['base']}/lab/workspaces/{Path(name).stem}/tree/nbs/{name}?token={lab['token']}")
    last = {}
    def ready(d):
        s = last["s"] = lab_state(d)
        if s is None: return False
        if s["dialogs"]: return s
        started = "Python 3" in (s["kernel"] or "")          # "No Kernel" while the session starts
        return s if len(s["cells"]) == n_code_cells and started and s["status"] == "idle" else False
    try:
        s = wait(driver, 300, ready)
    except TimeoutException:
        s = last.get("s") or {}
        pytest.fail(f"{name}: no idle Python 3 kernel within 300 s (kernel shown: {s.get('kernel')!r}, status: "
                    f"{s.get('status')!r}, code cells shown: {len(s.get('cells', []))} of {n_code_cells})")
    assert not s["dialogs"], f"JupyterLab opened {name} with a dialog: {s['dialogs']}"
    return s


def run_all_cells(driver):
    "Run > Run All Cells, through the menu bar as a reader does."
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    menu = wait(driver, 60, EC.element_to_be_clickable(
        (By.XPATH, "//li[contains(@class,'lm-MenuBar-item')][.//div[contains(@class,'lm-MenuBar-itemLabel')][normalize-space()='Run']]")))
    menu.click()
    item = wait(driver, 60, EC.element_to_be_clickable(
        (By.XPATH, "//li[contains(@class,'lm-Menu-item')][.//div[contains(@class,'lm-Menu-itemLabel')][normalize-space()='Run All Cells']]")))
    item.click()


def finished(state):
    return state and state["status"] == "idle" and all(executed(c["prompt"]) for c in state["cells"])


def shut_down_kernels(lab):
    "Free the kernels' memory between tests (the REST API JupyterLab's own UI uses)."
    h = {"Authorization": f"token {lab['token']}"}
    with urllib.request.urlopen(urllib.request.Request(f"{lab['base']}/api/sessions", headers=h), timeout=30) as r:
        sessions = json.load(r)
    for s in sessions:
        urllib.request.urlopen(urllib.request.Request(f"{lab['base']}/api/sessions/{s['id']}", headers=h,
                                                      method="DELETE"), timeout=60).close()


def problems(state):
    "Outputs a reader should not see: errors, tracebacks and warnings (stderr or anywhere in the text)."
    bad = []
    for i, c in enumerate(state["cells"]):
        for o in c["outputs"]:
            if o["mime"] in ("application/vnd.jupyter.stderr", "application/vnd.jupyter.error") or \
                    re.search(r"Error|Traceback|Warning|Glyph \d+ .*missing", o["text"]):
                bad.append((i, o["mime"], o["text"][:1500]))
    return bad


@pytest.mark.parametrize("chapter, figures", [(CHAPTER, 3), ("p1_attention.ipynb", 1)])   # Part II's first lesson, Part I's
def test_chapter_00_runs_in_jupyterlab(browser, lab, evidence, chapter, figures):
    nb = json.loads((ROOT / "nbs" / chapter).read_text(encoding="utf-8"))
    n_code = sum(c["cell_type"] == "code" for c in nb["cells"])
    n_png = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    with keep_evidence(browser, evidence, chapter[:-6], lab["log"]):
        open_notebook(browser, lab, chapter, n_code)
        # the exercise solutions open collapsed, and a collapsed cell shows no execution count: open them first, as a
        # reader who wants to see every cell run does
        menu_item(browser, "View", "Expand All Code")
        run_all_cells(browser)
        s = wait(browser, 600, lambda d: finished(lab_state(d)) and lab_state(d), poll=1)
        assert not s["dialogs"], s["dialogs"]
        assert not problems(s), f"error or warning output in {chapter}: {problems(s)}"
        images = [im for c in s["cells"] for im in c["images"]]
        assert n_png >= figures and len(images) == n_png, f"expected {n_png} image(s), found {len(images)}"
        assert all(im["src"].startswith("data:image/png;base64,") and im["ok"] for im in images), \
            [(im["src"][:60], im["ok"]) for im in images]
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        drawn = [i for i, shown in enumerate(s["cells"]) if shown["images"]]
        stored = [i for i, c in enumerate(code) if any("image/png" in o.get("data", {}) for o in c.get("outputs", []))]
        assert drawn == stored, f"code cells drawing images in JupyterLab {drawn}, storing them in the notebook {stored}"
    shut_down_kernels(lab)


GLYPHS_JS = """
const done = arguments[arguments.length - 1];
const where = {markdown: ".jp-MarkdownOutput h1", code: ".jp-CodeCell .cm-line", output: ".jp-OutputArea-output pre"};
const probes = {};
for (const [name, selector] of Object.entries(where)) {
  const el = document.querySelector(selector);
  if (!el) continue;
  probes[name] = ["\u4e2d\u6587\u9884\u8bad\u7ec3", "\ue000\ue000\ue000\ue000\ue000"].map(text => {
    const span = document.createElement("span");                 // the element's own font, outside the editor
    span.textContent = text;
    span.style.cssText = "position:absolute;visibility:hidden;white-space:pre;font:" + getComputedStyle(el).font;
    document.body.appendChild(span); span.offsetWidth; return span;
  });
}
document.fonts.ready.then(() => {
  const widths = {};
  for (const [name, [han, box]] of Object.entries(probes)) {
    widths[name] = [han.getBoundingClientRect().width, box.getBoundingClientRect().width];
    han.remove(); box.remove();
  }
  const faces = [...document.fonts].filter(f => f.family.includes("llmpt")).map(f => f.status);
  done({widths, faces});
});
"""


def test_chinese_is_drawn_in_jupyterlab_not_boxes(browser, lab, evidence):
    """Chinese in a notebook's markdown, code and output is drawn with the font the package's JupyterLab extension
    serves, on a machine with no CJK font: five Chinese characters are not as wide as five characters no font has (the
    missing-glyph box), and the extension's font face is loaded."""
    name = "chinese.ipynb"
    cells = [{"cell_type": "markdown", "id": "md", "metadata": {}, "source": "# 预训练 中文标题"},
             {"cell_type": "code", "execution_count": None, "id": "code", "metadata": {}, "outputs": [],
              "source": 'print("中文输出")  # 中文注释'}]
    kernelspec = json.loads((ROOT / "nbs" / CHAPTER).read_text(encoding="utf-8"))["metadata"]["kernelspec"]
    (lab["proj"] / "nbs" / name).write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": kernelspec},
                                                        "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    with keep_evidence(browser, evidence, "chinese", lab["log"]):
        open_notebook(browser, lab, name, 1)
        run_all_cells(browser)
        wait(browser, 120, lambda d: finished(lab_state(d)) and lab_state(d), poll=1)
        got = browser.execute_async_script(GLYPHS_JS)
        assert set(got["widths"]) == {"markdown", "code", "output"}, got
        for where, (han, box) in got["widths"].items():
            assert han > 0 and abs(han - box) > 0.1 * box, f"{where}: Chinese {han:.1f} px wide, missing glyphs {box:.1f} px"
        assert "loaded" in got["faces"], f"the extension's font face is not loaded ({got['faces']}): llmpt setup-jupyter"
    shut_down_kernels(lab)


def menu_item(driver, menu, item):
    "Menu > item, through the menu bar as a reader does."
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    wait(driver, 60, EC.element_to_be_clickable((By.XPATH, "//li[contains(@class,'lm-MenuBar-item')][.//div[contains("
         f"@class,'lm-MenuBar-itemLabel')][normalize-space()='{menu}']]"))).click()
    wait(driver, 60, EC.element_to_be_clickable((By.XPATH, "//li[contains(@class,'lm-Menu-item')][.//div[contains("
         f"@class,'lm-Menu-itemLabel')][normalize-space()='{item}']]"))).click()


def test_opening_and_saving_a_chapter_changes_no_byte(browser, lab, evidence):
    """JupyterLab adds the kernel's `language_info` to a notebook it opens and (auto)saves it; with the save hook that
    `llmpt setup-jupyter` registers, the file saved is the committed one, byte for byte (a clean git status). The
    exercise solutions open collapsed."""
    committed, shown = (ROOT / "nbs" / CHAPTER).read_bytes(), lab["proj"] / "nbs" / CHAPTER
    shown.write_bytes(committed)                                  # as committed: an earlier test may have run it
    n_code = sum(c["cell_type"] == "code" for c in json.loads(committed)["cells"])
    with keep_evidence(browser, evidence, "save_unchanged", lab["log"]):
        open_notebook(browser, lab, CHAPTER, n_code)
        # the exercise solutions are collapsed: JupyterLab shows a placeholder for each hidden input
        solutions = sum(c["cell_type"] == "code" and "#| solution" in "".join(c["source"]) for c in json.loads(committed)["cells"])
        folded = browser.execute_script("return document.querySelectorAll('.jp-CodeCell .jp-InputPlaceholder').length")
        assert solutions and folded == solutions, f"{folded} collapsed inputs in {CHAPTER}, {solutions} solutions"
        before = shown.stat().st_mtime_ns
        menu_item(browser, "File", "Save Notebook")
        wait(browser, 60, lambda d: shown.stat().st_mtime_ns != before)
        time.sleep(1)
        assert shown.read_bytes() == committed, "saving changed the notebook (llmpt setup-jupyter?): " + "".join(difflib.unified_diff(
            committed.decode().splitlines(True), shown.read_text(encoding="utf-8").splitlines(True)))[:3000]
    shut_down_kernels(lab)


def test_output_checks_see_errors_and_warnings(browser, lab, evidence):
    "The checks above and below are not blind: a warning, a line on stderr and an exception are each reported."
    with keep_evidence(browser, evidence, "errors_on_purpose", lab["log"]):
        open_notebook(browser, lab, BAD, 3)
        run_all_cells(browser)
        s = wait(browser, 300, lambda d: finished(lab_state(d)) and lab_state(d), poll=1)
        found = problems(s)
        assert sorted({i for i, *_ in found}) == [0, 1, 2], found
        text = " ".join(t for *_, t in found)
        assert re.search(r"Glyph 25105 .*missing", text) and "RuntimeError" in text and "a line on stderr" in text, found
    shut_down_kernels(lab)


def test_live_training_plot_redraws(browser, lab, evidence):
    with keep_evidence(browser, evidence, "live_training", lab["log"]):
        open_notebook(browser, lab, LIVE, 1)
        run_all_cells(browser)
        seen, states, t0 = [], 0, time.monotonic()
        while time.monotonic() - t0 < 900:
            s = lab_state(browser)
            states += 1
            for im in s["cells"][0]["images"] if s else []:
                h = hashlib.sha256(im["src"].encode()).hexdigest()
                if h not in seen: seen.append(h)
            if finished(s): break
            time.sleep(0.2)
        else:
            pytest.fail(f"the training cell did not finish within 900 s (images seen: {len(seen)})")
        print(f"live plot: {len(seen)} different images seen in {states} polls of {time.monotonic() - t0:.0f} s")
        cell = s["cells"][0]
        text = "\n".join(o["text"] for o in cell["outputs"])
        assert f"steps trained: {STEPS}" in text, text[-3000:]
        assert not problems(s), f"error or warning output while training: {problems(s)}"
        assert len(seen) >= 2, f"the live loss plot was drawn {len(seen)} time(s) while training; expected at least 2"
        assert len(cell["images"]) == 1, f"{len(cell['images'])} figures in the cell's output after training; expected one"
        assert cell["images"][0]["ok"] and cell["images"][0]["src"].startswith("data:image/png;base64,")
        assert f"step {STEPS}/{STEPS} loss" in text, "no metrics line shows the last step"
        summary = json.loads((lab["run_dir"] / "summary.json").read_text())
        assert summary["steps"] == STEPS
    shut_down_kernels(lab)


# ---- the docs site ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site_url(built_site, tmp_path_factory, env):
    "The site built as the README says (conftest's `built_site`), served over http.server."
    out = built_site
    port = free_port()
    log = tmp_path_factory.mktemp("http") / "http.log"
    cmd = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(out), str(port)]
    with server(cmd, out, env, log, f"http://127.0.0.1:{port}/index.html", 60):
        yield f"http://127.0.0.1:{port}"


PAGE_JS = """
const art = document.querySelector('article.md-content__inner');
const rules = l => { try { return l.sheet ? l.sheet.cssRules.length : -1; } catch (e) { return -2; } };
return {ready: document.readyState,
        links: art ? Array.from(art.querySelectorAll('a[href]')).map(a => a.getAttribute('href')) : null,
        images: Array.from(document.images).map(i => ({src: i.getAttribute('src') || '', ok: i.complete && i.naturalWidth > 0,
                                                        inArticle: !!(art && art.contains(i))})),
        styles: Array.from(document.querySelectorAll('link[rel=stylesheet]')).map(l => ({href: l.href, rules: rules(l)}))};
"""


def load_page(driver, url, origin, click=None):
    "Open `url` (or click `click` and wait for `url`); the page once loaded, after checks that it is whole."
    driver.get_log("browser")                                   # forget what earlier pages logged
    if click is None:
        driver.get(url)
    else:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", click)
        click.click()
        wait(driver, 120, lambda d: d.current_url == url)
    page = wait(driver, 120, lambda d: (p := d.execute_script(PAGE_JS))["ready"] == "complete" and p)
    name = url.rsplit("/", 1)[-1]
    broken = [im["src"][:80] for im in page["images"] if not im["ok"]]
    assert not broken, f"broken images on {name}: {broken}"
    # styled as the theme means: every stylesheet of the site loaded and has rules (the theme's assets were built)
    local = [st for st in page["styles"] if st["href"].startswith(origin)]
    assert local and all(st["rules"] > 0 for st in local), f"{name}: stylesheets missing or empty: {page['styles']}"
    # nothing of the site failed to load or threw (the MathJax CDN is not of the site: offline, formulas stay TeX)
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and origin in e["message"]]
    assert not errors, f"{name}: errors in the browser console: {errors}"
    return page


def test_docs_site_in_browser(browser, site_url, evidence):
    from selenium.webdriver.common.by import By
    chapters = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb") if p.name[0].isdigit())
    heatmap = [o["data"]["image/png"].replace("\n", "") for c in json.loads((ROOT / "nbs" / CHAPTER).read_text())["cells"]
               for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    stem = CHAPTER[:-6]
    with keep_evidence(browser, evidence, "docs"):
        page = load_page(browser, f"{site_url}/index.html", site_url)
        assert page["links"] is not None, "the index page has no article"
        missing = [c for c in chapters if f"{c}.html" not in page["links"]]
        assert not missing, f"chapters not linked from the index page: {missing}"
        # to chapter 00a by its link on the index page, as a reader would
        link = browser.find_element(By.CSS_SELECTOR, f"article.md-content__inner a[href='{stem}.html']")
        page = load_page(browser, f"{site_url}/{stem}.html", site_url, click=link)
        shown = [im for im in page["images"] if im["inArticle"] and im["src"].startswith("data:image/png;base64,")]
        drawn = [any(im["src"].replace("\n", "").endswith(png[-200:]) for im in shown) for png in heatmap]
        assert heatmap and all(drawn), f"stored figures drawn: {drawn}, among the page's {len(shown)} PNG image(s)"


MACHINERY_JS = """
const art = document.querySelector('article.md-content__inner'), right = art.getBoundingClientRect().right;
const shown = e => e.offsetParent !== null && getComputedStyle(e).visibility !== 'hidden';
return {text: art.innerText,
        prompts: Array.from(art.querySelectorAll('.jp-InputPrompt, .jp-OutputPrompt')).filter(e => shown(e) && e.innerText.trim())
                      .map(e => e.innerText.trim()),
        // a <pre> whose text is wider than its box must scroll inside it, and no box may run past the article's edge
        cut: Array.from(art.querySelectorAll('pre')).filter(shown).filter(p => {
               const st = getComputedStyle(p), r = p.getBoundingClientRect();
               return (p.scrollWidth > p.clientWidth + 1 && !['auto', 'scroll'].includes(st.overflowX)) || r.right > right + 1;
             }).map(p => p.innerText.slice(0, 80)),
        images: Array.from(art.querySelectorAll('img')).filter(i => i.src.startsWith('data:image/png') && i.naturalWidth > 0).length};
"""


@pytest.mark.parametrize("stem", ["07_weights", "02_data"])
def test_docs_pages_read_like_nbdevs(browser, site_url, evidence, stem):
    """A chapter's page as nbdev's own sites show one: no `#|` directive, no `#| hide` cell, no `In [ ]:` prompt,
    and every long line wraps or scrolls inside its cell; a chapter with figures shows them as images."""
    cells = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    hidden = ["".join(c["source"]).splitlines()[1] for c in cells if c["cell_type"] == "code"
              and "".join(c["source"]).startswith("#| hide") and len("".join(c["source"]).splitlines()) > 1]
    long_lines = [l for c in cells if c["cell_type"] == "code" for l in "".join(c["source"]).splitlines() if len(l) > 110]
    assert hidden and long_lines, (stem, "needs a #| hide cell and a long line to check")
    figures = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    with keep_evidence(browser, evidence, f"docs_{stem}"):
        load_page(browser, f"{site_url}/{stem}.html", site_url)
        page = browser.execute_script(MACHINERY_JS)
        assert "#|" not in page["text"], [l for l in page["text"].splitlines() if "#|" in l][:5]
        shown_hidden = [h for h in hidden if h.strip() and h.strip() in page["text"]]
        assert not shown_hidden, f"{stem}: lines of #| hide cells on the page: {shown_hidden}"
        assert not page["prompts"], f"{stem}: prompts shown: {page['prompts'][:5]}"
        assert not page["cut"], f"{stem}: lines cut off at the right edge: {page['cut'][:5]}"
        assert page["images"] >= figures, f"{stem}: {page['images']} images on the page, {figures} stored"


OFFLINE_JS = """
const done = arguments[arguments.length - 1];
const art = document.querySelector('article.md-content__inner');
const cjk = Array.from(art.querySelectorAll('h1, p, td, li')).find(e => /[\\u4e00-\\u9fff]/.test(e.innerText));
document.fonts.ready.then(() => {
  // the same Chinese text in the element's own font and in a font that does not exist (the tofu a machine without
  // a CJK font draws): equal widths would mean boxes
  const c = document.createElement('canvas').getContext('2d'), text = cjk ? cjk.innerText.replace(/[^\\u4e00-\\u9fff]/g, '') : '';
  const width = font => { c.font = '32px ' + font; return c.measureText(text).width; };
  done({text, family: cjk ? getComputedStyle(cjk).fontFamily : '', own: cjk ? width(getComputedStyle(cjk).fontFamily) : 0,
        tofu: width('"no such font here"'),
        loaded: Array.from(document.fonts).filter(f => f.family.includes('llmpt CJK')).map(f => f.status),
        column: art.getBoundingClientRect().width,
        wide: Array.from(art.querySelectorAll('img')).filter(i => i.getBoundingClientRect().width > art.getBoundingClientRect().width + 1)
                   .map(i => i.getBoundingClientRect().width),
        math: art.querySelectorAll('.MathJax, .MathJax_MathML, math').length,
        rawTeX: (art.innerText.match(/\\$[^$\\n]{1,60}\\$/g) || []).slice(0, 3),
        indented: Array.from(art.querySelectorAll('.jp-InputArea-editor pre')).map(p => getComputedStyle(p).whiteSpace)});
});
"""


@pytest.mark.parametrize("stem", ["glossary", "00a_attention", "10_pretrain"])
def test_docs_site_reads_offline(browser, site_url, evidence, stem):
    """The site's Chinese text is drawn with the font it bundles (not boxes, whatever fonts the machine has), its formulas
    are typeset by the MathJax it serves itself, no figure is wider than the column, and code keeps its indentation."""
    with keep_evidence(browser, evidence, f"docs_offline_{stem}"):
        load_page(browser, f"{site_url}/{stem}.html", site_url)
        wait(browser, 30, lambda d: d.execute_script(  # MathJax has finished
            "return !window.MathJax || !MathJax.Hub || MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0"))
        page = browser.execute_async_script(OFFLINE_JS)
    if stem == "glossary":   # its title and terms are Chinese
        assert page["text"], f"{stem}: no Chinese text found on the page"
        assert "llmpt CJK" in page["family"] and page["loaded"] == ["loaded"], page
        assert abs(page["own"] - page["tofu"]) > 1, f"{stem}: the Chinese text {page['text'][:10]!r} is as wide as boxes: {page}"
    assert not page["wide"], f"{stem}: figures wider than the {page['column']:.0f} px column: {page['wide']}"
    assert all(ws == "pre" for ws in page["indented"]), f"{stem}: code lines wrap and lose their indentation"
    if stem == "00a_attention":
        assert page["math"] > 0 and not page["rawTeX"], f"formulas left as TeX: {page['rawTeX']}"


FIGURES_JS = """
const art = document.querySelector('article.md-content__inner'), edge = art.getBoundingClientRect().right;
const content = e => { const st = getComputedStyle(e); return e.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight); };
return Array.from(art.querySelectorAll('img')).filter(i => i.complete && i.naturalWidth > 0).map(i => ({
  tail: (i.getAttribute('src') || '').replace(/\\s/g, '').slice(-200), natural: i.naturalWidth,
  shown: i.getBoundingClientRect().width, column: content(i.parentElement), right: i.getBoundingClientRect().right, edge: edge}));
"""

# a figure 1,000 px wide, in an output cell of the page: as the site shows it (shrunk to the column), and with the
# site's `max-width` taken off (wider than the column)
WIDE_JS = """
const done = arguments[arguments.length - 1], out = document.querySelector('article.md-content__inner .jp-RenderedImage');
const c = document.createElement('canvas'); c.width = 1000; c.height = 20;
const shrunk = new Image(), wide = new Image();
wide.style.maxWidth = 'none'; shrunk.id = 'shrunk-on-purpose'; wide.id = 'wide-on-purpose';
let left = 2; const loaded = () => { if (--left === 0) done(true); };
for (const im of [shrunk, wide]) { im.onload = loaded; im.src = c.toDataURL(); out.appendChild(im); }
"""

# (chapter, a line of the cell that draws the figure): figures drawn no wider than the column (at most 6.4 in at 100 dpi)
DRAWN_FOR_THE_COLUMN = [("02_data", "ax.set_title('打包与标签错位"), ("04b_optimizer", "title=\"学习率 learning rate"),
                        ("10_pretrain", "def attention_maps(net, ids, layer):"), ("11a_domain_task", "accuracy per seed"),
                        ("12a_troubleshooting", "title='损失缩放 loss scale'"), ("12a_troubleshooting", "梯度范数 gradient norm")]


def stored_figures(stem):
    "(the source of the cell, the base64 PNG) of every figure a chapter stores."
    cells = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    return [("".join(c["source"]), o["data"]["image/png"].replace("\n", "")) for c in cells for o in c.get("outputs", [])
            if "image/png" in o.get("data", {})]


def too_wide(images):
    "Images wider than their column, or running past the article's right edge."
    return [(round(i["shown"]), round(i["column"])) for i in images if i["shown"] > i["column"] + 1 or i["right"] > i["edge"] + 1]


def not_drawn_for_the_column(image):
    "An image the browser had to shrink: drawn wider than its column, so its text is smaller than it was drawn."
    return image["natural"] > image["column"] + 1 or abs(image["shown"] - image["natural"]) > 1


def test_figures_fit_their_column(browser, site_url, evidence):
    pages = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith(("_", ".")) and stored_figures(p.stem))
    wide, shrunk, found = {}, [], []
    with keep_evidence(browser, evidence, "docs_figure_widths"):
        for stem in pages:
            browser.get(f"{site_url}/{stem}.html")
            wait(browser, 120, lambda d: d.execute_script("return document.readyState") == "complete")
            images = browser.execute_script(FIGURES_JS)
            assert len(images) >= len(stored_figures(stem)), f"{stem}: {len(images)} images shown, {len(stored_figures(stem))} stored"
            if too_wide(images): wide[stem] = too_wide(images)
            for chapter, line in DRAWN_FOR_THE_COLUMN:
                if chapter != stem: continue
                png = next(png for src, png in stored_figures(stem) if line in src)
                image = next((i for i in images if png.endswith(i["tail"])), None)
                assert image, f"{stem}: the figure of the cell with {line!r} is not on the page"
                found.append(chapter)
                if not_drawn_for_the_column(image):
                    shrunk.append((chapter, line, f"drawn {image['natural']} px wide, shown at {image['shown']:.0f} px in a "
                                                  f"column of {image['column']:.0f} px"))
        # the checks are not blind: on the last page, a figure wider than the column, shown as the site shows it and
        # with its max-width taken off
        assert browser.execute_async_script(WIDE_JS)
        images = browser.execute_script(FIGURES_JS)
        on_purpose = [i for i in images if i["natural"] == 1000]
        assert len(on_purpose) == 2 and all(not_drawn_for_the_column(i) for i in on_purpose), on_purpose
        assert len(too_wide(on_purpose)) == 1, on_purpose
    assert sorted(found) == sorted(c for c, _ in DRAWN_FOR_THE_COLUMN), found
    assert not wide, f"images wider than their column (shown px, column px): {wide}"
    assert not shrunk, (f"figures drawn wider than the docs column, so the site shrinks them and their labels: {shrunk}; "
                        "draw them at most 6.4 in wide at 100 dpi")


COPY_JS = """
const art = document.querySelector('article.md-content__inner');
return Array.from(art.querySelectorAll('clipboard-copy')).map(b => document.getElementById(b.getAttribute('for')).textContent);
"""


@pytest.mark.parametrize("stem", ["glossary", "04_mindformers_keys", "07_weights", "09_launch"])
def test_the_copy_button_copies_the_code_shown(browser, site_url, evidence, stem):
    """The copy button of a code cell copies the text of the element its `for` names (`clipboard.writeText(
    node.textContent)`, the cell's highlighted source): after MathJax has typeset the page, that text is still the
    cell's source, `\\[`, `\\(` and `$..$` included (MathJax once read them as formulas)."""
    hooks = docs_hooks()
    nb = hooks.hide_machinery(hooks.fold_solutions(json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text(encoding="utf-8"))))
    sources = ["".join(c["source"]).strip("\n") for c in nb["cells"] if c["cell_type"] == "code"]
    assert any(re.search(r"\\[[(]|\$.*\$", s) for s in sources), f"{stem} has no code cell with \\[, \\( or $..$ to check"
    with keep_evidence(browser, evidence, f"docs_copy_{stem}"):
        load_page(browser, f"{site_url}/{stem}.html", site_url)
        wait(browser, 30, lambda d: d.execute_script(
            "return !window.MathJax || !MathJax.Hub || MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0"))
        copied = [t.strip("\n") for t in browser.execute_script(COPY_JS)]
    assert len(copied) == len(sources), f"{stem}: {len(copied)} copy texts for {len(sources)} code cells"
    wrong = [(c[:60], s[:60]) for c, s in zip(copied, sources) if c != s]
    assert not wrong, f"{stem}: the copy button copies other text than the cell shows: {wrong}"


WRAP_JS = """
const art = document.querySelector('article.md-content__inner');
return Array.from(art.querySelectorAll('.jp-OutputArea-output pre')).map(p => {
  const st = getComputedStyle(p); return st.whiteSpace + ' ' + st.wordBreak; });
"""


def test_outputs_and_text_tables_keep_their_lines(browser, site_url, evidence):
    "10d's speed and generation tables: an output line never wraps nor breaks inside a word, it scrolls in its cell."
    with keep_evidence(browser, evidence, "docs_output_lines"):
        load_page(browser, f"{site_url}/10d_generate.html", site_url)
        styles = browser.execute_script(WRAP_JS)
    assert styles and set(styles) == {"pre normal"}, f"output <pre> styles on 10d: {sorted(set(styles))}"


SEARCH_JS = """
const input = document.querySelector('.md-search__input');
return {placeholder: input ? input.placeholder : null,
        meta: Array.from(document.querySelectorAll('.md-search-result__meta')).map(e => e.textContent)};
"""


def test_search_finds_chinese_words_and_says_why_it_cannot_from_disk(browser, site_url, built_site, evidence):
    """Over http, a Chinese word is found inside a sentence (the index is cut into words by jieba): "学习率" finds chapter
    04b; opened from disk, where browsers run no search worker, the search box says to serve the site."""
    from selenium.webdriver.common.by import By
    with keep_evidence(browser, evidence, "docs_search"):
        load_page(browser, f"{site_url}/index.html", site_url)
        box = browser.find_element(By.CSS_SELECTOR, ".md-search__input")
        browser.execute_script("document.getElementById('__search').checked = true; arguments[0].focus();", box)
        box.send_keys("学习率")
        found = wait(browser, 60, lambda d: [a.get_attribute("href") for a in
                                             d.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")] or None)
        assert any("04b_optimizer.html" in h for h in found), f"searching 学习率 found: {found[:8]}"
        browser.get((built_site / "04b_optimizer.html").as_uri())
        wait(browser, 60, lambda d: d.execute_script("return document.readyState") == "complete")
        said = browser.execute_script(SEARCH_JS)
    assert "http.server" in said["placeholder"] and all("http.server" in m for m in said["meta"]), said
