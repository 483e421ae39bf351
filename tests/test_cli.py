"""The `llmpt` command as a user runs it: a smoke run end to end, and bad input that ends in one clear message."""
import json, signal, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
from conftest import ONE_LAYER, ROOT, bin_path, llmpt

SMALL = ["--smoke", "--train_dataset.max_documents=300"]



COMMANDS = ["pretrain", "train-tokenizer", "prepare-data", "import-config", "convert-weights", "continue-pretrain", "doctor", "launch",
            "export-config", "setup-jupyter"]


def test_help_does_not_import_mindspore(tmp_path, env):
    """`llmpt --help` and `llmpt COMMAND --help` answer without MindSpore, PyTorch or transformers (each command imports
    its chapter when it runs). Start-up time is measured in benchmarks/startup.py, not here."""
    check = "import sys, llmpt_nb.cli as c; c.build_parser(); assert 'mindspore' not in sys.modules"
    r = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ["mindspore", "torch", "transformers"]:     # stand-ins that fail on import, found before the real ones
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('llmpt imported {name}')\n")
    blocked = {**env, "PYTHONPATH": str(tmp_path)}
    r = llmpt("--help", env=blocked, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(c in r.stdout for c in COMMANDS), r.stdout
    r = llmpt("pretrain", "--help", env=blocked, timeout=300)
    assert r.returncode == 0 and "--resume" in r.stdout and "--allow-config-change" in r.stdout, r.stderr[-3000:]
    for command in COMMANDS[1:]:
        r = llmpt(command, "--help", env=blocked, timeout=300)
        assert r.returncode == 0 and f"usage: llmpt {command}" in r.stdout, (command, r.stderr[-3000:])
    r = llmpt("--version", env=blocked, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("llmpt_nb "), r.stderr[-3000:]
    r = llmpt("convert-weights", "a.ckpt", "--from", "safetensors", env=blocked, timeout=300)   # argparse's own error
    assert r.returncode == 2 and "invalid choice: 'safetensors'" in r.stderr, r.stderr[-3000:]


def test_smoke_pretrain_writes_everything(tmp_path, env):
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for f in ["config.yaml", "metrics.jsonl", "loss.png", "tokenizer/tokenizer.model", "data/prepared.json",
              "data/train.mindrecord.files", "data/val.mindrecord.files", "sample.txt", "summary.json"]:
        assert (out / f).exists(), f
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 2 and s["last_loss"] < s["first_loss"] and s["roundtrip_exact"] == 1.0
    b = s["baselines"]                      # the run is held against counting on the same held-out documents
    assert b["bigram"]["nats_per_token"] < b["unigram"]["nats_per_token"] and s["eval_bits_per_char"] > 0
    assert s["beats_bigram"] == (s["eval_loss"] < b["bigram"]["nats_per_token"])
    steps = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in steps if "loss" in m] == [1, 2]
    assert {"lr", "grad_norm", "tokens_per_s", "mfu", "peak_rss_mb", "loss_scale"} <= set(steps[0])
    import mindspore as ms
    ckpt = ms.load_checkpoint(s["checkpoint"])
    assert int(ckpt["global_step"].asnumpy()) == 2 and "model.norm.weight" in ckpt and "adam_m.model.norm.weight" in ckpt
    meta = json.loads(Path(s["checkpoint"]).with_suffix(".json").read_text())
    assert meta["step"] == 2 and meta["micro_step"] == 4 and meta["global_batch"] == 16
    from llmpt_nb.data import read_mindrecord       # the sample starts from the opening of the first held-out document
    from llmpt_nb.tokenizer import load_tokenizer
    tok = load_tokenizer(out / "tokenizer")
    first = next(read_mindrecord(out / "data" / "val.mindrecord", batch_size=1, pad_id=tok.pad_id)
                 .create_tuple_iterator(output_numpy=True))[0][0]
    assert len(s["prompt"]) == 4 and tok.decode([int(i) for i in first]).strip().startswith(s["prompt"])
    assert s["sample"].startswith(s["prompt"]) and (out / "sample.txt").read_text().startswith(s["prompt"])


def test_profile_window_prints_the_slowest_operators(tmp_path, env):
    "profile: true profiles steps profile_start_step..profile_stop_step with MindSpore's Profiler into OUTPUT_DIR/profile."
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={out}", "--runner_config.max_steps=4", "--profile=true",
              "--profile_start_step=2", "--profile_stop_step=3", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"profile of steps 2-3 (MindSpore Profiler, in {out / 'profile'})" in r.stdout
    table = (out / "profile" / "op_table.txt").read_text()
    assert table in r.stdout and "MatMul" in table and list((out / "profile").rglob("cpu_op_detail_info_*.csv"))
    rows = [l.split() for l in table.splitlines()[1:]]
    assert sum(float(x[-1].rstrip("%")) for x in rows) <= 100.05 and float(rows[0][-2]) >= float(rows[-1][-2]) > 0


def check_error(r, *needles):
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


def test_empty_corpus_folder(tmp_path, env):
    (tmp_path / "corpus").mkdir()
    r = llmpt("train-tokenizer", *SMALL, f"--train_dataset.corpus={tmp_path / 'corpus'}", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "corpus")


def test_non_utf8_file(tmp_path, env):
    folder = tmp_path / "corpus"; folder.mkdir()
    (folder / "news.txt").write_bytes("人民日报社论：坚持改革开放的方针政策。\n".encode("gbk") * 20)
    r = llmpt("train-tokenizer", *SMALL, f"--train_dataset.corpus={folder}", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "news.txt", "UTF-8")


def test_vocab_mismatch(tmp_path, env):
    r = llmpt("train-tokenizer", *SMALL, "--model.model_config.vocab_size=1234", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "vocab_size", "1234", "2000")


def test_unknown_config_key(tmp_path, env):
    r = llmpt("pretrain", "--runner_config.batch_szie=4", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "batch_szie", "runner_config.batch_size")


def test_wrong_type_in_config(tmp_path, env):
    r = llmpt("pretrain", "--runner_config.batch_size=four", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "runner_config.batch_size")


def test_run_that_cannot_fit_is_refused_with_the_fixes(tmp_path, env):
    "A run whose memory estimate is above the free memory: one sentence with the numbers and three fixes, no folder."
    r = llmpt("pretrain", "--smoke", "--model.model_config.seq_length=100000", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "needs at least", "GiB are free", "activations", "runner_config.batch_size=", "gradient_accumulation_steps=",
                "recompute_config.recompute=true", "model.model_config.seq_length=50000")
    assert not (tmp_path / "o").exists()


def test_missing_reference_corpus_is_refused_before_any_file(tmp_path, env):
    r = llmpt("pretrain", "--smoke", f"--callbacks.reference_corpus={tmp_path / 'nowhere'}", f"--output_dir={tmp_path / 'o'}",
              env=env)
    check_error(r, "callbacks.reference_corpus:", "nowhere", "does not exist")
    assert not (tmp_path / "o").exists()


def test_existing_output_is_refused(tmp_path, env):
    out = tmp_path / "o"
    r = llmpt("prepare-data", *SMALL, f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "data" / "prepared.json").exists() and (out / "data" / "train.mindrecord0").exists()
    check_error(llmpt("prepare-data", *SMALL, f"--output_dir={out}", env=env), "--overwrite")
    r = llmpt("prepare-data", *SMALL, "--overwrite", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]


def test_existing_mindrecord_is_refused(tmp_path):
    from llmpt_nb.data import write_mindrecord
    rows = {"input_ids": np.ones((4, 9), np.int32), "labels": np.ones((4, 9), np.int32)}
    write_mindrecord(rows, tmp_path / "x.mindrecord")
    with pytest.raises(FileExistsError, match="overwrite"):
        write_mindrecord(rows, tmp_path / "x.mindrecord")


@pytest.mark.parametrize("bad", ["dtype", "shape"])
def test_bad_mindrecord_row_fails_loudly(tmp_path, bad):
    from llmpt_nb.data import write_mindrecord
    ids = np.ones((4, 9), np.int64 if bad == "dtype" else np.int32)
    labels = np.ones((4, 9 if bad == "dtype" else 7), np.int32)
    with pytest.raises(ValueError) as e:
        write_mindrecord({"input_ids": ids, "labels": labels}, tmp_path / "x.mindrecord")
    assert ("int64" in str(e.value)) if bad == "dtype" else ("labels" in str(e.value))
    assert not list(tmp_path.glob("x.mindrecord*"))


@pytest.mark.slow
def test_default_pretrain(tmp_path, env):
    "README command 1 (the packaged default, minutes): the model ends below the bigram count model's held-out loss."
    r = llmpt("pretrain", f"--output_dir={tmp_path / 'run'}", env=env, timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    bigram = s["baselines"]["bigram"]["nats_per_token"]
    assert s["last_loss"] < s["first_loss"] - 2 and s["roundtrip_exact"] == 1.0
    assert s["beats_bigram"] and s["eval_loss"] < bigram, (s["eval_loss"], bigram)   # compared in summary.json
    assert "\ufffd" not in s["sample"]   # whole characters only


def two_nodes(args, tmp_path, env):
    """`args` (a `launch --workers 2 -- ...` command) run as two one-worker nodes (`--master-addr 127.0.0.1`,
    `--node-rank 0/1`, one scheduler port) writing into tmp_path/nodes."""
    from llmpt_nb.launch import free_port
    port, rest = free_port(), args[3:]  # after "launch --workers 2"
    nodes = [subprocess.Popen([bin_path("llmpt"), "launch", "--workers", "2", "--local-workers", "1", "--node-rank",
                               str(k), "--master-addr", "127.0.0.1", "--master-port", str(port), "--log-dir",
                               str(tmp_path / f"logs_node{k}"), *rest, f"--output_dir={tmp_path / 'nodes'}"], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in (0, 1)]
    outputs = [p.communicate(timeout=900)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    assert (tmp_path / "logs_node1" / "worker_1.log").exists()  # node 1 ran rank 1


def launch_args(stage):
    # 10 steps: the Ctrl-C sent when the launcher echoes step 1 must reach the workers before the last step (at about
    # 0.1 s a step, 5 steps left too little room on a loaded 2-core machine: the run sometimes ended first, exit 0)
    return ["launch", "--workers", "2", "--", "llmpt", "pretrain", "--smoke", ONE_LAYER, "--lr_schedule.total_steps=10",
            "--runner_config.max_steps=10", "--callbacks.save_checkpoint_steps=20",
            f"--parallel.parallel_optimizer_config.zero_stage={stage}"]

digest = lambda out, k: (out / f"weights_rank{k}.sha256").read_text()


@pytest.mark.slow
def test_launch_two_nodes(tmp_path, env):
    "Two launches on this machine act as node 0 and node 1 (`--node-rank`) and end with the one node's weights."
    args = launch_args(0)
    r = llmpt(*args, f"--output_dir={tmp_path / 'straight'}", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    two_nodes(args, tmp_path, env)
    assert digest(tmp_path / "nodes", 0) == digest(tmp_path / "nodes", 1) == digest(tmp_path / "straight", 0)


@pytest.mark.parametrize("stage, backend", [(0, "mindspore"), (2, "llmpt_nb")])
def test_launch_two_workers_pretrain(tmp_path, env, stage, backend):
    """`llmpt launch --workers 2 -- llmpt pretrain`: rank 0 prepares the data and both ranks end with identical weights,
    on MindSpore's data-parallel engine at stage 0 and on chapter 09a's ZeRO cells at stage 2 (summary.json says
    which). Then stopped: Ctrl-C to the launcher mid-run, every rank finishes the same step, one complete checkpoint is
    written (at stage 2 each rank keeps its own optimizer slice, the harder resume), the launcher exits 130 and prints
    the resume command; resuming ends bit-identical to the straight 10-step run."""
    args = launch_args(stage)
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    r = llmpt(*args, f"--output_dir={straight}", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert digest(straight, 0) == digest(straight, 1)
    parallel = json.loads((straight / "summary.json").read_text())["parallel"]
    assert parallel["backend"] == backend and parallel["world_size"] == 2 and parallel["zero_stage"] == stage, parallel
    assert parallel["mode"] == ("data_parallel" if stage == 0 else "llmpt_nb cells")
    assert len(list((straight / "data").glob("train.mindrecord[0-9]"))) == 2     # one file per rank
    assert {p.name for p in (straight / "logs").iterdir()} >= {"worker_0.log", "worker_1.log"}  # <output_dir>/logs

    proc = subprocess.Popen([bin_path("llmpt"), *args, f"--output_dir={broken}"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if "step 1/10" in line:
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, out[-3000:] + err[-3000:]
    assert "Traceback" not in err and "resume with: llmpt launch --workers 2 -- llmpt pretrain" in err, err[-3000:]
    stopped = json.loads(sorted((broken / "checkpoint").glob("step_*.json"))[-1].read_text())["step"]
    assert 1 <= stopped < 10
    if stage:
        assert (broken / "checkpoint" / f"step_{stopped}.rank1.ckpt").exists()  # each rank saved its optimizer slice
    r = llmpt(*args, f"--output_dir={broken}", "--resume", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"resumed from step {stopped}" in r.stdout
    assert digest(broken, 0) == digest(broken, 1) == digest(straight, 0)
    losses = lambda out: [(r["step"], r["loss"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
                          if "loss" in r]
    assert losses(broken) == losses(straight) and [s for s, _ in losses(broken)] == list(range(1, 11))  # bitwise, once each
    s = json.loads((broken / "summary.json").read_text())
    assert s["steps"] == 10 and s["last_loss"] < s["first_loss"]

