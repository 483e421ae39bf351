import importlib.util, json, os, shutil, subprocess, sys, time
from pathlib import Path
import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]


def docs_hooks():
    "docs/hooks.py (the site's MkDocs hooks) as a module."
    spec = importlib.util.spec_from_file_location("llmpt_docs_hooks", ROOT / "docs" / "hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# runs that test the CLI's bookkeeping, not the model, train one layer: half the compile time of the default's four
ONE_LAYER = "--model.model_config.num_layers=1"


def bin_path(name):
    "A console script installed next to the running Python (the project's environment)."
    return str(Path(sys.executable).parent / name)


def llmpt(*args, env, cwd=ROOT, timeout=900):
    "The `llmpt` command as a user runs it: its CompletedProcess, stdout and stderr as text."
    return subprocess.run([bin_path("llmpt"), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def env():
    "Environment for subprocesses: the project's Python first on PATH."
    e = dict(os.environ)
    e["PATH"] = str(Path(sys.executable).parent) + os.pathsep + e.get("PATH", "")
    return e


def pytest_collection_modifyitems(items):
    """The chapters' runs, the longest tests, spread evenly over the first two thirds of the other tests, the last
    chapters (the longest: they run the whole path) first, and the checks of their kept outputs last. pytest-xdist hands
    each process a block of consecutive tests first: spread out, the runs start in every process at once (all in front,
    they queue in one), and by the time an output check starts, its chapter has run (`run_chapter`), so it only reads
    the record."""
    kind = lambda item: getattr(item, "originalname", None)
    runs = [i for i in items if kind(i) == "test_notebook"][::-1]
    checks = [i for i in items if kind(i) == "test_kept_outputs_are_current"]
    rest = [i for i in items if kind(i) not in ("test_notebook", "test_kept_outputs_are_current")]
    step = 2 * len(rest) / 3 / max(len(runs), 1)
    for n, run in enumerate(runs):
        rest.insert(round(n * (step + 1)), run)
    items[:] = rest + checks


# `nbdev-test NB` that also writes the executed notebook (the outputs of this run) to a second path: nbdev's own
# `--save` writes over the chapter, so its writer is pointed at the copy. One notebook runs in this process.
_RUN_CHAPTER = """
import sys
import nbdev.test, fastcore.nbio
nb, out = sys.argv[1:3]
nbdev.test.write_nb = lambda executed, fn: fastcore.nbio.write_nb(executed, out)
nbdev.test.nbdev_test(path=nb, n_workers=0, save=True)
"""


def shared_folder(tmp_path_factory, name):
    """A folder of this test session that every pytest-xdist worker process sees (the README's command runs the tests in
    several), with a lock: what one process computes there, the others wait for and reuse."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


def shared_once(tmp_path_factory, name, make):
    """The folder `make(folder)` fills, filled once per test session: pytest-xdist runs a module's tests in several worker
    processes and a module fixture once in each; through this the first process to ask makes it, the others wait for it
    and reuse it. Tests must not change what is in it (they copy it first)."""
    folder, done = shared_folder(tmp_path_factory, name), shared_folder(tmp_path_factory, "done") / name
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            shutil.rmtree(folder); folder.mkdir()        # what a failed attempt in another process left
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def run_chapter(tmp_path_factory, env):
    """`run_chapter(nb)` runs a chapter top to bottom as `nbdev-test` does, once per test session whichever worker
    process asks first, and returns (the finished process, the executed notebook's path or None if it failed).
    tests/test_notebooks.py runs each chapter through it; tests/test_outputs.py compares the outputs of that same run
    with the kept ones."""
    folder = shared_folder(tmp_path_factory, "executed")
    def run(nb):
        out, record = folder / nb.name, folder / f"{nb.stem}.run.json"
        with FileLock(str(record) + ".lock"):
            if not record.exists():
                t0 = time.perf_counter()
                r = subprocess.run([sys.executable, "-c", _RUN_CHAPTER, str(nb), str(out)], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=900)
                record.write_text(json.dumps(dict(args=r.args, returncode=r.returncode, stdout=r.stdout, stderr=r.stderr,
                                                  seconds=time.perf_counter() - t0)))
        saved = json.loads(record.read_text())
        r = subprocess.CompletedProcess(saved["args"], saved["returncode"], saved["stdout"], saved["stderr"])
        r.seconds = saved["seconds"]
        return r, (out if r.returncode == 0 and out.is_file() else None)
    return run


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, env):
    "The docs site built once per test session as the README says (`mkdocs build --strict`) into a temporary folder."
    out = shared_folder(tmp_path_factory, "site")
    with FileLock(str(out) + ".lock"):
        if not (out / "index.html").exists():
            r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                               env=env, capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, "mkdocs build failed (pip install -e '.[docs]'?):\n" + r.stdout[-3000:] + r.stderr[-6000:]
    return out
