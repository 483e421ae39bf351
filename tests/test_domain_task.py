"""Chapter 11a: the classification reviews stay out of the domain MLM text, and a classifier head on the encoder
trains through chapter 05's Trainer and beats chance on held-out reviews."""
import json, math, os
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np
from llmpt_nb.continued import load_domain_documents, make_tiny_roberta
from llmpt_nb.domain_task import ClassifierSettings, labelled_reviews, split_review_task, write_documents, train_classifier


def test_split_keeps_classification_documents_out_of_the_mlm_text(tmp_path):
    split = split_review_task(300, 200, seed=3)
    (train, y_train), (test, y_test) = split.train, split.test
    assert np.bincount(y_train).tolist() == [300, 300] and np.bincount(y_test).tolist() == [200, 200]
    assert not set(train) & set(test)
    # what continue_pretrain reads from the written corpus (sample and split included) holds none of them
    folder = write_documents(split.mlm, tmp_path / "mlm" / "reviews.txt")
    read = load_domain_documents(folder, max_documents=10 ** 6, seed=0)
    assert sorted(read) == sorted(split.mlm)
    assert not set(read) & (set(train) | set(test))
    # ... while the review corpus itself does hold them (the check above could fail), and labels follow the file
    everything = set(load_domain_documents("reviews"))
    assert set(test) <= everything and set(train) <= everything
    assert len(everything) == len(split.mlm) + len(train) + len(test)
    texts, labels = labelled_reviews()
    label_of = dict(zip(texts, labels.tolist()))
    assert [label_of[t] for t in test] == y_test.tolist()


def test_classifier_trains_through_trainer_and_beats_chance(tmp_path):
    split = split_review_task(200, 100, seed=1)
    src = make_tiny_roberta(tmp_path / "init", split.mlm[:3000], seed=0)
    r = train_classifier(src, split, seed=0, out=tmp_path / "clf", settings=ClassifierSettings(steps=60, learning_rate=1e-3))
    assert r["steps"] == 60 and r["test_examples"] == 200
    metrics = [json.loads(l) for l in (tmp_path / "clf" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m] == list(range(1, 61))        # the Trainer's own log
    assert r["test_loss"] < math.log(2) and r["accuracy"] > 0.62, r              # chance: 0.5 and ln 2
