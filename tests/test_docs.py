"""The docs site (mkdocs.yml, docs/hooks.py): built from the notebooks with their stored outputs, never executed."""
import html, json, re
import pytest
from conftest import ROOT, docs_hooks
from test_reading_order import reference_chapters

PAGES = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith(("_", ".")))
CHAPTERS = [p for p in PAGES if p.name[0].isdigit()]
PART_ONE = [p for p in PAGES if re.match(r"p\d+_", p.name)]   # Part I, "the whole path, small"
GUIDES = ["glossary", "from_mindformers"]
REFERENCE = reference_chapters()   # the index's `### Reference` chapters, in its order
LESSONS = [p for p in CHAPTERS if p.stem not in REFERENCE]


@pytest.fixture(scope="module")
def site(built_site):
    "The site as the README builds it (conftest's `built_site`); --strict fails on warnings."
    return built_site


def article(site, stem):
    "The page's own content (the notebook), without the navigation around it."
    html = (site / f"{stem}.html").read_text(encoding="utf-8")
    m = re.search(r'<article class="md-content__inner[^"]*">(.*)</article>', html, re.S)
    assert m, f"{stem}.html has no article"
    return m.group(1)


def stored_pngs(nb_path):
    "Base64 PNGs a notebook stores in its cell outputs."
    outs = [o for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"] for o in c.get("outputs", [])]
    return [o["data"]["image/png"].replace("\n", "") for o in outs if "image/png" in o.get("data", {})]


def test_every_notebook_has_a_page(site):
    assert (site / "index.html").is_file()
    missing = [p.stem for p in PAGES if not (site / f"{p.stem}.html").is_file()]
    assert not missing, missing


def test_index_lists_every_chapter(site):
    text = article(site, "index")
    missing = [p.stem for p in CHAPTERS + PART_ONE if f'href="{p.stem}.html"' not in text]
    assert not missing, f"chapters not linked from the index page's text: {missing}"


def test_links_between_notebooks_point_to_pages(site):
    for p in PAGES:
        left = re.findall(r'href="([^"/:]+\.ipynb)', article(site, p.stem))
        assert not left, (p.stem, left)


def test_table_of_contents_links_resolve(site):
    "Each page's table of contents names its headings (inline code included) and links to ids the page has."
    for p in PAGES:
        html = (site / f"{p.stem}.html").read_text(encoding="utf-8")
        start = html.find('md-nav--secondary')            # absent on a page without sections
        if start == -1: continue
        toc = html[start:html.index('<article')]
        links = re.findall(r'href="#([^"]+)"', toc)
        missing = [a for a in links if f'id="{a}"' not in html]
        assert not missing, (p.stem, missing)
    toc = (site / "from_mindformers.html").read_text(encoding="utf-8")
    assert "Training: runner_config, optimizer, lr_schedule, runner_wrapper" in toc


def primary_nav(site):
    html = (site / "glossary.html").read_text(encoding="utf-8")
    return html[html.index('md-nav--primary'):]


def test_navigation_order(site):
    "Index, Part I, the lessons in name order, the reference chapters in name order, then the glossary and 'Coming from MindFormers'."
    nav = primary_nav(site)
    order = [f"{s}.html" for s in ["index"] + [p.stem for p in PART_ONE + LESSONS] + REFERENCE + GUIDES]
    positions = [nav.find(f'href="{h}"') for h in order]
    assert -1 not in positions, dict(zip(order, positions))
    assert positions == sorted(positions), dict(zip(order, positions))


def test_navigation_groups_part_one_part_two_and_reference(site):
    """The site's navigation has a 'Part I' section holding Part I's notebooks, a 'Part II' section of lessons and a
    'Reference' section holding exactly the reference chapters, in that order."""
    nav = primary_nav(site)
    label = lambda name: re.search(r">\s*" + name + r"[^<]*<", nav)
    one, two, reference = label("Part I:"), label("Part II:"), label("Reference")
    assert one and two and reference and one.start() < two.start() < reference.start(), "no 'Part I', 'Part II' and 'Reference' sections in order"
    end = min(nav.find(f'href="{g}.html"') for g in GUIDES)
    pages = lambda a, b: set(re.findall(r'href="(\w+)\.html"', nav[a:b]))
    assert pages(one.start(), two.start()) == {p.stem for p in PART_ONE}
    assert pages(two.start(), reference.start()) == {p.stem for p in LESSONS}
    assert pages(reference.start(), end) == set(REFERENCE)
    assert PART_ONE, "no Part I notebooks (nbs/pN_*.ipynb)"


@pytest.mark.parametrize("stem", ["00a_attention", "02b_baseline", "10_pretrain"])
def test_stored_figures_are_images(site, stem):
    "Every figure a chapter stores (chapter 00a's heatmap, RoPE and tiles, 02b's baselines, 10's full run) is an <img>."
    pngs = stored_pngs(ROOT / "nbs" / f"{stem}.ipynb")
    assert len(pngs) >= 2, f"{stem} stores {len(pngs)} PNG outputs"
    text = article(site, stem)
    missing = [i for i, png in enumerate(pngs) if not re.search(r'<img [^>]*src="data:image/png;base64,' + re.escape(png[:200]), text)]
    assert not missing, f"{stem}: stored figures {missing} are not images on the page"


@pytest.mark.parametrize("stem", ["05_train", "10_pretrain"])
def test_loss_plot_is_an_image(site, stem):
    """A live training view (`LivePlot`) leaves a static copy of itself when the run ends: the notebook stores the loss
    plot as a PNG output and no widget for JupyterLab to redraw (it showed `VBox(...)`), and the page shows the plot."""
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    live = [c for c in nb["cells"] if c["cell_type"] == "code" and re.search(r"LivePlot\(|live=True", "".join(c["source"]))
            and not "".join(c["source"]).lstrip().startswith("#| export")]
    assert live, f"{stem}: no cell trains with the live view"
    outs = [o for c in live for o in c.get("outputs", [])]
    assert not [o for o in outs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})], f"{stem}: a widget is stored"
    pngs = [o["data"]["image/png"].replace("\n", "") for o in outs if "image/png" in o.get("data", {})]
    assert pngs and "widgets" not in nb["metadata"], f"{stem}: {len(pngs)} loss plots stored, metadata {list(nb['metadata'])}"
    text = article(site, stem).replace("\n", "")
    assert re.search(r'<img [^>]*src="data:image/png;base64,' + re.escape(pngs[-1][:200]), text), "no loss plot <img>"


def test_glossary_page_in_two_languages(site):
    text = article(site, "glossary")
    for word in ("Glossary / 术语表", "gradient accumulation", "梯度累积", "MindRecord", "断点续训"):
        assert word in text, word
    assert 'href="05_train.html"' in text


def test_from_mindformers_page(site):
    text = article(site, "from_mindformers")
    for word in ("run_mindformer.py", "msrun_launcher.sh", "convert_weight.py", "rope_theta", "no equivalent"):
        assert word in text, word


def test_flatten_widgets_unit():
    "A VBox(HTML, Output(image)) becomes an HTML output and the image; a widget without state keeps its text."
    hooks = docs_hooks()
    view = lambda mid: {"output_type": "display_data", "metadata": {},
                        "data": {"application/vnd.jupyter.widget-view+json": {"model_id": mid}, "text/plain": ["VBox()"]}}
    state = {"b": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_h", "IPY_MODEL_o"]}},
             "h": {"model_name": "HTMLModel", "state": {"value": "step 4 loss 7.2"}},
             "o": {"model_name": "OutputModel", "state": {"outputs": [
                 {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}]}}}
    nb = {"metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": state}}},
          "cells": [{"cell_type": "code", "outputs": [view("b"), view("gone")]}]}
    outs = hooks.flatten_widgets(nb)["cells"][0]["outputs"]
    assert [list(o["data"]) for o in outs] == [["text/html"], ["image/png", "text/plain"], ["text/plain"]], outs
    assert outs[0]["data"]["text/html"] == "step 4 loss 7.2"
    assert "widgets" not in hooks.flatten_widgets(nb)["metadata"]
    assert "widgets" in nb["metadata"], "the input notebook must not be changed"


def test_nav_picks_up_new_chapters(tmp_path):
    hooks = docs_hooks()
    for name, title in [("index", "Home"), ("12a_troubleshooting", "Troubleshooting"), ("01a_tokenizer", "Tokenizer"),
                        ("04a_import", "Import"), ("glossary", "Glossary"), ("from_mindformers", "Coming from MindFormers"),
                        ("_draft", "x"), ("p2_tokens", "Tokens"), ("p1_attention", "Attention, by hand")]:
        (tmp_path / f"{name}.ipynb").write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": [f"# {title}\n"]}]}))
    chapters = [{"01a Tokenizer": "01a_tokenizer.ipynb"}, {"04a Import": "04a_import.ipynb"},
                {"12a Troubleshooting": "12a_troubleshooting.ipynb"}]
    part_one = {"Part I: the whole path, small": [{"I.1 Attention, by hand": "p1_attention.ipynb"}, {"I.2 Tokens": "p2_tokens.ipynb"}]}
    guides = [{"Glossary": "glossary.ipynb"}, {"Coming from MindFormers": "from_mindformers.ipynb"}]
    assert hooks.build_nav(tmp_path) == [{"Home": "index.ipynb"}, part_one, {"Part II: the engine": chapters}] + guides
    # the index lists 04a under `### Reference` in its reading order: the navigation groups it apart from the lessons
    index = ["# Home\n", "## Reading order\n", "| [01a](01a_tokenizer.ipynb) |\n| [12a](12a_troubleshooting.ipynb) |\n",
             "### Reference\n", "| [04a](04a_import.ipynb) |\n", "## More pages\n", "[Glossary](glossary.ipynb)\n"]
    (tmp_path / "index.ipynb").write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": index}]}))
    assert hooks.reference_chapters(tmp_path) == ["04a_import.ipynb"]
    assert hooks.build_nav(tmp_path) == [{"Home": "index.ipynb"}, part_one, {"Part II: the engine": [chapters[0], chapters[2]]},
                                         {"Reference": [chapters[1]]}] + guides


def solution_cells(nb_path):
    hooks = docs_hooks()
    return [c for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "code" and hooks.SOLUTION.search("".join(c["source"]))]


def test_exercise_solutions_are_folded_in_jupyterlab_too():
    """Each `#| solution` cell stores `jupyter.source_hidden` (kept by nbdev-clean: `allowed_cell_metadata_keys` in
    pyproject.toml), so JupyterLab shows it collapsed under its exercise until the reader opens it."""
    cells = {p.stem: solution_cells(p) for p in CHAPTERS}
    assert sum(map(len, cells.values())) >= 20, cells.keys()
    shown = {stem: len(cs) for stem, cs in cells.items() if not all(c["metadata"].get("jupyter", {}).get("source_hidden") for c in cs)}
    assert not shown, f"solution cells JupyterLab shows open (set metadata jupyter.source_hidden): {shown}"
    late = {stem: len(cs) for stem, cs in cells.items() if not all("".join(c["source"]).startswith("#| solution") for c in cs)}
    assert not late, f"solution cells whose `#| solution` is not their first line (nbdev reads directives at the top): {late}"


def test_exercise_solutions_are_folded(site):
    "A chapter's exercise solutions (`#| solution` cells) are on the page only inside closed <details> blocks."
    with_exercises = [p for p in CHAPTERS if solution_cells(p)]
    assert {p.stem for p in with_exercises} >= {"00a_attention", "01a_tokenizer", "02_data", "03_model", "03b_encoder", "06a_testing"}, with_exercises
    for p in with_exercises:
        text = article(site, p.stem)
        blocks = re.findall(r'<details class="solution">(.*?)</details>', text, re.S)
        assert len(blocks) == len(solution_cells(p)), (p.stem, len(blocks))
        assert not re.search(r'<details class="solution"[^>]*\bopen', text), f"{p.stem}: a solution is open"
        outside = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r'<details class="solution">.*?</details>', "", text, flags=re.S)))
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        elsewhere = {l.strip() for c in cells if c not in solution_cells(p) for l in "".join(c["source"]).splitlines()}
        for cell in solution_cells(p):
            own = [l.strip() for l in "".join(cell["source"]).splitlines()[1:] if len(l.strip()) > 12 and l.strip() not in elsewhere]
            assert own, f"{p.stem}: a solution with no line of its own"
            assert any(html.escape(own[0], quote=False) in b or html.escape(own[0]) in b for b in blocks), (p.stem, own[0])
            shown = [l for l in own if l in {x.strip() for x in outside.splitlines()}]
            assert not shown, f"{p.stem}: solution lines shown outside a folded block: {shown}"
        assert "#| solution" not in text, f"{p.stem}: the directive is shown"
        assert "Solution (click to open)" in text


def test_fold_solutions_unit():
    "A `#| solution` cell becomes one closed <details> line with its code escaped; other cells stay."
    hooks = docs_hooks()
    code = {"cell_type": "code", "source": ["#| solution\n", "def f(x):\n", "\n", "    return x < 1\n"], "outputs": []}
    other = {"cell_type": "code", "source": ["f(0)\n"], "outputs": []}
    cells = hooks.fold_solutions({"cells": [code, other]})["cells"]
    assert cells[1] is other and cells[0]["cell_type"] == "markdown"
    src = cells[0]["source"]
    assert src.startswith('<details class="solution"><summary>') and src.endswith("</details>") and "\n" not in src
    assert "def f(x):&#10;&#10;    return x &lt; 1" in src and "#| solution" not in src


def test_hide_machinery_unit():
    "Leading `#|` lines go, a `#| hide` cell and a cell left empty are dropped, markdown and `#|` inside code stay."
    hooks = docs_hooks()
    code = lambda src, outs=(): {"cell_type": "code", "source": src, "outputs": list(outs)}
    md = {"cell_type": "markdown", "source": "#| not a directive in markdown"}
    nb = {"cells": [code(["#| default_exp data\n"]), code("#| hide\nfrom x import y"), md,
                    code("#| export\n#| varies: timing\ndef f(): pass\ns = '#| kept'\n"), code("#| slow\n", [{"x": 1}])]}
    cells = hooks.hide_machinery(nb)["cells"]
    assert [c["source"] for c in cells] == [md["source"], "def f(): pass\ns = '#| kept'\n", ""], cells
    assert len(nb["cells"]) == 5 and nb["cells"][3]["source"].startswith("#| export"), "the input must not be changed"


def test_the_site_brings_a_small_chinese_font(site):
    """The site's Chinese font is the cut JupyterLab gets (GB2312 and the chapters' characters, tools/jupyter_font.py),
    not the 8 MB font file, and every page names it first for CJK code points (its unicode-range)."""
    font = site / "assets" / "fonts" / "NotoSansSC-llmpt.woff"
    assert font.is_file() and font.stat().st_size < 3 * 2**20 and not list(site.rglob("*.otf"))
    assert '--md-text-font-family: "llmpt CJK"' in (site / "index.html").read_text(encoding="utf-8")


def test_the_site_is_small_and_its_404_page_works_from_disk(site):
    """The whole site stays under 20 MB (the notebook CSS is one shared file, MathJax only what the pages load, no
    source maps), and the 404 page links relative to itself, not to the root of a server."""
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert size <= 20 * 2**20, f"the site is {size / 2**20:.1f} MB (at most 20 MB)"
    pages = list(site.glob("*.html"))
    inline = [p.name for p in pages if re.search(r'<style type="text/css">.{100000,}?</style>', p.read_text(encoding="utf-8"), re.S)]
    assert not inline, f"pages that carry the notebook CSS themselves: {inline}"
    rooted = re.findall(r'(?:href|src)="/[^/"][^"]*"', (site / "404.html").read_text(encoding="utf-8"))
    assert not rooted, f"404.html links from the server's root (broken from disk): {rooted[:5]}"
