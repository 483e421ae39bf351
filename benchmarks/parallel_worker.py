"""The data parallel / ZeRO experiment of chapter 09a: `python benchmarks/parallel_worker.py --stage S --out DIR`,
started on every rank by `llmpt launch` (msrun), trains a tiny LLaMA for a few steps on a fixed random global batch
with the chapter's cells (or MindSpore's own data parallel engine: `--stage dp`) and writes, per rank,
`DIR/stage<S>/rank<r>.json` (bytes held, peak RSS, step times, communication) and `rank<r>.npz` (final weights,
gathered at stage 3). `--stage 0,1,2,3` runs the stages one after the other in the same processes; each optimizer step
uses `--micro-batches` micro-batches over all ranks, rank r its contiguous 1/N of them, so one process with all of
them sees exactly the same global batch; `--die-at-step` makes one rank kill itself mid-run (chapter 09's failure
test). The readers at the end load what the workers wrote. It defines no Cell: MindSpore compiles a Cell from the
source of its module, and this script runs as __main__."""
import argparse, dataclasses, json, os, sys
from pathlib import Path
import numpy as np
import llmpt_nb  # noqa: F401  first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
import mindspore as ms
from llmpt_nb.models.llama import CausalLMLoss
from llmpt_nb.parallel import (GatherShard, ParallelPlan, broadcast_parameters, build_train_cells, comm_per_step,
                               engine_grad_reducer, full_shapes, init_distributed, rank_memory, tiny_llama, train_steps,
                               unshard_model)
from llmpt_nb.optim import StepSettings
from llmpt_nb.config import load_config
from llmpt_nb.metrics import peak_rss_mb


def _parse(argv):
    p = argparse.ArgumentParser(prog="python benchmarks/parallel_worker.py", description="data parallel / ZeRO experiment worker")
    p.add_argument("--stage", default="0", help="ZeRO stage(s), e.g. 0 or dp,0,1,2,3 (0: data parallel on this chapter's cells, dp: on MindSpore's engine)")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--micro-batches", type=int, default=4, help="per optimizer step, over all ranks")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=128)
    p.add_argument("--head-dim", type=int, default=None, help="Qwen3: a head size other than hidden/heads")
    p.add_argument("--qkv-bias", action="store_true", help="Qwen2: biases on q/k/v")
    p.add_argument("--qk-norm", action="store_true", help="Qwen3: RMSNorm on each head's query and key")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--die-at-step", type=int, default=None)
    p.add_argument("--die-rank", type=int, default=1)
    return p.parse_args(argv)


def _full_weights(net, world_size):
    params = net.trainable_params()
    if any(isinstance(getattr(c, "shard_gather", None), GatherShard) for _, c in net.cells_and_names()):
        unshard_model(net)
        params = net.trainable_params()
    return {p.name: p.asnumpy() for p in params}


def _io_bytes():
    "Bytes this process has written and read through system calls (sockets included), from /proc/self/io."
    try:
        io = dict(l.split(": ") for l in Path("/proc/self/io").read_text().splitlines())
        return int(io["wchar"]), int(io["rchar"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def run_stage(stage, args, rank, world):
    """Train a fresh tiny LLaMA at ZeRO `stage` (0 = data parallel; "dp": data parallel on MindSpore's engine) on this
    rank; returns (record, final weights)."""
    engine, stage, accum = stage == "dp", 0 if stage == "dp" else int(stage), args.micro_batches // world
    net = tiny_llama(args.vocab, args.seq, args.hidden, args.layers, args.heads, args.ffn, args.seed,
                     head_dim=args.head_dim, qkv_has_bias=args.qkv_bias, qk_layernorm=args.qk_norm)
    broadcast_parameters(net.trainable_params(), world)
    plan = ParallelPlan(world, 0, "CPU", "mindspore", dict(parallel_mode="data_parallel", device_num=world))
    reducer = engine_grad_reducer(net.trainable_params(), plan) if engine and world > 1 else None
    cells = build_train_cells(net, CausalLMLoss(net), accum, stage, rank, world,
                              dataclasses.replace(StepSettings.from_config(load_config()), weight_decay=args.weight_decay),
                              reducer)
    data = np.random.default_rng(args.seed).integers(0, args.vocab, (args.steps, args.micro_batches, args.batch, args.seq + 1))
    mine = data[:, rank * accum:(rank + 1) * accum].astype(np.int32)
    batches = [[(m, m) for m in step] for step in mine]
    losses, times, io = [], [], []
    for step in range(args.steps):
        if args.die_at_step is not None and step == args.die_at_step and rank == args.die_rank:
            print(f"rank {rank}: killing myself at step {step}", flush=True)
            os.kill(os.getpid(), 9)
        io.append(_io_bytes())
        l, t = train_steps(net, cells, batches[step:step + 1], [args.lr])
        losses += l; times += t
        print(f"stage {stage} rank {rank} step {step + 1} loss {l[0]:.4f} {t[0] * 1e3:.0f} ms", flush=True)
    io.append(_io_bytes())
    later = [b[0] - a[0] for a, b in zip(io[1:], io[2:])]  # steps after the first (which compiles)
    ms.reset_auto_parallel_context()
    rec = dict(rank=rank, world_size=world, stage=stage, engine="mindspore" if engine else "llmpt_nb", accum_steps=accum, losses=losses,
               step_ms=[t * 1e3 for t in times], step_ms_median=float(np.median(times[1:] or times) * 1e3),
               n_params=sum(int(np.prod(s)) for s in full_shapes(net)), **rank_memory(net, cells),
               **comm_per_step(net, cells, stage, accum, world), io_write_bytes_per_step=float(np.median(later or [0])),
               peak_rss_mb=peak_rss_mb())
    return rec, _full_weights(net, world)


def run_worker(argv=None):
    "Worker entry: for each --stage, train on this rank and write <out>/stage<s>/rank<r>.json and .npz."
    args = _parse(argv)
    rank, world = init_distributed()
    ms.set_context(mode=ms.GRAPH_MODE)
    if args.micro_batches % world:
        raise ValueError(f"--micro-batches {args.micro_batches} does not divide over {world} ranks")
    recs = []
    for stage in str(args.stage).split(","):
        rec, weights = run_stage(stage, args, rank, world)
        out = Path(args.out) / f"stage{stage}"
        out.mkdir(parents=True, exist_ok=True)
        np.savez(out / f"rank{rank}.npz", **weights)
        (out / f"rank{rank}.json").write_text(json.dumps(rec))
        recs.append(rec)
    return recs



def collect_results(folder):
    "Every rank<r>.json under folder/stage<s>/, sorted by (stage, rank)."
    recs = [json.loads(f.read_text()) for f in Path(folder).glob("stage*/rank*.json")]
    return sorted(recs, key=lambda r: (r["stage"], r["rank"]))

def rank_weights(folder, stage, rank):
    "Final weights a worker saved: {parameter name: array}."
    with np.load(Path(folder) / f"stage{stage}" / f"rank{rank}.npz") as f:
        return {k: f[k] for k in f.files}

def max_weight_diff(a, b):
    "Largest absolute difference between two sets of weights with the same names."
    if a.keys() != b.keys():
        raise ValueError(f"different parameter names: {sorted(set(a) ^ set(b))[:5]}")
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)

def stage_table(recs):
    "A markdown table: one row per (stage, rank)."
    mb = lambda b: f"{b / 2**20:.2f}"
    head = ("| stage | rank | params MiB | grads MiB | optimizer MiB | peak RSS MiB | step ms | AllReduce MiB/step "
            "| AllGather MiB/step | written MiB/step |\n|---|---|---|---|---|---|---|---|---|---|")
    rows = [f"| {'DP' if r['stage'] == 0 else 'ZeRO-%d' % r['stage']} | {r['rank']} | {mb(r['param_bytes'])} | "
            f"{mb(r['grad_bytes'])} | {mb(r['optimizer_bytes'])} | {r['peak_rss_mb']:.0f} | {r['step_ms_median']:.0f} | "
            f"{mb(r['allreduce_bytes'])} | {mb(r['allgather_bytes'])} | {mb(r['io_write_bytes_per_step'])} |" for r in recs]
    return "\n".join([head, *rows])


if __name__ == "__main__":
    run_worker(sys.argv[1:])
