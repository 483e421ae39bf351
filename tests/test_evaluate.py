"""`llmpt evaluate` as a user runs it (chapter 10g): on a run folder (held-out bits per byte and the Chinese tasks beside
the bigram of the run's training documents and chance, written to eval.json), on a Hugging Face folder (BLiMP's
pairs scored sentence by sentence as transformers scores them), and the errors of broken task files and of a model
folder without a tokenizer: one sentence, exit 2, nothing written."""
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
    from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer, bpe.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    sentences = [r[k] for r in map(json.loads, BLIMP.read_text(encoding="utf-8").splitlines()) for k in ("sentence_good", "sentence_bad")]
    bpe.train_from_iterator(sentences, trainers.BpeTrainer(vocab_size=600, special_tokens=[EOS], show_progress=False,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder = tmp_path_factory.mktemp("hf") / "llama"
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=EOS, eos_token=EOS)
    tok.save_pretrained(str(folder))
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
