"""Megatron's indexed dataset (chapter 02a) checked by its owners' code: megatron-core's `IndexedDataset` reads the
prefixes llmpt_nb writes and gets every document's ids back, and llmpt_nb reads what megatron-core's
`IndexedDatasetBuilder` writes (uint16 and int32 ids, documents of several sequences). Skipped, with the reason, where
megatron-core is not installed (`pip install -e ".[test]"` installs it)."""
import json, os, struct, warnings
from dataclasses import replace
from pathlib import Path
import numpy as np
import pytest

from llmpt_nb.megatron import IndexedWriter, read_indexed, write_indexed, gpt_samples


@pytest.fixture(scope="module")
def indexed_dataset():
    with warnings.catch_warnings():  # "Transformer Engine and Apex are not installed": not needed to read files
        warnings.simplefilter("ignore")
        return pytest.importorskip("megatron.core.datasets.indexed_dataset",
                                   reason="megatron-core is not installed (pip install megatron-core==0.16.1)")


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    "The running example's documents, encoded by a tokenizer trained on them: (documents' ids, tokenizer)."
    from llmpt_nb.corpus import load_corpus, clean_documents
    from llmpt_nb.tokenizer import train_tokenizer
    docs = clean_documents(load_corpus("default", max_documents=1500))
    tok = train_tokenizer(docs, tmp_path_factory.mktemp("tok") / "pd", vocab_size=2000, character_coverage=0.98)
    return tok.encode(docs), tok


def test_megatron_core_reads_what_we_write(example, indexed_dataset, tmp_path):
    ids, tok = example
    prefix = tmp_path / "pd_text_document"
    with IndexedWriter(prefix, tok.vocab_size, tok.eos_id) as w:       # in batches, as chapter 02c's preparation adds them
        for start in range(0, len(ids), 100):
            batch = ids[start:start + 100]
            w.add(np.concatenate([np.array(d, np.int64) for d in batch]), [len(d) for d in batch])
    theirs = indexed_dataset.IndexedDataset(str(prefix))
    assert len(theirs.document_indices) == len(ids) + 1 and theirs.index.dtype == np.uint16
    for i, d in enumerate(ids):
        s, e = theirs.document_indices[i], theirs.document_indices[i + 1]
        assert np.concatenate(theirs[s:e]).tolist() == d + [tok.eos_id], i
    assert (tmp_path / "pd_text_document.idx").read_bytes()[:9] == b"MMIDIDX\x00\x00"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pd_text_document.bin", "pd_text_document.idx"]


@pytest.mark.parametrize("vocab_size", [2000, 100_000])
def test_we_read_what_megatron_core_writes(example, indexed_dataset, tmp_path, vocab_size):
    import torch
    ids, tok = example
    dtype = indexed_dataset.DType.optimal_dtype(vocab_size)            # uint16 below 65,500 pieces, else int32
    prefix = str(tmp_path / f"theirs_{vocab_size}")
    builder = indexed_dataset.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    docs = [d + [tok.eos_id] for d in ids[:300]] + [[vocab_size - 1, 5, 6]]
    for i, d in enumerate(docs):
        if i % 7 == 3 and len(d) > 4:                                   # a document of two sequences (sentences)
            builder.add_document(torch.tensor(d), [2, len(d) - 2])
        else:
            builder.add_item(torch.tensor(d)); builder.end_document()
    builder.finalize(prefix + ".idx")
    ours = read_indexed(prefix)
    assert ours.tokens.dtype == dtype and len(ours) == len(docs)
    assert all(ours.document(i).tolist() == d for i, d in enumerate(docs))
    rows = gpt_samples(ours, 64)                                        # Megatron's samples: consecutive ones share an id
    flat = np.concatenate([np.array(d) for d in docs])
    assert rows.shape == ((len(flat) - 1) // 64, 65) and rows[5].tolist() == flat[320:385].tolist()


def test_damaged_prefixes_are_refused_in_one_sentence(tmp_path):
    prefix = write_indexed([[1, 2, 3], [4, 5]], tmp_path / "p", 10, eos_id=0)
    idx = (tmp_path / "p.idx").read_bytes()
    (tmp_path / "short.bin").write_bytes((tmp_path / "p.bin").read_bytes())
    (tmp_path / "short.idx").write_bytes(idx[:40])
    (tmp_path / "int8.bin").write_bytes((tmp_path / "p.bin").read_bytes())
    (tmp_path / "int8.idx").write_bytes(idx[:17] + bytes([2]) + idx[18:])   # int8 ids: the .bin is twice too long
    (tmp_path / "text.idx").write_bytes(b"not an index at all, just text")
    (tmp_path / "text.bin").write_bytes(b"")
    for name, needle in [("short", "it was cut short"), ("int8", "int8.idx is not consistent: its pointers"),
                         ("text", "is not a Megatron index"), ("missing", "a Megatron prefix is two files")]:
        with pytest.raises((ValueError, FileNotFoundError)) as e:
            read_indexed(tmp_path / name)
        assert needle in str(e.value), (name, str(e.value))
    with pytest.raises(ValueError, match="token id 10 is outside the vocabulary"):
        write_indexed([[1, 2], [10]], tmp_path / "beyond", 10)
    assert not list(tmp_path.glob("*beyond*"))
    assert read_indexed(prefix).document(1).tolist() == [4, 5, 0]


def test_running_example_prefix_holds_the_documents_of_the_mindrecord_path(indexed_dataset, tmp_path):
    "`train_dataset.format: megatron`: megatron-core reads, document for document, the ids the MindRecord rows hold."
    from llmpt_nb.prepare import prepare_corpus, PrepareSettings, megatron_prefix
    from llmpt_nb.evaluation import run_documents
    from llmpt_nb.tokenizer import load_tokenizer
    settings = PrepareSettings(vocab_size=2000, character_coverage=0.98, max_documents=2000)
    prepare_corpus("default", tmp_path / "mindrecord", settings, verbose=False)
    tok = load_tokenizer(tmp_path / "mindrecord" / "tokenizer")         # the same tokenizer for both
    prepare_corpus("default", tmp_path / "megatron", replace(settings, vocab_file=tok.model_file, data_format="megatron"),
                   verbose=False)
    assert not list((tmp_path / "megatron").glob("*.mindrecord*"))
    for split in ("train", "val"):
        want = run_documents(tmp_path / "mindrecord", split, tok.eos_id)
        theirs = indexed_dataset.IndexedDataset(str(megatron_prefix(tmp_path / "megatron", split)))
        assert len(theirs) == len(want) > 0
        assert all(theirs[i].tolist() == d + [tok.eos_id] for i, d in enumerate(want)), split


@pytest.fixture(scope="module")
def their_prefixes(example, indexed_dataset, tmp_path_factory):
    "Two prefixes written by megatron-core's builder from the running example's documents, and the tokenizer's file."
    import torch
    ids, tok = example
    folder = tmp_path_factory.mktemp("theirs")
    for name, docs in (("news_a", ids[:1000]), ("news_b", ids[1000:])):
        b = indexed_dataset.IndexedDatasetBuilder(str(folder / f"{name}_text_document.bin"),
                                                  dtype=indexed_dataset.DType.optimal_dtype(tok.vocab_size))
        for d in docs: b.add_item(torch.tensor(d + [tok.eos_id])); b.end_document()
        b.finalize(str(folder / f"{name}_text_document.idx"))
    return folder, tok


def test_a_run_trains_from_prefixes_megatron_core_wrote(their_prefixes, tmp_path, env):
    from conftest import llmpt
    folder, tok = their_prefixes
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", f"--output_dir={out}", f"--processor.tokenizer.vocab_file={tok.model_file}",
              f"--train_dataset.data_path=['0.75', {folder / 'news_a_text_document'}, '0.25', {folder / 'news_b_text_document'}]",
              env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "(weight 0.75), " in r.stdout and "Megatron prefixes: " in r.stdout, r.stdout[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 2 and s["last_loss"] < s["first_loss"] + 0.5 and s["eval_loss"] > 0
    assert not list((out / "data").glob("*.bin")) and not list((out / "data").glob("*.mindrecord*"))   # read where they are
    r = llmpt("evaluate", out, "--items", "20", env=env)                      # judged on the held-out share of each
    assert r.returncode == 0 and "heldout" in r.stdout and "continuation" in r.stdout, r.stderr[-3000:]
    # handed to MindFormers 2.x, the prefixes are named where they are, with their weights (chapter 10i)
    r = llmpt("export-config", out, "--to", "mindformers2", "--workers", "2", "-o", tmp_path / "mf2", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    import yaml
    data_path = yaml.safe_load((tmp_path / "mf2" / "pretrain.yaml").read_text())["train_dataset"]["data_loader"]["config"]["data_path"]
    assert data_path == ["0.75", str(folder / "news_a_text_document"), "0.25", str(folder / "news_b_text_document")], data_path
    assert not list((tmp_path / "mf2" / "data").iterdir())


def test_bad_prefixes_are_refused_before_any_file(their_prefixes, tmp_path, env):
    import shutil
    from conftest import llmpt
    folder, tok = their_prefixes
    src = folder / "news_b_text_document"
    def copy(name, change):
        for ext in (".bin", ".idx"): shutil.copy(f"{src}{ext}", tmp_path / f"{name}{ext}")
        change(tmp_path / name); return tmp_path / name
    idx = (folder / "news_b_text_document.idx").read_bytes()
    cases = {
        copy("cut", lambda p: os.truncate(f"{p}.bin", 100)): "cut.bin has 100 bytes but cut.idx describes",
        copy("v2", lambda p: Path(f"{p}.idx").write_bytes(idx[:9] + struct.pack("<Q", 2) + idx[17:])):
            "is version 2 of Megatron's index",
        copy("f32", lambda p: Path(f"{p}.idx").write_bytes(idx[:17] + bytes([7]) + idx[18:])): "type code 7 (float32)",
        copy("big", lambda p: Path(f"{p}.bin").write_bytes(np.full(os.path.getsize(f"{p}.bin") // 2, 2500, np.uint16).tobytes())):
            "holds token id 2500, outside the tokenizer's 2000 pieces",
    }
    for prefix, needle in cases.items():
        out = tmp_path / f"run_{prefix.name}"
        r = llmpt("pretrain", "--smoke", f"--output_dir={out}", f"--processor.tokenizer.vocab_file={tok.model_file}",
                  f"--train_dataset.data_path={prefix}", env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (prefix.name, r.stderr[-3000:])
        assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, (needle, r.stderr[-3000:])
        assert not out.exists(), prefix.name
