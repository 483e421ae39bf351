"""Counting baselines for a config's held-out documents: unigram and interpolated bigram (Jelinek-Mercer, lambda chosen
on the last 10% of the training documents) in nats/token and bits/char, with the wall time of each stage and the machine.
The documents and tokenizer are made as `llmpt pretrain` makes them (load_documents, prepare_run_tokenizer).

    python benchmarks/baseline.py [--config NAME_OR_YAML] [--vocab-size 8000] [--character-coverage 0.9995]
                                  [--max-documents N]
"""
import argparse, tempfile, time
from pathlib import Path

import numpy as np
from machine import describe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=None, help="packaged config name or YAML file (default: pretrain_llama_tiny)")
    ap.add_argument("--vocab-size", type=int, default=None, help="tokenizer pieces (default: the config's)")
    ap.add_argument("--character-coverage", type=float, default=None,
                    help="SentencePiece character_coverage (default: the config's; lower it with a small --vocab-size)")
    ap.add_argument("--max-documents", type=int, default=None, help="keep the first N documents (default: the config's)")
    a = ap.parse_args()
    t = time.perf_counter()
    from llmpt_nb.baseline import tokenizer_baselines
    from llmpt_nb.config import load_config
    from llmpt_nb.corpus import load_corpus, clean_documents, split_documents
    from llmpt_nb.tokenizer import train_tokenizer
    overrides = [f"processor.tokenizer.vocab_size={a.vocab_size}"] * (a.vocab_size is not None)
    overrides += [f"processor.tokenizer.character_coverage={a.character_coverage}"] * (a.character_coverage is not None)
    overrides += [f"train_dataset.max_documents={a.max_documents}"] * (a.max_documents is not None)
    cfg = load_config(a.config, overrides)
    td, tc = cfg.train_dataset, cfg.processor.tokenizer
    times = {"imports": time.perf_counter() - t}

    t = time.perf_counter()
    docs = clean_documents(load_corpus(td.corpus, max_documents=td.max_documents), min_chars=td.min_chars)
    train, val = split_documents(docs, td.val_fraction, seed=cfg.seed)
    times["load, clean, split"] = time.perf_counter() - t
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tok = train_tokenizer(train, Path(tmp) / "tokenizer", vocab_size=tc.vocab_size,
                              character_coverage=tc.character_coverage)
    times["tokenizer training"] = time.perf_counter() - t
    t = time.perf_counter()
    train_ids = tok.encode(train); tok.encode(val)
    times["encoding"] = time.perf_counter() - t
    t = time.perf_counter()
    b = tokenizer_baselines(tok, train, val)   # encodes again: the time below is encoding + fitting + scoring
    times["baselines (encode + fit + score)"] = time.perf_counter() - t

    print(describe(NumPy=np.__version__))
    print(f"config: {a.config or 'pretrain_llama_tiny'}; corpus {td.corpus!r}, max_documents {td.max_documents}, "
          f"min_chars {td.min_chars}, val_fraction {td.val_fraction}, seed {cfg.seed}")
    print(f"tokenizer: {tok.vocab_size} pieces, character_coverage {tc.character_coverage}")
    print(f"documents: {len(train):,} training ({sum(map(len, train_ids)):,} tokens), {len(val):,} held-out "
          f"({b.bigram.tokens:,} tokens with EOS, {b.bigram.chars:,} characters)")
    print(f"\n{'model':<8} {'nats/token':>10} {'bits/char':>9}")
    for name, s in (("unigram", b.unigram), ("bigram", b.bigram)):
        print(f"{name:<8} {s.nats_per_token:>10.3f} {s.bits_per_char:>9.3f}")
    print(f"bigram lambda {b.lam:.2f}\n\n{b}\n")
    for k, v in times.items():
        print(f"{k:<34} {v:6.2f} s")


if __name__ == "__main__":
    main()
