import os, sys
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
