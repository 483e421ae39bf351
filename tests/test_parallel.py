"""Data parallel and ZeRO 1/2/3 on two msrun workers (tiny LLaMA, 4 optimizer steps, 4 micro-batches per step):
the ranks stay identical, DP matches one process on the same global batch, every ZeRO stage matches DP,
and each stage holds 1/N of what it splits."""
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
from conftest import ROOT, shared_once
from llmpt_nb.launch import launch

TOL = 1e-5  # max |weight difference| after 4 AdamW steps at lr 1e-3 (measured: <= 1e-6; bit-identical for ZeRO-1 vs DP)
ARGS = ["--layers", "1", "--steps", "4", "--micro-batches", "4"]
WORKER = str(ROOT / "benchmarks" / "parallel_worker.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return shared_once(tmp_path_factory, "parallel", two_and_one)


def two_and_one(out):
    "Data parallel on MindSpore's engine and the four stages in one two-worker job into out/two, stage 0 in one process into out/one."
    code = launch(["python", WORKER, "--stage", "dp,0,1,2,3", *ARGS, "--out", str(out / "two")],
                  workers=2, log_dir=out / "logs", echo=None, timeout=900)
    assert code == 0, f"the two-worker job failed: logs in {out / 'logs'}"
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([sys.executable, WORKER, "--stage", "0", *ARGS, "--out", str(out / "one")],
                       cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


def weights(folder, stage, rank):
    with np.load(folder / f"stage{stage}" / f"rank{rank}.npz") as f:
        return {k: f[k] for k in f.files}


def record(folder, stage, rank):
    return json.loads((folder / f"stage{stage}" / f"rank{rank}.json").read_text())


def max_diff(a, b):
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


@pytest.mark.parametrize("stage", ["dp", 0, 1, 2, 3])
def test_ranks_end_identical(runs, stage):
    assert max_diff(weights(runs / "two", stage, 0), weights(runs / "two", stage, 1)) == 0.0


def test_data_parallel_matches_one_process_on_the_global_batch(runs):
    two, one = record(runs / "two", 0, 0), record(runs / "one", 0, 0)
    assert (two["world_size"], two["accum_steps"], one["world_size"], one["accum_steps"]) == (2, 2, 1, 4)
    assert max_diff(weights(runs / "two", 0, 0), weights(runs / "one", 0, 0)) < TOL


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_matches_data_parallel(runs, stage):
    assert max_diff(weights(runs / "two", stage, 0), weights(runs / "two", 0, 0)) < TOL
    np.testing.assert_allclose(record(runs / "two", stage, 0)["losses"], record(runs / "two", 0, 0)["losses"], atol=TOL)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_each_stage_holds_half_of_what_it_splits(runs, stage):
    dp = record(runs / "two", 0, 0)
    for rank in (0, 1):
        z = record(runs / "two", stage, rank)
        assert z["optimizer_bytes"] * 2 == dp["optimizer_bytes"]
        assert z["grad_bytes"] * (2 if stage >= 2 else 1) == dp["grad_bytes"]
        assert z["param_bytes"] * (2 if stage == 3 else 1) == dp["param_bytes"]
    assert dp["optimizer_bytes"] == 8 * dp["n_params"] and dp["param_bytes"] == 4 * dp["n_params"]


def test_communication_grows_with_the_stage(runs):
    payload = [record(runs / "two", s, 0)["allreduce_bytes"] + record(runs / "two", s, 0)["allgather_bytes"] for s in range(4)]
    assert payload[0] < payload[1] < payload[2] < payload[3]
    written = [record(runs / "two", s, 0)["io_write_bytes_per_step"] for s in range(4)]
    if written[0]:  # /proc/self/io available: the measured bytes follow the same order
        assert written[0] < written[1] < written[2] < written[3]


def test_mindspore_engine_matches_the_chapters_cells_and_one_process(runs):
    "MindSpore's data_parallel mode with its DistributedGradReducer trains as chapter 09a's GradAllReduce does."
    engine = weights(runs / "two", "dp", 0)
    assert record(runs / "two", "dp", 0)["engine"] == "mindspore" and record(runs / "two", 0, 0)["engine"] == "llmpt_nb"
    assert max_diff(engine, weights(runs / "two", 0, 0)) < TOL
    assert max_diff(engine, weights(runs / "one", 0, 0)) < TOL
