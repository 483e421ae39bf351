"""Hugging Face `tokenizer.json` tokenizers (chapter 01a's `HFTokenizer`) through the whole path, as a user meets them: a
LLaMA saved by transformers with a byte-level BPE trained here on People's Daily, `llmpt generate` on that folder
against transformers' own greedy `generate`, `llmpt pretrain` with the tokenizer (given, or taken from the weights'
folder), and the errors of a wrong vocabulary, a wrong type or no tokenizer at all."""
import json
import numpy as np
import pytest
from conftest import llmpt

EOS = "<|endoftext|>"
SHAPE = dict(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, n_kv_heads=2, rms_norm_eps=1e-6,
             tie_word_embeddings=False)
HF_NAMES = dict(hidden_size="hidden_size", intermediate_size="intermediate_size", num_layers="num_hidden_layers",
                num_heads="num_attention_heads", n_kv_heads="num_key_value_heads", rms_norm_eps="rms_norm_eps",
                tie_word_embeddings="tie_word_embeddings")



@pytest.fixture(scope="module")
def docs():
    from llmpt_nb.corpus import load_corpus, clean_documents
    return clean_documents(load_corpus("default", max_documents=4000), min_chars=8)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, docs):
    """A Hugging Face LLaMA folder as transformers writes it: random weights (seeded) and a byte-level BPE tokenizer
    trained on the first 3,000 paragraphs, wrapped as a PreTrainedTokenizerFast and saved with save_pretrained."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(docs[:3000], trainers.BpeTrainer(vocab_size=1200, special_tokens=[EOS], show_progress=False,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder = tmp_path_factory.mktemp("hf") / "llama"
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=EOS, eos_token=EOS)
    tok.save_pretrained(str(folder))
    config = transformers.LlamaConfig(vocab_size=len(tok), max_position_embeddings=128, initializer_range=0.2,
                                      bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                                      **{HF_NAMES[k]: v for k, v in SHAPE.items()})
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(str(folder))
    return folder


def test_the_tokenizer_round_trips_and_agrees_with_transformers(hf_dir, docs):
    from transformers import AutoTokenizer
    from llmpt_nb.tokenizer import HFTokenizer, load_tokenizer, roundtrip_report
    tok, theirs = load_tokenizer(hf_dir), AutoTokenizer.from_pretrained(str(hf_dir))
    assert isinstance(tok, HFTokenizer) and tok.vocab_size == len(theirs) == 1200
    assert (tok.eos_id, tok.pad_id, tok.bos_id, tok.add_bos) == (theirs.eos_token_id,) * 3 + (False,)   # no pad: EOS pads
    held = docs[3000:3600]                                       # paragraphs the tokenizer was not trained on
    report = roundtrip_report(tok, held)
    assert report.n_lines == 600 and report.failures == [], report
    assert tok.encode(held[:50]) == [theirs(t)["input_ids"] for t in held[:50]]
    odd = ["Hello,  world!\t", " leading space", "（１）全角", "😀 昇腾 MindSpore", "a\u2581b", ""]
    assert roundtrip_report(tok, odd).failures == []


@pytest.fixture(scope="module")
def prompts(docs):
    return [d[:10] for d in docs[3600:3603]]


def test_llmpt_generate_writes_transformers_greedy_tokens(hf_dir, prompts, tmp_path, env):
    """The acceptance test: `llmpt generate DIR --greedy --prompts FILE --max_new_tokens 32` on the folder writes, for each
    of 3 prompts, the text of the tokens transformers' greedy `generate` picks; the token ids agree exactly too."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM
    from llmpt_nb.tokenizer import load_tokenizer
    theirs_tok, model = AutoTokenizer.from_pretrained(str(hf_dir)), LlamaForCausalLM.from_pretrained(str(hf_dir)).eval()
    tok = load_tokenizer(hf_dir)
    expected = []
    for p in prompts:
        ids = theirs_tok(p)["input_ids"]
        assert ids == tok.encode(p)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=32, pad_token_id=tok.eos_id)
        new = out[0, len(ids):].tolist()
        expected.append(new[:new.index(tok.eos_id)] if tok.eos_id in new else new)   # ours stops before EOS
    (tmp_path / "prompts.txt").write_text("\n".join(prompts) + "\n", encoding="utf-8")
    r = llmpt("generate", hf_dir, "--greedy", "--prompts", tmp_path / "prompts.txt", "--max_new_tokens", "32", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and "KV cache" in r.stderr
    for p, line, new in zip(prompts, lines, expected):
        assert line == p + tok.decode_continuation(tok.encode(p), new), (line, new)
        text = theirs_tok.decode(new)
        if "\ufffd" not in text: assert line == p + text
    # the ids themselves, in this process: the command's own generator, with and without the cache
    from llmpt_nb.generation import load_generator, generate_ids
    gen, _, _ = load_generator(hf_dir)
    for cache in (gen.decoder(1), None):
        got = [generate_ids(gen.net, tok.encode(p), 32, tok.eos_id, tok.pad_id, decoder=cache, temperature=0,
                            banned=gen.banned) for p in prompts]
        assert got == expected, (got, expected)
    assert len(expected[0]) == 32


def test_pretrain_with_the_tokenizer_json(hf_dir, tmp_path, env):
    "`llmpt pretrain --smoke` with the folder's tokenizer.json: prepared, trained, sampled and generated from, whole characters."
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", "--processor.tokenizer.type=HFTokenizer",
              f"--processor.tokenizer.vocab_file={hf_dir}", "--model.model_config.vocab_size=1200", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "tokenizer" / "tokenizer.json").is_file() and not (out / "tokenizer" / "tokenizer.model").exists()
    prep = json.loads((out / "data" / "prepared.json").read_text())
    assert prep["tokenizer"]["vocab_size"] == 1200 and not prep["tokenizer"]["trained"]
    assert prep["roundtrip"]["n_lines"] > 0 and prep["roundtrip"]["n_failed"] == 0
    assert prep["columns"] == ["input_ids", "labels"]                       # pads with EOS: the labels column is kept
    summary = json.loads((out / "summary.json").read_text())
    # a model two steps old writes byte sequences that are no UTF-8 (shown as U+FFFD, as transformers decodes them), but
    # a text is never cut inside a character: pieces that end inside one wait for the rest
    assert summary["steps"] == 2 and summary["roundtrip_exact"] == 1.0 and not summary["sample"].endswith("\ufffd")
    g = llmpt("generate", out, "--prompt", "中国", "--num_samples", "2", "--seed", "1", env=env)
    assert g.returncode == 0, g.stderr[-3000:]
    lines = g.stdout.splitlines()
    assert [l[:2] for l in lines] == ["中国", "中国"] and not any(l.endswith("\ufffd") for l in lines)


def test_a_run_from_converted_weights_takes_their_tokenizer(hf_dir, tmp_path, env):
    "load_checkpoint: the Hugging Face folder, type HFTokenizer and no vocab_file: the run uses the folder's tokenizer.json."
    from llmpt_nb.tokenizer import load_tokenizer
    out = tmp_path / "warm"
    shape = [f"--model.model_config.{k}={v}" for k, v in SHAPE.items()] + ["--model.model_config.vocab_size=1200"]
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", f"--load_checkpoint={hf_dir}",
              "--processor.tokenizer.type=HFTokenizer", *shape, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "weights:" in r.stdout, r.stdout[-3000:]
    run_tok, theirs = load_tokenizer(out / "tokenizer"), load_tokenizer(hf_dir)
    assert [run_tok.id_to_piece(i) for i in range(1200)] == [theirs.id_to_piece(i) for i in range(1200)]
    summary = json.loads((out / "summary.json").read_text())
    # a fresh model starts near ln 1200 = 7.09; the folder's weights (initializer_range 0.2) start higher (measured: 8.36)
    assert summary["first_loss"] > np.log(1200) + 0.5 and not summary["sample"].endswith("\ufffd")


def test_a_vocabulary_that_disagrees_is_refused_naming_both_sizes(hf_dir, tmp_path, env):
    out = tmp_path / "wrong"
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", "--processor.tokenizer.type=HFTokenizer",
              f"--processor.tokenizer.vocab_file={hf_dir}", env=env)                # the smoke model has 2,000 rows
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert ("vocab_size 2000 in the model config but the tokenizer has 1200 pieces: set model.model_config.vocab_size: 1200"
            in r.stderr), r.stderr[-3000:]
    assert not out.exists()                                                   # a run that fails its checks leaves nothing
    # weights with 1,200 rows and a hidden size the run contradicts: refused before any file of the run is written
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", f"--load_checkpoint={hf_dir}",
              f"--model.model_config.hidden_size={SHAPE['hidden_size'] * 2}", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"hidden_size is {SHAPE['hidden_size'] * 2} here, {SHAPE['hidden_size']} there" in r.stderr, r.stderr[-3000:]
    assert "Remove --model.model_config.hidden_size" in r.stderr and not out.exists()


def test_one_command_takes_the_shape_and_tokenizer_from_the_folder(hf_dir, tmp_path, env):
    "load_checkpoint alone: the run takes the folder's shape and tokenizer.json, says so, records them, and trains."
    from llmpt_nb.config import load_config
    from llmpt_nb.tokenizer import load_tokenizer
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", f"--load_checkpoint={hf_dir}",
              "--callbacks.reference_corpus=default", "--callbacks.reference_documents=5", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"model shape and tokenizer from {hf_dir / 'config.json'}: vocab_size 1200" in r.stdout, r.stdout[-3000:]
    assert "memory (chapter 08a's estimate): weights " in r.stdout, r.stdout[-3000:]
    # what continued pretraining is for: held-out loss on the new text and on the reference text, before and after
    s = json.loads((out / "summary.json").read_text())
    before, after = s["eval_before"], s["eval_after"]
    assert before["step"] == 0 and after["step"] == 2, (before, after)
    assert after["eval_loss"] == s["eval_loss"] and before["eval_loss"] != after["eval_loss"]
    assert all(0 < x["reference_text_loss"] < 20 and x["reference_text_bits_per_byte"] > 0 for x in (before, after))
    assert f"reference text {before['reference_text_loss']:.4f} -> {after['reference_text_loss']:.4f}" in r.stdout
    mc = load_config(out / "config.yaml").model.model_config                     # recorded in the run's config
    assert mc.vocab_size == 1200 and all(mc[k] == v for k, v in SHAPE.items()), mc
    run_tok, theirs = load_tokenizer(out / "tokenizer"), load_tokenizer(hf_dir)
    assert [run_tok.id_to_piece(i) for i in range(1200)] == [theirs.id_to_piece(i) for i in range(1200)]
    assert json.loads((out / "summary.json").read_text())["steps"] == 2
    # back where it came from: a Hugging Face folder of the run's newest checkpoint, with the original tokenizer files,
    # that transformers loads with logits equal to ours (the --verify rule)
    back = tmp_path / "back"
    r = llmpt("convert-weights", "--from", "ms", "--to", "hf", out, back, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (back / "tokenizer.json").read_bytes() == (hf_dir / "tokenizer.json").read_bytes()
    r = llmpt("convert-weights", "--verify", back, out, env=env)       # ids from the folder's tokenizer, not bytes
    assert r.returncode == 0 and "OK (float32 rule" in r.stdout and "from back" in r.stdout, r.stdout[-3000:]


def test_missing_or_mismatched_tokenizer_files_get_one_sentence(hf_dir, tmp_path, env):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_tok = tmp_path / "no_tokenizer"
    no_tok.mkdir()
    for f in ("config.json", "model.safetensors"):
        (no_tok / f).write_bytes((hf_dir / f).read_bytes())
    base = ["pretrain", "--smoke", f"--output_dir={tmp_path / 'run'}"]
    for args, needle in [
            ((*base, "--processor.tokenizer.type=HFTokenizer", f"--processor.tokenizer.vocab_file={empty}"),
             f"folder '{empty}' has no tokenizer.json"),
            ((*base, f"--processor.tokenizer.vocab_file={hf_dir / 'tokenizer.json'}"),
             "is a Hugging Face tokenizer.json but processor.tokenizer.type is SentencePieceBPE: set "
             "processor.tokenizer.type: HFTokenizer"),
            ((*base, f"--processor.tokenizer.vocab_file={hf_dir}"),
             "has no tokenizer.model (it has tokenizer.json: set processor.tokenizer.type: HFTokenizer)"),
            ((*base, "--processor.tokenizer.type=HFTokenizer"), "HFTokenizer loads a Hugging Face tokenizer.json, it "
                                                                "does not train one"),
            (("generate", no_tok, "--prompt", "中国"), "no tokenizer comes with")]:
        r = llmpt(*args, env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr[-3000:])
        assert needle in r.stderr, (needle, r.stderr[-3000:])
