"""`llmpt import-config` as a user runs it: a MindFormers YAML (r1.x or 2.x) in, an llmpt_nb YAML and a table of every key out."""
import json, shutil, subprocess, sys
import pytest
import yaml
from conftest import ROOT, bin_path

MF = """
seed: 1234
run_mode: 'train'
use_parallel: True
runner_config: {epochs: 1, batch_size: 2, sink_mode: True, sink_size: 2, gradient_accumulation_steps: 4}
optimizer: {type: AdamW, betas: [0.9, 0.95], eps: 1.e-8, weight_decay: 0.1}
lr_schedule: {type: CosineWithWarmUpLR, learning_rate: 1.e-4, lr_end: 1.e-5, warmup_steps: 10, total_steps: 200}
parallel_config: {data_parallel: 2, model_parallel: 2, pipeline_stage: 4, micro_batch_num: 8}
callbacks: [{type: MFLossMonitor}, {type: CheckpointMonitor, save_checkpoint_steps: 50}]
context: {mode: 0, device_target: CPU}
model:
  arch: {type: LlamaForCausalLM}
  model_config: {type: LlamaConfig, seq_length: 256, hidden_size: 512, num_layers: 4, num_heads: 8, n_kv_heads: 4,
                 vocab_size: 4000, multiple_of: 256, theta: 500000.0, use_flash_attention: True, compute_dtype: float32}
some_future_key: 3
"""


def test_import_config_command(tmp_path, env):
    (tmp_path / "mf.yaml").write_text(MF)
    r = subprocess.run([bin_path("llmpt"), "import-config", "mf.yaml", "-o", "ours.yaml"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("| ")}
    leaves = ["seed", "run_mode", "use_parallel", "runner_config.sink_mode", "parallel_config.pipeline_stage",
              "parallel_config.model_parallel", "callbacks[1].save_checkpoint_steps", "model.model_config.multiple_of",
              "model.model_config.theta", "lr_schedule.warmup_steps", "some_future_key"]
    assert all(k in rows for k in leaves), [k for k in leaves if k not in rows]
    assert "**dropped**" in rows["parallel_config.pipeline_stage"] and "no pipeline parallelism" in rows["parallel_config.pipeline_stage"]
    assert "**dropped**" in rows["parallel_config.model_parallel"] and "**dropped**" in rows["some_future_key"]
    assert "model.model_config.intermediate_size = 1536" in rows["model.model_config.multiple_of"]   # 2/3 * 4 * 512 -> 1536
    assert "wrote ours.yaml" in r.stdout
    ours = yaml.safe_load((tmp_path / "ours.yaml").read_text())
    mc = ours["model"]["model_config"]
    assert (mc["intermediate_size"], mc["rope_theta"], mc["n_kv_heads"]) == (1536, 500000.0, 4)
    assert ours["lr_schedule"]["warmup_ratio"] == 0.05 and ours["callbacks"]["save_checkpoint_steps"] == 50
    assert "pipeline_stage" not in ours["parallel_config"] and "sink_mode" not in ours["runner_config"]
    check = ("import sys; from llmpt_nb.config import load_config; c = load_config('ours.yaml'); "
             "assert c.parallel_config.pipeline_stage == 1 and c.model.model_config.intermediate_size == 1536; "
             "assert 'mindspore' not in sys.modules")
    r2 = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0, r2.stderr[-3000:]
    again = subprocess.run([bin_path("llmpt"), "import-config", "mf.yaml", "-o", "ours.yaml"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "--overwrite" in again.stderr and "Traceback" not in again.stderr


HEALTH = """
use_skip_data_by_global_norm: True
use_checkpoint_health_monitor: True
monitor_config: {monitor_on: True, global_norm_spike_threshold: 2.5, global_norm_spike_count_threshold: 5}
runner_wrapper: {local_norm: True}
callbacks: [{type: MFLossMonitor}, {type: CheckpointMonitor, save_checkpoint_steps: 1, embedding_local_norm_threshold: 270.0}]
tensorboard: {tensorboard_dir: worker/tensorboard, tensorboard_queue_size: 10}
profile: True
profile_start_step: 2
profile_stop_step: 5
profile_memory: True
"""


def test_import_config_maps_the_run_health_keys(tmp_path, env):
    "MindFormers' TensorBoard, data-skipping, checkpoint-health and profiling keys become llmpt_nb's, not dropped."
    (tmp_path / "mf.yaml").write_text(HEALTH)
    r = subprocess.run([bin_path("llmpt"), "import-config", "mf.yaml", "-o", "ours.yaml"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("| ")}
    ours = yaml.safe_load((tmp_path / "ours.yaml").read_text())
    assert ours["use_skip_data_by_global_norm"] is True and ours["use_checkpoint_health_monitor"] is True
    assert ours["monitor_config"] == {"global_norm_spike_threshold": 2.5, "global_norm_spike_count_threshold": 5}
    assert ours["callbacks"] == {"save_checkpoint_steps": 1, "embedding_local_norm_threshold": 270.0}
    assert ours["tensorboard"] == {"tensorboard_dir": "worker/tensorboard"}
    assert (ours["profile"], ours["profile_start_step"], ours["profile_stop_step"]) == (True, 2, 5)
    for key, why in [("profile_memory", "Profiler option"), ("runner_wrapper.local_norm", "embedding_grad_norm"),
                     ("monitor_config.monitor_on", "training-monitor option")]:
        assert "**dropped**" in rows[key] and why in rows[key], rows[key]
    check = ("from llmpt_nb.config import load_config; c = load_config('ours.yaml'); "
             "assert c.callbacks.embedding_local_norm_threshold == 270.0 and c.profile_stop_step == 5")
    r2 = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0, r2.stderr[-3000:]


# MindFormers 2.x: fixtures written from MindFormers' own configs and documentation (each names its source in its header)
MF2 = ROOT / "tests" / "fixtures" / "mindformers2"
QWEN3_0_6B_HF = {   # a Hugging Face Qwen3 config.json, the folder a 2.x template's pretrained_model_dir names
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "use_sliding_window": False, "vocab_size": 151936}


def _import(tmp_path, env, src, out="ours.yaml"):
    r = subprocess.run([bin_path("llmpt"), "import-config", str(src), "-o", out], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    return r, r.stdout + r.stderr


def test_2x_pynative_qwen3_imports_with_its_values(tmp_path, env):
    "The PyNative layout (training, checkpoint, lr_scheduler, parallelism, model) of a dense Qwen3 maps key by key."
    from llmpt_nb.config import load_config
    r, text = _import(tmp_path, env, MF2 / "pretrain_qwen3_0_6b_pynative.yaml")
    assert r.returncode == 0, text[-3000:]
    c = load_config(tmp_path / "ours.yaml")                        # valid, and what llmpt pretrain --config trains with
    mc = c.model.model_config
    assert (mc.num_layers, mc.hidden_size, mc.num_heads, mc.n_kv_heads, mc.head_dim, mc.intermediate_size) == (28, 1024, 16, 8, 128, 3072)
    assert (mc.qk_layernorm, mc.qkv_has_bias, mc.tie_word_embeddings, mc.rope_theta, mc.rms_norm_eps) == (True, False, True, 1e6, 1e-6)
    assert (mc.vocab_size, c.processor.tokenizer.vocab_size, mc.seq_length, c.model.arch.type) == (151936, 151936, 4096, "LlamaForCausalLM")
    assert (c.seed, c.runner_config.max_steps, c.runner_config.batch_size, c.runner_config.gradient_accumulation_steps) == (1234, 3000, 2, 8)
    assert (c.runner_wrapper.use_clip_grad, c.runner_wrapper.max_grad_norm) == (True, 1.0)
    assert (c.callbacks.save_checkpoint_steps, c.callbacks.keep_checkpoint_max, c.output_dir) == (500, 3, "output/qwen3_0_6b")
    assert (c.lr_schedule.type, c.lr_schedule.learning_rate, c.lr_schedule.lr_end, c.lr_schedule.warmup_ratio) == ("CosineWithWarmUpLR", 3e-4, 3e-5, 0.05)
    assert (c.amp_level, c.amp_dtype, c.recompute_config.recompute, c.parallel.parallel_optimizer_config.zero_stage) == ("O1", "bfloat16", False, 3)
    assert c.train_dataset.data_path == ["0.7", "/path/wiki_text_document", "0.3", "/path/code_text_document"]
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("| ")}
    assert "model.model_config.num_layers = 28" in rows["model.num_hidden_layers"]
    assert "model.model_config.qkv_has_bias = false" in rows["model.attention_bias"]
    assert "**dropped**" in rows["parallelism.context_parallel"] and "context parallelism" in rows["parallelism.context_parallel"]
    assert "train with: llmpt pretrain --config ours.yaml" in r.stdout


def test_2x_dense_template_reads_the_model_from_pretrained_model_dir(tmp_path, env):
    "MindFormers' own dense template: the model comes from pretrained_model_dir's config.json; without one, exit 2."
    shutil.copy(MF2 / "llm_pretrain_dense_template.yaml", tmp_path / "template.yaml")
    r, text = _import(tmp_path, env, "template.yaml")                 # path/to/model_dir does not exist: refused, said why
    assert r.returncode == 2 and "pretrained_model_dir 'path/to/model_dir' holds no config.json" in r.stderr, text[-3000:]
    assert "Traceback" not in text and "train with" not in text and not (tmp_path / "ours.yaml").exists()
    (tmp_path / "path" / "to" / "model_dir").mkdir(parents=True)
    (tmp_path / "path" / "to" / "model_dir" / "config.json").write_text(json.dumps(QWEN3_0_6B_HF))
    r, text = _import(tmp_path, env, "template.yaml")
    assert r.returncode == 0, text[-3000:]
    from llmpt_nb.config import load_config
    c = load_config(tmp_path / "ours.yaml")
    mc = c.model.model_config
    assert (mc.num_layers, mc.hidden_size, mc.num_heads, mc.n_kv_heads, mc.head_dim, mc.qk_layernorm) == (28, 1024, 16, 8, 128, True)
    assert (mc.seq_length, mc.rope_theta, mc.tie_word_embeddings, mc.vocab_size) == (4096, 1e6, True, 151936)   # seq_length: the dataset's
    assert (c.seed, c.runner_config.epochs, c.runner_config.max_steps, c.optimizer.beta2, c.optimizer.eps) == (0, 2, -1, 0.999, 1e-6)
    assert (c.parallel_config.data_parallel, c.parallel.parallel_optimizer_config.zero_stage, c.callbacks.save_checkpoint_steps) == (2, 1, 5000)
    assert c.train_dataset.data_path == ["1", "/path/megatron_data"]   # Megatron prefixes, read as they are (chapter 02a)
    assert (c.runner_wrapper.scale_sense.type, c.context.mode) == ("FixedLossScaleUpdateCell", "GRAPH_MODE")


SMOLLM2_HF5 = {   # a LLaMA config.json as transformers 5 writes it (SmolLM2-135M's shape): rope_theta inside rope_parameters
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
    "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "hidden_act": "silu",
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "tie_word_embeddings": True, "vocab_size": 49152,
    "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}, "dtype": "bfloat16", "transformers_version": "5.0.0"}
SMOLLM2_HF4 = {**{k: v for k, v in SMOLLM2_HF5.items() if k != "rope_parameters"}, "rope_theta": 100000.0, "rope_scaling": None}


def _template_with(tmp_path, hf):
    "MindFormers 2.1's dense template, its pretrained_model_dir (path/to/model_dir) holding `hf` as config.json."
    shutil.copy(MF2 / "llm_pretrain_dense_template.yaml", tmp_path / "template.yaml")
    (tmp_path / "path" / "to" / "model_dir").mkdir(parents=True, exist_ok=True)
    (tmp_path / "path" / "to" / "model_dir" / "config.json").write_text(json.dumps(hf))
    return "template.yaml"


@pytest.mark.parametrize("hf", [SMOLLM2_HF5, SMOLLM2_HF4], ids=["transformers5", "transformers4"])
def test_hf_rope_theta_is_read_where_transformers_writes_it(tmp_path, env, hf):
    "rope_parameters.rope_theta (transformers 5) or a top-level rope_theta: 100000, not MindFormers' default 10000."
    r, text = _import(tmp_path, env, _template_with(tmp_path, hf))
    assert r.returncode == 0, text[-3000:]
    ours = yaml.safe_load((tmp_path / "ours.yaml").read_text())
    assert ours["model"]["model_config"]["rope_theta"] == 100000.0
    assert "| model.model_config.theta |" not in r.stdout               # no (absent) row: MindFormers' default is not used
    from llmpt_nb.config import load_config
    mc = load_config(tmp_path / "ours.yaml").model.model_config
    assert (mc.rope_theta, mc.num_layers, mc.hidden_size, mc.num_heads, mc.n_kv_heads) == (100000.0, 30, 576, 9, 3)


@pytest.mark.parametrize("rope, says", [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, "rope_theta": 1e5}},
     "config.json.rope_parameters.rope_type: yarn"),
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192, "rope_theta": 5e5}},
     "config.json.rope_parameters.rope_type: llama3"),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "config.json.rope_scaling.type: linear"),
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "config.json.rope_scaling.rope_type: dynamic")],
    ids=["yarn", "llama3", "linear", "dynamic"])
def test_rope_scaling_is_refused_naming_the_key(tmp_path, env, rope, says):
    "A RoPE other than plain (rope_type default) is refused in one sentence: the key, and what to change; nothing written."
    base = SMOLLM2_HF5 if "rope_parameters" in rope else SMOLLM2_HF4
    r, text = _import(tmp_path, env, _template_with(tmp_path, {**base, **rope}))
    assert r.returncode == 2, text[-3000:]
    assert says in r.stderr and "set rope_type to default" in r.stderr, r.stderr
    assert "Traceback" not in text and "train with" not in text and not (tmp_path / "ours.yaml").exists()
    assert len(r.stderr.strip().splitlines()) == 1                     # one sentence


@pytest.mark.parametrize("name, keys", [
    ("pretrain_qwen3_moe_30b_a3b.yaml", ["a mixture of experts", "model.model_config.num_experts: 128",
                                         "model.model_config.num_experts_per_tok: 8"]),
    ("train_deepseek_v3_pynative.yaml", ["a mixture of experts", "model.n_routed_experts: 8", "model.num_experts_per_tok: 4"])])
def test_2x_moe_is_refused_naming_its_keys(tmp_path, env, name, keys):
    "A mixture-of-experts model is not trained as llmpt_nb's dense decoder: exit 2, the keys named, nothing written."
    r, text = _import(tmp_path, env, MF2 / name)
    assert r.returncode == 2, text[-3000:]
    assert all(k in r.stderr for k in keys), r.stderr
    assert "Traceback" not in text and "train with" not in text and not (tmp_path / "ours.yaml").exists()
    assert len(r.stderr.strip().splitlines()) == 1                     # one sentence


def test_2x_names_that_agree_are_one_setting():
    "theta (r1.x) and rope_theta (2.x) may both be given when equal; different values are refused, naming both."
    from llmpt_nb.import_config import map_config
    mc = "model.model_config."
    q3 = {"model": {"model_config": {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "rope_theta": 1e6}}}
    assert map_config(q3)[1][mc + "rope_theta"] == 1e6                  # no theta default: rope_theta gives it
    same = {"model": {"model_config": {**q3["model"]["model_config"], "theta": 1e6}}}
    assert map_config(same)[1][mc + "rope_theta"] == 1e6
    differ = {"model": {"model_config": {**q3["model"]["model_config"], "theta": 1e4}}}
    with pytest.raises(ValueError, match="theta and model.model_config.rope_theta both set model.model_config.rope_theta"):
        map_config(differ)
    qwen2 = {"model": {"model_config": {"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 2, "add_qkv_bias": True}}}
    s = map_config(qwen2)[1]
    assert (s[mc + "qkv_has_bias"], s[mc + "qk_layernorm"], s[mc + "num_layers"]) == (True, False, 2)


@pytest.mark.parametrize("text, says", [
    ("", "holds no settings"), ("- a\n- b\n", "must hold a mapping"), ("a: [1, 2\n", "is not valid YAML"),
    ("a: &x {b: *x}\n", "nests too deep"), ("training: {max_norm: big}\n", "training.max_norm: big cannot be mapped"),
    ("model: {model_type: qwen3, num_experts: many}\n", "a mixture of experts (model.num_experts: many)"),
    ("model: {hidden_size: 64, num_hidden_layers: 2}\n", "names no architecture")])
def test_no_traceback_for_any_yaml(tmp_path, env, text, says):
    "Whatever the file holds, import-config answers in one message and exit code 2, never a traceback."
    (tmp_path / "in.yaml").write_text(text)
    r, out = _import(tmp_path, env, "in.yaml")
    assert r.returncode == 2 and says in r.stderr, out[-3000:]
    assert "Traceback" not in out and "train with" not in out


def test_import_config_under_a_file_is_one_sentence(tmp_path, env):
    (tmp_path / "f").write_text("a file")
    r, text = _import(tmp_path, env, MF2 / "pretrain_qwen3_0_6b_pynative.yaml", out="f/ours.yaml")
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr and "Traceback" not in text, text[-2000:]
    assert (tmp_path / "f").read_text() == "a file"
