"""Hugging Face <-> llmpt_nb <-> MindFormers weights: parity with transformers, round trips, and errors that name the tensor."""
import json, os
from types import SimpleNamespace
os.environ["HF_HUB_OFFLINE"] = "1"          # never download: every model is built offline from a config
import numpy as np
import pytest
import mindspore as ms
from llmpt_nb.cli import build_parser
from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
from llmpt_nb.hf_folder import HFCheckpoint, save_safetensors
from llmpt_nb.weights import WeightsError, load_hf_model, export_hf, parameter_arrays, to_mindformers
from llmpt_nb.convert import convert_weights, save_ms_checkpoint, load_ms_checkpoint
from llmpt_nb.testing import our_logits
from llmpt_nb.testing import damaged_copy

IDS = np.random.default_rng(1).integers(0, 128, (2, 20))


def tiny_ours(**kw):
    ms.set_seed(0)
    return LlamaForCausalLM(LlamaConfig(**{**dict(vocab_size=128, seq_length=64, hidden_size=32, num_layers=2, num_heads=4,
                                                 n_kv_heads=2, intermediate_size=64), **kw}))


@pytest.fixture(scope="module")
def tf():
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.disable_progress_bar()
    from llmpt_nb import convert, testing
    return SimpleNamespace(tiny_hf_model=testing.tiny_hf_model, hf_model=testing.hf_model, hf_logits=testing.hf_logits,
                           verify_weights=convert.verify_weights)


VARIANTS = {"mha_untied": dict(num_key_value_heads=4, tie_word_embeddings=False),
            "mha_tied": dict(num_key_value_heads=4, tie_word_embeddings=True),
            "gqa_untied": dict(num_key_value_heads=2, tie_word_embeddings=False, rope_theta=5e5),
            "gqa_tied": dict(num_key_value_heads=1, tie_word_embeddings=True)}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_llama_logits_match_transformers(tf, tmp_path, name):
    folder = tf.tiny_hf_model(tmp_path / name, seed=3, **VARIANTS[name])
    net, table = load_hf_model(folder)
    assert len(table.mapped) == len(list(net.get_parameters()))
    diff = np.abs(our_logits(net, IDS) - tf.hf_logits(tf.hf_model(folder), IDS)).max()
    assert diff < 1e-4, diff


@pytest.mark.parametrize("name", ["mha_untied", "gqa_tied"])
def test_hf_roundtrip_reproduces_logits(tf, tmp_path, name):
    src = tf.tiny_hf_model(tmp_path / "src", **VARIANTS[name])
    net, _ = load_hf_model(src)
    ckpt = convert_weights(src, tmp_path / "m.ckpt", "hf", "ms", verbose=False)["dst"]
    convert_weights(ckpt, tmp_path / "out", "ms", "hf", verbose=False)
    a, b = HFCheckpoint(src), HFCheckpoint(tmp_path / "out")
    assert sorted(a.keys()) == sorted(b.keys())
    assert all(np.array_equal(a.get(k), b.get(k)) for k in a.keys())
    theirs_src, theirs_out = tf.hf_model(src), tf.hf_model(tmp_path / "out")   # from_pretrained(local_files_only=True)
    assert np.abs(tf.hf_logits(theirs_out, IDS) - tf.hf_logits(theirs_src, IDS)).max() < 1e-6
    assert np.abs(our_logits(net, IDS) - tf.hf_logits(theirs_out, IDS)).max() < 1e-4


def test_bf16_and_sharded_sources(tf, tmp_path):
    bf = tf.tiny_hf_model(tmp_path / "bf16", dtype="bfloat16", num_key_value_heads=2)
    net, table = load_hf_model(bf, dtype="float32")
    assert {(r.src_dtype, r.dst_dtype) for r in table.mapped} == {("bfloat16", "float32")}
    assert np.abs(our_logits(net, IDS) - tf.hf_logits(tf.hf_model(bf), IDS)).max() < 1e-4
    sh = tf.tiny_hf_model(tmp_path / "sharded", max_shard_size="40KB")
    assert len(HFCheckpoint(sh).files) > 1
    assert np.abs(our_logits(load_hf_model(sh)[0], IDS) - tf.hf_logits(tf.hf_model(sh), IDS)).max() < 1e-4


def test_verify_mode(tf, tmp_path, capsys):
    folder = tf.tiny_hf_model(tmp_path / "m", num_key_value_heads=2)
    res = tf.verify_weights(folder)
    assert res["ok"] and res["max_rel_diff"] < 1e-5 and res["top1"] == 1 and len(res["sentences"]) == 3
    assert "OK (float32 rule: relative difference <= 0.0001" in capsys.readouterr().out


@pytest.mark.parametrize("tied", [False, True])
def test_mindformers_roundtrip_is_lossless(tmp_path, tied):
    net = tiny_ours(tie_word_embeddings=tied)
    mf = save_ms_checkpoint(net, tmp_path / "mf.ckpt", names="mindformers")
    names = {k for k in ms.load_checkpoint(str(mf)) if k not in ("model_config", "arch", "names")}
    assert {"model.tok_embeddings.embedding_weight", "model.layers.1.attention.wq.weight", "model.layers.0.attention.wk.weight",
            "model.layers.0.attention.wv.weight", "model.layers.0.attention.wo.weight", "model.layers.0.feed_forward.w1.weight",
            "model.layers.0.feed_forward.w2.weight", "model.layers.0.feed_forward.w3.weight",
            "model.layers.0.attention_norm.weight", "model.layers.0.ffn_norm.weight", "model.norm_out.weight"} <= names
    assert ("lm_head.weight" in names) != tied
    back, _ = load_ms_checkpoint(mf)
    a, b = parameter_arrays(net), parameter_arrays(back)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    # and through our own checkpoint format, back to MindFormers names: the same numbers under the same names
    convert_weights(mf, tmp_path / "ours.ckpt", "mindformers", "ms", verbose=False)
    convert_weights(tmp_path / "ours.ckpt", tmp_path / "mf2.ckpt", "ms", "mindformers", verbose=False)
    x, y = ms.load_checkpoint(str(mf)), ms.load_checkpoint(str(tmp_path / "mf2.ckpt"))
    assert all(np.array_equal(x[k].asnumpy(), y[k].asnumpy()) for k in names)


def test_mindformers_checkpoint_without_config_needs_yaml(tmp_path):
    net = tiny_ours()
    plain = [{"name": to_mindformers(p.name), "data": p} for p in net.get_parameters()]
    ms.save_checkpoint(plain, str(tmp_path / "mf_plain.ckpt"))          # as MindFormers writes it: tensors only
    with pytest.raises(ValueError, match="does not record its model's hyperparameters"):
        load_ms_checkpoint(tmp_path / "mf_plain.ckpt")
    (tmp_path / "mf.yaml").write_text(json.dumps({"model": {"arch": {"type": "LlamaForCausalLM"},
                                                            "model_config": {**net.config.__dict__, "type": "LlamaConfig"}}}))
    back, table = load_ms_checkpoint(tmp_path / "mf_plain.ckpt", config=tmp_path / "mf.yaml")
    assert np.array_equal(parameter_arrays(back)["model.norm.weight"], parameter_arrays(net)["model.norm.weight"])


@pytest.fixture
def good_folder(tmp_path):
    "A Hugging Face folder written by our exporter (no transformers needed)."
    export_hf(tiny_ours(), tmp_path / "good")
    return tmp_path / "good"


def test_missing_tensor_is_named(good_folder, tmp_path):
    bad = damaged_copy(good_folder, tmp_path / "bad", drop=["model.layers.1.self_attn.v_proj.weight"])
    with pytest.raises(WeightsError, match=r"missing tensor 'model\.layers\.1\.self_attn\.v_proj\.weight'.*bad"):
        load_hf_model(bad)


def test_shape_mismatch_is_named(good_folder, tmp_path):
    bad = damaged_copy(good_folder, tmp_path / "bad", config_update={"num_key_value_heads": 4})
    with pytest.raises(WeightsError) as e:
        load_hf_model(bad)
    msg = str(e.value)
    assert "shape mismatch for 'model.layers.0.self_attn.k_proj.weight' in model.safetensors" in msg
    assert "(16, 32)" in msg and "(32, 32)" in msg and "4 problems" in msg     # k and v of both layers, all at once


def test_unexpected_tensor_is_named(good_folder, tmp_path):
    ck = HFCheckpoint(good_folder)
    arrays = {k: ck.get(k) for k in ck.keys()}
    arrays["model.layers.0.self_attn.q_proj.bias"] = np.zeros(32, np.float32)
    save_safetensors(arrays, good_folder / "model.safetensors")
    with pytest.raises(WeightsError, match=r"unexpected tensor 'model\.layers\.0\.self_attn\.q_proj\.bias'"):
        load_hf_model(good_folder)


def test_unsupported_architecture_is_named(good_folder, tmp_path):
    bad = damaged_copy(good_folder, tmp_path / "bad", config_update={"architectures": ["MistralForCausalLM"], "model_type": "mistral"})
    with pytest.raises(ValueError, match=r"unsupported architecture 'MistralForCausalLM' in .*bad/config\.json"):
        load_hf_model(bad)


def test_sharded_index_with_missing_shard(good_folder, tmp_path):
    net = tiny_ours()
    export_hf(net, tmp_path / "sh", max_shard_mb=0.02)
    shards = sorted((tmp_path / "sh").glob("model-*.safetensors"))
    assert len(shards) > 1
    back, table = load_hf_model(tmp_path / "sh")
    a, b = parameter_arrays(net), parameter_arrays(back)
    assert len(table.mapped) == len(a) and a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    shards[-1].unlink()
    with pytest.raises(FileNotFoundError, match=shards[-1].name):
        load_hf_model(tmp_path / "sh")


def test_training_checkpoint_uses_run_config(tmp_path):
    "A chapter-05 training checkpoint (weights + AdamW moments, no config inside) converts with the run's config.yaml."
    from llmpt_nb.optim import AdamW
    from llmpt_nb.checkpoint import save_checkpoint
    import yaml
    net = tiny_ours()
    opt = AdamW(net.trainable_params())
    run = tmp_path / "run"
    ckpt = save_checkpoint(run / "checkpoint" / "step_5.ckpt",
                           list(net.get_parameters()) + list(opt.exp_avg) + list(opt.exp_avg_sq) + [opt.global_step])
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"},
                                                              "model_config": dict(net.config.__dict__)}}))
    res = convert_weights(ckpt, tmp_path / "hf", "ms", "hf", verbose=False)
    assert any("AdamW" in note for _, note in res["skipped"])
    back, _ = load_hf_model(tmp_path / "hf")
    assert np.abs(our_logits(back, IDS) - our_logits(net, IDS)).max() == 0


def test_cli_convert_and_errors(good_folder, tmp_path, capsys):
    parser = build_parser()
    args = parser.parse_args(["convert-weights", "--from", "hf", "--to", "mindformers", str(good_folder), str(tmp_path / "mf.ckpt")])
    res = args.handler(args, [])
    assert res["dst_format"] == "mindformers" and "model.norm_out.weight" in capsys.readouterr().out
    args = parser.parse_args(["convert-weights", "--from", "mindformers", "--to", "hf", str(tmp_path / "mf.ckpt"), str(tmp_path / "hf")])
    args.handler(args, [])
    assert (tmp_path / "hf" / "config.json").is_file() and (tmp_path / "hf" / "model.safetensors").is_file()
    args = parser.parse_args(["convert-weights", str(tmp_path / "nowhere"), str(tmp_path / "x.ckpt")])
    with pytest.raises(FileNotFoundError, match="nowhere"):
        args.handler(args, [])
    args = parser.parse_args(["convert-weights", "--from", "hf", "--to", "mindformers", str(good_folder), str(tmp_path / "mf.ckpt")])
    with pytest.raises(FileExistsError, match="--overwrite"):
        args.handler(args, [])


def test_dtype_conversions_are_stated(tf, tmp_path):
    "fp16 source -> float16 weights; our float32 model -> bf16 export -> float32 again; the table says each step."
    fp16 = tf.tiny_hf_model(tmp_path / "fp16", dtype="float16", num_key_value_heads=2)
    net16, table = load_hf_model(fp16, dtype="float16")
    assert {(r.src_dtype, r.dst_dtype) for r in table.mapped} == {("float16", "float16")}
    assert all(p.dtype == ms.float16 for p in net16.get_parameters())
    ref = tf.hf_logits(tf.hf_model(fp16), IDS)                  # transformers on the same fp16 values, in float32
    assert np.abs(our_logits(net16, IDS) - ref).max() < 1e-4     # we compute in float32 too (compute_dtype)
    net32, _ = load_hf_model(fp16, dtype="float32")
    table = export_hf(net32, tmp_path / "bf16", dtype="bfloat16")
    assert {r.dst_dtype for r in table.mapped} == {"bfloat16"}
    assert HFCheckpoint(tmp_path / "bf16").dtype("model.norm.weight") == "bfloat16"
    back, t2 = load_hf_model(tmp_path / "bf16")
    assert {(r.src_dtype, r.dst_dtype) for r in t2.mapped} == {("bfloat16", "float32")}
    assert np.abs(our_logits(back, IDS) - tf.hf_logits(tf.hf_model(tmp_path / "bf16"), IDS)).max() < 1e-4


# --- Qwen2 / Qwen3: our LlamaForCausalLM with q/k/v biases, q/k norms and its own head_dim -------------------------
# Pass rule of every comparison with transformers: the float32 rule of `convert-weights --verify` (VERIFY_RULES):
# max |our logit - transformers' logit| / max |transformers' logit| <= 1e-4 and top-1 agreement >= 99.9%.
QWEN_SIZES = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False)
QWEN = {"qwen2": ("Qwen2ForCausalLM", "Qwen2Config", {}),
        "qwen2_tied": ("Qwen2ForCausalLM", "Qwen2Config", {"tie_word_embeddings": True}),
        "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", {"head_dim": 32}),          # 4 heads x 32 = 128 != hidden 64
        "qwen3_tied": ("Qwen3ForCausalLM", "Qwen3Config", {"head_dim": 32, "tie_word_embeddings": True, "rope_theta": 1e6})}
QIDS = np.random.default_rng(2).integers(0, 256, (2, 40))


def tiny_qwen(tf, folder, name, **kw):
    "A small random transformers Qwen2/Qwen3 (weights perturbed: biases nonzero, norm scales not one), saved to folder."
    from llmpt_nb.testing import TINY_HF
    arch, cfg_class, extra = QWEN[name]
    TINY_HF.setdefault(arch, (cfg_class, {}))              # every size is passed below
    return tf.tiny_hf_model(folder, arch=arch, seed=4, **{**QWEN_SIZES, **extra, **kw})


def cli(*argv):
    "Run the real `llmpt` entry point in-process; returns its exit code."
    from llmpt_nb.cli import main
    return main(["convert-weights", *map(str, argv)])


@pytest.mark.parametrize("name", list(QWEN))
def test_qwen_verify_cli_passes(tf, tmp_path, capsys, name):
    "`llmpt convert-weights --verify HF_DIR`: transformers' Qwen2/Qwen3 against our loader, float32 rule."
    folder = tiny_qwen(tf, tmp_path / name, name)
    net, table = load_hf_model(folder)
    c = net.config
    assert (c.qkv_has_bias, c.qk_layernorm) == (name.startswith("qwen2"), name.startswith("qwen3"))
    assert c.head_dim == (32 if name.startswith("qwen3") else 16) and len(table.mapped) == len(list(net.get_parameters()))
    assert cli("--verify", folder) == 0
    assert "OK (float32 rule: relative difference <= 0.0001, top-1 agreement >= 99.9%)" in capsys.readouterr().out
    theirs = tf.hf_model(folder)
    diff = np.abs(our_logits(net, QIDS) - tf.hf_logits(theirs, QIDS)).max()
    assert diff <= 1e-4 * np.abs(tf.hf_logits(theirs, QIDS)).max(), diff


@pytest.mark.parametrize("name", ["qwen2", "qwen3_tied"])
def test_qwen_cli_roundtrip_hf_ms_hf(tf, tmp_path, capsys, name):
    "--from hf --to ms, then --from ms --to hf: the same tensors, the same architecture, transformers' same logits."
    src = tiny_qwen(tf, tmp_path / "src", name)
    assert cli("--from", "hf", "--to", "ms", src, tmp_path / "m.ckpt") == 0
    assert cli("--from", "ms", "--to", "hf", tmp_path / "m.ckpt", tmp_path / "out") == 0
    a, b = HFCheckpoint(src), HFCheckpoint(tmp_path / "out")
    assert sorted(a.keys()) == sorted(b.keys()) and all(np.array_equal(a.get(k), b.get(k)) for k in a.keys())
    assert b.config["architectures"] == a.config["architectures"] and b.config["model_type"] == a.config["model_type"]
    assert b.config["head_dim"] == (32 if name.startswith("qwen3") else 16)
    theirs_src, theirs_out = tf.hf_model(src), tf.hf_model(tmp_path / "out")   # transformers loads the export
    assert np.abs(tf.hf_logits(theirs_out, QIDS) - tf.hf_logits(theirs_src, QIDS)).max() < 1e-6
    capsys.readouterr()
    assert cli("--verify", tmp_path / "out", tmp_path / "m.ckpt") == 0          # our .ckpt against transformers on the export
    assert "OK (float32 rule" in capsys.readouterr().out


def test_qwen2_mindformers_names_roundtrip(tf, tmp_path):
    "MindFormers' Qwen2 (its LLaMA with qkv_has_bias) names the biases attention.wq.bias ...: bit-exact both ways."
    src = tiny_qwen(tf, tmp_path / "src", "qwen2")
    assert cli("--from", "hf", "--to", "mindformers", src, tmp_path / "mf.ckpt") == 0
    names = set(ms.load_checkpoint(str(tmp_path / "mf.ckpt")))
    assert {f"model.layers.{i}.attention.w{x}.bias" for i in (0, 1) for x in "qkv"} <= names
    assert not any("wo.bias" in n or "q_proj" in n for n in names)
    assert cli("--from", "mindformers", "--to", "hf", tmp_path / "mf.ckpt", tmp_path / "out") == 0
    a, b = HFCheckpoint(src), HFCheckpoint(tmp_path / "out")
    assert sorted(a.keys()) == sorted(b.keys()) and all(np.array_equal(a.get(k), b.get(k)) for k in a.keys())
    assert b.config["architectures"] == ["Qwen2ForCausalLM"]


def test_qwen3_mindformers_names_refused(tf, tmp_path, capsys):
    "MindFormers' LLaMA names have no q/k norm tensors: refused with exit code 2 and a sentence, nothing written."
    src = tiny_qwen(tf, tmp_path / "src", "qwen3")
    assert cli("--from", "hf", "--to", "mindformers", src, tmp_path / "mf.ckpt") == 2
    err = capsys.readouterr().err
    assert "no q/k norm tensors" in err and "--to ms" in err and "Traceback" not in err
    assert not (tmp_path / "mf.ckpt").exists()


def test_qwen_wrong_shape_is_named(tf, tmp_path):
    src = tiny_qwen(tf, tmp_path / "src", "qwen3")
    bad = damaged_copy(src, tmp_path / "bad", reshape="model.layers.1.self_attn.k_norm.weight")
    with pytest.raises(WeightsError, match=r"shape mismatch for 'model\.layers\.1\.self_attn\.k_norm\.weight'.*\(31,\).*\(32,\)"):
        load_hf_model(bad)
    bad = damaged_copy(src, tmp_path / "bad2", config_update={"head_dim": 16})   # config.json that does not describe the tensors
    with pytest.raises(WeightsError, match=r"shape mismatch for 'model\.layers\.0\.self_attn\.q_proj\.weight'"):
        load_hf_model(bad)
    bad = damaged_copy(tiny_qwen(tf, tmp_path / "q2", "qwen2"), tmp_path / "bad3", drop=["model.layers.0.self_attn.v_proj.bias"])
    with pytest.raises(WeightsError, match=r"missing tensor 'model\.layers\.0\.self_attn\.v_proj\.bias'"):
        load_hf_model(bad)


def test_qwen_sliding_window_refused_only_when_used(tf, tmp_path, capsys):
    "A sliding window that some layer uses is refused naming use_sliding_window; one no layer uses loads and verifies."
    src = tiny_qwen(tf, tmp_path / "src", "qwen2")
    slid = damaged_copy(src, tmp_path / "slid", config_update={"use_sliding_window": True, "sliding_window": 8,
                                                                "layer_types": ["full_attention", "sliding_attention"]})
    assert cli("--verify", slid) == 2
    err = capsys.readouterr().err
    assert "use_sliding_window: True" in err and "layers 1 of 2" in err and "Traceback" not in err
    theirs = tf.hf_model(slid)   # the refusal matters: transformers' layer 1 attends to 8 tokens, and the logits differ
    ours = load_hf_model(src)[0]
    assert np.abs(our_logits(ours, QIDS) - tf.hf_logits(theirs, QIDS)).max() > 1e-3
    # older config.json without layer_types: transformers slides from layer max_window_layers on
    cfg = {k: v for k, v in json.loads((slid / "config.json").read_text()).items() if k != "layer_types"}
    (slid / "config.json").write_text(json.dumps({**cfg, "max_window_layers": 1}))
    with pytest.raises(ValueError, match="use_sliding_window.*layers 1 of 2"):
        load_hf_model(slid)
    (slid / "config.json").write_text(json.dumps({**cfg, "max_window_layers": 2}))      # on, but for no layer
    capsys.readouterr()
    assert cli("--verify", slid) == 0 and "OK (float32 rule" in capsys.readouterr().out


def test_qwen3_attention_bias_refused(tf, tmp_path):
    "Qwen3's attention_bias also biases o_proj, which our attention has not: refused, naming the key."
    src = tiny_qwen(tf, tmp_path / "src", "qwen3")
    bad = damaged_copy(src, tmp_path / "bad", config_update={"attention_bias": True})
    with pytest.raises(ValueError, match=r"bad/config\.json has attention_bias: True.*o_proj"):
        load_hf_model(bad)


def test_qwen_switches_without_hf_twin_refused(tmp_path):
    "q/k norms together with q/k/v biases (and no o_proj bias) exist in no transformers architecture: export refuses."
    net = tiny_ours(qkv_has_bias=True, qk_layernorm=True)
    with pytest.raises(ValueError, match="no Hugging Face twin"):
        export_hf(net, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
    save_ms_checkpoint(net, tmp_path / "ours.ckpt")            # our own names hold it
    back, _ = load_ms_checkpoint(tmp_path / "ours.ckpt")
    assert np.abs(our_logits(back, IDS) - our_logits(net, IDS)).max() == 0


def test_qwen_options_train_in_graph_mode(tmp_path):
    "GRAPH_MODE compiles and trains the model with every Qwen switch on: loss falls, biases and q/k norms are updated."
    from mindspore import nn, Tensor
    from llmpt_nb.models.llama import CausalLMLoss
    mode = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = tiny_ours(qkv_has_bias=True, qk_layernorm=True, head_dim=16, tie_word_embeddings=True)   # 4 x 16 != 32
        before = {k: a.copy() for k, a in parameter_arrays(net).items()}   # asnumpy() may share the buffer
        step = nn.TrainOneStepCell(CausalLMLoss(net), nn.Adam(net.trainable_params(), learning_rate=1e-2))
        rows = Tensor(np.random.default_rng(0).integers(0, 128, (4, 33)).astype(np.int32))
        losses = [float(step(rows, rows).asnumpy()) for _ in range(8)]
    finally:
        ms.set_context(mode=mode)
    assert losses[-1] < losses[0] - 0.5, losses
    print("GRAPH_MODE losses:", [round(x, 3) for x in losses])
    after = parameter_arrays(net)
    for name in ("model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.k_norm.weight"):
        assert np.abs(after[name] - before[name]).max() > 1e-3, name
