"""`llmpt generate` as a user runs it (chapter 10d): from a run folder, from one of its checkpoints and from the Hugging
Face folder `convert-weights` makes of it; seeded and deterministic; the KV cache equal to the full forward pass."""
import numpy as np
import pytest
from conftest import ONE_LAYER, shared_once, llmpt



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, env):
    "A finished 6-step smoke run with checkpoints at steps 3 and 6 (export compares the two)."
    def make(folder):
        r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={folder / 'run'}", "--runner_config.max_steps=6",
                  "--callbacks.save_checkpoint_steps=3", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    return shared_once(tmp_path_factory, "generate", make) / "run"


def test_generate_from_a_run_folder_is_seeded(run_dir, env):
    args = ["generate", run_dir, "--prompt", "中国", "--prompt", "北京", "--num_samples", "2", "--seed", "3", "--top_p", "0.9"]
    a, b = llmpt(*args, env=env), llmpt(*args, env=env)
    assert a.returncode == 0, a.stderr[-3000:]
    lines = a.stdout.strip().splitlines()
    assert len(lines) == 4 and [l[:2] for l in lines] == ["中国", "中国", "北京", "北京"] and "\ufffd" not in a.stdout
    assert a.stdout == b.stdout                                     # the same seed, the same texts
    assert "step_6.ckpt" in a.stderr and "KV cache" in a.stderr and "top_p 0.9" in a.stderr
    c = llmpt(*args[:-4], "--seed", "4", env=env)
    assert c.returncode == 0 and c.stdout != a.stdout


def test_the_default_prompt_is_the_one_the_run_sampled_from(run_dir, tmp_path, env):
    "No --prompt: a run folder continues the prompt of its own sample (summary.json); a bare checkpoint has none: exit 2."
    import json
    prompt = json.loads((run_dir / "summary.json").read_text())["prompt"]
    r = llmpt("generate", run_dir, "--greedy", env=env)
    assert r.returncode == 0 and r.stdout.startswith(prompt) and len(prompt) == 4, (prompt, r.stdout, r.stderr[-2000:])
    hf = tmp_path / "hf"
    assert llmpt("convert-weights", "--from", "ms", "--to", "hf", run_dir / "checkpoint" / "step_6.ckpt", hf, env=env).returncode == 0
    r = llmpt("generate", hf, env=env)
    assert r.returncode == 2 and "no prompt: give --prompt" in r.stderr and "Traceback" not in r.stderr


def test_cache_and_no_cache_write_the_same_greedy_text(run_dir, env):
    runs = [llmpt("generate", run_dir, "--greedy", "--max_new_tokens", "30", *extra, env=env) for extra in ([], ["--no_cache"])]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and "no cache" in runs[1].stderr


def test_generate_from_a_converted_hugging_face_folder(run_dir, tmp_path, env):
    hf = tmp_path / "hf"
    r = llmpt("convert-weights", "--from", "ms", "--to", "hf", run_dir / "checkpoint" / "step_6.ckpt", hf, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (hf / "tokenizer.model").is_file()
    ours = llmpt("generate", run_dir / "checkpoint" / "step_6.ckpt", "--greedy", "--prompt", "中国", env=env)
    theirs = llmpt("generate", hf, "--greedy", "--prompt", "中国", env=env)
    assert ours.returncode == 0 and theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.stdout == theirs.stdout and len(ours.stdout.strip()) > 2


def test_bad_inputs_get_one_sentence(run_dir, tmp_path, env):
    empty = tmp_path / "empty_run"
    empty.mkdir(); (empty / "checkpoint").mkdir(); (empty / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    latin1 = tmp_path / "prompts.txt"
    latin1.write_bytes("café\n".encode("latin-1"))
    for args, needle in [((empty,), "without a complete checkpoint"),
                         ((run_dir, "--prompt", "中国" * 300), "shorten it"),
                         ((tmp_path / "nothing",), "is not a model"),
                         ((run_dir, "--temprature=0.5"), "has no option"),
                         ((run_dir, "--top_p", "0"), "--top_p must be above 0 and at most 1, got 0"),
                         ((run_dir, "--top_p", "1.5"), "--top_p must be above 0 and at most 1, got 1.5"),
                         ((run_dir, "--temperature", "-1"), "--temperature must be 0 or more"),
                         ((run_dir, "--max_new_tokens", "0"), "--max_new_tokens must be 1 or more"),
                         ((run_dir, "--num_samples", "0"), "--num_samples must be 1 or more"),
                         ((run_dir, "--prompts", latin1), "is not UTF-8 text")]:
        r = llmpt("generate", *args, env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
        assert needle in r.stderr, (needle, r.stderr[-2000:])


def cached_logits(net, ids, prefill=1):
    "Logits of positions prefill-1 .. of `ids`: the first `prefill` tokens in one call, then one token per call."
    from llmpt_nb.generation import KVCacheDecoder
    dec, ids = KVCacheDecoder(net), np.asarray(ids, np.int32)
    return [dec.step(ids[None, :prefill], 0, [0])[0]] + [dec.step(ids[None, [p]], p, [0])[0] for p in range(prefill, len(ids))]


def test_cached_logits_equal_the_full_forward_pass_at_every_position():
    "The packaged default's shape (GQA 4/2 heads, RoPE), random weights, all 128 positions: float32 rounding only."
    import llmpt_nb  # noqa: F401
    import mindspore as ms
    from mindspore import Tensor
    from llmpt_nb.config import load_config
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(1)
    mc = load_config().model.model_config
    net = LlamaForCausalLM(LlamaConfig.from_dict({**mc, "initializer_range": 0.1}))
    ids = np.random.default_rng(1).integers(0, mc.vocab_size, mc.seq_length).astype(np.int32)
    full = net(Tensor(ids[None])).asnumpy()[0]
    got = cached_logits(net, ids)
    assert np.abs(np.array(got) - full).max() < 1e-4
    assert (np.argmax(got, 1) == np.argmax(full, 1)).all()
    got = cached_logits(net, ids, prefill=45)            # a prompt that is not a whole bucket
    assert np.abs(np.array(got) - full[44:]).max() < 1e-4


def test_cached_logits_equal_the_full_forward_pass_for_a_qwen_shaped_model():
    "q/k/v biases (Qwen2) and per-head q/k norms (Qwen3) go through CachedLayer in the cache too: float32 rounding only."
    import llmpt_nb  # noqa: F401
    import mindspore as ms
    from mindspore import Tensor
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(2)
    net = LlamaForCausalLM(LlamaConfig(vocab_size=300, seq_length=40, hidden_size=64, num_layers=2, num_heads=4,
                                       n_kv_heads=2, head_dim=32, intermediate_size=96, initializer_range=0.2,
                                       qkv_has_bias=True, qk_layernorm=True))
    rng = np.random.default_rng(2)
    moved = [p for p in net.trainable_params() if p.name.endswith(("bias", "_norm.weight"))]
    for p in moved:                                      # zeros and ones at first: moved, so that a missing one shows
        p.set_data(Tensor(p.asnumpy() + rng.normal(0, 0.3, p.shape).astype(np.float32)))
    assert len(moved) == 2 * 5                           # per layer: q/k/v biases, q and k norms
    ids = rng.integers(0, 300, 40).astype(np.int32)
    full = net(Tensor(ids[None])).asnumpy()[0]
    got = cached_logits(net, ids, prefill=7)
    assert np.abs(np.array(got) - full[6:]).max() < 1e-4
    assert (np.argmax(got, 1) == np.argmax(full[6:], 1)).all()


def test_prompts_decoded_together_get_what_each_gets_alone():
    """Rows of one batch, left-padded: the greedy tokens and the sampled ones (row i's own seed) of each prompt alone,
    also when a row ends at EOS or at seq_length before the others."""
    import llmpt_nb  # noqa: F401
    import mindspore as ms
    from llmpt_nb.generation import KVCacheDecoder, generate_batch, generate_ids
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(3)
    net = LlamaForCausalLM(LlamaConfig(vocab_size=200, seq_length=48, hidden_size=64, num_layers=2, num_heads=4,
                                       n_kv_heads=2, intermediate_size=96, initializer_range=0.2))
    rng = np.random.default_rng(3)
    prompts = [rng.integers(3, 200, n).tolist() for n in (5, 17, 1, 40)]        # the last reaches seq_length first
    with pytest.raises(ValueError, match="need 68 cache slots, the decoder has 64"):    # 48 + 20 new; 48 + 16
        generate_batch(net, prompts, KVCacheDecoder(net, batch=4, bucket=16), 20)
    dec = KVCacheDecoder(net, batch=5, slots=68, bucket=16)                     # one row more than prompts
    for settings in (dict(temperature=0), dict(temperature=1.0, top_k=0)):
        together = generate_batch(net, prompts, dec, 20, seeds=[7, 8, 9, 10], **settings)
        alone = [generate_ids(net, p, 20, seed=s, **settings) for p, s in zip(prompts, (7, 8, 9, 10))]
        assert together == alone, settings
        assert [len(x) for x in together] == [20, 20, 20, 8]
    eos = together[1][3]                                                        # row 1 stops at its 4th token
    assert generate_batch(net, prompts, dec, 20, eos_id=eos, seeds=[7, 8, 9, 10], temperature=1.0, top_k=0)[1] == \
        together[1][:together[1].index(eos)]
    with pytest.raises(ValueError, match="decoder of 5 rows"):
        generate_batch(net, prompts * 2, dec, 4)


def test_generate_prompts_file_in_batches_with_verbose_timing(run_dir, tmp_path, env):
    "`--prompts FILE --batch_size 2`: 3 prompts in two batches, the texts of one at a time, timing on stderr."
    (tmp_path / "p.txt").write_text("中国\n北京大学\n\n人民日报社论：坚持改革开放\n", encoding="utf-8")
    batched = llmpt("generate", run_dir, "--greedy", "--prompts", tmp_path / "p.txt", "--batch_size", "2", "--verbose", env=env)
    single = llmpt("generate", run_dir, "--greedy", "--prompts", tmp_path / "p.txt", "--batch_size", "1", env=env)
    assert batched.returncode == 0, batched.stderr[-3000:]
    assert batched.stdout == single.stdout and len(batched.stdout.splitlines()) == 3
    timing = [l for l in batched.stderr.splitlines() if "tokens/s" in l]
    assert [l.split()[0] for l in timing] == ["2", "1"] and all("first tokens after" in l for l in timing), batched.stderr


@pytest.mark.parametrize("fmt", ["mindir", "onnx"])
def test_export_passes_its_check_and_a_changed_model_fails_it(run_dir, tmp_path, env, fmt):
    f = tmp_path / f"model.{fmt}"
    r = llmpt("export", run_dir, "--format", fmt, "-o", f, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "step_6.ckpt" in r.stdout and "OK (float32 rule" in r.stdout and "top-1 agreement 100.0%" in r.stdout
    assert f.is_file() and [p.name for p in tmp_path.iterdir()] == [f.name]        # nothing half-written beside it
    again = llmpt("export", run_dir, "--format", fmt, "-o", f, env=env)            # no silent overwrite
    assert again.returncode == 2 and "--overwrite" in again.stderr
    ok = llmpt("export", run_dir, "--format", fmt, "-o", f, "--check", env=env)
    assert ok.returncode == 0 and "OK" in ok.stdout
    other = llmpt("export", run_dir / "checkpoint" / "step_3.ckpt", "--format", fmt, "-o", f, "--check", env=env)
    assert other.returncode == 1 and "MISMATCH" in other.stdout and "max relative logit difference" in other.stdout


def test_export_faults_get_one_sentence_and_change_nothing(run_dir, tmp_path, env):
    """The folder exported into keeps its mode; a folder that is a file, a truncated file under --check and ONNX
    without onnxruntime end in one sentence, exit 2, with nothing written."""
    out = tmp_path / "out"
    out.mkdir(); out.chmod(0o755)
    r = llmpt("export", run_dir, "--format", "mindir", "-o", out / "m.mindir", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert out.stat().st_mode & 0o777 == 0o755 and [p.name for p in out.iterdir()] == ["m.mindir"]
    data = (out / "m.mindir").read_bytes()
    (out / "cut.mindir").write_bytes(data[:len(data) // 2])
    (tmp_path / "file").write_text("not a folder")
    no_ort = tmp_path / "no_onnxruntime" / "onnxruntime"
    no_ort.mkdir(parents=True)
    (no_ort / "__init__.py").write_text("raise ImportError('No module named onnxruntime')\n")   # as if not installed
    without = dict(env, PYTHONPATH=str(no_ort.parent))
    for args, needle, e in [(("-o", tmp_path / "file" / "m.mindir"), "is not a folder", env),
                            (("--check", "-o", out / "cut.mindir"), "cannot be loaded", env),
                            (("--format", "onnx", "-o", out / "m.onnx"), 'pip install "llmpt_nb[onnx]"', without)]:
        r = llmpt("export", run_dir, *(("--format", "mindir") if "--format" not in args else ()), *args, env=e)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
    assert sorted(p.name for p in out.iterdir()) == ["cut.mindir", "m.mindir"]


def test_export_refuses_an_unknown_format(run_dir, tmp_path, env):
    r = llmpt("export", run_dir, "--format", "tflite", "-o", tmp_path / "m.tflite", env=env)
    assert r.returncode == 2 and "invalid choice: 'tflite'" in r.stderr and "Traceback" not in r.stderr


def test_cached_logits_follow_the_model_in_half_precision():
    """AMP O1's dtypes (matmuls and the cache in float16, norms and softmax in float32): the cache computes in the dtypes
    the model's own cells do, so it agrees with the full forward pass to float16 rounding and picks the same tokens."""
    import llmpt_nb  # noqa: F401
    import mindspore as ms
    from mindspore import Tensor
    from llmpt_nb.amp import apply_amp_level
    from llmpt_nb.config import load_config
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(3)
    mc = apply_amp_level({**load_config().model.model_config, "seq_length": 40, "initializer_range": 0.1}, "O1")
    net = LlamaForCausalLM(LlamaConfig.from_dict(mc))
    assert (mc["compute_dtype"], mc["layernorm_compute_type"]) == ("float16", "float32")
    ids = np.random.default_rng(3).integers(0, mc["vocab_size"], 40).astype(np.int32)
    full = net(Tensor(ids[None])).asnumpy()[0]
    got = np.array(cached_logits(net, ids, prefill=9))
    # measured: 1.8e-3 of the largest logit; a cache computing in float32 instead is 4.1e-3 away from this model
    assert np.abs(got - full[8:]).max() < 3e-3 * np.abs(full).max(), np.abs(got - full[8:]).max() / np.abs(full).max()
    assert (np.argmax(got, 1) == np.argmax(full[8:], 1)).mean() > 0.9
