"""Is a hand-off (`llmpt export-config`, chapter 10f) what MindFormers 1.9 reads? Checked with MindFormers' own code.

MindFormers 1.9.0 pins MindSpore 2.9 (this project runs 2.10), so it gets an environment of its own, made here on first
use (`python -m venv` + `pip install mindformers==1.9.0 "numpy<2"`, about 3 GB). Then:

1. two tiny runs of `llmpt pretrain --smoke` (2 layers, 12 steps, RoPE base 50000 so a misnamed `theta` would show, a
   warmup of 3 steps; one with tied embeddings and ZeRO-1, one with an untied head and ZeRO-2), each handed off with
   `llmpt export-config RUN --to mindformers --workers 8 -o DIR`;
2. what the run says the hand-off must hold, computed with this project's code: the model config, a SHA-256 of every
   weight under MindFormers' names, the learning rate of every step (metrics.jsonl), the MindRecord rows;
3. in MindFormers' environment: `MindFormerConfig` reads the YAML and its validators pass; MindSpore 2.9 takes the
   `parallel` section as its auto-parallel context; `build_network(config.model)` builds LlamaForCausalLM with the run's
   config; `check_path_include_total_ckpt` and `load_param_into_net` load the weights (nothing missing, nothing left
   over, no shape mismatch, the same values); `build_dataset(config.train_dataset_task)` reads the rows;
   `build_optim` / `build_lr` make AdamW and CosineWithWarmUpLR, compared with the run's rates step by step.

MindFormers' forward pass does not run on a CPU (RMSNorm has no CPU kernel in MindSpore 2.9): names, shapes, values,
config and data are checked, not losses.

    python benchmarks/mindformers_handoff.py [--env DIR] [--workers 8] [--work DIR]
"""
import argparse, hashlib, json, os, subprocess, sys, tempfile
from pathlib import Path
from machine import describe
from startup import llmpt_script

MINDFORMERS = "1.9.0"
DEFAULT_ENV = Path.home() / ".cache" / "llmpt_nb" / f"mindformers-{MINDFORMERS}"
RUN_OVERRIDES = ["--model.model_config.num_layers=2", "--model.model_config.rope_theta=50000.0",
                 "--runner_config.max_steps=12", "--lr_schedule.warmup_ratio=0.25"]
VARIANTS = {"tied embeddings, ZeRO-1": ["--parallel.parallel_optimizer_config.zero_stage=1"],   # the packaged default's head
            "untied head, ZeRO-2": ["--model.model_config.tie_word_embeddings=false",         # LLaMA-2's
                                    "--parallel.parallel_optimizer_config.zero_stage=2"]}


def mindformers_env(folder):
    "The Python of an environment with MindFormers 1.9.0 in `folder`, made (venv + pip) if it is not there yet."
    python = Path(folder) / "bin" / "python"
    probe = [str(python), "-c", "import mindformers; print(mindformers.__version__)"]
    version = lambda: subprocess.run(probe, capture_output=True, text=True, cwd=tempfile.mkdtemp()).stdout.split()[-1:]
    if python.exists() and version() == [MINDFORMERS]:                 # (MindFormers logs to stdout and ./output)
        return python
    print(f"making MindFormers {MINDFORMERS}'s environment in {folder} (pip, about 3 GB)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"mindformers=={MINDFORMERS}", "numpy<2"], check=True)
    if version() != [MINDFORMERS]: raise SystemExit(f"MindFormers {MINDFORMERS} did not install in {folder}")
    return python


def _digest(a):
    import numpy as np
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()


def expected(run, handoff):
    "What the hand-off must hold, from the run, with this project's code (its own MindSpore)."
    import numpy as np
    from llmpt_nb.handoff import read_run
    from llmpt_nb.weights import parameter_arrays, to_mindformers
    from llmpt_nb.convert import load_ms_checkpoint
    from llmpt_nb.data import read_mindrecord
    parts = read_run(run)
    cfg, mc = parts["cfg"], parts["cfg"].model.model_config
    weights = {to_mindformers(k): _digest(a) for k, a in parameter_arrays(load_ms_checkpoint(parts["checkpoint"])[0]).items()}
    rows = np.stack([r[0] for r in read_mindrecord(parts["train_files"][0], columns=("input_ids",))
                     .create_tuple_iterator(output_numpy=True)])
    assert len(rows) == parts["record"]["rows"]["train"], (len(rows), parts["record"]["rows"])
    lrs = [json.loads(l)["lr"] for l in (Path(run) / "metrics.jsonl").read_text().splitlines() if '"lr"' in l]
    config = dict(seq_length=mc.seq_length, hidden_size=mc.hidden_size, num_layers=mc.num_layers, num_heads=mc.num_heads,
                  n_kv_heads=mc.n_kv_heads, vocab_size=mc.vocab_size, intermediate_size=mc.intermediate_size,
                  rms_norm_eps=mc.rms_norm_eps, theta=mc.rope_theta, tie_word_embeddings=mc.tie_word_embeddings,
                  pad_token_id=parts["tokenizer"].pad_id, eos_token_id=parts["tokenizer"].eos_id)
    return dict(config=config, weights=weights, rows=len(rows), row_length=int(rows.shape[1]),
                first_rows=_digest(rows[:cfg.runner_config.batch_size]), lrs=lrs, batch_size=cfg.runner_config.batch_size,
                optimizer=[cfg.optimizer.beta1, cfg.optimizer.beta2, cfg.optimizer.eps, cfg.optimizer.weight_decay],
                warmup_steps=yaml_of(handoff)["lr_schedule"]["warmup_steps"])


def yaml_of(handoff):
    import yaml
    return yaml.safe_load((Path(handoff) / "pretrain_llama.yaml").read_text())


# run by MindFormers' environment's Python, in a folder of its own (MindFormers writes ./output/log)
CHECK = r'''
import copy, hashlib, json, os, sys
import numpy as np
import mindspore as ms
import mindformers
from mindformers import MindFormerConfig
from mindformers.core.context.validators import execute_validator
from mindformers.models.build_model import build_network
from mindformers.trainer.utils import check_path_include_total_ckpt
from mindformers.dataset.build_dataset import build_dataset
from mindformers.core.lr.build_lr import build_lr
from mindformers.core.optim.build_optim import build_optim

yaml_path, want, report = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
digest = lambda a: hashlib.sha256(np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()
out, failed = [f"mindformers {mindformers.__version__}, mindspore {ms.__version__}"], []
def check(ok, line):
    out.append(("ok    " if ok else "FAIL  ") + line)
    if not ok: failed.append(line)

# (a) the YAML, as run_mindformer.py reads it
cfg = MindFormerConfig(yaml_path)
validated = copy.deepcopy(cfg); execute_validator(validated)
check(True, f"MindFormerConfig read {os.path.basename(yaml_path)}; its validators pass (run_mode {cfg.run_mode}, "
            f"parallel_mode {cfg.parallel.parallel_mode} -> {validated.parallel.parallel_mode})")
ctx = {k: v for k, v in validated.parallel.items()}
ms.set_auto_parallel_context(**ctx)
from mindspore.parallel._auto_parallel_context import auto_parallel_context
check(ms.get_auto_parallel_context("enable_parallel_optimizer") == cfg.parallel.enable_parallel_optimizer,
      f"MindSpore took the parallel section as its auto-parallel context: {ms.get_auto_parallel_context('parallel_mode')}, "
      f"full_batch {ms.get_auto_parallel_context('full_batch')}, enable_parallel_optimizer "
      f"{ms.get_auto_parallel_context('enable_parallel_optimizer')}, parallel_optimizer_config "
      f"{dict(cfg.parallel.parallel_optimizer_config)} (gradient accumulation shard "
      f"{auto_parallel_context().get_grad_accumulation_shard()}); data_parallel {cfg.parallel_config.data_parallel}")
ms.reset_auto_parallel_context()

# (b) the model and the weights
net = build_network(cfg.model)
diff = {k: (getattr(net.config, k), v) for k, v in want["config"].items() if getattr(net.config, k) != v}
check(not diff, f"build_network(config.model) built {type(net).__name__}; its config equals the run's in "
                f"{len(want['config'])} fields (theta {net.config.theta})" + (f"; differs: {diff}" if diff else ""))
params = {p.name: p for p in net.get_parameters()}
ckpt = ms.load_checkpoint(cfg.load_checkpoint)
tensors = {k: v for k, v in ckpt.items() if isinstance(v, ms.Parameter)}
check(check_path_include_total_ckpt(cfg.load_checkpoint),
      "check_path_include_total_ckpt(load_checkpoint) is True: one complete checkpoint, loaded as it is")
shapes = [k for k, v in tensors.items() if k in params and tuple(v.shape) != tuple(params[k].shape)]
missing, unused = ms.load_param_into_net(net, ckpt)
left = [k for k in unused if k in tensors]
check(not missing and not left and not shapes,
      f"load_param_into_net: {len(params)} parameters, {len(missing)} missing, {len(left)} tensors left over, "
      f"{len(shapes)} shape mismatches (not parameters: {sorted(set(unused) - set(left))})")
values = {k: digest(p.asnumpy()) for k, p in params.items()}
check(values == want["weights"], f"the loaded values equal the run's checkpoint, {len(want['weights'])} of "
      f"{len(want['weights'])} tensors by SHA-256" if values == want["weights"] else
      f"loaded values differ: {sorted(k for k in want['weights'] if values.get(k) != want['weights'][k])}")

# (c) the data, through the dataset class train_dataset_task names
task = copy.deepcopy(cfg.train_dataset_task)
task.dataset_config.batch_size = cfg.runner_config.batch_size           # what the trainer sets for one card
task.dataset_config.num_parallel_workers = min(8, os.cpu_count())      # 8 on a cluster node; this machine has fewer cores
task.dataset_config.data_loader.shuffle = False                          # to compare the rows with the file's order
ds = build_dataset(task)
batches = list(ds.create_dict_iterator(num_epochs=1, output_numpy=True))
first = batches[0]["input_ids"]
check(len(batches) == want["rows"] // want["batch_size"] and first.shape == (want["batch_size"], want["row_length"])
      and digest(first) == want["first_rows"],
      f"{type(ds).__name__} from {task.type}: {len(batches)} batches of {first.shape} {first.dtype} "
      f"({want['rows']} rows, drop_remainder), the first batch the file's first rows; columns {ds.get_col_names()}")

# (d) the optimizer and the schedule
lr = build_lr(cfg.lr_schedule)
theirs = [float(lr(ms.Tensor(s, ms.int32)).asnumpy()) for s in range(len(want["lrs"]) + 1)]
w = want["warmup_steps"]
after = max(abs(a - b) for a, b in zip(theirs[w:], want["lrs"][w:]))
during = max(abs(a - b) for a, b in zip(theirs[1:w + 1], want["lrs"][:w]))
check(after < 1e-6 and during < 1e-6 and theirs[0] == 0.0,
      f"{type(lr).__name__}: steps {w}..{len(want['lrs']) - 1} equal the run's logged rates (max |diff| {after:.1e}); "
      f"during the {w} warmup steps MindFormers' step s+1 is the run's step s (max |diff| {during:.1e}), its step 0 lr 0")
opt = build_optim(cfg.optimizer, default_args={"params": net.trainable_params(), "learning_rate": lr})
got = [float(opt.beta1.asnumpy()[0]), float(opt.beta2.asnumpy()[0]), float(opt.eps.asnumpy()[0]), float(opt.weight_decay)]
check(np.allclose(got, want["optimizer"], rtol=1e-6), f"{type(opt).__name__}: betas [{got[0]:.6g}, {got[1]:.6g}], eps {got[2]:.1e}, "
      f"weight_decay {got[3]:g} (the run's: {want['optimizer']})")
open(report, "w").write("\n".join(out) + "\n")   # MindFormers' own log lines go to stdout
sys.exit(1 if failed else 0)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", type=Path, default=DEFAULT_ENV, help=f"MindFormers {MINDFORMERS}'s environment (made if missing)")
    ap.add_argument("--workers", type=int, default=8, help="cards the hand-off is written for")
    ap.add_argument("--work", type=Path, default=None, help="folder for the run and the hand-off (default: a temporary one)")
    a = ap.parse_args()
    print(describe())
    python = mindformers_env(a.env.expanduser())
    work = (a.work or Path(tempfile.mkdtemp(prefix="mf_handoff_"))).absolute()
    failed = [name for k, (name, extra) in enumerate(VARIANTS.items()) if not check_variant(python, work / f"v{k}", name,
                                                                                           extra, a.workers)]
    if failed: raise SystemExit(f"MindFormers does not read the hand-off as the run meant it: {', '.join(failed)} (FAIL lines above)")
    print("MindFormers reads both hand-offs as the runs meant them.")


def check_variant(python, work, name, extra, workers):
    "Train, hand off and check one run in `work`; prints the report, returns whether every check passed."
    llmpt, run, handoff = llmpt_script(), work / "run", work / "handoff"
    overrides = RUN_OVERRIDES + extra
    for cmd in ([llmpt, "pretrain", "--smoke", f"--output_dir={run}", "--overwrite", *overrides],
                [llmpt, "export-config", run, "--to", "mindformers", "--workers", str(workers), "-o", handoff, "--overwrite"]):
        r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
        if r.returncode != 0: raise SystemExit(f"{' '.join(map(str, cmd[1:3]))} failed:\n{r.stderr[-3000:]}")
    print(f"\n== {name}\nrun: llmpt pretrain --smoke {' '.join(overrides)}\nhand-off: {r.stdout.strip().splitlines()[-1]}")
    (work / "expected.json").write_text(json.dumps(expected(run, handoff)))
    (work / "check_mindformers.py").write_text(CHECK)
    (work / "mf").mkdir(exist_ok=True)
    r = subprocess.run([str(python), str(work / "check_mindformers.py"), str(handoff / "pretrain_llama.yaml"),
                        str(work / "expected.json"), str(work / "report.txt")], cwd=work / "mf", capture_output=True,
                       text=True, env={**os.environ, "GLOG_v": "3"})
    report = work / "report.txt"
    print(report.read_text() if report.is_file() else "", end="")
    if r.returncode != 0 and not report.is_file(): print(r.stdout[-3000:] + r.stderr[-4000:], file=sys.stderr)
    return r.returncode == 0


if __name__ == "__main__":
    main()
