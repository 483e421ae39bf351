"""What a bigger model buys for the same data: the packaged default recipe (People's Daily, 2,000 steps of 16 x 128
tokens, the same tokenizer and schedule) at several model sizes, each a real `llmpt pretrain` with the Chinese
continuation task scored at every evaluation (chapter 10g), one after the other. Results go to
benchmarks/results/size_sweep.json (held-out loss and task accuracy against training FLOPs), which chapter 10g draws.

    python benchmarks/size_sweep.py                # every size below not yet in the results file
    python benchmarks/size_sweep.py --only d128x4  # one size (re-run)
"""
import argparse, json, subprocess, sys, tempfile, time
from pathlib import Path

import yaml
from llmpt_nb.metrics import flops_per_token

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

RESULTS = Path(__file__).parent / "results" / "size_sweep.json"
M = "model.model_config."
# name -> the model's shape; everything else is the packaged default (d128x4 is the default itself)
SIZES = {
    "d64x2": [f"{M}hidden_size=64", f"{M}num_layers=2", f"{M}num_heads=2", f"{M}n_kv_heads=1", f"{M}intermediate_size=176"],
    "d128x4": [],
    "d192x4": [f"{M}hidden_size=192", f"{M}num_heads=6", f"{M}n_kv_heads=3", f"{M}intermediate_size=512"],
}


def run(name, overrides):
    out = Path(tempfile.mkdtemp()) / "run"
    cmd = ["llmpt", "pretrain", f"--output_dir={out}", "--callbacks.eval_tasks=[continuation]",
           "--callbacks.save_checkpoint_steps=100000"] + [f"--{o}" for o in overrides]
    machine, t0 = describe(), time.perf_counter()      # the load before the run, not the run's own
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    s = json.loads((out / "summary.json").read_text())
    evals = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if "eval_loss" in l]
    last, mc = evals[-1], yaml.safe_load((out / "config.yaml").read_text())["model"]["model_config"]
    # chapter 04c's 6N + 12 L d T per token, N all parameters (the tied embedding is the output head's matmul)
    per_token = flops_per_token(s["parameters"], mc["num_layers"], mc["hidden_size"], mc["seq_length"])
    return dict(size=name, overrides=overrides, wall_s=wall, parameters=s["parameters"], tokens_seen=s["tokens_seen"],
                train_flops=per_token * s["tokens_seen"],
                eval_loss=last["eval_loss"], bigram_loss=last["bigram_loss"],
                continuation_acc=last["continuation_acc"], continuation_acc_stderr=last["continuation_acc_stderr"],
                continuation_bigram_acc=last["continuation_bigram_acc"], continuation_chance=last["continuation_chance"],
                curve=[dict(step=e["step"], eval_loss=e["eval_loss"], continuation_acc=e["continuation_acc"]) for e in evals],
                machine=machine)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="run this size again even if it has a result")
    a = ap.parse_args()
    done = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    todo = [a.only] if a.only else [n for n in SIZES if n not in {r["size"] for r in done}]
    for name in todo:
        print(f"{name}: llmpt pretrain {' '.join(SIZES[name]) or '(the packaged default)'}", flush=True)
        r = run(name, SIZES[name])
        done = [d for d in done if d["size"] != name] + [r]
        RESULTS.write_text(json.dumps(sorted(done, key=lambda d: d["parameters"]), indent=1, ensure_ascii=False) + "\n")
        print(f"  {r['parameters'] / 1e6:.2f} M parameters, {r['train_flops']:.2e} FLOPs, {r['wall_s'] / 60:.1f} min: held-out {r['eval_loss']:.3f} "
              f"(bigram {r['bigram_loss']:.3f}), continuation {r['continuation_acc']:.3f} ± {r['continuation_acc_stderr']:.3f} "
              f"(bigram {r['continuation_bigram_acc']:.3f}, chance {r['continuation_chance']:.2f})", flush=True)


if __name__ == "__main__":
    main()
