"""Is continued pretraining (chapter 11) repeatable, and do its evaluations change what it trains? The packaged
`llmpt continue-pretrain`, 12 steps, each run a fresh process: the same command twice, and once more with
`callbacks.reference_corpus=default` (one more MLM evaluation, of a People's Daily sample, at each held-out evaluation;
it changes no weight); all three with the config's dropout and with dropout off. Printed: the largest difference
between step losses of the first run and each other.

    python benchmarks/dropout_evaluations.py [--steps 12]
"""
import argparse, json, subprocess, sys, tempfile
from pathlib import Path
from machine import describe

LLMPT = Path(sys.executable).with_name("llmpt")


def step_losses(out, overrides):
    subprocess.run([str(LLMPT), "continue-pretrain", f"--output_dir={out}", *overrides], check=True, capture_output=True)
    return [r["loss"] for r in map(json.loads, (Path(out) / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    off = ["--model.model_config.hidden_dropout_prob=0", "--model.model_config.attention_probs_dropout_prob=0"]
    print(describe())
    for name, dropout in (("dropout as configured", []), ("dropout off", off)):
        base = [f"--runner_config.max_steps={a.steps}", "--callbacks.log_interval=1", *dropout]
        first, again = step_losses(tmp / f"{name}1", base), step_losses(tmp / f"{name}2", base)
        measured = step_losses(tmp / f"{name}3", base + ["--callbacks.reference_corpus=default"])
        diff = lambda other: max(abs(x - y) for x, y in zip(first, other))
        print(f"{name}: largest step-loss difference over {len(first)} steps: the same command again "
              f"{diff(again):.2g}, with the reference evaluations {diff(measured):.2g}")


if __name__ == "__main__":
    main()
