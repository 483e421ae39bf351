"""Continued MLM pretraining: masking, chunking, bucketing, tokenizer checks, and the command end to end."""
import json, os, subprocess
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np
import pytest
from conftest import ROOT, bin_path
from llmpt_nb.continued import (mask_tokens, bucket_lengths, make_batches, padding_stats, build_char_vocab, IGNORE_INDEX,
                                load_domain_documents)

SPECIAL = {0, 1, 2, 3, 4}


def test_dynamic_masking_80_10_10():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 500, (256, 64)); ids[:, 0] = 2; ids[:, -1] = 3; ids[:, 50:-1] = 0
    masked, labels = mask_tokens(ids, SPECIAL, 4, 500, rng)
    chosen = labels != IGNORE_INDEX
    assert abs(chosen[:, 1:50].mean() - 0.15) < 0.01
    assert not chosen[:, 0].any() and not chosen[:, 50:].any()
    assert abs((masked[chosen] == 4).mean() - 0.8) < 0.02
    kept = (masked[chosen] == ids[chosen]).mean()
    assert 0.08 < kept < 0.12                                          # 10% unchanged (+ rare same-id random draws)
    assert (labels[chosen] == ids[chosen]).all() and (masked[~chosen] == ids[~chosen]).all()
    again, _ = mask_tokens(ids, SPECIAL, 4, 500, rng)
    assert (again != masked).any()


def test_buckets_and_measured_padding():
    rng = np.random.default_rng(1)
    examples = [np.full(int(n), 7, np.int32) for n in rng.integers(4, 65, 1000)]
    buckets = bucket_lengths([len(e) for e in examples], 64, num_buckets=4, multiple=8)
    assert buckets[-1] == 64 and len(buckets) <= 4 and all(b % 8 == 0 for b in buckets)
    batches = make_batches(examples, buckets, 16, 0, np.random.default_rng(2))
    assert {b.shape for b in batches} <= {(16, b) for b in buckets}
    for b in batches:                                                  # every row fits its bucket, padded with 0
        lens = (b != 0).sum(1)
        assert lens.max() <= b.shape[1]
    stats = padding_stats(batches, 0, 64)
    assert stats["padded_to_max"] == len(batches) * 16 * 64 - stats["real_tokens"]
    assert 0 < stats["padded_bucketed"] < stats["padded_to_max"] and stats["padding_saved_ratio"] > 0.3
    # training drops remainders, evaluation keeps every example (short batches filled with padding rows)
    ev = make_batches(examples, [64], 16, 0, rng=None, drop_last=False)
    assert sum(int((b != 0).sum()) for b in ev) == sum(len(e) for e in examples)


def test_reviews_corpus_and_char_vocab():
    docs = load_domain_documents("reviews", max_documents=300, seed=0)
    assert len(docs) == 300 and all(len(d) >= 8 for d in docs)
    vocab = build_char_vocab(docs, max_size=500, min_count=2)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(vocab) <= 500
    assert "的" in vocab and len(set(vocab)) == len(vocab)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from llmpt_nb.continued import TinyRoberta, make_tiny_roberta
    docs = load_domain_documents("reviews", max_documents=800, seed=0)
    folder = make_tiny_roberta(tmp_path_factory.mktemp("init") / "roberta", docs, TinyRoberta(seq_length=32))
    return folder, docs


def test_chunks_are_whole_sentences(tiny):
    from llmpt_nb.continued import load_checkpoint_tokenizer, chunk_documents
    from llmpt_nb.corpus import split_sentences
    folder, docs = tiny
    tok = load_checkpoint_tokenizer(folder)
    chunks = chunk_documents(tok, docs[:200], 32)
    assert all(len(c) <= 32 and c[0] == tok.cls_token_id and c[-1] == tok.sep_token_id for c in chunks)
    total = sum(len(tok(s, add_special_tokens=False)["input_ids"]) for d in docs[:200] for s in split_sentences(d) if s.strip())
    assert sum(len(c) - 2 for c in chunks) == total                   # nothing lost, nothing duplicated


def test_tokenizer_checks(tiny, tmp_path):
    from llmpt_nb.continued import load_checkpoint_tokenizer, check_tokenizer, make_tiny_roberta, TinyRoberta
    from llmpt_nb.weights import load_hf_model
    folder, docs = tiny
    net, _ = load_hf_model(folder)
    tok = load_checkpoint_tokenizer(folder)
    report = check_tokenizer(tok, net.config, docs[700:800])
    assert report.n_lines == 100 and report.unk_rate < 0.05 and "round trip" in str(report)
    other = make_tiny_roberta(tmp_path / "other", docs[:100], TinyRoberta(seq_length=32), min_count=1)
    with pytest.raises(ValueError, match=rf"has {len(load_checkpoint_tokenizer(other))} tokens but the checkpoint's "
                                         rf"config.json says vocab_size {net.config.vocab_size}"):
        check_tokenizer(load_checkpoint_tokenizer(other), net.config, where=str(folder))
    (tmp_path / "bare").mkdir()
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        load_checkpoint_tokenizer(tmp_path / "bare")


def run_cli(*args, timeout=600):
    "The installed `llmpt` command."
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([bin_path("llmpt"), *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_cli_continue_pretrain_lowers_heldout_loss(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    r = run_cli("continue-pretrain", f"--output_dir={out}", "--train_dataset.max_documents=1500",
                "--runner_config.max_steps=20", "--callbacks.eval_batches=8", "--callbacks.reference_corpus=default",
                "--callbacks.reference_documents=50")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["eval_after"]["eval_loss"] < s["eval_before"]["eval_loss"], s
    old = [s[k]["reference_text_loss"] for k in ("eval_before", "eval_after")]    # People's Daily, fixed masks
    assert all(4 < v < 10 for v in old) and old[0] != old[1], old
    assert f"reference text {old[0]:.4f} -> {old[1]:.4f}" in r.stdout, r.stdout[-2000:]
    assert s["padding"]["padding_saved"] > 0 and len(s["shapes"]) <= 4 and s["steps"] == 20
    assert s["export_max_abs_diff"] < 1e-4
    for f in ["config.yaml", "metrics.jsonl", "tokenizer_report.txt", "weights_table.txt", "hf/config.json",
              "hf/model.safetensors", "hf/tokenizer.json", s["checkpoint"], "checkpoint/step_20.ckpt",
              "data/train_chunks.mindrecord", "loss.png"]:
        assert (out / f).exists(), f
    steps = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    lrs = [m["lr"] for m in steps if "lr" in m]
    assert lrs[1] > lrs[0] and lrs[-1] < max(lrs)                      # 10% warmup (2 steps), then decay
    assert all(m["grad_norm"] > 0 for m in steps if "grad_norm" in m)


def test_a_missing_reference_corpus_is_refused_before_any_file(tmp_path):
    out = tmp_path / "run"
    r = run_cli("continue-pretrain", f"--output_dir={out}", f"--callbacks.reference_corpus={tmp_path / 'news'}",
                timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "callbacks.reference_corpus" in r.stderr and str(tmp_path / "news") in r.stderr, r.stderr[-2000:]
    assert not out.exists()


def test_cli_rejects_a_tokenizer_that_disagrees(tiny, tmp_path):
    from llmpt_nb.continued import TinyRoberta, make_tiny_roberta
    folder, docs = tiny
    other = make_tiny_roberta(tmp_path / "other", docs[:100], TinyRoberta(seq_length=32), min_count=1)
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(other / f, bad / f)
    r = run_cli("continue-pretrain", f"--load_checkpoint={bad}", f"--output_dir={tmp_path / 'o'}",
                "--train_dataset.max_documents=300", timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "tokens but the checkpoint's config.json says vocab_size" in r.stderr and str(bad) in r.stderr


def test_cli_continue_pretrain_from_a_bare_encoder(tiny, tmp_path):
    "A RobertaModel folder (no MLM head, as sentence-embedding models ship) trains with a fresh head, and says so."
    import shutil, transformers
    folder, _ = tiny
    bare = tmp_path / "bare"
    transformers.RobertaForMaskedLM.from_pretrained(str(folder)).roberta.save_pretrained(str(bare))
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(folder / f, bare / f)
    assert json.loads((bare / "config.json").read_text())["architectures"] == ["RobertaModel"]
    out = tmp_path / "run"
    r = run_cli("continue-pretrain", f"--load_checkpoint={bare}", f"--output_dir={out}",
                "--train_dataset.max_documents=600", "--runner_config.max_steps=8", "--callbacks.eval_batches=4")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "holds a bare RobertaModel (no MLM head)" in r.stderr and "freshly initialised" in r.stderr
    assert "freshly initialised" in (out / "weights_table.txt").read_text()
    s = json.loads((out / "summary.json").read_text())
    assert s["eval_after"]["eval_loss"] < s["eval_before"]["eval_loss"], s
    assert json.loads((out / "hf" / "config.json").read_text())["architectures"] == ["RobertaForMaskedLM"]
    v = run_cli("convert-weights", "--verify", bare, timeout=300)
    assert v.returncode == 2 and "no MLM head" in v.stderr and "Traceback" not in v.stderr, v.stderr[-2000:]


@pytest.mark.slow     # chapter 09a checks data parallel against one process in every test run
def test_launch_two_workers_match_one_process(tmp_path):
    """`llmpt launch --workers 2 -- llmpt continue-pretrain`: two ranks with one micro-batch each train to the weights of
    one process accumulating the same two micro-batches (dropout off: each process draws its own dropout masks)."""
    pytest.importorskip("transformers")
    common = ["--smoke", "--runner_config.max_steps=3", "--model.model_config.hidden_dropout_prob=0",
              "--model.model_config.attention_probs_dropout_prob=0"]
    one, two = tmp_path / "one", tmp_path / "two"
    r = run_cli("continue-pretrain", *common, f"--output_dir={one}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = run_cli("launch", "--workers", "2", "--", "llmpt", "continue-pretrain", *common,
                "--runner_config.gradient_accumulation_steps=1", f"--output_dir={two}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (two / "weights_rank0.sha256").read_text() == (two / "weights_rank1.sha256").read_text()
    a, b = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    assert a["eval_before"]["eval_loss"] == b["eval_before"]["eval_loss"]          # the same starting model
    assert abs(a["eval_after"]["eval_loss"] - b["eval_after"]["eval_loss"]) < 1e-5, (a["eval_after"], b["eval_after"])


def test_a_loaded_encoder_gets_the_runs_amp_level_and_recompute(tmp_path):
    "build_model(cfg, like=net): at O0 without recompute the loaded model itself; at O2 its weights in a float16-compute twin."
    from llmpt_nb.config import load_config
    from llmpt_nb.build import build_model
    from llmpt_nb.testing import tiny_hf_model
    from llmpt_nb.weights import load_hf_model, parameter_arrays
    net, _ = load_hf_model(tiny_hf_model(tmp_path / "roberta", arch="RobertaForMaskedLM"))
    assert build_model(load_config("continue_roberta_tiny"), like=net) is net
    cfg = load_config("continue_roberta_tiny", overrides=["--amp_level=O2", "--recompute_config.recompute=true"])
    amp = build_model(cfg, like=net)
    assert amp is not net and (amp.config.compute_dtype, amp.config.param_init_type) == ("float16", "float32")
    ours, theirs = parameter_arrays(net), parameter_arrays(amp)
    assert ours.keys() == theirs.keys() and all(np.array_equal(ours[k], theirs[k]) for k in ours)
    assert all(layer._has_config_recompute for layer in amp.roberta.encoder.layer)
    assert not any(layer._has_config_recompute for layer in net.roberta.encoder.layer)
