import os, subprocess, sys, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


def bin_path(name):
    "A console script installed next to the running Python (the project's environment)."
    return str(Path(sys.executable).parent / name)


@pytest.fixture(scope="session")
def env():
    "Environment for subprocesses: the project's Python first on PATH."
    e = dict(os.environ)
    e["PATH"] = str(Path(sys.executable).parent) + os.pathsep + e.get("PATH", "")
    return e


# `nbdev-test NB` that also writes the executed notebook (the outputs of this run) to a second path: nbdev's own
# `--save` writes over the chapter, so its writer is pointed at the copy. One notebook runs in this process.
_RUN_CHAPTER = """
import sys
import nbdev.test, fastcore.nbio
nb, out = sys.argv[1:3]
nbdev.test.write_nb = lambda executed, fn: fastcore.nbio.write_nb(executed, out)
nbdev.test.nbdev_test(path=nb, n_workers=0, save=True)
"""


@pytest.fixture(scope="session")
def run_chapter(tmp_path_factory, env):
    """`run_chapter(nb)` runs a chapter top to bottom as `nbdev-test` does, once per test session, and returns
    (the finished process, the executed notebook's path or None if it failed). tests/test_notebooks.py runs each
    chapter through it; tests/test_outputs.py compares the outputs of that same run with the kept ones."""
    folder, done = tmp_path_factory.mktemp("executed"), {}
    def run(nb):
        if nb not in done:
            out = folder / nb.name
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-c", _RUN_CHAPTER, str(nb), str(out)], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=900)
            r.seconds = time.perf_counter() - t0
            done[nb] = r, (out if r.returncode == 0 and out.is_file() else None)
        return done[nb]
    return run


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, env):
    "The docs site built once per test session as the README says (`mkdocs build --strict`) into a temporary folder."
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, "mkdocs build failed (pip install -e '.[docs]'?):\n" + r.stdout[-3000:] + r.stderr[-6000:]
    return out


# Three test processes share the 2 cores (a test spends much of its time waiting on the processes it starts), and
# pytest-xdist's `--dist loadgroup` (pyproject's addopts) keeps together what shares a fixture: a module's tests run
# in one process (its module fixtures are built once), and so do a chapter's run and the comparison of its outputs
# (conftest's `run_chapter`), and the two modules that read the built docs site (`built_site`).
CHAPTER_TESTS = {"test_notebooks.py": "test_notebook", "test_outputs.py": "test_kept_outputs_are_current"}
SITE_MODULES = {"test_docs.py", "test_browser.py"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.name
        if CHAPTER_TESTS.get(module) == item.originalname:
            group = "chapter-" + item.callspec.params["nb"].stem
        else:
            group = "site" if module in SITE_MODULES else module
        item.add_marker(pytest.mark.xdist_group(group))
