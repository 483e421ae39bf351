"""`load_checkpoint` in `llmpt pretrain`: a new run starts from existing weights (an llmpt_nb checkpoint or a Hugging Face
LLaMA folder), checked against the run's model config and tokenizer before the first step."""
import importlib.util, json, shutil
import numpy as np
import pytest
from test_cli import llmpt


@pytest.mark.parametrize("fmt", [pytest.param("ckpt", marks=pytest.mark.slow), "safetensors"])  # .ckpt: the same code
def test_new_run_starts_from_a_checkpoint(tmp_path, env, fmt):
    "From a training checkpoint of either format (checkpoint.format), or from its run folder."
    base, warm = tmp_path / "base", tmp_path / "warm"
    r = llmpt("pretrain", "--smoke", f"--output_dir={base}", "--runner_config.max_steps=30", f"--checkpoint.format={fmt}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    fresh = json.loads((base / "summary.json").read_text())
    assert fresh["checkpoint"].endswith(f"step_30.{fmt}")
    r = llmpt("pretrain", "--smoke", f"--output_dir={warm}", f"--load_checkpoint={fresh['checkpoint']}",
              "--runner_config.max_steps=2", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"weights: step_30.{fmt}" in r.stdout, r.stdout[-3000:]
    # the tokenizer comes with the weights: the run's own, found through its config.yaml (chapter 08a)
    assert f"tokenizer from {base}/config.yaml: vocab_file {base}/tokenizer/tokenizer.model" in r.stdout, r.stdout[-3000:]
    loaded = json.loads((warm / "summary.json").read_text())
    print(f"first loss: {fresh['first_loss']:.3f} from random weights, {loaded['first_loss']:.3f} from step 30 "
          f"(whose last loss was {fresh['last_loss']:.3f})")
    # measured: 7.633 from random weights, 6.789 from step 30, whose last loss was 6.705
    assert loaded["first_loss"] < fresh["first_loss"] - 0.5              # not a random start
    assert abs(loaded["first_loss"] - fresh["last_loss"]) < 0.3           # where the first run ended
    # a vocabulary the weights contradict: refused before any file of the run is written, naming the override to drop
    r = llmpt("pretrain", "--smoke", f"--output_dir={tmp_path / 'other'}", f"--load_checkpoint={base}",
              "--processor.tokenizer.vocab_size=1800", "--model.model_config.vocab_size=1800", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"the weights in {base}/config.yaml: vocab_size is 1800 here, 2000 there" in r.stderr, r.stderr[-3000:]
    assert "Remove --model.model_config.vocab_size" in r.stderr and not (tmp_path / "other").exists()
    r = llmpt("generate", base, "--greedy", "--prompt", "中国", "--max_new_tokens=4", env=env)   # a run folder of either format
    assert r.returncode == 0 and f"step_30.{fmt}" in r.stderr and r.stdout.startswith("中国"), r.stderr[-3000:]
    if fmt == "safetensors" and importlib.util.find_spec("transformers"):   # on to MindFormers 2.x, checked by transformers
        r = llmpt("convert-weights", "--from", "ms", "--to", "mindformers2", fresh["checkpoint"], tmp_path / "mf2", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        r = llmpt("convert-weights", "--verify", tmp_path / "mf2", fresh["checkpoint"], env=env)
        assert r.returncode == 0 and "OK (float32 rule" in r.stdout and "top-1 agreement" in r.stdout, r.stdout[-3000:]


@pytest.fixture(scope="module")
def docs():
    from llmpt_nb.corpus import load_corpus, clean_documents
    return clean_documents(load_corpus("default", max_documents=300), min_chars=8)


def test_hugging_face_folder(tmp_path, docs):
    from llmpt_nb.config import load_config
    from llmpt_nb.build import build_model, load_pretrained
    from llmpt_nb.tokenizer import train_tokenizer
    from llmpt_nb.testing import tiny_hf_model
    from llmpt_nb.weights import load_hf_model, parameter_arrays
    tok = train_tokenizer(docs[:150], tmp_path / "tok" / "tokenizer", vocab_size=2000, character_coverage=0.98)
    hf = tiny_hf_model(tmp_path / "hf", vocab_size=tok.vocab_size)           # 2 layers, hidden 32, 4 heads, untied
    shape = {"vocab_size": tok.vocab_size, "hidden_size": 32, "intermediate_size": 64, "num_layers": 2, "num_heads": 4,
             "n_kv_heads": 4, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
    cfg = load_config(overrides={f"model.model_config.{k}": v for k, v in shape.items()} | {"recompute_config.recompute": False})
    net = build_model(cfg)
    load_pretrained(net, hf, tok)
    ref, _ = load_hf_model(hf)
    a, b = parameter_arrays(net), parameter_arrays(ref)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    # the folder's SentencePiece model has the same size but other pieces: not the run's tokenizer
    other = train_tokenizer(docs[150:300], tmp_path / "other" / "tokenizer", vocab_size=2000, character_coverage=0.98)
    shutil.copy(other.model_file, hf / "tokenizer.model")
    with pytest.raises(ValueError, match="the run's tokenizer is not the one the weights in .* were trained with"):
        load_pretrained(net, hf, tok)
    # only a Hugging Face tokenizer.json, and another vocabulary size
    (hf / "tokenizer.model").unlink(); (hf / "tokenizer.json").write_text("{}")
    small = train_tokenizer(docs[:150], tmp_path / "small" / "tokenizer", vocab_size=1500, character_coverage=0.98)
    with pytest.raises(ValueError, match="(?s)vocabulary of 2000 tokens but the run's tokenizer has 1500 pieces.*"
                                         "SentencePiece tokenizer must be the one the weights were trained with"):
        load_pretrained(net, hf, small)
    # a model config that does not describe the weights: every difference, with the overrides that fix it
    wide = build_model(load_config(overrides={f"model.model_config.{k}": v for k, v in shape.items()}
                                   | {"model.model_config.rope_theta": 500000.0}))
    with pytest.raises(ValueError, match=r"rope_theta is 500000.0 here, 10000.0 there.*--model.model_config.rope_theta=10000.0"):
        load_pretrained(wide, hf, tok)
