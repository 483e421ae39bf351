"""The sweep behind the packaged default recipe: each setting is a real `llmpt pretrain` (tokenizer, MindRecord,
training, held-out evaluation, counting baselines, sample), one after the other, timed end to end. Results are
appended to benchmarks/results/sweep.json, which chapter 10 reads for its table and plot.

    python benchmarks/sweep.py                 # every setting below not yet in the results file
    python benchmarks/sweep.py --only default  # one setting (re-run)
"""
import argparse, json, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

RESULTS = Path(__file__).parent / "results" / "sweep.json"
M = "model.model_config."
SMALL_VOCAB = ["processor.tokenizer.vocab_size=4500", f"{M}vocab_size=4500"]
SEQ128 = [f"{M}seq_length=128", "runner_config.batch_size=16", "runner_config.gradient_accumulation_steps=1"]

# name -> overrides of the packaged config (an empty list is the packaged default itself)
SETTINGS = {
    "previous default (200 steps, lr 1e-3)": [
        "processor.tokenizer.vocab_size=8000", f"{M}vocab_size=8000", f"{M}seq_length=256", f"{M}hidden_size=256",
        f"{M}num_layers=4", f"{M}intermediate_size=704", f"{M}tie_word_embeddings=false", "runner_config.batch_size=8",
        "runner_config.gradient_accumulation_steps=2", "runner_config.max_steps=200", "lr_schedule.learning_rate=1e-3",
        "lr_schedule.lr_end=1e-4", "lr_schedule.warmup_ratio=0.05"],
    "vocab 4500, d192 x4, seq 128, tied, lr 4e-3, 900 steps": SMALL_VOCAB + SEQ128 + [
        f"{M}hidden_size=192", f"{M}intermediate_size=512", f"{M}tie_word_embeddings=true",
        "lr_schedule.learning_rate=4e-3", "runner_config.max_steps=900"],
    "vocab 4500, d128 x4, seq 128, tied, lr 5e-3, 2000 steps": SMALL_VOCAB + SEQ128 + [
        f"{M}hidden_size=128", f"{M}intermediate_size=352", f"{M}tie_word_embeddings=true",
        "lr_schedule.learning_rate=5e-3", "runner_config.max_steps=2000"],
    "lr 5e-3, 1200 steps": ["lr_schedule.learning_rate=5e-3", "runner_config.max_steps=1200"],
    "lr 5e-3 (the default before 3e-3)": ["lr_schedule.learning_rate=5e-3"],
    "default": [],
}


def run(name, overrides):
    out = Path(tempfile.mkdtemp()) / "run"
    # the packaged default runs exactly as `llmpt pretrain`; the others evaluate every 100 steps and save once
    extra = ["--callbacks.eval_interval=100", "--callbacks.save_checkpoint_steps=100000"] if overrides else []
    cmd = ["llmpt", "pretrain", f"--output_dir={out}"] + extra + [f"--{o}" for o in overrides]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    s = json.loads((out / "summary.json").read_text())
    evals = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if "eval_loss" in l]
    b = s["baselines"]["bigram"]
    return dict(setting=name, overrides=overrides, wall_s=wall, tokens_seen=s["tokens_seen"], steps=s["steps"],
                parameters=s["parameters"], tokens_per_s=s["tokens_per_s"], eval_loss=s["eval_loss"],
                bigram_loss=b["nats_per_token"], eval_bits_per_char=s["eval_bits_per_char"],
                bigram_bits_per_char=b["bits_per_char"], beats_bigram=s["beats_bigram"], sample=s["sample"],
                curve=[dict(elapsed_s=e["elapsed_s"], tokens_seen=e["tokens_seen"], eval_bits_per_char=e["eval_bits_per_char"])
                       for e in evals], machine=describe())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="run this setting again even if it has a result")
    a = ap.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    done = {r["setting"] for r in results}
    todo = [a.only] if a.only else [n for n in SETTINGS if n not in done]
    for name in todo:
        print(f"running: {name}", flush=True)
        rec = run(name, SETTINGS[name])
        results = [r for r in results if r["setting"] != name] + [rec]
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")
        print(f"  {rec['wall_s']:.0f} s, {rec['tokens_seen']:,} tokens, held-out {rec['eval_bits_per_char']:.3f} bits/char "
              f"vs bigram {rec['bigram_bits_per_char']:.3f} ({rec['eval_loss']:.3f} vs {rec['bigram_loss']:.3f} nats/token)",
              flush=True)


if __name__ == "__main__":
    main()
