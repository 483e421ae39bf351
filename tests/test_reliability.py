"""Faults lose nothing: signals, resume bookkeeping, --overwrite, damaged checkpoints, and a clear error for bad input.

Every case runs the `llmpt` command as a user would (or the function it calls, where that is the thing under test) and
checks four things: the exit code, that no traceback is printed, that the message names the file, key or tensor, and
the state left on disk (old run intact, checkpoints intact, metrics without a step logged twice)."""
import json, shutil, signal, subprocess, time
from pathlib import Path
import numpy as np
import pytest
from conftest import ONE_LAYER, ROOT, bin_path, shared_once, llmpt

# ~6,000 tokens of training rows of 65 tokens: fast steps; the schedule is fixed by total_steps so max_steps may change
RUN = ["--smoke", ONE_LAYER, "--train_dataset.max_documents=300", "--model.model_config.seq_length=64", "--runner_config.batch_size=4",
       "--runner_config.gradient_accumulation_steps=1", "--lr_schedule.total_steps=8", "--callbacks.eval_interval=100",
       "--callbacks.save_checkpoint_steps=2", "--callbacks.keep_checkpoint_max=3"]



def check_error(r, *needles, code=2):
    "Exit code, no traceback, and every needle in the message."
    assert r.returncode == code, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr[-3000:]
    for n in needles:
        assert str(n) in r.stderr, (n, r.stderr[-3000:])


def metrics(out):
    return [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if l.strip()]


def losses(out):
    return {r["step"]: r["loss"] for r in metrics(out) if "loss" in r}


def no_duplicate_steps(out):
    steps = [r["step"] for r in metrics(out) if "loss" in r]
    return steps == sorted(set(steps))


def snapshot(folder):
    "{relative path: bytes} of every file under `folder`."
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def weights(out, step):
    import mindspore as ms
    return {k: v.asnumpy() for k, v in ms.load_checkpoint(str(out / "checkpoint" / f"step_{step}.ckpt")).items()}


def finished_run(factory, name, steps, env):
    def make(folder):
        r = llmpt("pretrain", *RUN, f"--runner_config.max_steps={steps}", f"--output_dir={folder / 'run'}", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    return shared_once(factory, name, make) / "run"


@pytest.fixture(scope="module")
def straight(tmp_path_factory, env):
    "An uninterrupted 8-step run, the reference for every resumed one."
    return finished_run(tmp_path_factory, "straight", 8, env)


@pytest.fixture(scope="module")
def base(tmp_path_factory, env):
    "A finished 6-step run with checkpoints at steps 2, 4 and 6; tests work on copies of it."
    return finished_run(tmp_path_factory, "base", 6, env)


def copy_run(base, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(base, out)
    return out


def start(args, env):
    return subprocess.Popen([bin_path("llmpt"), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_step(proc, step, timeout=300):
    "Read the run's output until it logs `step N/`; returns what it printed."
    seen, deadline = [], time.time() + timeout
    for line in proc.stdout:
        seen.append(line)
        if f"step {step}/" in line or time.time() > deadline:
            return "".join(seen)
    raise AssertionError("the run ended before step %d:\n%s" % (step, "".join(seen)[-2000:]))


# --- signals ----------------------------------------------------------------------------------------------------------
def test_sigint_saves_a_checkpoint_and_resume_matches_the_straight_run(straight, tmp_path, env):
    out = tmp_path / "run"
    proc = start(["pretrain", *RUN, "--runner_config.max_steps=8", f"--output_dir={out}"], env)
    wait_for_step(proc, 3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    # 130 for SIGINT; MindSpore's graph runtime turns a SIGINT that arrives during a step into SIGTERM (143)
    assert (proc.returncode, f"stopped by {'SIGINT' if proc.returncode == 130 else 'SIGTERM'}") in \
        {(130, "stopped by SIGINT"), (143, "stopped by SIGTERM")} and "stopped by" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr and f"Resume with: llmpt pretrain --resume --output_dir={out}" in stderr, stderr[-2000:]
    stopped = max(losses(out))
    assert 3 <= stopped < 8 and (out / "checkpoint" / f"step_{stopped}.json").exists()   # the step it stopped at
    assert not list((out / "checkpoint").glob(".tmp_*"))

    r = llmpt("pretrain", "--resume", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"resumed from step {stopped}" in r.stdout
    a, b = losses(straight), losses(out)
    assert sorted(b) == list(range(1, 9)) and no_duplicate_steps(out)
    assert max(abs(a[s] - b[s]) for s in range(1, 9)) == 0.0
    wa, wb = weights(straight, 8), weights(out, 8)
    assert set(wa) == set(wb) and all(np.array_equal(wa[k], wb[k]) for k in wa)


# -m slow: a race it cannot win every time. A step's micro-batches run inside MindSpore's graph call, where Python does
# not run its signal handler; when the first Ctrl-C is handled only as the step returns, the run saves and stops (exit
# 143, the signal passed on as SIGTERM) before the second one can arrive. Seen in 2 of the last 4 runs of the suite.
@pytest.mark.slow
def test_second_sigint_stops_at_once(tmp_path, env):
    out = tmp_path / "run"
    # steps of 4 micro-batches of 16 x 512 tokens, and the first signal a moment into step 4: the second one then reaches
    # the run inside the step the first one let finish (sent between two steps, the first signal stops the run at once
    # with exit 143 or 130, before the second arrives)
    proc = start(["pretrain", *RUN, "--runner_config.max_steps=400", "--model.model_config.seq_length=512",
                  "--model.model_config.num_layers=4",
                  "--runner_config.batch_size=16", "--runner_config.gradient_accumulation_steps=4",
                  "--train_dataset.max_documents=2000", f"--output_dir={out}"], env)
    wait_for_step(proc, 3)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    for line in proc.stdout:  # the second Ctrl-C after the first is acknowledged: two signals in one step are one
        if "send it again" in line:
            break
    proc.send_signal(signal.SIGINT)
    t = time.time()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and time.time() - t < 60, stderr[-2000:]
    assert "stopped at once" in stderr and "Traceback" not in stderr, stderr[-2000:]
    assert not list(out.rglob(".tmp_*"))                       # no half-written file left behind
    assert no_duplicate_steps(out)


# --- resume bookkeeping -----------------------------------------------------------------------------------------------
def test_resume_of_a_folder_with_no_run_names_it(tmp_path, env):
    check_error(llmpt("pretrain", "--resume", f"--output_dir={tmp_path / 'typo'}", env=env), tmp_path / "typo", "no run")
    assert not (tmp_path / "typo").exists()                     # nothing was started there


def test_resume_refuses_changed_settings_and_names_them(base, tmp_path, env):
    out = copy_run(base, tmp_path)
    before = snapshot(out)
    r = llmpt("pretrain", "--resume", "--lr_schedule.learning_rate=0.05", "--model.model_config.hidden_size=64",
              f"--output_dir={out}", env=env)
    check_error(r, "lr_schedule.learning_rate", "model.model_config.hidden_size", "--allow-config-change")
    assert snapshot(out) == before                              # config.yaml, checkpoints, metrics untouched


def test_failed_resume_with_accepted_changes_leaves_the_run_as_it_was(base, tmp_path, env):
    """--allow-config-change with a change the checkpoint cannot load into (another hidden_size) fails before anything
    is written: config.yaml and metrics.jsonl as they were, so a plain --resume then continues the run."""
    out = copy_run(base, tmp_path)
    before = snapshot(out)
    r = llmpt("pretrain", "--resume", "--model.model_config.hidden_size=64", "--allow-config-change",
              f"--output_dir={out}", env=env)
    check_error(r, "does not fit the model", "model.layers.0.self_attn.q_proj.weight")
    assert snapshot(out) == before
    r = llmpt("pretrain", "--resume", "--runner_config.max_steps=7", f"--output_dir={out}", env=env)
    assert r.returncode == 0 and "resumed from step 6" in r.stdout, r.stderr[-3000:]
    assert [m["step"] for m in metrics(out) if "loss" in m] == list(range(1, 8))
    assert [m["step"] for m in metrics(out) if "config_change" in m] == [6]   # at the step it resumed from


def test_resume_without_a_complete_checkpoint_starts_clean_and_records_accepted_changes(base, tmp_path, env):
    out = copy_run(base, tmp_path)
    for f in (out / "checkpoint").glob("*.json"):
        f.write_text("{truncated")                               # every checkpoint is damaged
    r = llmpt("pretrain", "--resume", "--runner_config.max_steps=2", "--lr_schedule.learning_rate=0.002",
              "--allow-config-change", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipping the damaged checkpoint step_6" in r.stderr and "no complete checkpoint" in r.stdout
    assert [m["step"] for m in metrics(out) if "loss" in m] == [1, 2]             # one history, from step 0
    change = [m for m in metrics(out) if "config_change" in m][0]["config_change"]
    assert change["lr_schedule.learning_rate"][1] == 0.002 and change["runner_config.max_steps"] == [6, 2]
    assert "learning_rate: 0.002" in (out / "config.yaml").read_text()


def test_resume_after_a_kill_during_data_preparation_names_the_command(tmp_path, env):
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(ROOT / "llmpt_nb" / "configs" / "pretrain_llama_tiny.yaml", out / "config.yaml")  # killed right after
    r = llmpt("pretrain", "--resume", f"--output_dir={out}", env=env)
    check_error(r, f"llmpt pretrain --overwrite --output_dir={out}")


# --- --overwrite is safe ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [["--train_dataset.corpus=/no/such/corpus"], ["--model.model_config.vocab_size=1234"]],
                         ids=["corpus typo", "vocab mismatch"])
def test_overwrite_that_fails_keeps_the_old_run(base, tmp_path, env, bad):
    out = copy_run(base, tmp_path)
    before = snapshot(out)
    r = llmpt("pretrain", *RUN, *bad, "--overwrite", f"--output_dir={out}", env=env)
    check_error(r, bad[0].split("=")[1] if "corpus" in bad[0] else "1234")
    assert snapshot(out) == before and not (tmp_path / ".run.replaced").exists()


def test_failed_new_run_leaves_no_folder_behind(tmp_path, env):
    out = tmp_path / "new"
    check_error(llmpt("prepare-data", *RUN, "--model.model_config.vocab_size=1234", f"--output_dir={out}", env=env), "1234")
    assert not out.exists()                                     # so the corrected rerun is not refused


def test_overwrite_that_succeeds_replaces_the_old_run(base, tmp_path, env):
    out = copy_run(base, tmp_path)
    r = llmpt("prepare-data", *RUN, "--overwrite", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (out / "checkpoint").exists() and (out / "data" / "prepared.json").exists()
    assert not (tmp_path / ".run.replaced").exists()


def lock_holder(out, proc, timeout=300):
    "Wait until `proc` holds the lock of run folder `out`."
    lock, deadline = out.parent / f".{out.name}.lock", time.time() + timeout
    while not (lock.exists() and f"process {proc.pid} " in lock.read_text()):
        assert proc.poll() is None and time.time() < deadline, "the run never took its folder's lock"
        time.sleep(0.2)


def test_one_run_per_folder(tmp_path, env):
    "A second run into a folder in use is refused, naming the first, which finishes as if alone; a killed run's lock is taken over."
    out = tmp_path / "run"
    first = start(["pretrain", *RUN, "--runner_config.max_steps=30", f"--output_dir={out}"], env)
    lock_holder(out, first)
    for command in ["pretrain", "prepare-data"]:
        check_error(llmpt(command, *RUN, "--overwrite", f"--output_dir={out}", env=env),
                    f"output_dir {out} is in use by process {first.pid} (llmpt pretrain")
    check_error(llmpt("pretrain", "--resume", f"--output_dir={out}", env=env), f"is in use by process {first.pid}")
    assert first.wait(timeout=900) == 0, first.stderr.read()[-3000:]
    assert sorted(losses(out)) == list(range(1, 31)) and no_duplicate_steps(out)
    assert (out / "checkpoint" / "step_30.ckpt").is_file() and not list((out / "checkpoint").glob("step_3[1-9].ckpt"))
    killed = start(["pretrain", *RUN, "--runner_config.max_steps=30", "--overwrite", f"--output_dir={out}"], env)
    wait_for_step(killed, 2)                                         # training: the run it replaced is gone
    killed.kill(); killed.wait()
    r = llmpt("prepare-data", *RUN, "--overwrite", f"--output_dir={out}", env=env)
    assert r.returncode == 0 and f"taking over the lock of process {killed.pid} (llmpt pretrain" in r.stdout, r.stderr[-3000:]
    assert (out.parent / ".run.lock").read_text() == ""


# --- damaged checkpoints ----------------------------------------------------------------------------------------------
def damage(path, how):
    data = bytearray(path.read_bytes())
    data = {"flip a bit": lambda d: d[:len(d) // 2] + bytes([d[len(d) // 2] ^ 1]) + d[len(d) // 2 + 1:],
            "truncate": lambda d: d[:len(d) // 2], "empty": lambda d: b"", "garbage": lambda d: b"\x00garbage\xff"}[how](data)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how,victim", [("flip a bit", "ckpt"), ("truncate", "ckpt"), ("empty", "ckpt"),
                                        ("garbage", "json"), ("truncate", "json"), ("empty", "json")])
def test_damaged_newest_checkpoint_falls_back_to_the_previous(base, tmp_path, how, victim):
    from llmpt_nb.checkpoint import latest_checkpoint
    out = copy_run(base, tmp_path)
    damage(out / "checkpoint" / f"step_6.{victim}", how)
    skipped = []
    ckpt, meta = latest_checkpoint(out / "checkpoint", skipped)
    assert meta["step"] == 4 and ckpt.name == "step_4.ckpt"
    assert f"step_6.{victim}" in skipped[0][1]


def test_damaged_rank_slice_is_caught(tmp_path):
    "Under ZeRO each rank's optimizer slice is listed in the metadata with its digest: a damaged slice is caught too."
    import mindspore as ms
    from llmpt_nb.checkpoint import save_checkpoint, save_training_state, latest_checkpoint
    w = ms.Parameter(np.ones((4, 4), np.float32), name="w")
    for step in (1, 2):
        save_checkpoint(tmp_path / f"step_{step}.rank1.ckpt", [ms.Parameter(np.full(8, step, np.float32), name="adam_m.w")])
        save_training_state(tmp_path, step, [w], {"epoch": 0})
    assert set(json.loads((tmp_path / "step_2.json").read_text())["files"]) == {"step_2.ckpt", "step_2.rank1.ckpt"}
    damage(tmp_path / "step_2.rank1.ckpt", "flip a bit")
    skipped = []
    assert latest_checkpoint(tmp_path, skipped)[1]["step"] == 1 and "step_2.rank1.ckpt" in skipped[0][1]


def test_resume_from_a_truncated_newest_checkpoint(base, tmp_path, env):
    out = copy_run(base, tmp_path)
    damage(out / "checkpoint" / "step_6.ckpt", "truncate")
    r = llmpt("pretrain", "--resume", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipping the damaged checkpoint step_6.ckpt" in r.stderr and "resumed from step 4" in r.stdout
    assert losses(out) == pytest.approx(losses(base), abs=0) and no_duplicate_steps(out)   # steps 5, 6 trained again


@pytest.mark.parametrize("how", ["flip a bit", "truncate"])
def test_changed_data_shard_is_refused_by_name(base, tmp_path, env, how):
    "A data shard changed after it was written is refused before MindRecord reads it (it used to crash with SIGSEGV)."
    out = copy_run(base, tmp_path)
    shard = sorted((out / "data").glob("train.mindrecord[0-9]"))[0]
    damage(shard, how)
    check_error(llmpt("pretrain", "--resume", f"--output_dir={out}", env=env),
                "changed since it was written", shard.name, "bytes", "--overwrite")


def test_nonfinite_state_is_never_saved(base, tmp_path, env):
    """A NaN in an AdamW moment (written with a valid digest: integrity checks cannot see it) makes the weights NaN
    at the next step: the run stops at the next save with a message naming the last good checkpoint, which stays."""
    import mindspore as ms
    from llmpt_nb.checkpoint import file_digest
    out = copy_run(base, tmp_path)
    ckpt = out / "checkpoint" / "step_4.ckpt"
    for k in ("step_6.ckpt", "step_6.json"):
        (out / "checkpoint" / k).unlink()
    state = ms.load_checkpoint(str(ckpt))
    m = state["adam_m.model.norm.weight"].asnumpy().copy(); m[0] = np.nan
    state["adam_m.model.norm.weight"] = ms.Parameter(m, name="adam_m.model.norm.weight")
    ms.save_checkpoint([{"name": k, "data": v} for k, v in state.items()], str(ckpt))
    meta = json.loads(ckpt.with_suffix(".json").read_text()); meta["files"][ckpt.name] = file_digest(ckpt)
    ckpt.with_suffix(".json").write_text(json.dumps(meta))
    r = llmpt("pretrain", "--resume", f"--output_dir={out}", env=env)
    check_error(r, "non-finite", "model.norm.weight", "step_4.ckpt", code=1)
    assert sorted(p.name for p in (out / "checkpoint").glob("*.ckpt")) == ["step_2.ckpt", "step_4.ckpt"]


def test_spikes_in_a_row_stop_the_run_naming_the_last_checkpoint(base, tmp_path, env):
    """Spike skipping switched on by MindFormers' keys with a threshold below every real norm: each step is skipped and
    logged as such, and after global_norm_spike_count_threshold of them in a row the run stops (exit 1), naming the
    last checkpoint, which still holds the weights the skipped steps left alone."""
    out = copy_run(base, tmp_path)
    for k in ("step_6.ckpt", "step_6.json"):
        (out / "checkpoint" / k).unlink()                              # resume from step 4
    r = llmpt("pretrain", "--resume", f"--output_dir={out}", "--allow-config-change", "--use_skip_data_by_global_norm=true",
              "--monitor_config.global_norm_spike_threshold=0.001", "--monitor_config.global_norm_spike_count_threshold=2",
              env=env)
    check_error(r, "2 optimizer steps in a row had a global gradient norm above monitor_config.global_norm_spike_threshold "
                "0.001", "step_4.ckpt", code=1)
    recs = [m for m in metrics(out) if "loss" in m]
    assert [m["step"] for m in recs if m.get("skipped")] == [5, 6] and no_duplicate_steps(out)
    assert "SKIPPED" in r.stdout


def test_max_steps_far_beyond_the_data_says_so_before_training(tmp_path, env):
    "A max_steps whose warmup alone outlasts the data (the run would train for days at a learning rate near 0) is named."
    proc = start(["pretrain", *RUN, "--runner_config.max_steps=1000000000", "--lr_schedule.total_steps=-1",
                  f"--output_dir={tmp_path / 'run'}"], env)
    try:
        line = next((l for l in proc.stderr if "warning:" in l), "")
    finally:
        proc.kill(); proc.wait()
    assert "warmup alone (50000000 optimizer steps) is longer than one pass" in line and "passes" in line, line
    assert "runner_config.max_steps" in line


def test_a_corpus_of_80_lines_trains_a_tokenizer_or_says_what_to_change(tmp_path, env):
    """A corpus of under 100 training documents (SentencePiece refused input_sentence_size <= 100 raw) trains; a
    vocabulary it cannot fill, or a character_coverage SentencePiece does not accept, is one sentence naming the key."""
    rng = np.random.default_rng(0)
    chars = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后"
    (tmp_path / "tiny.txt").write_text("".join("".join(rng.choice(list(chars), 40)) + "。\n" for _ in range(80)), encoding="utf-8")
    run = lambda *o: llmpt("train-tokenizer", f"--train_dataset.corpus={tmp_path / 'tiny.txt'}", *o,
                           f"--output_dir={tmp_path / 'out'}", env=env)
    check_error(run("--processor.tokenizer.vocab_size=8000"), "too little text for 8000 pieces", "processor.tokenizer.vocab_size")
    check_error(run("--processor.tokenizer.character_coverage=0.9"), "character_coverage must be between 0.98 and 1")
    assert not (tmp_path / "out").exists()
    r = run("--processor.tokenizer.vocab_size=400", "--model.model_config.vocab_size=400")
    assert r.returncode == 0 and "trained on" in r.stdout, r.stderr[-2000:]


def test_sigterm_during_data_preparation_says_what_it_stopped(tmp_path, env):
    "SIGTERM while `llmpt prepare-data` works: exit 143 (as training), no word of checkpoints it does not have."
    proc = start(["prepare-data", f"--output_dir={tmp_path / 'run'}"], env)
    proc.stdout.readline()                                   # it has started (the handler is in place)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, err[-2000:])
    assert "stopped at once by SIGTERM" in err and "checkpoint" not in err and "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "run").exists()


# --- every error is a sentence, exit 2 --------------------------------------------------------------------------------
def test_a_key_without_value_and_a_tab_indented_config(tmp_path, env):
    (tmp_path / "tabs.yaml").write_text("runner_config:\n\tbatch_size: 4\n")
    for args, needle in [(("--smoke", "--runner_config.max_steps"), "--runner_config.max_steps needs a value"),
                         ((f"--config={tmp_path / 'tabs.yaml'}",), "line 2 is indented with a tab")]:
        check_error(llmpt("pretrain", *args, f"--output_dir={tmp_path / 'run'}", env=env), needle)


def test_output_dir_is_a_file(tmp_path, env):
    (tmp_path / "f").write_text("x")
    check_error(llmpt("pretrain", "--smoke", f"--output_dir={tmp_path / 'f'}", env=env), tmp_path / "f", "is a file")


def test_output_dir_under_a_file(tmp_path, env):
    (tmp_path / "f").write_text("x")
    check_error(llmpt("prepare-data", "--smoke", f"--output_dir={tmp_path / 'f' / 'run'}", env=env), "which is a file")


def _mount_tmpfs(path, options):
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def test_read_only_output_dir(tmp_path, env):
    ro = tmp_path / "ro"
    if not _mount_tmpfs(ro, "size=1m,ro"):
        pytest.skip("cannot mount a read-only tmpfs here (needs root)")
    try:
        check_error(llmpt("prepare-data", "--smoke", f"--output_dir={ro / 'run'}", env=env), "read-only", ro)
    finally:
        subprocess.run(["umount", str(ro)])


@pytest.mark.parametrize("what", ["MindRecord", "checkpoint"])
def test_full_disk(base, tmp_path, env, what):
    """A small file system that fills up while writing the data, or (room for the data) the first checkpoint:
    a sentence naming what could not be written, exit 2, and no temporary file left."""
    disk = tmp_path / "disk"
    size = 256 << 10 if what == "MindRecord" else 24 << 20  # room for the data (under 1 MB), not for a ~40 MB checkpoint
    wide = ["--model.model_config.hidden_size=256", "--model.model_config.intermediate_size=704",
            "--model.model_config.num_layers=4"]                     # the checkpoint this size fills the disk
    if not _mount_tmpfs(disk, f"size={size // 1024}k"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        r = llmpt("pretrain", *RUN, *wide, "--runner_config.max_steps=2", f"--output_dir={disk / 'run'}", env=env)
        check_error(r, f"could not write the {what}")
        assert "no space left" in r.stderr.lower(), r.stderr[-3000:]                 # the cause, not the library's words
        assert not list(disk.rglob(".tmp_*")) and not list(disk.rglob("*.tmp")), list(disk.rglob("*"))
    finally:
        subprocess.run(["umount", str(disk)])


@pytest.mark.parametrize("fmt, said", [("mindrecord", ("could not write the MindRecord set", "MB free, a page needs")),
                                       ("megatron", ("could not write the Megatron prefix", "MB free)"))])
def test_full_disk_half_the_prepared_data(base, tmp_path, env, fmt, said):
    """A file system half the size of the data a run prepares (the blocks its files take): the preparation stops with
    one sentence naming the set (MindRecord's, or the Megatron prefix, chapter 02a) and the space free, exit 2, and
    nothing of the run is left."""
    data = [p for p in (base / "data").iterdir() if p.is_file()]
    half = max(sum(p.stat().st_blocks * 512 for p in data) // 2, 64 << 10)
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, f"size={half // 1024}k"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        r = llmpt("pretrain", *RUN, "--runner_config.max_steps=2", f"--train_dataset.format={fmt}",
                  f"--output_dir={disk / 'run'}", env=env)
        check_error(r, *said, "no space left on the device")
        assert len([l for l in r.stderr.splitlines() if l.strip()]) == 1, r.stderr[-3000:]          # one sentence
        assert not (disk / "run").exists() and [p.name for p in disk.iterdir()] == [".run.lock"], list(disk.rglob("*"))
    finally:
        subprocess.run(["umount", str(disk)])


def test_sequence_too_long_for_memory(tmp_path, env):
    r = llmpt("pretrain", "--model.model_config.seq_length=100000", f"--output_dir={tmp_path / 'o'}", env=env)
    check_error(r, "GiB", "model.model_config.seq_length")
    assert not (tmp_path / "o").exists()


def test_device_target_that_this_mindspore_cannot_use(tmp_path, env):
    import mindspore as ms
    if ms.hal.is_available("GPU"):
        pytest.skip("this machine has a GPU")
    check_error(llmpt("pretrain", "--smoke", "--context.device_target=GPU", f"--output_dir={tmp_path / 'o'}", env=env),
                "context.device_target is GPU", "device_target=CPU")


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    pytest.importorskip("transformers")
    from llmpt_nb.testing import tiny_hf_model
    folder = tmp_path_factory.mktemp("hf") / "tiny"
    tiny_hf_model(folder)
    return folder


def test_convert_weights_truncated_safetensors(hf_folder, tmp_path, env):
    src = tmp_path / "src"; shutil.copytree(hf_folder, src)
    damage(src / "model.safetensors", "truncate")
    check_error(llmpt("convert-weights", src, tmp_path / "out.ckpt", env=env), "model.safetensors", "truncated")


def test_convert_weights_invalid_config_json(hf_folder, tmp_path, env):
    src = tmp_path / "src"; shutil.copytree(hf_folder, src)
    (src / "config.json").write_text('{"hidden_size": 64,')
    check_error(llmpt("convert-weights", src, tmp_path / "out.ckpt", env=env), "config.json", "not valid JSON")


def test_convert_weights_warns_beyond_max_position_embeddings(hf_folder, tmp_path, env):
    limit = json.loads((hf_folder / "config.json").read_text())["max_position_embeddings"]
    r = llmpt("convert-weights", hf_folder, tmp_path / "out.ckpt", "--seq-length", limit * 2, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"seq_length {limit * 2} is above max_position_embeddings {limit}" in r.stderr


def test_killed_worker_log_keeps_its_last_lines(tmp_path):
    "Worker output is unbuffered: what a rank printed before SIGKILL is in its log and in the launcher's report."
    from llmpt_nb.launch import launch
    import contextlib, io
    err = io.StringIO()
    src = ("import os, signal, time; print('rank', os.environ['RANK_ID'], 'reached step 7'); time.sleep(0.5); "
           "os.environ['RANK_ID'] == '1' and os.kill(os.getpid(), signal.SIGKILL); time.sleep(3)")
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = launch(["python", "-c", src], workers=2, log_dir=tmp_path, timeout=120)
    assert code != 0 and "rank 1 reached step 7" in err.getvalue(), err.getvalue()


def test_a_stopped_continue_pretrain_is_told_to_resume_with_continue_pretrain(tmp_path, env):
    """The resume line names the command that was stopped, and running that line continues the run to its end with
    the uninterrupted run's losses and weights, bit for bit (dropout off: its random stream restarts on resume)."""
    pytest.importorskip("transformers")
    run = ["continue-pretrain", "--smoke", "--runner_config.max_steps=12", "--callbacks.log_interval=1",
           "--model.model_config.hidden_dropout_prob=0", "--model.model_config.attention_probs_dropout_prob=0"]
    straight, out = tmp_path / "straight", tmp_path / "run"
    r = subprocess.run([bin_path("llmpt"), *run, f"--output_dir={straight}"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    proc = start([*run, f"--output_dir={out}"], env)
    wait_for_step(proc, 2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    said = f"Resume with: llmpt continue-pretrain --resume --output_dir={out}"
    assert proc.returncode in (130, 143) and said in stderr and "Traceback" not in stderr, stderr[-3000:]
    r = subprocess.run([bin_path("llmpt"), *said.split(": ", 1)[1].split()[1:]], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and "resumed from step" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["steps"] == 12
    a, b = losses(straight), losses(out)
    assert sorted(b) == list(range(1, 13)) and no_duplicate_steps(out) and all(a[s] == b[s] for s in a), (a, b)
    wa, wb = weights(straight, 12), weights(out, 12)
    assert set(wa) == set(wb) and all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_resume_past_unhealthy_checkpoints_records_changes_against_the_one_it_continues_from(tmp_path, env):
    """Steps 1-2 healthy (max_steps 2), steps 3-4 trained with max_steps 4 and a threshold every step exceeds
    (unhealthy). Resumed with the health monitor and max_steps 6, the run continues from step 2, and the change is
    recorded at step 2 as 2 -> 6 (what step 2 was trained with), not 4 -> 6."""
    out = tmp_path / "run"
    every = ["--callbacks.save_checkpoint_steps=1", "--callbacks.keep_checkpoint_max=5", f"--output_dir={out}"]
    r = llmpt("pretrain", *RUN, "--runner_config.max_steps=2", *every, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = llmpt("pretrain", "--resume", "--runner_config.max_steps=4", "--callbacks.embedding_local_norm_threshold=1e-6",
              f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    health = {s: json.loads((out / "checkpoint" / f"step_{s}.json").read_text())["health"]["healthy"] for s in range(1, 5)}
    assert health == {1: True, 2: True, 3: False, 4: False}, health
    r = llmpt("pretrain", "--resume", "--runner_config.max_steps=6", "--use_checkpoint_health_monitor=true",
              f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipping the unhealthy checkpoint step_4.ckpt" in r.stderr and "resumed from step 2 " in r.stdout, r.stdout[-2000:]
    changes = [m for m in metrics(out) if "config_change" in m]
    assert changes[-1]["step"] == 2 and changes[-1]["config_change"]["runner_config.max_steps"] == [2, 6], changes
    assert sorted(losses(out)) == list(range(1, 7)) and no_duplicate_steps(out)
