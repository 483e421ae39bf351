"""Chapter 02c's streaming preparation as a user runs it: the worker count does not change the files, a stopped
`llmpt prepare-data` never leaves data that passes for finished and its rerun writes what an uninterrupted run writes,
and a corpus many times the size of the batches in flight is prepared in the same memory."""
import hashlib, json, signal, subprocess, sys, time
import pytest
from conftest import ROOT, bin_path
from test_cli import llmpt


def digests(folder):
    "SHA-256 of every MindRecord data file in `folder`."
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.glob("*.mindrecord*"))
            if f.suffix != ".db"}


def write_corpus(path, n_docs, seed=0):
    "`n_docs` distinct documents of real sentences (People's Daily shuffled into new documents), one per line."
    import random
    from llmpt_nb.corpus import load_corpus, split_sentences
    sentences = [s for d in load_corpus(max_documents=3000) for s in split_sentences(d) if len(s) > 4]
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n_docs):
            f.write(f"{i} " + "".join(rng.choices(sentences, k=rng.randint(2, 8))) + "\n")
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from llmpt_nb.corpus import load_corpus
    from llmpt_nb.tokenizer import train_tokenizer
    return train_tokenizer(load_corpus(max_documents=3000), tmp_path_factory.mktemp("tok") / "t", vocab_size=4500)


def test_worker_count_does_not_change_the_files(tmp_path, tokenizer):
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    corpus = write_corpus(tmp_path / "c.txt", 4000)
    records = [prepare_corpus(corpus, tmp_path / f"w{n}", PrepareSettings(seq_length=64, vocab_file=tokenizer.model_file,
                              shard_num=2, workers=n, batch_documents=300), verbose=False) for n in (0, 1, 2)]
    assert digests(tmp_path / "w0") == digests(tmp_path / "w1") == digests(tmp_path / "w2") and digests(tmp_path / "w0")
    same = lambda r: {k: v for k, v in r.items() if k not in ("seconds", "encoding_seconds", "tokens_per_second",
                                                               "workers", "data_dir", "tokenizer")}
    assert same(records[0]) == same(records[1]) == same(records[2])
    assert records[0]["rows"]["train"] % 2 == 0 and records[0]["documents"]["val"] > 0



def test_documents_come_back_whole_and_in_order_from_several_files(tmp_path, tokenizer):
    """Two workers' preparation deals its training rows out to two files (shard_num 2, chapter 02): chapter 10g's
    `run_documents` (the evaluation's bigram, its tasks) gets back the documents a one-file preparation holds, in order."""
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    from llmpt_nb.evaluation import run_documents
    corpus, docs = write_corpus(tmp_path / "c.txt", 1500), {}
    for n in (1, 2):
        prepare_corpus(corpus, tmp_path / f"s{n}", PrepareSettings(seq_length=64, vocab_file=tokenizer.model_file,
                                                                   shard_num=n), verbose=False)
        docs[n] = run_documents(tmp_path / f"s{n}", "train", tokenizer.eos_id)
    assert len(list((tmp_path / "s2").glob("train.mindrecord[0-9]"))) == 2 and len(docs[1]) > 1000
    dropped = len(docs[1]) - len(docs[2])          # shard_num 2 keeps an even row count: its last row may go
    assert docs[2] == docs[1][:len(docs[2])] and 0 <= dropped <= 2, dropped


def test_stopped_megatron_preparation_is_named_and_cleared(tmp_path, tokenizer, capsys):
    "A Megatron-format preparation stopped while writing (a `.tmp` prefix file, no prepared.json) is named and cleared."
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    data = tmp_path / "data"; data.mkdir()
    (data / ".train_text_document.bin.tmp").write_bytes(bytes(64))
    prepare_corpus(write_corpus(tmp_path / "c.txt", 300), data, PrepareSettings(seq_length=64, data_format="megatron",
                   vocab_file=tokenizer.model_file), verbose=True)
    assert "stopped before it finished" in capsys.readouterr().out
    assert not list(data.glob(".*")) and (data / "prepared.json").is_file()


def test_tokenizer_sample_is_bounded_in_characters(tmp_path):
    """The tokenizer trains on a seeded sample of at most `sample_chars` characters (prepared.json says how many), full
    to within a document; the same seed draws the same sample, so the same pieces."""
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    from llmpt_nb.tokenizer import load_tokenizer
    corpus = write_corpus(tmp_path / "c.txt", 3000)
    sample = [prepare_corpus(corpus, tmp_path / f"d{i}", PrepareSettings(seq_length=64, vocab_size=2000,
                             character_coverage=0.98, sample_chars=200_000), verbose=False)["tokenizer"] for i in (0, 1)][0]
    assert 195_000 < sample["sample_chars"] <= 200_000 and sample["sample_documents"] < 0.6 * sample["training_documents"], sample
    toks = [load_tokenizer(tmp_path / f"d{i}" / "tokenizer") for i in (0, 1)]
    pieces = [[tok.id_to_piece(i) for i in range(tok.vocab_size)] for tok in toks]
    assert pieces[0] == pieces[1]                              # (the files differ: they hold their own paths)


def test_labels_are_on_disk_only_when_the_padding_is_eos(tmp_path, tokenizer):
    """A tokenizer with a pad piece of its own gets input_ids alone, and read back the labels are the packed ones
    (padding ignored); one that pads with EOS (pad -1, as LLaMA's) keeps its labels column, so every real EOS is scored."""
    import numpy as np
    from llmpt_nb.corpus import load_corpus
    from llmpt_nb.data import IGNORE_INDEX, read_mindrecord
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    from llmpt_nb.tokenizer import Tokenizer, train_tokenizer
    corpus = write_corpus(tmp_path / "c.txt", 600)
    no_pad = train_tokenizer(load_corpus(max_documents=3000), tmp_path / "eos" / "t", vocab_size=4500, pad_id=-1)
    assert no_pad.pad_id == no_pad.eos_id
    for tok, columns in ((tokenizer, ["input_ids"]), (no_pad, ["input_ids", "labels"])):
        out = tmp_path / f"pad{tok.pad_id}"
        r = prepare_corpus(corpus, out, PrepareSettings(seq_length=64, vocab_file=tok.model_file), verbose=False)
        assert r["columns"] == columns
        tok = Tokenizer(out / "tokenizer" / "tokenizer.model")
        rows = list(read_mindrecord(out / "val.mindrecord", pad_id=tok.pad_id).create_tuple_iterator(output_numpy=True))
        ids, labels = np.stack([a for a, _ in rows]), np.stack([b for _, b in rows])
        padded = labels == IGNORE_INDEX
        assert padded[:-1].sum() == 0                                     # only the last row is padded
        assert (labels[~padded] == ids[~padded]).all() and (ids[padded] == tok.pad_id).all()
        assert (labels == tok.eos_id).sum() >= r["documents"]["val"] - 1  # every document's EOS is scored

def test_stopped_preparation_is_never_read_and_reruns_the_same(tmp_path, env):
    "SIGKILL part-way (nothing can clean up), then run the same command again: it says so and writes the same shards."
    corpus = write_corpus(tmp_path / "c.txt", 30000)
    args = ["prepare-data", "--smoke", f"--train_dataset.corpus={corpus}", "--train_dataset.max_documents=null"]
    r = llmpt(*args, f"--output_dir={tmp_path / 'whole'}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "stopped"
    p = subprocess.Popen([bin_path("llmpt"), *args, f"--output_dir={out}"], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list((out / "data").glob(".train.mindrecord.*")) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)                                     # the training set is being written
    time.sleep(0.5)
    assert p.poll() is None, "the preparation ended before it could be stopped: give it a larger corpus"
    p.send_signal(signal.SIGKILL); p.wait()
    assert not (out / "data" / "prepared.json").exists()
    time.sleep(3)                                            # its workers notice and exit too
    left = subprocess.run(["pgrep", "-f", f"--output_dir={out}"], capture_output=True, text=True).stdout.split()
    assert not left, f"worker processes of the killed preparation are still running: {left}"
    r = llmpt("pretrain", "--resume", f"--output_dir={out}", env=env)       # training refuses what is left
    assert r.returncode != 0 and "prepared.json" in r.stderr, r.stderr[-3000:]
    r = llmpt(*args, f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stopped before it finished" in r.stdout + r.stderr and "starting it again" in r.stdout + r.stderr
    assert digests(out / "data") == digests(tmp_path / "whole" / "data")
    assert not list((out / "data").glob(".*"))                # no temporary folder left


PEAK = """
import json, resource, sys
import llmpt_nb.prepare
from llmpt_nb.prepare import PrepareSettings, prepare_corpus
llmpt_nb.prepare.FILE_BYTES = 1 << 23      # MindRecord files of 8 MB: the test's corpora span several
import llmpt_nb.baseline                   # the baselines' pair table dense from the start in both runs: its size is set
llmpt_nb.baseline.PairCounts.__init__.__defaults__ = (1 << 22, 0)   # by the vocabulary (V * V counts), not the corpus
r = prepare_corpus(sys.argv[1], sys.argv[2], PrepareSettings(seq_length=128, vocab_file=sys.argv[3], workers=2,
                   batch_documents=500), verbose=False)
print(json.dumps(dict(tokens=sum(r['tokens'].values()), main=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      workers=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)))
"""


def test_memory_does_not_grow_with_the_corpus(tmp_path, env, tokenizer):
    """Peak resident memory (ru_maxrss, in KiB, of this preparation's process and of its largest worker) for a corpus
    and one four times as large. The batches in flight (2 per worker, 500 documents each) are a few MB; the lists of
    chapter 02 would need about 40 times the corpus (benchmarks/data_prep.py), some 1.4 GB more for the larger one, far beyond the 15% allowed."""
    peaks = []
    for n in (20000, 80000):
        corpus = write_corpus(tmp_path / f"c{n}.txt", n, seed=n)
        r = subprocess.run([sys.executable, "-c", PEAK, str(corpus), str(tmp_path / f"d{n}"), tokenizer.model_file],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        peaks.append(dict(json.loads(r.stdout.strip().splitlines()[-1]), mb=corpus.stat().st_size / 2**20))
    small, large = peaks
    assert large["mb"] > 3.5 * small["mb"] and large["tokens"] > 3.5 * small["tokens"], peaks
    assert large["main"] < 1.15 * small["main"] and large["workers"] < 1.15 * small["workers"], peaks
