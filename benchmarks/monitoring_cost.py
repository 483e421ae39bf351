"""What watching a run costs: the packaged default's train step (its model, batch and context, random token batches,
chapter 05's `Trainer.fit` with the callbacks `llmpt pretrain` gives it, the learning rate pinned at today's default) timed in this checkout with TensorBoard off,
with TensorBoard on, and with spike skipping on (at its default threshold), and in an older checkout of the project (`--before`, a git revision:
the code before TensorBoard, spike skipping and checkpoint health), the runs interleaved so that a slow minute of the
machine falls on both sides; each case's losses are compared with the older code's, bit for bit.

    python benchmarks/monitoring_cost.py [--before 64a9cc2] [--steps 120] [--repeats 3]
"""
import argparse, json, statistics, subprocess, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, tempfile
import numpy as np
import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
import mindspore.dataset as mds
from llmpt_nb.config import load_config
from llmpt_nb.build import build_model
from llmpt_nb.run import config_callbacks
from llmpt_nb.trainer import Trainer
from llmpt_nb.context import set_context
steps, extra = int(sys.argv[1]), sys.argv[2:]
cfg = load_config(overrides=[f"output_dir={tempfile.mkdtemp()}", f"runner_config.max_steps={steps}",
                             "callbacks.save_checkpoint_steps=100000", "lr_schedule.learning_rate=3e-3",
                             "context.peak_flops=1.0", *extra])
mc, rc = cfg.model.model_config, cfg.runner_config
set_context(cfg.context, cfg.seed)
rows = np.random.default_rng(0).integers(0, mc.vocab_size, (steps * rc.batch_size * rc.gradient_accumulation_steps,
                                                           mc.seq_length + 1)).astype(np.int32)
data = mds.NumpySlicesDataset({"input_ids": rows, "labels": rows}, shuffle=False).batch(rc.batch_size)
tr = Trainer.from_config(build_model(cfg), cfg, data, verbose=False, callbacks=config_callbacks(cfg))
tr.fit()
rates = [r["tokens_per_s"] for r in tr.history[10:]]    # after compilation and warm-up
print(json.dumps({"code": llmpt_nb.__file__, "tokens_per_s": float(np.median(rates)), "losses": [r["loss"] for r in tr.history]}))
"""


def run(tree, steps, extra):
    script = Path(tempfile.mkdtemp()) / "step.py"        # MindSpore compiles Cells only from a source file
    script.write_text(CHILD)
    out = subprocess.run([sys.executable, str(script), str(steps), *extra], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(tree)}, cwd=tempfile.mkdtemp())
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(got["code"]).resolve().is_relative_to(Path(tree).resolve()), got["code"]
    return got["tokens_per_s"], got["losses"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="64a9cc2"); ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(describe())
    old = Path(tempfile.mkdtemp()) / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), a.before], check=True,
                   capture_output=True)
    cases = {f"before ({a.before})": (old, []), "now, TensorBoard off": (ROOT, []),
             "now, TensorBoard on": (ROOT, ["tensorboard.tensorboard_dir=tb"]),
             "now, spike skipping on": (ROOT, ["use_skip_data_by_global_norm=true"])}
    rates, losses = {name: [] for name in cases}, {}
    try:
        for _ in range(a.repeats):
            for name, (tree, extra) in cases.items():
                rate, losses[name] = run(tree, a.steps, extra)
                rates[name].append(rate)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    base = statistics.median(rates[f"before ({a.before})"])
    print(f"default config's train step, {a.steps} steps per run, median tokens/s after step 10, {a.repeats} runs each:")
    for name, rs in rates.items():
        m = statistics.median(rs)
        same = losses[name] == losses[f"before ({a.before})"]
        print(f"  {name:28s} {m:7,.0f} tok/s  ({m / base - 1:+.1%} against before)  runs: {', '.join(f'{r:,.0f}' for r in rs)}"
              f"  losses {'identical to' if same else 'differ from'} before's")


if __name__ == "__main__":
    main()
