"""`llmpt evaluate` as a user runs it (chapter 10g): on a run folder (held-out bits per byte and the Chinese tasks beside
the bigram of the run's training documents and chance, written to eval.json), on a Hugging Face folder (BLiMP's
pairs scored sentence by sentence as transformers scores them), and the errors of broken task files and of a model
folder without a tokenizer: one sentence, exit 2, nothing written. Tasks scored while a run trains
(`callbacks.eval_tasks`), and `llmpt lm-eval` (chapter 10h) answering a harness task as the harness's `hf` model does."""
import json
import numpy as np
import pytest
from conftest import ONE_LAYER, ROOT, shared_once, llmpt

BLIMP = ROOT / "tests" / "fixtures" / "blimp_dev.jsonl"
EOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, env):
    "A finished 4-step smoke run: its prepared data gives the bigram and the held-out documents."
    def make(folder):
        r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={folder / 'run'}", "--runner_config.max_steps=4", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    return shared_once(tmp_path_factory, "evaluate", make) / "run"


@pytest.fixture(scope="module")
def blimp_sample(tmp_path_factory):
    "Two pairs of each of BLiMP's 67 phenomena."
    rows = [json.loads(l) for l in BLIMP.read_text(encoding="utf-8").splitlines()]
    path = tmp_path_factory.mktemp("blimp") / "blimp_sample.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[::25]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, blimp_sample):
    """A random LLaMA saved by transformers with a byte-level BPE tokenizer trained on BLiMP's sentences, one
    <|endoftext|> as BOS and EOS (SmolLM2's layout)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from llmpt_nb.testing import tiny_bpe_tokenizer
    sentences = [r[k] for r in map(json.loads, BLIMP.read_text(encoding="utf-8").splitlines()) for k in ("sentence_good", "sentence_bad")]
    folder = tmp_path_factory.mktemp("hf") / "llama"
    tok = tiny_bpe_tokenizer(sentences, folder, vocab_size=600)
    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      initializer_range=0.2, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(str(folder))
    return folder


def test_a_run_folder_gets_eval_json_with_its_bigram_and_chance(run_dir, tmp_path, env):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    r = llmpt("evaluate", run, "--items", "20", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "continuation" in r.stdout and "bits/byte" in r.stdout and "eval.json" in r.stdout, r.stdout
    record = json.loads((run / "eval.json").read_text(encoding="utf-8"))
    tasks = record["tasks"]
    assert sorted(tasks) == ["continuation", "heldout"], sorted(tasks)            # the default tasks
    r = llmpt("evaluate", run, "--task", "swap", "--items", "20", "--output", tmp_path / "swap.json", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    tasks["swap"] = json.loads((tmp_path / "swap.json").read_text(encoding="utf-8"))["tasks"]["swap"]
    for who in ("model", "bigram"):
        h = tasks["heldout"][who]
        assert h["bits_per_byte"] > 0 and h["tokens"] > 0 and h["bytes"] > h["documents"] > 0, h
        for name in ("swap", "continuation"):
            t = tasks[name][who]
            assert 0 < t["n"] <= 20 and 0 <= t["acc"] <= 1 and t["acc_stderr"] >= 0 and 0 < t["chance"] < 1, (name, who, t)
            assert len(t["loglikelihoods"]) == t["n"], (name, who)
    assert tasks["swap"]["model"]["chance"] == 0.5 and tasks["continuation"]["model"]["chance"] == 0.25
    assert "swap" in r.stdout and "bits/byte" not in r.stdout and "swap.json" in r.stdout, r.stdout


def test_blimp_loglikelihoods_equal_transformers(hf_dir, blimp_sample, tmp_path, env):
    "Every BLiMP sentence's log-likelihood from `llmpt evaluate` equals transformers' within 1e-3 nats, so the accuracy does."
    import torch, transformers
    from llmpt_nb.evaluation import blimp_items, encode_pair
    from llmpt_nb.tokenizer import load_tokenizer
    out = tmp_path / "eval.json"
    r = llmpt("evaluate", hf_dir, "--task", f"blimp={blimp_sample}", "--output", out, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ours = json.loads(out.read_text(encoding="utf-8"))["tasks"]["blimp"]["model"]
    assert "bigram" not in json.loads(out.read_text(encoding="utf-8"))["tasks"]["blimp"]   # no run, no training text
    model = transformers.LlamaForCausalLM.from_pretrained(str(hf_dir)).eval()
    tok = load_tokenizer(hf_dir / "tokenizer.json")
    items = blimp_items(blimp_sample)
    def ll(sentence):
        ctx, cont = encode_pair(tok, "", " " + sentence)                     # lm-eval's blimp: no context, a space first
        assert ctx == [tok.eos_id]
        with torch.no_grad(): logits = model(torch.tensor([ctx + cont[:-1]])).logits[0].double()
        return float(torch.log_softmax(logits, -1)[torch.arange(len(cont)), torch.tensor(cont)].sum())
    theirs = np.array([[ll(s) for s in it.choices] for it in items])
    diff = np.abs(np.array(ours["loglikelihoods"]) - theirs)
    assert diff.max() < 1e-3, (diff.max(), items[int(diff.max(1).argmax())])
    assert ours["acc"] == np.mean(theirs[:, 0] > theirs[:, 1]) and len(items) == ours["n"] == 134


@pytest.mark.parametrize("text, said", [
    ('{"sentence_good": "A cat.", "sentence_bad": "Cat a."}\n{oops\n', "task.jsonl line 2 is not JSON"),
    ('{"sentence_good": "A cat."}\n', "task.jsonl line 1 has no field 'sentence_bad'"),
    ('{"sentence_good": "A cat.", "sentence_bad": ""}\n', "task.jsonl line 1: field 'sentence_bad' is empty")])
def test_a_broken_task_file_is_one_sentence_and_nothing_is_written(run_dir, tmp_path, env, text, said):
    task, out = tmp_path / "task.jsonl", tmp_path / "eval.json"
    task.write_text(text, encoding="utf-8")
    r = llmpt("evaluate", run_dir, "--task", f"blimp={task}", "--output", out, env=env)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_model_folder_without_a_tokenizer_is_refused(hf_dir, blimp_sample, tmp_path, env):
    import shutil
    bare, out = tmp_path / "bare", tmp_path / "eval.json"
    shutil.copytree(hf_dir, bare)
    for f in bare.glob("tokenizer*"): f.unlink()
    r = llmpt("evaluate", bare, "--task", f"blimp={blimp_sample}", "--output", out, env=env)
    assert r.returncode == 2 and "no tokenizer comes with" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not out.exists()


def test_tasks_scored_while_a_run_trains(tmp_path, env):
    "`callbacks.eval_tasks`: each evaluation's record in metrics.jsonl and TensorBoard has the accuracy, the bigram's, chance."
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={out}", "--runner_config.max_steps=4", "--callbacks.eval_interval=2",
              "--callbacks.eval_tasks=[continuation]", "--tensorboard.tensorboard_dir=tb", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    evals = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if "eval_loss" in l]
    assert [e["step"] for e in evals] == [2, 4] and "continuation acc" in r.stdout, r.stdout[-2000:]
    for e in evals:
        assert 0 <= e["continuation_acc"] <= 1 and e["continuation_acc_stderr"] >= 0 and e["continuation_chance"] == 0.25, e
        assert 0 <= e["continuation_bigram_acc"] <= 1, e
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(out / "tb")); events.Reload()
    assert [s.value for s in events.Scalars("eval/continuation_acc")] == pytest.approx([e["continuation_acc"] for e in evals])


@pytest.mark.parametrize("task, said", [("[heldout]", "held-out loss is measured at every evaluation already"),
                                        ("[lambada]", "unknown task 'lambada'"), ("[blimp]", "task blimp reads a JSONL file")])
def test_a_wrong_training_task_is_refused_before_any_file(tmp_path, env, task, said):
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", f"--callbacks.eval_tasks={task}", env=env)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not out.exists()


def test_lm_eval_answers_as_the_harness_hf_model(hf_dir, blimp_sample, tmp_path, env):
    """`llmpt lm-eval --model llmpt_nb` and the harness's own `lm_eval --model hf` on the same folder and a local BLiMP
    task: every log-likelihood equal within 1e-3 nats, the same accuracy, and those of `llmpt evaluate`."""
    pytest.importorskip("lm_eval")
    import subprocess
    from conftest import bin_path
    from llmpt_nb.harness import BLIMP_TASK, local_task
    tasks = tmp_path / "tasks"
    local_task(tasks, "blimp_local", blimp_sample, **BLIMP_TASK)
    offline = dict(env, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    def samples(cmd, model, args):
        out = tmp_path / model
        r = subprocess.run([*cmd, "--model", model, "--model_args", args, "--include_path", str(tasks), "--tasks", "blimp_local",
                            "--log_samples", "--output_path", str(out), "--batch_size", "8", "--device", "cpu"], env=offline, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "blimp_local" in r.stdout, r.stdout[-2000:]
        rows = [json.loads(l) for f in out.rglob("samples_blimp_local_*.jsonl") for l in f.read_text().splitlines()]
        return np.array([[float(x[0][0]) for x in s["resps"]] for s in sorted(rows, key=lambda s: s["doc_id"])])  # written as text
    ours = samples([bin_path("llmpt"), "lm-eval"], "llmpt_nb", f"pretrained={hf_dir}")
    theirs = samples([bin_path("lm_eval")], "hf", f"pretrained={hf_dir},dtype=float32")
    assert ours.shape == theirs.shape == (134, 2) and np.abs(ours - theirs).max() < 1e-3, np.abs(ours - theirs).max()
    assert np.mean(ours[:, 0] > ours[:, 1]) == np.mean(theirs[:, 0] > theirs[:, 1])
    r = llmpt("evaluate", hf_dir, "--task", f"blimp={blimp_sample}", "--output", tmp_path / "eval.json", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    mine = json.loads((tmp_path / "eval.json").read_text())["tasks"]["blimp"]["model"]["loglikelihoods"]
    assert np.abs(np.array(mine) - ours).max() < 1e-5             # the same functions, batched in another order


def test_lm_eval_names_a_path_that_is_not_a_model(blimp_sample, tmp_path, env):
    pytest.importorskip("lm_eval")
    from llmpt_nb.harness import BLIMP_TASK, local_task
    local_task(tmp_path / "tasks", "blimp_local", blimp_sample, **BLIMP_TASK)
    r = llmpt("lm-eval", "--model", "llmpt_nb", "--model_args", f"pretrained={tmp_path / 'nothing'}", "--include_path",
              tmp_path / "tasks", "--tasks", "blimp_local", env=dict(env, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1"))
    assert r.returncode == 2 and "is not a model" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
