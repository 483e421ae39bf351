r"""MkDocs hooks for the workbook's site (named in mkdocs.yml; run by `mkdocs build`).

The notebooks in nbs/ are the only source of the site, rendered with the outputs they store (never executed).
These hooks add what mkdocs-jupyter does not do by itself:

1. **Navigation from the folder**: index first, then "Part I: the whole path, small" (the notebooks `pN_*.ipynb`, in
   name order, titled `I.N`), then the chapters (notebooks whose name starts with a digit) in name order, in two
   sections as the index groups them: "Part II: the engine", the lessons read in order, and "Reference", the chapters
   the index lists under its `### Reference` heading; then the glossary and "Coming from MindFormers", then any other
   notebook. A new chapter needs no config edit. A `nav:` written in mkdocs.yml takes precedence.
2. **Widgets as static outputs**: a live training view (an ipywidgets VBox of an HTML line and an Output holding
   the loss plot) is stored in the notebook's widget state, which a browser can only draw by downloading the
   widget JavaScript. Each widget output is replaced by what its state holds (HTML, a progress bar, the Output's
   own outputs, images included) in a temporary copy of the notebook, so the page shows the plot offline.
3. **Links between notebooks**: `[chapter 05](05_train.ipynb)` opens the notebook in Jupyter; on the site it
   is rewritten to that chapter's page.
4. **A table of contents that matches the headings**, inline code included.
5. **Notebook machinery out of sight**, as nbdev's own sites show a notebook: the `#|` directive lines at the top of a
   code cell (`#| export`, `#| default_exp ...`, `#| varies`, ...) are not shown, a `#| hide` cell is left out with
   its outputs, a cell left empty is dropped, no `In [ ]:` prompts, and a long line wraps (code) or scrolls inside
   its cell (outputs) instead of running past the right edge.
6. **A site that reads offline**: formulas are typeset by the MathJax 2 that the `jupyter-server-mathjax` package
   ships, copied into `assets/mathjax/`; Chinese text is drawn with the Noto Sans SC font of `pylopdf-fonts-zh-cn`
   (SIL Open Font License 1.1; the figures' font too), cut to the characters the book uses as JupyterLab gets it
   (`jupyter/labextension`), copied into `assets/fonts/` and used for CJK characters only, so
   a machine with no Chinese font shows characters, not boxes. Search needs the site served over http
   (`python -m http.server -d _site`): browsers do not run its worker for a page opened from disk, and the search
   box says so there; its index cuts Chinese into words with jieba. The 404 page links relative to itself.
   The site stays small (under 20 MB): the notebook CSS mkdocs-jupyter puts in every page is one shared file, only
   the parts of MathJax the pages load are copied, source maps and other languages' search splitters are left out,
   and the search index holds each code cell once.
   A copy button's hidden source text is kept from MathJax, which would read `\[` or `$..$` in code as a formula.
7. **Exercise solutions folded**: a code cell whose source has the line `#| solution` (the chapters' exercises)
   is shown as a closed `<details class="solution">` block, "Solution (click to open)", with its code and without
   its outputs, so a reader tries the exercise first. The notebook itself runs the solution as any other cell.
"""
import copy, hashlib, html, json, re, shutil, tempfile
from pathlib import Path

CHAPTER = re.compile(r"^\d")
PART_ONE = re.compile(r"^p(\d+)_")   # Part I's notebooks: p1_attention.ipynb ... (titled I.1 ...)
SECTIONS = ("Part I: the whole path, small", "Part II: the engine", "Reference")
GUIDES = ("glossary.ipynb", "from_mindformers.ipynb")
READING_ORDER, REFERENCE = "## Reading order", "### Reference"
NOTEBOOK_LINK = re.compile(r"\]\(([\w.-]+\.ipynb)\)")
_staged = {"dir": None}


def page_notebooks(docs_dir):
    "Names of the notebooks that become pages: every *.ipynb not starting with `_` or `.`, sorted."
    return sorted(p.name for p in Path(docs_dir).glob("*.ipynb") if not p.name.startswith(("_", ".")))


def notebook_title(path):
    "The first level-1 heading of a notebook's markdown cells, or None."
    for cell in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "markdown": continue
        for line in "".join(cell["source"]).splitlines():
            if line.startswith("# "): return line[2:].replace("`", "").strip()   # nav titles are plain text
    return None


def reference_chapters(docs_dir):
    """The notebooks the index links under the `### Reference` heading of its "Reading order" section (chapters looked
    up when a lesson points to them, not read in line), in their order; none without an index or such a heading."""
    index = Path(docs_dir) / "index.ipynb"
    if not index.is_file(): return []
    cells = json.loads(index.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    if READING_ORDER not in text: return []
    section = text.split(READING_ORDER, 1)[1].split("\n## ", 1)[0]
    return NOTEBOOK_LINK.findall(section.split(REFERENCE, 1)[1]) if REFERENCE in section else []


def build_nav(docs_dir):
    """MkDocs `nav`: index, Part I ('I.N title'), the lessons of Part II and the reference chapters ('NN title'), each in
    name order, the guides, then any other notebook."""
    names = page_notebooks(docs_dir)
    title = lambda n: notebook_title(Path(docs_dir) / n) or n[:-6]
    entry = lambda n: {f"{n.split('_')[0]} {title(n)}": n}
    part_one = [{f"I.{PART_ONE.match(n).group(1)} {title(n)}": n} for n in names if PART_ONE.match(n)]
    chapters = [n for n in names if CHAPTER.match(n)]
    reference = set(reference_chapters(docs_dir)) & set(chapters)
    nav = [{"Home": "index.ipynb"}] if "index.ipynb" in names else []
    if part_one: nav.append({SECTIONS[0]: part_one})
    nav.append({SECTIONS[1]: [entry(n) for n in chapters if n not in reference]})
    if reference: nav.append({SECTIONS[2]: [entry(n) for n in chapters if n in reference]})
    nav += [{title(n): n} for n in GUIDES if n in names]
    placed = set(chapters) | set(GUIDES) | {"index.ipynb"} | {n for n in names if PART_ONE.match(n)}
    nav += [{title(n): n} for n in names if n not in placed]
    return nav


# ---- widgets -> static outputs -------------------------------------------------------------------------------

def _model(ref, state):
    return state.get(ref.removeprefix("IPY_MODEL_")) if isinstance(ref, str) else None


def _leaf_html(m):
    "HTML for a leaf widget, or None if it is not one we know."
    name, s = m["model_name"], m["state"]
    if name in ("HTMLModel", "HTMLMathModel"): return s.get("value", "")
    if name in ("LabelModel", "TextModel"): return html.escape(str(s.get("value", "")))
    if name in ("FloatProgressModel", "IntProgressModel"):
        lo, hi, v = float(s.get("min", 0)), float(s.get("max", 100)), float(s.get("value", 0))
        return f'<progress value="{v - lo:g}" max="{hi - lo:g}"></progress>'
    return None


def _row_html(m, state):
    "An HBox (a tqdm bar: description, bar, counts) as one line of HTML, or None."
    parts = []
    for ref in m["state"].get("children", []):
        c = _model(ref, state)
        h = _leaf_html(c) if c else None
        if h is None: return None
        parts.append(h)
    return '<div style="display:flex;gap:0.6em;align-items:center">' + " ".join(parts) + "</div>"


def widget_outputs(model_id, state):
    "The static outputs a stored widget stands for (a list of nbformat outputs), or None if it cannot be drawn."
    m = state.get(model_id)
    if m is None: return None
    name = m["model_name"]
    if name == "OutputModel": return copy.deepcopy(m["state"].get("outputs", []))
    if name == "HBoxModel":
        h = _row_html(m, state)
        if h is not None: return [{"output_type": "display_data", "metadata": {}, "data": {"text/html": h}}]
    if name in ("VBoxModel", "BoxModel", "HBoxModel"):
        outs = []
        for ref in m["state"].get("children", []):
            c = _model(ref, state)
            sub = widget_outputs(ref.removeprefix("IPY_MODEL_"), state) if c else None
            if sub is None: return None
            outs += sub
        return outs
    h = _leaf_html(m)
    if h is None: return None
    return [{"output_type": "display_data", "metadata": {}, "data": {"text/html": h}}] if h else []


SOLUTION = re.compile(r"^#\|\s*solution\s*$", re.M)


def fold_solutions(nb):
    """Notebook `nb` (a dict) with each `#| solution` code cell replaced by a markdown cell holding a closed
    <details> block with the code. The block is one line (newlines as `&#10;` inside <pre>): Markdown ends a raw
    HTML block at a blank line, and a solution may have blank lines."""
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or not SOLUTION.search(src): continue
        code = SOLUTION.sub("", src).strip("\n")
        body = html.escape(code).replace("\n", "&#10;")
        nb["cells"][i] = {"cell_type": "markdown", "metadata": {}, "source":
                          '<details class="solution"><summary>Solution (click to open)</summary>'
                          f'<pre><code class="language-python">{body}</code></pre></details>'}
    return nb


DIRECTIVE = re.compile(r"^#\|\s*([\w-]+)")


def hide_machinery(nb):
    """Notebook `nb` (a dict) without nbdev's machinery: each code cell loses the `#|` lines it starts with; a cell
    with `#| hide`, or with nothing left to show, is dropped."""
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            lines = ("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]).splitlines(True)
            flags = []
            while lines and DIRECTIVE.match(lines[0]): flags.append(DIRECTIVE.match(lines.pop(0)).group(1))
            if "hide" in flags or not ("".join(lines).strip() or cell.get("outputs")): continue
            cell = {**cell, "source": "".join(lines)}
        cells.append(cell)
    return {**nb, "cells": cells}


# the prompts hidden; a long line of code or output scrolls sideways inside its cell, never wraps (a wrapped line of
# Python would start at column 0 and hide its indentation, a wrapped text table falls apart) and never breaks inside a
# word; more specific than mkdocs-jupyter's own rule (`pre-wrap`, `break-all`), which comes later in the page
PAGE_CSS = """<style>
.jp-InputPrompt, .jp-OutputPrompt { display: none !important; }
.md-content .jupyter-wrapper .jp-InputArea-editor pre, .md-content .jupyter-wrapper .jp-OutputArea-output pre {
  white-space: pre; word-break: normal; overflow-wrap: normal; word-wrap: normal; overflow-x: auto; }
.md-content .jupyter-wrapper .jp-OutputArea-output pre, .md-content .jupyter-wrapper .jp-OutputArea-output table {
  display: block; overflow-x: auto; max-width: 100%; }
.md-content .jupyter-wrapper .jp-OutputArea-output img { max-width: 100%; height: auto; }
</style>"""

# every page: the bundled CJK font after the system fonts, for CJK characters only (unicode-range)
CJK_FONT = "NotoSansSC-llmpt.woff"   # GB2312 and the chapters' characters (tools/jupyter_font.py)
CJK_CSS = """<style>
@font-face { font-family: "llmpt CJK"; src: url("assets/fonts/%s") format("woff"); font-display: swap;
  unicode-range: U+2E80-2FDF, U+3000-303F, U+3040-30FF, U+3100-312F, U+3190-31FF, U+3400-4DBF, U+4E00-9FFF,
                 U+F900-FAFF, U+FE30-FE4F, U+FF00-FFEF; }
body { --md-text-font-family: "llmpt CJK", -apple-system, BlinkMacSystemFont, Helvetica, Arial, sans-serif;
       --md-code-font-family: SFMono-Regular, Consolas, Menlo, "llmpt CJK", monospace; }
body .jupyter-wrapper { --jp-content-font-family: var(--md-text-font-family); --jp-ui-font-family: var(--md-text-font-family);
       --jp-code-font-family: Menlo, Consolas, "DejaVu Sans Mono", "llmpt CJK", monospace; }
</style>""" % CJK_FONT

# MathJax 2 as the jupyter-server-mathjax package ships it (one combined configuration, STIX-Web fonts only), drawing
# formulas as the browser's own MathML: its HTML-CSS output would probe a web font at about:blank, which browsers refuse
MATHJAX_CONFIG = """<script>window.MathJax = {menuSettings: {renderer: "NativeMML"},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null}};</script>"""


def flatten_widgets(nb):
    "A copy of notebook `nb` (a dict) with each widget output replaced by its static outputs, or its text if none."
    nb = copy.deepcopy(nb)
    state = nb.get("metadata", {}).pop("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for cell in nb["cells"]:
        if cell["cell_type"] != "code": continue
        outs = []
        for o in cell.get("outputs", []):
            view = o.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view is None: outs.append(o); continue
            static = widget_outputs(view.get("model_id", ""), state)
            if static is not None: outs += static; continue
            data = {k: v for k, v in o["data"].items() if k != "application/vnd.jupyter.widget-view+json"}
            if data: outs.append({**o, "data": data})
        cell["outputs"] = outs
    return nb


# ---- MkDocs events ---------------------------------------------------------------------------------------------

def on_config(config):
    if not config.nav: config.nav = build_nav(config.docs_dir)
    return config


def on_files(files, config):
    "Point each notebook page at a copy with static widgets, folded solutions and no nbdev machinery (nbs/ is not touched)."
    _cleanup()
    tmp = Path(tempfile.mkdtemp(prefix="llmpt-docs-"))
    _staged["dir"] = tmp
    for f in files:
        if not f.src_uri.endswith(".ipynb") or f.abs_src_path is None: continue
        nb = json.loads(Path(f.abs_src_path).read_text(encoding="utf-8"))
        dest = tmp / f.src_uri
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(hide_machinery(fold_solutions(flatten_widgets(nb))), ensure_ascii=False), encoding="utf-8")
        f.abs_src_path = str(dest)
    return files


_LINK = re.compile(r'href="([^"/:#?]+\.ipynb)(#[^"]*)?"')
_HEADING = re.compile(r'<h([1-6])\b[^>]*\bid="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
_ANCHOR = re.compile(r'<a class="anchor-link".*?</a>', re.S)


def toc_tokens(html_text, depth=3):
    "Table-of-contents tokens (MkDocs' format) from the page's own headings, with their ids and full titles."
    root = {"level": 0, "children": []}
    stack = [root]
    for m in _HEADING.finditer(html_text):
        level = int(m.group(1))
        if level > depth: continue
        text = html.unescape(re.sub(r"<[^>]+>", "", _ANCHOR.sub("", m.group(3)))).strip()
        tok = {"level": level, "id": m.group(2), "name": html.escape(text), "children": []}
        while stack[-1]["level"] >= level: stack.pop()
        stack[-1]["children"].append(tok)
        stack.append(tok)
    return root["children"]


def on_page_content(html_text, page, config, files):
    """Links to a notebook of the site go to its page; the table of contents is made from the page's headings
    (mkdocs-jupyter's own drops inline code from titles, so `## The `llmpt` command` linked to a missing anchor); the
    search indexes each code cell once (not also the hidden copy of its source that the copy button uses: 1 MB)."""
    def fix(m):
        target = files.get_file_from_path(m.group(1))
        if target is None or not target.src_uri.endswith(".ipynb"): return m.group(0)
        return f'href="{target.url_relative_to(page.file)}{m.group(2) or ""}"'
    if page.file.src_uri.endswith(".ipynb"):
        from mkdocs.structure.toc import get_toc
        plugin = config.plugins.get("mkdocs-jupyter")
        page.toc = get_toc(toc_tokens(html_text, plugin.config["toc_depth"] if plugin else 3))
        html_text = html_text.replace(COPY_TEXT, COPY_TEXT + " data-search-exclude")
    return _LINK.sub(fix, html_text)


# mkdocs-jupyter puts each code cell's source, for its copy button, in a hidden <div>: MathJax must not read `\[` there
COPY_TEXT = 'class="clipboard-copy-txt"'
# from disk (file://) the browser starts no search worker: the search box says why, where it would say "Initializing"
SEARCH_FROM_DISK = """<script>document.addEventListener("DOMContentLoaded", () => { if (location.protocol !== "file:") return;
  const say = "Search needs the site served: python -m http.server -d _site";
  document.querySelectorAll(".md-search__input").forEach(e => e.placeholder = say);
  document.querySelectorAll(".md-search-result__meta").forEach(e => e.textContent = say); });</script>"""
_STYLE = re.compile(r'<style type="text/css">(.{2000,}?)</style>', re.S)


def shared_asset(text, site_dir, stem, suffix):
    "The site path of one copy of `text` (`assets/<stem>-<hash of text>.<suffix>`), written the first time it is asked for."
    data = text.encode("utf-8")
    name = f"assets/{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{suffix}"
    dest = Path(site_dir) / name
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return name


def shared_stylesheets(output, site_dir):
    """`output` with each long inline <style> block (mkdocs-jupyter's notebook CSS, 0.6 MB, the same on every page)
    replaced by a link to one copy under assets/stylesheets/, named by its content's hash, written once."""
    link = lambda m: f'<link rel="stylesheet" href="{shared_asset(m.group(1), site_dir, "stylesheets/notebook", "css")}">'
    return _STYLE.sub(link, output)


_MERMAID = re.compile(r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded", async \(\) => \{\s*'
                      r'const diagrams = document\.querySelectorAll\("\.jp-Mermaid.*?</script>', re.S)
_CLIPBOARD_JS = re.compile(r'<script>\s*(\(function \(global, factory\).*?ClipboardCopyElement.*?)</script>', re.S)
_COPY_ICON = re.compile(r'(<svg aria-hidden="true" class="clipboard-copy-icon"[^>]*>)\s*(<path .*?)</svg>', re.S)
_KEEP = re.compile(r'(<(pre|script|style|textarea|code)\b.*?</\2>)', re.S)
# a code cell's highlighted source, then the hidden copy of it that mkdocs-jupyter keeps for the copy button
_COPY_SOURCE = re.compile(r'(<div class="highlight[^"]*"><pre)(>(?:(?!<pre[ >]).)*?</pre>\s*</div>\s*)'
                          r'<div class="clipboard-copy-txt[^"]*"[^>]*\bid="(cell-\d+)"[^>]*>.*?</div>', re.S)


def lighter_page(output, site_dir):
    """The same page in fewer bytes: mkdocs-jupyter's Mermaid loader left out where the page has no diagram (it does
    nothing then), its copy-button script one shared file, the copy icon drawn once per page and used by every button,
    the copy button copying the cell's highlighted source (the same text) instead of a hidden second copy of it, and
    the indentation between tags dropped (never inside <pre>, <code>, <script>, <style> or <textarea>)."""
    if not re.search(r'class="[^"]*jp-Mermaid', output): output = _MERMAID.sub("", output)
    output = _COPY_SOURCE.sub(r'\1 id="\3"\2', output)
    script = lambda m: f'<script src="{shared_asset(m.group(1), site_dir, "javascripts/clipboard-copy", "js")}"></script>'
    output = _CLIPBOARD_JS.sub(script, output)
    icon = _COPY_ICON.search(output)
    if icon:
        symbol = f'<svg hidden><symbol id="llmpt-copy-icon" viewBox="0 0 16 16">{icon.group(2)}</symbol></svg>'
        output = _COPY_ICON.sub(lambda m: m.group(1) + '<use href="#llmpt-copy-icon"></use></svg>', output)
        output = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + symbol, output, count=1)
    parts = _KEEP.split(output)         # text, kept block, its tag name, text, ...
    return "".join(re.sub(r"\n\s+", "\n", p) if i % 3 == 0 else p for i, p in enumerate(parts) if i % 3 != 2)


def on_post_page(output, page, config):
    """The bundled CJK font and the search note on every page, and the notebook pages' own style (PAGE_CSS), at the
    end of <head>; the notebook CSS shared between pages; copy-button texts kept from MathJax; `lighter_page`."""
    css = CJK_CSS + SEARCH_FROM_DISK + ("\n" + PAGE_CSS if page.file.src_uri.endswith(".ipynb") else "")
    output = output.replace('<script src="assets/mathjax/', MATHJAX_CONFIG + '\n<script src="assets/mathjax/', 1)
    output = output.replace(COPY_TEXT, 'class="clipboard-copy-txt tex2jax_ignore"')
    output = shared_stylesheets(output, config.site_dir).replace("</head>", css + "\n</head>", 1)
    return lighter_page(output, config.site_dir)


def on_post_template(output, template_name, config):
    "The 404 page links with paths from the server's root: made relative, so it also works from disk; the CJK font."
    if template_name != "404.html": return output
    output = re.sub(r'\b(href|src)="/(?!/)', r'\1="./', output)
    return output.replace("</head>", CJK_CSS + "\n</head>", 1)


def offline_assets():
    "{folder of the site: source folder or file} for what the pages load from the site itself: MathJax and the CJK font."
    import jupyter_server_mathjax
    return {"assets/mathjax": Path(jupyter_server_mathjax.__file__).parent / "static",
            "assets/fonts": Path(__file__).resolve().parents[1] / "jupyter" / "labextension" / "static" / CJK_FONT}


def mathjax_unused(folder, names):
    """What the pages never load from MathJax: formulas are drawn as MathML (no web font files, no SVG output), in
    English (built in), without the accessibility extensions: 8 of its 9 MB. (HTML-CSS's font tables are loaded.)"""
    unused = {"a11y", "SVG", "localization"} | ({"fonts"} if Path(folder).name == "static" else set())
    return [n for n in names if n in unused]


def copy_offline_assets(site_dir):
    for dest, src in offline_assets().items():
        dest = Path(site_dir) / dest
        if src.is_dir(): shutil.copytree(src, dest, dirs_exist_ok=True, ignore=mathjax_unused)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / src.name)


def _cleanup():
    if _staged["dir"] is not None: shutil.rmtree(_staged["dir"], ignore_errors=True)
    _staged["dir"] = None


def unused_theme_files(site_dir, langs):
    """The theme's files no page loads: source maps (1.3 MB, read only by a browser's developer tools), and the search
    worker's word splitters and stemmers for languages other than the search index's `langs` (Thai's alone is 0.7 MB)."""
    assets = Path(site_dir) / "assets"
    keep = {f"lunr.{l}.min.js" for l in langs} | {"lunr.stemmer.support.min.js", "lunr.multi.min.js"}
    lunr = assets / "javascripts" / "lunr"
    splitters = list(lunr.glob("*.js")) + [f for f in (lunr / "min").glob("lunr.*.min.js") if f.name not in keep]
    return list(assets.rglob("*.map")) + (splitters if lunr.is_dir() else [])


def on_post_build(config):
    "MathJax and the font copied in; the theme's files that no page loads left out."
    copy_offline_assets(config.site_dir)
    search = config.plugins.get("search") or config.plugins.get("material/search")
    for f in unused_theme_files(config.site_dir, search.config.lang if search else ["en"]): f.unlink()
    _cleanup()
def on_build_error(error): _cleanup()
def on_shutdown(): _cleanup()
