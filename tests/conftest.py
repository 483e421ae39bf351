import os, subprocess, sys
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


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, env):
    "The docs site built once per test session as the README says (`mkdocs build --strict`) into a temporary folder."
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, "mkdocs build failed (pip install -e '.[docs]'?):\n" + r.stdout[-3000:] + r.stderr[-6000:]
    return out
