"""`llmpt convert-weights --to mindformers2`: the folder MindFormers 2.x loads as `pretrained_model_dir` (Hugging Face names,
config.json, the tokenizer), read back with transformers as MindFormers reads it: the source's logits and token ids."""
import json
import numpy as np
import pytest
from test_cli import llmpt

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def run_checkpoint(tmp_path_factory):
    "A checkpoint laid out as a run lays it out: RUN/checkpoint/step_1.ckpt with the run's SentencePiece model in RUN/tokenizer."
    from llmpt_nb.convert import convert_weights
    from llmpt_nb.corpus import load_corpus, clean_documents
    from llmpt_nb.testing import tiny_hf_model
    from llmpt_nb.tokenizer import train_tokenizer
    tmp = tmp_path_factory.mktemp("mf2")
    docs = clean_documents(load_corpus("default", max_documents=300), min_chars=8)
    tok = train_tokenizer(docs, tmp / "run" / "tokenizer" / "tokenizer", vocab_size=2000, character_coverage=0.98)
    src = tiny_hf_model(tmp / "src", vocab_size=tok.vocab_size, num_key_value_heads=2)       # GQA, untied head
    return convert_weights(src, tmp / "run" / "checkpoint" / "step_1.ckpt", verbose=False)["dst"], tok


def test_mindformers2_folder_reads_back_with_transformers(run_checkpoint, tmp_path, env):
    import torch
    from llmpt_nb.convert import VERIFY_SENTENCES, compare_logits, VERIFY_RULES, rule_failures
    from llmpt_nb.convert import load_ms_checkpoint
    from llmpt_nb.testing import our_logits
    ckpt, tok = run_checkpoint
    out = tmp_path / "mf2"
    r = llmpt("convert-weights", "--from", "ms", "--to", "mindformers2", ckpt, out, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"pretrained_model_dir: {out}" in r.stdout and "load_ckpt_format: safetensors" in r.stdout, r.stdout[-2000:]
    assert "MindFormers 2.1.0 reads a LlamaForCausalLM only with its legacy model (--to mindformers)" in r.stdout
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors",
                                                     "tokenizer.model", "tokenizer_config.json"]
    # the tokenizer, as MindFormers builds it (transformers' AutoTokenizer on the folder): llmpt_nb's ids, no BOS added
    auto = transformers.AutoTokenizer.from_pretrained(str(out))
    ids = tok.encode(VERIFY_SENTENCES)
    assert [auto(s)["input_ids"] for s in VERIFY_SENTENCES] == ids
    assert [auto.decode(i) for i in ids] == VERIFY_SENTENCES
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen == {"bos_token_id": tok.bos_id, "eos_token_id": tok.eos_id, "pad_token_id": tok.pad_id}
    # the model: Hugging Face names, and the source checkpoint's logits by the float32 verify rule
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    assert "model.embed_tokens.weight" in dict(model.named_parameters())
    net, _ = load_ms_checkpoint(ckpt)
    with torch.no_grad():
        theirs = [model(torch.tensor([i])).logits[0].numpy() for i in ids]
    res = compare_logits([our_logits(net, np.array([i]))[0] for i in ids], theirs)
    print(f"max relative logit difference {res['max_rel_diff']:.1e}, top-1 {res['top1']:.0%}")
    assert rule_failures(res, *VERIFY_RULES["float32"]) == [] and res["top1"] == 1.0
    # and the command's own check says the same
    r = llmpt("convert-weights", "--verify", out, ckpt, env=env)
    assert r.returncode == 0 and "OK (float32 rule" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def test_mindformers2_refuses_what_it_cannot_write(run_checkpoint, tmp_path, env):
    "An encoder (MindFormers 2.x has none) and a non-empty destination: exit 2, one sentence naming the way out."
    from llmpt_nb.testing import tiny_hf_model
    ckpt, _ = run_checkpoint
    roberta = tiny_hf_model(tmp_path / "roberta", "RobertaForMaskedLM")
    r = llmpt("convert-weights", "--to", "mindformers2", roberta, tmp_path / "out", env=env)
    assert r.returncode == 2 and "MindFormers 2.x has no RobertaForMaskedLM" in r.stderr and "--to hf" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    (tmp_path / "full").mkdir(); (tmp_path / "full" / "x").write_text("keep")
    r = llmpt("convert-weights", "--from", "ms", "--to", "mindformers2", ckpt, tmp_path / "full", env=env)
    assert r.returncode == 2 and "--overwrite" in r.stderr and (tmp_path / "full" / "x").read_text() == "keep", r.stderr[-2000:]
