"""`llmpt export-config` (chapter 10f) as a user runs it: the hand-off folder MindFormers 1.9 reads, and bad input as one
sentence with exit code 2. Whether MindFormers' own code reads the folder is benchmarks/mindformers_handoff.py (it
needs MindFormers' own environment); the slow test below runs it where that environment exists."""
import os, shutil, subprocess, sys
from pathlib import Path
import pytest
import yaml
from conftest import ONE_LAYER, ROOT, shared_once, llmpt



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, env):
    "A finished 4-step smoke run (one layer), its ZeRO stage 2, its RoPE base not the default."
    def make(folder):
        r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={folder / 'run'}", "--runner_config.max_steps=4",
                  "--model.model_config.rope_theta=50000.0", "--parallel.parallel_optimizer_config.zero_stage=2", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    return shared_once(tmp_path_factory, "handoff", make) / "run"


def test_export_config_writes_what_mindformers_reads(run_dir, tmp_path, env):
    out = tmp_path / "mf"
    r = llmpt("export-config", run_dir, "--to", "mindformers", "--workers", "8", "-o", out, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    line = f'bash scripts/msrun_launcher.sh "run_mindformer.py --config {out / "pretrain_llama.yaml"} --run_mode train" 8'
    assert line in r.stdout and line in (out / "launch.sh").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["launch.sh", "llama.ckpt", "pretrain_llama.yaml"]
    mf = yaml.safe_load((out / "pretrain_llama.yaml").read_text())
    ours = yaml.safe_load((run_dir / "config.yaml").read_text())
    mc, theirs = ours["model"]["model_config"], mf["model"]["model_config"]
    assert mf["model"]["arch"]["type"] == "LlamaForCausalLM" and theirs["type"] == "LlamaConfig" and mf["run_mode"] == "train"
    assert all(theirs[k] == mc[k] for k in ("seq_length", "hidden_size", "num_layers", "num_heads", "n_kv_heads",
                                              "vocab_size", "intermediate_size", "rms_norm_eps", "tie_word_embeddings"))
    assert theirs["theta"] == 50000.0 and "rope_theta" not in theirs          # r1.x's LlamaConfig calls it theta
    assert (theirs["bos_token_id"], theirs["eos_token_id"], theirs["pad_token_id"]) == (1, 2, 3)   # the run's tokenizer
    assert mf["parallel_config"] == {**mf["parallel_config"], "data_parallel": 8, "model_parallel": 1, "pipeline_stage": 1}
    assert mf["use_parallel"] and mf["parallel"]["enable_parallel_optimizer"]
    assert mf["parallel"]["parallel_optimizer_config"] == {"parallel_optimizer_threshold": 64, "optimizer_level": "level2"}
    assert mf["optimizer"] == {"type": "AdamW", "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
    assert mf["lr_schedule"]["total_steps"] == 4 and mf["runner_config"]["stop_step"] == 4
    assert mf["runner_config"]["batch_size"] == 8 and mf["runner_config"]["gradient_accumulation_steps"] == 2
    data = mf["train_dataset"]["data_loader"]
    assert data["type"] == "MindDataset" and Path(data["dataset_dir"]) == run_dir / "data" / "train.mindrecord0"
    assert mf["train_dataset_task"]["dataset_config"] == mf["train_dataset"]         # a YAML alias, as MindFormers writes
    assert mf["load_checkpoint"] == str(out / "llama.ckpt") and not mf["auto_trans_ckpt"]
    names = subprocess.run([sys.executable, "-c", "import mindspore as ms, sys; print(sorted(k for k, v in "
                            "ms.load_checkpoint(sys.argv[1]).items() if not isinstance(v, str)))", out / "llama.ckpt"],
                           capture_output=True, text=True, env=env).stdout
    assert "'model.tok_embeddings.embedding_weight'" in names and "'model.layers.0.attention.wq.weight'" in names
    assert "adam_m" not in names and "embed_tokens" not in names                     # weights only, MindFormers' names


def test_export_config_refuses_bad_input(run_dir, tmp_path, env):
    "Each mistake is one sentence on stderr and exit code 2, and nothing is written."
    untrained = tmp_path / "untrained"
    shutil.copytree(run_dir, untrained, ignore=shutil.ignore_patterns("step_*"))
    cases = [((untrained, "--workers", "8", "-o", tmp_path / "a"), "no complete checkpoint to hand off"),
             ((tmp_path, "--workers", "8", "-o", tmp_path / "b"), "not a run folder of llmpt pretrain"),
             ((run_dir, "--workers", "0", "-o", tmp_path / "c"), "positive number of cards")]
    for args, message in cases:
        r = llmpt("export-config", *args, env=env)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert not Path(args[-1]).exists()
    (tmp_path / "full").mkdir(); (tmp_path / "full" / "keep").write_text("keep")
    r = llmpt("export-config", run_dir, "--workers", "2", "-o", tmp_path / "full", env=env)
    assert r.returncode == 2 and "--overwrite" in r.stderr and os.listdir(tmp_path / "full") == ["keep"], r.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("script, version", [("mindformers_handoff.py", "1.9.0"), ("mindformers2_handoff.py", "2.1.0")])
def test_mindformers_reads_the_handoff(tmp_path, env, script, version):
    "MindFormers' own code on each hand-off (chapters 10f, 10i), where its environment exists (the script makes it)."
    if not (Path.home() / ".cache" / "llmpt_nb" / f"mindformers-{version}" / "bin" / "python").exists():
        pytest.skip(f"MindFormers {version}'s environment is not there: python benchmarks/{script} makes it")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--work", str(tmp_path)],
                       cwd=ROOT / "benchmarks", env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-4000:] + r.stderr[-3000:]


def test_mindformers2_handoff_round_trips_and_trains(tmp_path, env):
    """`--to mindformers2` of a run prepared as Megatron prefixes: model/, data/ (the run's prefix, byte for byte),
    pretrain.yaml, launch.sh; `llmpt import-config` reads the YAML back to the same model and data, and it trains here."""
    run, out = tmp_path / "run", tmp_path / "mf2"
    r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={run}", "--train_dataset.format=megatron", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = llmpt("export-config", run, "--to", "mindformers2", "--workers", "2", "-o", out, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["data", "launch.sh", "model", "pretrain.yaml"]
    for ext in (".bin", ".idx"):
        assert (out / "data" / f"train_text_document{ext}").read_bytes() == (run / "data" / f"train_text_document{ext}").read_bytes()
    mf = yaml.safe_load((out / "pretrain.yaml").read_text())
    loader = mf["train_dataset"]["data_loader"]
    assert (mf["use_legacy"], mf["pretrained_model_dir"], loader["type"]) == (False, str(out / "model"), "BlendedMegatronDatasetDataLoader")
    assert loader["config"]["data_path"] == ["1", str(out / "data" / "train_text_document")] and loader["config"]["pad"] == -1
    assert mf["parallel_config"]["data_parallel"] == 2 and "msrun_launcher.sh" in (out / "launch.sh").read_text()
    r = llmpt("import-config", out / "pretrain.yaml", "-o", tmp_path / "back.yaml", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    back, ours = (yaml.safe_load(p.read_text()) for p in (tmp_path / "back.yaml", run / "config.yaml"))
    shape = ("vocab_size", "hidden_size", "num_layers", "num_heads", "n_kv_heads", "intermediate_size", "seq_length")
    assert all(back["model"]["model_config"][k] == ours["model"]["model_config"][k] for k in shape)
    assert back["train_dataset"]["data_path"] == loader["config"]["data_path"] and back["load_checkpoint"] == str(out / "model")
    r = llmpt("pretrain", "--smoke", "--config", tmp_path / "back.yaml", "--context.device_target=CPU",
              "--parallel_config.data_parallel=1", f"--output_dir={tmp_path / 'again'}", env=env)
    assert r.returncode == 0 and "Megatron prefixes: " in r.stdout, r.stderr[-3000:]


def test_mindformers2_handoff_refuses_a_corpus_that_changed(tmp_path, env):
    "A run on MindRecord has its documents written again from its corpus: a corpus that changed since is refused."
    from llmpt_nb.corpus import load_corpus
    corpus = tmp_path / "corpus"; corpus.mkdir()
    (corpus / "news.txt").write_text("\n".join(load_corpus("default", max_documents=400)) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    r = llmpt("pretrain", "--smoke", ONE_LAYER, f"--output_dir={run}", f"--train_dataset.corpus={corpus}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = (corpus / "news.txt").read_text(encoding="utf-8").splitlines()          # its first document rewritten
    (corpus / "news.txt").write_text("\n".join(["这是训练之后才写进语料的一篇新文章，比原来的第一篇短。", *lines[1:]]) + "\n",
                                     encoding="utf-8")
    r = llmpt("export-config", run, "--to", "mindformers2", "--workers", "2", "-o", tmp_path / "mf2", env=env)
    assert r.returncode == 2 and "changed since the run" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / "mf2").exists() and not list(tmp_path.glob(".mf2*"))     # nothing of the hand-off is left
