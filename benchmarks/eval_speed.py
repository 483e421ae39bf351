"""Items per second of lm-evaluation-harness on the same Hugging Face folder and the same BLiMP pairs, answered by
llmpt_nb (`--model llmpt_nb`, chapter 10h: MindSpore GRAPH_MODE, chapter 10g's scorer) and by the harness's own `hf`
model (transformers + PyTorch eager, float32), each in a process of its own with the same threads and batch size,
twice (MindSpore compiles a graph for each padded width in the first run); every pair's two log-likelihoods compared. The folder is SmolLM2-135M-shaped (random weights, `generate_speed.py`'s)
or one you give (a real model: `--folder DIR`).

    python benchmarks/eval_speed.py [--pairs 400] [--batch 8] [--folder DIR]
"""
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

BLIMP = Path(__file__).parent.parent / "tests" / "fixtures" / "blimp_dev.jsonl"


def side(model, folder, tasks, batch):
    "Run the task on one model in this process; print one JSON line: seconds, pairs, accuracy, log-likelihoods."
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    import lm_eval
    from lm_eval.tasks import TaskManager
    if model == "llmpt_nb":
        import llmpt_nb.harness  # noqa: F401  registers the model
        args = f"pretrained={folder}"
    else:
        import torch
        torch.set_num_threads(os.cpu_count())
        args = f"pretrained={folder},dtype=float32,device=cpu"
    lm = lm_eval.api.registry.get_model(model).create_from_arg_string(args, {"batch_size": batch})
    manager, seconds = TaskManager(include_path=tasks), []
    for _ in range(2):       # the first run compiles MindSpore's graphs (one per padded width); the second is warm
        t = time.perf_counter()
        out = lm_eval.simple_evaluate(model=lm, tasks=["blimp_bench"], task_manager=manager, log_samples=True)
        seconds.append(time.perf_counter() - t)
    samples = out["samples"]["blimp_bench"]
    print(json.dumps(dict(seconds=seconds, pairs=len(samples), acc=out["results"]["blimp_bench"]["acc,none"],
                          lls=[[float(r[0][0]) for r in s["resps"]] for s in samples],
                          peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--folder", default=None)
    ap.add_argument("--side", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tasks", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.side:
        return side(a.side, a.folder, a.tasks, a.batch)
    import lm_eval, torch, mindspore
    print(describe(mindspore=mindspore.__version__, torch=torch.__version__, lm_eval=lm_eval.__version__))
    work = Path(tempfile.mkdtemp())
    folder = Path(a.folder) if a.folder else work / "smollm2"
    if not a.folder:
        from generate_speed import smollm2_folder
        smollm2_folder(folder)
    lines = BLIMP.read_text().splitlines()
    (work / "pairs.jsonl").write_text("\n".join(lines[::max(1, len(lines) // a.pairs)][:a.pairs]) + "\n")
    from llmpt_nb.harness import BLIMP_TASK, local_task
    local_task(work / "tasks", "blimp_bench", work / "pairs.jsonl", **BLIMP_TASK)
    runs = {}
    for model in ("llmpt_nb", "hf"):
        cmd = [sys.executable, __file__, "--side", model, "--folder", str(folder), "--tasks", str(work / "tasks"),
               "--batch", str(a.batch)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode: sys.exit(f"{model} failed:\n{out.stderr[-3000:]}")
        runs[model] = json.loads(out.stdout.strip().splitlines()[-1])
    import numpy as np
    diff = np.abs(np.array(runs["llmpt_nb"]["lls"]) - np.array(runs["hf"]["lls"])).max()
    print(f"folder: {'SmolLM2-135M shape, random weights' if not a.folder else folder}; {runs['hf']['pairs']} BLiMP pairs "
          f"({2 * runs['hf']['pairs']} loglikelihood requests), batch {a.batch}, {os.cpu_count()} threads each")
    rate = lambda r, i: r["pairs"] / r["seconds"][i]
    for model, r in runs.items():
        print(f"{model:9} first run {rate(r, 0):5.1f} pairs/s ({r['seconds'][0]:.1f} s), second {rate(r, 1):5.1f} pairs/s "
              f"({r['seconds'][1]:.1f} s)  acc {r['acc']:.4f}  peak RSS {r['peak_rss_mb']:,.0f} MB")
    ours, theirs = runs["llmpt_nb"], runs["hf"]
    print(f"llmpt_nb / hf items per second: {rate(ours, 0) / rate(theirs, 0):.2f}x in the first run (graphs compiled in it), "
          f"{rate(ours, 1) / rate(theirs, 1):.2f}x in the second; max |log-likelihood difference| {diff:.1e} nats")


if __name__ == "__main__":
    main()
