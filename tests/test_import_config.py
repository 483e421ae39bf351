"""`llmpt import-config` as a user runs it: a MindFormers LLaMA YAML in, an llmpt_nb YAML and a table of every key out."""
import subprocess, sys
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
