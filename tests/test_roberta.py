"""The BERT / RoBERTa encoder: parity with transformers through the strict loader, export round trip, and errors."""
import os
from types import SimpleNamespace
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np
import pytest
from mindspore import Tensor
from llmpt_nb.models.roberta import EncoderConfig, RobertaForMaskedLM, BertForMaskedLM, roberta_position_ids
from llmpt_nb.hf_folder import HFCheckpoint, save_safetensors
from llmpt_nb.weights import WeightsError, load_hf_model, export_hf
from llmpt_nb.convert import save_ms_checkpoint, load_ms_checkpoint
from llmpt_nb.testing import our_logits
from llmpt_nb.testing import damaged_copy

PAD = {"RobertaForMaskedLM": 1, "BertForMaskedLM": 0}


@pytest.fixture(scope="module")
def tf():
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.disable_progress_bar()
    from llmpt_nb import testing
    return SimpleNamespace(tiny_hf_model=testing.tiny_hf_model, hf_model=testing.hf_model, hf_logits=testing.hf_logits)


def batch(arch, seed=0):
    rng = np.random.default_rng(seed)
    pad = PAD[arch]
    ids = rng.integers(3, 96, (3, 16)); ids[1, 11:] = pad; ids[2, 4:] = pad
    mask = (ids != pad).astype(np.int64)
    types = np.zeros_like(ids) if arch.startswith("Roberta") else np.broadcast_to((np.arange(16) >= 7).astype(np.int64), ids.shape).copy()
    return ids, mask, types


@pytest.mark.parametrize("arch", ["RobertaForMaskedLM", "BertForMaskedLM"])
@pytest.mark.parametrize("tied", [True, False])
def test_encoder_logits_match_transformers(tf, tmp_path, arch, tied):
    folder = tf.tiny_hf_model(tmp_path / arch, arch=arch, seed=5, tie_word_embeddings=tied)
    net, table = load_hf_model(folder)
    assert len(table.mapped) == len(list(net.get_parameters()))
    ids, mask, types = batch(arch)
    ours, theirs = our_logits(net, ids, mask, types), tf.hf_logits(tf.hf_model(folder), ids, mask, types)
    assert np.abs(ours - theirs)[mask.astype(bool)].max() < 1e-4


@pytest.mark.parametrize("arch", ["RobertaForMaskedLM", "BertForMaskedLM"])
def test_encoder_hf_roundtrip(tf, tmp_path, arch):
    src = tf.tiny_hf_model(tmp_path / "src", arch=arch)
    net, _ = load_hf_model(src)
    save_ms_checkpoint(net, tmp_path / "enc.ckpt")
    back, _ = load_ms_checkpoint(tmp_path / "enc.ckpt")
    export_hf(back, tmp_path / "out")
    a, b = HFCheckpoint(src), HFCheckpoint(tmp_path / "out")
    assert sorted(a.keys()) == sorted(b.keys()) and all(np.array_equal(a.get(k), b.get(k)) for k in a.keys())
    ids, mask, types = batch(arch, 1)
    d = np.abs(tf.hf_logits(tf.hf_model(tmp_path / "out"), ids, mask, types) - tf.hf_logits(tf.hf_model(src), ids, mask, types)).max()
    assert d < 1e-6


def test_padding_does_not_change_real_tokens():
    net = RobertaForMaskedLM(EncoderConfig(vocab_size=40, seq_length=16, hidden_size=16, num_layers=2, num_heads=2,
                                           intermediate_size=32, pad_token_id=1))
    alone = net(Tensor(np.array([[0, 5, 9, 12, 2]], np.int32))).asnumpy()
    padded = np.array([[0, 5, 9, 12, 2, 1, 1, 1, 1]], np.int32)
    out = net(Tensor(padded), Tensor((padded != 1).astype(np.int32))).asnumpy()
    assert np.abs(out[:, :5] - alone).max() < 1e-5
    assert roberta_position_ids(Tensor(padded), 1).asnumpy().tolist() == [[2, 3, 4, 5, 6, 1, 1, 1, 1]]


def make_folder(tmp_path, arch="RobertaForMaskedLM"):
    cls = RobertaForMaskedLM if arch.startswith("Roberta") else BertForMaskedLM
    cfg = EncoderConfig(model_type="roberta" if cls is RobertaForMaskedLM else "bert", vocab_size=40, seq_length=16,
                        hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32, pad_token_id=PAD[arch])
    export_hf(cls(cfg), tmp_path / "good")
    return tmp_path / "good"


def test_encoder_missing_and_misshaped(tmp_path):
    good = make_folder(tmp_path)
    bad = damaged_copy(good, tmp_path / "b1", drop=["lm_head.bias"])
    with pytest.raises(WeightsError, match=r"missing tensor 'lm_head\.bias' \(40,\).*b1"):
        load_hf_model(bad)
    bad = damaged_copy(good, tmp_path / "b2", config_update={"max_position_embeddings": 20})
    with pytest.raises(WeightsError, match=r"shape mismatch for 'roberta\.embeddings\.position_embeddings\.weight'"):
        load_hf_model(bad)


def test_encoder_unsupported_config(tmp_path):
    good = make_folder(tmp_path, "BertForMaskedLM")
    bad = damaged_copy(good, tmp_path / "b", config_update={"position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="position_embedding_type"):
        load_hf_model(bad)
    bad = damaged_copy(good, tmp_path / "c", config_update={"architectures": ["DistilBertForMaskedLM"]})
    with pytest.raises(ValueError, match="unsupported architecture 'DistilBertForMaskedLM'"):
        load_hf_model(bad)


def test_stored_decoder_must_equal_embeddings(tmp_path):
    good = make_folder(tmp_path)
    ck = HFCheckpoint(good)
    arrays = {k: ck.get(k) for k in ck.keys()}
    arrays["lm_head.decoder.weight"] = arrays["roberta.embeddings.word_embeddings.weight"].copy()
    save_safetensors(arrays, good / "model.safetensors")
    net, table = load_hf_model(good)                             # equal: listed as tied, loads
    assert any(r.src == "lm_head.decoder.weight" and "tied" in r.note for r in table)
    arrays["lm_head.decoder.weight"][0, 0] += 1
    save_safetensors(arrays, good / "model.safetensors")
    with pytest.raises(WeightsError, match="should be tied"):
        load_hf_model(good)
