"""Exact resume: a run killed with SIGKILL and resumed reproduces the uninterrupted run step for step (`llmpt pretrain`
and `llmpt continue-pretrain`, both on chapter 05's Trainer), with checkpoints in either format (`checkpoint.format`:
ckpt or safetensors)."""
import json, signal, subprocess, time
import numpy as np
import pytest
from conftest import ROOT, bin_path

# ~140 rows of 129 tokens, 4 x 2 micro-batches per step: 17 steps per epoch, so 20 steps cross an epoch boundary
RUN = ["pretrain", "--smoke", "--train_dataset.max_documents=300", "--model.model_config.seq_length=128", "--runner_config.batch_size=4",
       "--runner_config.max_steps=20", "--callbacks.save_checkpoint_steps=1", "--callbacks.keep_checkpoint_max=2",
       "--callbacks.eval_interval=100", "--tensorboard.tensorboard_dir=tb",
       # spike skipping on, at a threshold that step 2's norm (3.3, twice step 1's) exceeds and no later step reaches
       "--use_skip_data_by_global_norm=true", "--monitor_config.global_norm_spike_threshold=3.2"]
# RoBERTa MLM: ~550 chunks in buckets, 2 x 16 per step: about 16 steps per epoch. Dropout off: its random stream
# restarts on resume (chapter 11), everything else must match bit for bit.
MLM_RUN = ["continue-pretrain", "--smoke", "--train_dataset.max_documents=300", "--runner_config.max_steps=20",
           "--callbacks.save_checkpoint_steps=1", "--callbacks.keep_checkpoint_max=2", "--callbacks.eval_interval=100",
           "--model.model_config.hidden_dropout_prob=0", "--model.model_config.attention_probs_dropout_prob=0"]


def losses(out):
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def check_tensorboard(out):
    "The run's TensorBoard events, read back by tensorboard's own reader, hold each step of metrics.jsonl once, same values."
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(out / "tb")); events.Reload()
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    for tag, key in [("train/loss", "loss"), ("train/grad_norm", "grad_norm"), ("train/lr", "lr"), ("eval/eval_loss", "eval_loss")]:
        want = [(r["step"], r[key]) for r in rows if key in r]
        got = [(e.step, e.value) for e in events.Scalars(tag)]
        assert [s for s, _ in got] == [s for s, _ in want], tag
        assert np.allclose([v for _, v in got], [v for _, v in want], rtol=1e-6), tag


def damage(path):
    "Flip one bit in the middle of a file, as a failing disk might."
    data = bytearray(path.read_bytes()); data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def check_safetensors_library_reads(path, by_mindspore):
    "The safetensors library (no MindSpore) lists every tensor of a training checkpoint, moments included, same values."
    from safetensors import safe_open
    with safe_open(str(path), framework="np") as f:
        names = set(f.keys())
        assert names == set(by_mindspore)
        weights = [n for n in names if f"adam_m.{n}" in names]
        assert weights and all(f"adam_v.{n}" in names for n in weights)          # both AdamW moments of each weight
        assert all(np.array_equal(f.get_tensor(n), by_mindspore[n].asnumpy()) for n in names)


# each run kind and each format runs by default once; the other two pairs run the same code paths with -m slow
# and the rows of Megatron prefixes (chapter 02a) resume as exactly as MindRecord's
@pytest.mark.parametrize("run, fmt", [pytest.param(RUN, "ckpt", marks=pytest.mark.slow), (RUN, "safetensors"),
                                       (MLM_RUN, "ckpt"), pytest.param(MLM_RUN, "safetensors", marks=pytest.mark.slow),
                                       ([*RUN, "--train_dataset.format=megatron"], "ckpt")],
                         ids=["pretrain-ckpt", "pretrain-safetensors", "continue-pretrain-ckpt", "continue-pretrain-safetensors",
                              "pretrain-megatron-ckpt"])
def test_sigkill_then_resume_matches_straight_run(tmp_path, env, run, fmt):
    if run is MLM_RUN:
        pytest.importorskip("transformers")
    args = [*run, f"--checkpoint.format={fmt}"]         # resume reads the format back from the run's config.yaml
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    r = subprocess.run([bin_path("llmpt"), *args, f"--output_dir={straight}"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]

    proc = subprocess.Popen([bin_path("llmpt"), *args, f"--output_dir={broken}"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (broken / "checkpoint" / "step_6.json").exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before it could be killed"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL); proc.wait()
    killed_at = max(losses(broken))
    assert killed_at < 20

    r = subprocess.run([bin_path("llmpt"), run[0], "--resume", f"--output_dir={broken}"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    resumed_from = int(r.stdout.split("resumed from step ")[1].split()[0])
    assert 6 <= resumed_from < 20
    a, b = losses(straight), losses(broken)
    assert sorted(b) == list(range(1, 21))                      # no step missing or logged twice
    diff = max(abs(a[s] - b[s]) for s in range(resumed_from + 1, 21))
    print(f"killed after step {killed_at}, resumed from {resumed_from}, max loss difference {diff:.1e}")
    assert diff == 0.0                                        # bitwise: every piece of state was restored
    if run is RUN:                                            # the resumed run's TensorBoard events: no step twice
        check_tensorboard(broken)
        assert len(list((broken / "tb").glob("events.out.tfevents.*"))) == 1
        for out in (straight, broken):                        # the same step skipped, and counted, in both
            rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
            assert [x["step"] for x in rows if x.get("skipped")] == [2], out
            assert json.loads((out / "summary.json").read_text())["skipped_steps"] == 1

    from llmpt_nb.checkpoint import read_checkpoint
    for d in (straight, broken):                              # one format, the run's, in rank 0's files and the metadata
        assert {p.suffix for p in (d / "checkpoint").glob("step_*") if p.suffix != ".json"} == {f".{fmt}"}
        assert list(json.loads((d / "checkpoint" / "step_20.json").read_text())["files"]) == [f"step_20.{fmt}"]
    wa, wb = (read_checkpoint(d / "checkpoint" / f"step_20.{fmt}") for d in (straight, broken))
    assert set(wa) == set(wb)
    assert all(np.array_equal(wa[k].asnumpy(), wb[k].asnumpy()) for k in wa)
    if fmt == "safetensors":
        check_safetensors_library_reads(broken / "checkpoint" / "step_20.safetensors", wb)
    if run is RUN:                                            # the newest checkpoint damaged: named, and the one before used
        damage(broken / "checkpoint" / f"step_20.{fmt}")
        r = subprocess.run([bin_path("llmpt"), "pretrain", "--resume", f"--output_dir={broken}", "--runner_config.max_steps=21"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"skipping the damaged checkpoint step_20.{fmt}: " in r.stderr and "SHA-256" in r.stderr, r.stderr[-3000:]
        assert "resumed from step 19 " in r.stdout, r.stdout[-3000:]
        c = losses(broken)
        assert sorted(c) == list(range(1, 22)) and c[20] == a[20]   # step 20 trained again from step 19's state


def test_resume_refuses_another_global_batch(tmp_path, env):
    out = tmp_path / "run"
    args = ["--smoke", "--train_dataset.max_documents=300", f"--output_dir={out}"]
    assert subprocess.run([bin_path("llmpt"), "pretrain", *args], env=env, cwd=ROOT, capture_output=True).returncode == 0
    resume = [bin_path("llmpt"), "pretrain", "--resume", "--runner_config.max_steps=4",
              "--runner_config.gradient_accumulation_steps=1", f"--output_dir={out}"]
    r = subprocess.run(resume, env=env, cwd=ROOT, capture_output=True, text=True)   # refused as a changed setting
    assert r.returncode == 2 and "gradient_accumulation_steps: 2 -> 1" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = subprocess.run(resume + ["--allow-config-change"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "global batch" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]  # and by the trainer


@pytest.mark.slow     # chapter 06 resumes past an unhealthy checkpoint in every test run
def test_resume_passes_over_an_unhealthy_checkpoint(tmp_path, env):
    """RUN's spike at step 2 is skipped, so the step-2 checkpoint is recorded unhealthy. A run stopped there and
    resumed with use_checkpoint_health_monitor passes over it (named), continues from step 1 and ends with the
    uninterrupted run's losses and weights; when every checkpoint is unhealthy the resume is refused, exit 2."""
    short = [a for a in RUN if not a.startswith(("--runner_config.max_steps", "--callbacks.keep_checkpoint_max"))]
    short += ["--lr_schedule.total_steps=20", "--callbacks.keep_checkpoint_max=1"]   # the same schedule in every run
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    for out, steps in ((straight, 6), (stopped, 2)):
        r = subprocess.run([bin_path("llmpt"), *short, f"--runner_config.max_steps={steps}", f"--output_dir={out}"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
    meta = {p.stem: json.loads(p.read_text()) for p in (stopped / "checkpoint").glob("step_*.json")}
    assert sorted(meta) == ["step_1", "step_2"]                 # step 1 kept beyond keep_checkpoint_max 1: the healthy one
    assert meta["step_1"]["health"]["healthy"] and not meta["step_2"]["health"]["healthy"]
    assert "step 2 skipped as a gradient spike" in meta["step_2"]["health"]["problems"][0]

    r = subprocess.run([bin_path("llmpt"), "pretrain", "--resume", f"--output_dir={stopped}", "--runner_config.max_steps=6",
                        "--use_checkpoint_health_monitor=true"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipping the unhealthy checkpoint step_2.ckpt: step 2 skipped as a gradient spike" in r.stderr
    assert "resumed from step 1 " in r.stdout
    a, b = losses(straight), losses(stopped)
    assert sorted(b) == list(range(1, 7)) and all(a[s] == b[s] for s in a)
    import mindspore as ms
    wa, wb = (ms.load_checkpoint(str(d / "checkpoint" / "step_6.ckpt")) for d in (straight, stopped))
    assert all(np.array_equal(wa[k].asnumpy(), wb[k].asnumpy()) for k in wa)

    sick = tmp_path / "sick"                                   # every window's embedding norm above a tiny threshold
    r = subprocess.run([bin_path("llmpt"), "pretrain", "--smoke", f"--output_dir={sick}",
                        "--callbacks.embedding_local_norm_threshold=1e-6"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([bin_path("llmpt"), "pretrain", "--resume", f"--output_dir={sick}", "--runner_config.max_steps=4",
                        "--use_checkpoint_health_monitor=true"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "is healthy" in r.stderr and "--use_checkpoint_health_monitor=false" in r.stderr
    assert "above callbacks.embedding_local_norm_threshold 1e-06" in r.stderr
