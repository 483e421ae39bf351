"""Data preparation (documents -> tokens -> packed rows -> MindRecord) of llmpt_nb against a baseline written the way
MindFormers' preprocessing scripts do it, and reading the result back as training reads it.

Both paths start from the same cleaned, split documents of a config's corpus and the same tokenizer (trained once,
as `llmpt pretrain` trains it) and write the training and held-out splits:

- baseline: for each document `sp.encode(doc)` and an EOS appended to one Python list; windows of seq_length + 1
  cut in Python (the last one padded, `labels` -100 on the padding); `FileWriter` with its default page and
  header sizes, `write_raw_data([one_sample])` once per sample, then `commit()`.
- llmpt_nb: what chapter 02 runs on lists: `pack_documents(tok.encode(docs), ...)`, trimmed to a multiple
  of the shard count, then `write_mindrecord(...)` (rows validated, written atomically with pages sized to the data,
  then counted and the first and last row read back).

Both must give the same rows: the row digests of the files they wrote are compared. Reading: the training split
through `read_mindrecord(path, batch_size=8, shuffle=True)` end to end, in tokens/s (rows x seq_length, as the
trainer counts), against what training consumes. "total" is documents in, MindRecord files on disk out (the median
run's encode + pack + write); loading, cleaning and tokenizer training are shared and timed once.

    python benchmarks/pack_vs_mindformers.py [--config NAME_OR_YAML] [--repeat 5] [--train-tokens-per-s 1940]
"""
import argparse, hashlib, os, platform, shutil, statistics, tempfile, time
from pathlib import Path

import numpy as np
from machine import cpu_model, load_average


def cpu_seconds():
    "(busy CPU seconds of the whole machine from /proc/stat or None, CPU seconds of this process and its children)."
    t = os.times()
    try:
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        machine = (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")      # all but idle and iowait
    except (OSError, ValueError, IndexError):
        machine = None
    return machine, t.user + t.system + t.children_user + t.children_system


def others_share(start, stop, wall):
    "Fraction of all CPUs that other processes kept busy between two cpu_seconds() samples, or None."
    if start[0] is None or stop[0] is None: return None
    return max(0.0, (stop[0] - start[0]) - (stop[1] - start[1])) / (wall * (os.cpu_count() or 1))


def baseline_split(sp, eos_id, pad_id, docs, seq_length, shard_num, path, times):
    "One split, MindFormers style; adds the seconds of each stage to `times`; returns the number of rows written."
    from mindspore.mindrecord import FileWriter
    t = time.perf_counter()
    content = []
    for doc in docs:                       # one encode call per document
        ids = sp.encode(doc)
        if ids:
            content += ids
            content.append(eos_id)
    times["encode"] += time.perf_counter() - t

    t = time.perf_counter()
    width, samples = seq_length + 1, []
    for start in range(0, len(content), width):
        chunk = content[start:start + width]
        if len(chunk) == 1 and start > 0: break            # nothing to predict in a one-token last row
        n_real = len(chunk)
        chunk = chunk + [pad_id] * (width - n_real)
        labels = chunk[:n_real] + [-100] * (width - n_real)
        samples.append({"input_ids": np.array(chunk, dtype=np.int32), "labels": np.array(labels, dtype=np.int32)})
    samples = samples[:len(samples) // shard_num * shard_num]
    times["pack"] += time.perf_counter() - t

    t = time.perf_counter()
    writer = FileWriter(str(path), shard_num=shard_num)
    writer.add_schema({"input_ids": {"type": "int32", "shape": [width]}, "labels": {"type": "int32", "shape": [width]}},
                      "packed tokens")
    for sample in samples:                 # one write per sample
        writer.write_raw_data([sample])
    writer.commit()
    times["write"] += time.perf_counter() - t
    return len(samples)


def ours_split(tok, docs, seq_length, shard_num, path, times):
    "One split, as chapter 02 packs and writes it; adds the seconds of each stage to `times`; returns the rows written."
    from llmpt_nb.data import pack_documents, write_mindrecord
    t = time.perf_counter()
    ids = tok.encode(docs)
    times["encode"] += time.perf_counter() - t
    t = time.perf_counter()
    rows = pack_documents(ids, seq_length, tok.eos_id, tok.pad_id)
    keep = len(rows["input_ids"]) // shard_num * shard_num
    rows = {k: v[:keep] for k, v in rows.items()}
    times["pack"] += time.perf_counter() - t
    t = time.perf_counter()
    write_mindrecord(rows, path, shard_num=shard_num)
    times["write"] += time.perf_counter() - t
    return keep


def digest(path):
    "(rows, real tokens, blake2b of every row in file order) of a written MindRecord set."
    from llmpt_nb.data import read_mindrecord
    h, rows, real = hashlib.blake2b(digest_size=16), 0, 0
    for ids, labels in read_mindrecord(path).create_tuple_iterator(output_numpy=True, num_epochs=1):
        h.update(ids.tobytes()); h.update(labels.tobytes())
        rows += 1; real += int((labels != -100).sum())
    return rows, real, h.hexdigest()


def read_once(path):
    "Seconds and rows for one full pass over `path` as training reads it (batches of 8, shuffled)."
    from llmpt_nb.data import read_mindrecord
    t, rows = time.perf_counter(), 0
    for ids, _ in read_mindrecord(path, batch_size=8, shuffle=True, seed=0).create_tuple_iterator(output_numpy=True,
                                                                                                  num_epochs=1):
        rows += ids.shape[0]
    return time.perf_counter() - t, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=None, help="packaged config name or YAML file (default: pretrain_llama_tiny)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each path; the median is reported")
    ap.add_argument("--train-tokens-per-s", type=float, default=1940.0,
                    help="what training consumes (default: the README's default run, 1,940 tokens/s)")
    a = ap.parse_args()
    load_before, cpu_start, wall_start = load_average(), cpu_seconds(), time.perf_counter()
    t = time.perf_counter()
    import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
    import mindspore
    from llmpt_nb.config import load_config
    from llmpt_nb.corpus import load_corpus, clean_documents, split_documents
    from llmpt_nb.tokenizer import train_tokenizer
    cfg = load_config(a.config)
    td, tc, seq = cfg.train_dataset, cfg.processor.tokenizer, cfg.model.model_config.seq_length
    t_import = time.perf_counter() - t

    t = time.perf_counter()
    docs = clean_documents(load_corpus(td.corpus, max_documents=td.max_documents), min_chars=td.min_chars)
    train, val = split_documents(docs, td.val_fraction, seed=cfg.seed)
    t_load = time.perf_counter() - t
    shards = td.shard_num or 1                       # shard_num or the number of workers (1 here)
    splits = (("train", train, shards), ("val", val, 1))

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        tok = train_tokenizer(train, tmp / "tokenizer", vocab_size=tc.vocab_size, character_coverage=tc.character_coverage)
        t_tok = time.perf_counter() - t
        runs = {"baseline": [], "llmpt_nb": []}
        for r in range(-1, a.repeat):                # run -1 warms up (allocator, page cache) and is not counted
            for name in runs:                        # alternate, so a change of load hits both paths alike
                times, out = dict(encode=0.0, pack=0.0, write=0.0), tmp / f"{name}{r}"
                out.mkdir()
                for split, split_docs, n_shards in splits:
                    if name == "baseline":
                        baseline_split(tok.sp, tok.eos_id, tok.pad_id, split_docs, seq, n_shards,
                                       out / f"{split}.mindrecord", times)
                    else:
                        ours_split(tok, split_docs, seq, n_shards, out / f"{split}.mindrecord", times)
                if r >= 0: runs[name].append({**times, "total": sum(times.values())})
                if r > 0: shutil.rmtree(out)         # keep run 0 (checked and read below); no gigabytes of pages
        checks = {name: [digest(tmp / f"{name}0" / f"{s}.mindrecord") for s, _, _ in splits] for name in runs}
        same = checks["baseline"] == checks["llmpt_nb"]
        (train_rows, tokens, _), (val_rows, val_tokens, _) = checks["llmpt_nb"]
        tokens += val_tokens
        read = [read_once(tmp / "llmpt_nb0" / "train.mindrecord") for r in range(a.repeat)]
        sizes = {name: sum(f.stat().st_size for f in (tmp / f"{name}0").iterdir()) for name in runs}
    load_after, others = load_average(), others_share(cpu_start, cpu_seconds(), time.perf_counter() - wall_start)

    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}, "
          f"Python {platform.python_version()}, MindSpore {mindspore.__version__}, NumPy {np.__version__}")
    quiet = others is not None and others < 0.1
    print(f"other processes (kernel writeback included) used {'n/a' if others is None else f'{others:.0%}'} of the CPUs "
          f"during the benchmark ({'quiet' if quiet else 'BUSY: expect slower, noisier numbers'}); load average (1 min) "
          f"{load_before or 0:.2f} before, {load_after or 0:.2f} after")
    print(f"config: {a.config or 'pretrain_llama_tiny'}; corpus {td.corpus!r}, {len(train):,} training + {len(val):,} "
          f"held-out documents; tokenizer {tok.vocab_size} pieces; seq_length {seq}; train shards {shards}")
    print(f"imports {t_import:.2f} s, load + clean + split {t_load:.2f} s, tokenizer training {t_tok:.2f} s "
          "(shared, not timed below)")
    print(f"rows: {train_rows:,} train + {val_rows:,} held-out of {seq}+1, {tokens:,} real tokens (EOS included); "
          f"median of {a.repeat} runs, both splits\n")
    med = {name: {k: statistics.median(t[k] for t in ts) for k in ts[0]} for name, ts in runs.items()}
    print(f"{'stage':<8} {'baseline s':>10} {'M tok/s':>8} {'llmpt_nb s':>10} {'M tok/s':>8} {'speedup':>8}")
    for k in ("encode", "pack", "write", "total"):
        b, o = med["baseline"][k], med["llmpt_nb"][k]
        print(f"{k:<8} {b:>10.3f} {tokens / b / 1e6:>8.2f} {o:>10.3f} {tokens / o / 1e6:>8.2f} {b / o:>7.1f}x")
    print(f"\nfiles on disk: baseline {sizes['baseline'] / 1e6:.1f} MB, llmpt_nb {sizes['llmpt_nb'] / 1e6:.1f} MB")
    print(f"same rows: {'yes' if same else 'NO'} (train {checks['llmpt_nb'][0][2]}, val {checks['llmpt_nb'][1][2]})")
    t_read = statistics.median(s for s, _ in read)
    read_tps = read[0][1] * seq / t_read
    print(f"reading: {read[0][1]:,} rows of the training split in {t_read:.3f} s (batch 8, shuffled) = "
          f"{read_tps:,.0f} tokens/s, {read_tps / a.train_tokens_per_s:,.0f}x the {a.train_tokens_per_s:,.0f} tokens/s "
          "training consumes")
    if not same: raise SystemExit("the two paths wrote different rows")


if __name__ == "__main__":
    main()
