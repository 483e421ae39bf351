"""Does a training step loaded from MindSpore's compile cache train? `llmpt pretrain --smoke` (2 steps) three times in
fresh output folders: without the cache, then twice with `MS_COMPILER_CACHE_ENABLE=1` and one new cache folder (the
first of those writes the cache, the second loads its graphs). Each run's step lines are printed; a run that learns
has the first one's losses and gradient norms.

    python benchmarks/compile_cache.py [--graph-kernel false]
"""
import argparse, os, re, subprocess, sys, tempfile
from pathlib import Path
from machine import describe
from startup import llmpt_script

STEP = re.compile(r"^step (\d+)/\d+ loss ([\d.]+) .*?grad_norm ([\d.]+)")


def steps(llmpt, out, extra_env, graph_kernel):
    "[(step, loss, grad_norm)] of one smoke run."
    r = subprocess.run([llmpt, "pretrain", "--smoke", f"--output_dir={out}", f"--context.enable_graph_kernel={graph_kernel}"],
                       env={**os.environ, **extra_env}, capture_output=True, text=True)
    if r.returncode != 0: raise SystemExit(f"the smoke run failed:\n{r.stderr[-3000:]}")
    return [(int(m[1]), float(m[2]), float(m[3])) for m in map(STEP.match, r.stdout.splitlines()) if m]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph-kernel", default="true", choices=["true", "false"], help="context.enable_graph_kernel")
    a = ap.parse_args()
    print(describe())
    llmpt, work = llmpt_script(), Path(tempfile.mkdtemp())
    cache = dict(MS_COMPILER_CACHE_ENABLE="1", MS_COMPILER_CACHE_PATH=str(work / "cache"))
    runs = {"no cache": steps(llmpt, work / "a", {}, a.graph_kernel),
            "cache, writing it": steps(llmpt, work / "b", cache, a.graph_kernel),
            "cache, loading it": steps(llmpt, work / "c", cache, a.graph_kernel)}
    for name, rows in runs.items():
        print(f"{name:18s}", "  ".join(f"step {s}: loss {l:.4f} grad_norm {g:.3f}" for s, l, g in rows))
    same = runs["cache, loading it"] == runs["no cache"]
    print("the run that loads its step from the cache", "trains as the others" if same else "does NOT train as the others")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
