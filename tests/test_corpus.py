"""Corpora as they ship: compressed `.txt` / `.jsonl` files (another text field included), Parquet files and `datasets`
folders written by save_to_disk give the run the same data as the plain files, through `llmpt prepare-data` and
`llmpt pretrain` as a user runs them."""
import gzip, hashlib, json
import zstandard
from conftest import ONE_LAYER
from test_cli import llmpt


def rows_digest(out):
    "One digest of the packed training rows a run wrote, read back in order."
    from llmpt_nb.data import read_mindrecord
    from llmpt_nb.tokenizer import load_tokenizer
    h, pad = hashlib.sha256(), load_tokenizer(out / "tokenizer").pad_id
    for ids, labels in read_mindrecord(out / "data" / "train.mindrecord", pad_id=pad).create_tuple_iterator(output_numpy=True, num_epochs=1):
        h.update(ids.tobytes()); h.update(labels.tobytes())
    return h.hexdigest()


def test_compressed_corpus_gives_the_same_rows(tmp_path, env):
    from llmpt_nb.corpus import load_corpus
    docs = load_corpus(max_documents=300)                            # People's Daily, as the smoke run reads it
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir(); packed.mkdir()
    (plain / "a.txt").write_text("".join(d + "\n" for d in docs[:150]), encoding="utf-8")
    (plain / "b.txt").write_text("".join(d + "\n" for d in docs[150:]), encoding="utf-8")
    (packed / "a.txt.zst").write_bytes(zstandard.ZstdCompressor().compress((plain / "a.txt").read_bytes()))
    lines = "".join(json.dumps({"id": i, "body": d}, ensure_ascii=False) + "\n" for i, d in enumerate(docs[150:]))
    (packed / "b.jsonl.gz").write_bytes(gzip.compress(lines.encode("utf-8")))
    digests = []
    for corpus, field in [(plain, "text"), (packed, "body")]:
        out = tmp_path / f"run_{corpus.name}"
        r = llmpt("prepare-data", "--smoke", f"--train_dataset.corpus={corpus}", f"--train_dataset.text_field={field}",
                  f"--output_dir={out}", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        digests.append(rows_digest(out))
    assert digests[0] == digests[1]
    r = llmpt("prepare-data", "--smoke", f"--train_dataset.corpus={packed}", f"--output_dir={tmp_path / 'wrong'}", env=env)
    assert r.returncode == 2 and "b.jsonl.gz:1: no string field 'text'" in r.stderr and "text_field" in r.stderr, r.stderr
    out = tmp_path / "trained"                                       # and a run trains on the compressed folder
    r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--train_dataset.corpus={packed}", "--train_dataset.text_field=body",
              f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 2 and s["last_loss"] < s["first_loss"] and rows_digest(out) == digests[0]


def test_parquet_and_saved_dataset_give_the_same_rows(tmp_path, env):
    "A Parquet file and a `datasets` save_to_disk folder (two Arrow shards) of the same documents: the same rows."
    import datasets, pyarrow as pa, pyarrow.parquet as pq
    from llmpt_nb.corpus import load_corpus
    docs = load_corpus(max_documents=300)
    (tmp_path / "plain.txt").write_text("".join(d + "\n" for d in docs), encoding="utf-8")
    pq.write_table(pa.table({"id": list(range(300)), "text": docs}), tmp_path / "docs.parquet", row_group_size=64)
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"content": docs}).save_to_disk(tmp_path / "saved", num_shards=2)
    digests = []
    for corpus, field in [("plain.txt", "text"), ("docs.parquet", "text"), ("saved", "content")]:
        out = tmp_path / f"run_{corpus}"
        r = llmpt("prepare-data", "--smoke", f"--train_dataset.corpus={tmp_path / corpus}",
                  f"--train_dataset.text_field={field}", f"--output_dir={out}", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        digests.append(rows_digest(out))
    assert digests[0] == digests[1] == digests[2]
    r = llmpt("prepare-data", "--smoke", f"--train_dataset.corpus={tmp_path / 'saved'}", f"--output_dir={tmp_path / 'x'}",
              env=env)
    assert r.returncode == 2 and "no column 'text' (columns: ['content'])" in r.stderr and "text_field" in r.stderr, r.stderr


def test_sensitive_information_is_masked_by_config(tmp_path, capsys):
    "The packaged config masks e-mail addresses, phone numbers and ID-card numbers, says how many, and can drop instead."
    from llmpt_nb.config import load_config
    from llmpt_nb.corpus import load_corpus, clean_documents
    from llmpt_nb.pipeline import load_documents, prepare
    plain = clean_documents(load_corpus(max_documents=400))            # People's Daily holds none of them
    (tmp_path / "c.txt").write_text("请联系 zhang.san@example.com 报名参加本次活动。\n客服热线 010-51236699，欢迎来电咨询。\n"
                                    "身份证号 11010519491231002X 的申请人已经通过审核。\n" + "".join(p + "\n" for p in plain),
                                    encoding="utf-8")
    base = [f"train_dataset.corpus={tmp_path / 'c.txt'}", "train_dataset.val_fraction=0.2"]
    train, val = load_documents(load_config(overrides=base))
    assert sorted(train + val) == sorted(["请联系 <email> 报名参加本次活动。", "客服热线 <phone>，欢迎来电咨询。",
                                          "身份证号 <id> 的申请人已经通过审核。", *plain])
    small = ["processor.tokenizer.vocab_size=2000", "processor.tokenizer.character_coverage=0.98",
             "model.model_config.vocab_size=2000"]
    record = prepare(load_config(overrides=base + small), tmp_path / "masked")
    assert "sensitive information (mask): 1 email, 1 id_card, 1 phone" in capsys.readouterr().out
    assert record["documents"]["train"] + record["documents"]["val"] == len(plain) + 3
    train, val = load_documents(load_config(overrides=base + ["train_dataset.sensitive_info=drop"]))
    assert sorted(train + val) == sorted(plain)
    record = prepare(load_config(overrides=base + small + ["train_dataset.sensitive_info=drop"]), tmp_path / "dropped")
    assert "3 documents dropped" in capsys.readouterr().out
    assert record["documents"]["train"] + record["documents"]["val"] == len(plain)


def test_blended_corpus_trains_by_weight(tmp_path, env):
    """A blend of two corpora given on the command line as MindFormers-style {path, weight} entries: documents drawn by
    weight, the tokens of each source printed and recorded in summary.json, and a bad entry refused by name."""
    from llmpt_nb.corpus import load_corpus, default_corpus_file
    news, reviews = tmp_path / "news", tmp_path / "reviews"
    news.mkdir(); reviews.mkdir()
    (news / "pd.txt").write_text("".join(d + "\n" for d in load_corpus(max_documents=600)), encoding="utf-8")
    texts = load_corpus(default_corpus_file().parents[1] / "sentiment" / "pos.txt", max_documents=600)
    (reviews / "pos.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    blend = f"[{{path: {news}, weight: 3}}, {{path: {reviews}, weight: 1}}]"
    out = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--train_dataset.corpus={blend}", f"--output_dir={out}", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"blend: {news}: " in r.stdout and "weight 75.0%" in r.stdout and "weight 25.0%" in r.stdout, r.stdout[-3000:]
    assert "training documents" in r.stdout and "a blend ends when one source runs out" in r.stdout
    s = json.loads((out / "summary.json").read_text())
    prep = json.loads((out / "data" / "prepared.json").read_text())
    assert [x["path"] for x in s["sources"]] == [str(news), str(reviews)] and s["sources"] == prep["sources"]
    assert sum(x["train tokens"] for x in s["sources"]) == prep["tokens"]["train"]
    share = s["sources"][1]["train tokens"] / prep["tokens"]["train"]
    assert 0.2 < share < 0.3 and s["steps"] == 2, s["sources"]         # by characters, so near the weight
    r = llmpt("prepare-data", "--smoke", f"--train_dataset.corpus=[{{path: {news}, weight: -1}}]",
              f"--output_dir={tmp_path / 'bad'}", env=env)
    assert r.returncode == 2 and f"corpus entry 0 ({news}): weight must be a number > 0, got -1" in r.stderr, r.stderr


def test_files_that_are_not_text_and_one_source_written_twice_are_refused(tmp_path):
    """A 0-byte .gz, a file of binary bytes named .txt (with NUL bytes, or only other control characters: many to a line
    or a few), and one blend source written as a/b and a/b/ each get a sentence."""
    import pytest
    from llmpt_nb.corpus import blend_entries, load_corpus
    (tmp_path / "empty").mkdir(); (tmp_path / "empty" / "part.txt.gz").write_bytes(b"")
    (tmp_path / "binary").mkdir(); (tmp_path / "binary" / "data.txt").write_bytes(bytes(range(32)) * 800)
    (tmp_path / "control").mkdir(); (tmp_path / "control" / "data.txt").write_bytes(bytes(range(1, 32)) * 800)  # no NUL
    (tmp_path / "short").mkdir(); (tmp_path / "short" / "data.txt").write_bytes(b"\x01\x02\x03\n" * 500)  # few a line
    for folder, needle in [("empty", "is empty (0 bytes), not a .gz archive"), ("binary", "is not a text file: a NUL byte"),
                           ("control", "is not a text file: line 1 has 8 control characters in 9"),
                           ("short", "is not a text file: 6 of its first 6 characters (to line 2) are control characters")]:
        with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            load_corpus(str(tmp_path / folder))
    with pytest.raises(ValueError, match="corpus entries 0 and 1 are both"):
        blend_entries([{"path": "corpora/news", "weight": 1}, {"path": "corpora/news/", "weight": 1}])
