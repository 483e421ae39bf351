"""Start-up time of the `llmpt` command: `llmpt --help`, `llmpt --version` and `llmpt COMMAND --help` for every
command, each run as a new process (wall clock, best of N), next to `python -c "import mindspore"` for scale.
Help and version should not import MindSpore: the target is under 1 s each.

    python benchmarks/startup.py [--runs 5]
"""
import argparse, os, shutil, subprocess, sys, time
from pathlib import Path
from machine import describe

COMMANDS = ["pretrain", "train-tokenizer", "prepare-data", "convert-weights", "continue-pretrain", "doctor", "launch"]


def llmpt_script():
    "The `llmpt` console script of the running Python's environment, else the one on PATH."
    here = Path(sys.executable).parent / "llmpt"
    found = str(here) if here.exists() else shutil.which("llmpt")
    if not found: raise SystemExit("llmpt is not installed: run `pip install -e .` in the project first")
    return found


def best_time(cmd, runs):
    "Best wall-clock seconds of `runs` runs of `cmd`; fails if the command fails."
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        best = min(best, time.perf_counter() - t)
        if r.returncode != 0: raise SystemExit(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-2000:]}")
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="runs per command; the best is reported (default 5)")
    a = ap.parse_args()
    llmpt = llmpt_script()
    load = os.getloadavg()
    print(describe())
    rows = [("llmpt --help", [llmpt, "--help"]), ("llmpt --version", [llmpt, "--version"])]
    rows += [(f"llmpt {c} --help", [llmpt, c, "--help"]) for c in COMMANDS]
    rows += [('python -c "import mindspore"', [sys.executable, "-c", "import mindspore"])]
    print(f"best of {a.runs} runs, wall clock\n")
    times = []
    for name, cmd in rows:
        times.append(best_time(cmd, a.runs))
        print(f"{name:<34} {times[-1]:6.2f} s")
    slow = [name for (name, _), t in zip(rows[:-1], times[:-1]) if t >= 1]
    print(f"\nllmpt: slowest {max(times[:-1]):.2f} s; " + (f"over 1 s: {', '.join(slow)}" if slow else "all under 1 s"))
    print(f"load average (1, 5, 15 min): before {' '.join(f'{x:.2f}' for x in load)}, "
          f"after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
