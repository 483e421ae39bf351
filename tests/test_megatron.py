"""Megatron's indexed dataset (chapter 02a) checked by its owners' code: megatron-core's `IndexedDataset` reads the
prefixes llmpt_nb writes and gets every document's ids back, and llmpt_nb reads what megatron-core's
`IndexedDatasetBuilder` writes (uint16 and int32 ids, documents of several sequences). Skipped, with the reason, where
megatron-core is not installed (`pip install -e ".[test]"` installs it)."""
import warnings
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
