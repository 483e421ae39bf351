"""Where the time of one training step goes: MindSpore's profiler around the project's real train step (the
packaged config's model and context, random token batches), then the time per op type, and the matmul shapes of
that model timed alone in MindSpore and in PyTorch (the kernel that dominates the step), and what a slice of the
keys costs (why chapter 00a's `narrow` skips whole-axis slices).

    python benchmarks/profile_step.py [--steps 5] [--seq 256] [--batch 8] [--accum 2]
"""
import argparse, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe


def profile(a, out):
    import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
    import mindspore.dataset as mds
    from mindspore import Profiler
    from llmpt_nb.config import load_config
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    from llmpt_nb.trainer import Trainer
    from llmpt_nb.context import set_context
    cfg = load_config(overrides=[f"output_dir={tempfile.mkdtemp()}", f"model.model_config.seq_length={a.seq}",
                                 f"runner_config.batch_size={a.batch}", f"runner_config.gradient_accumulation_steps={a.accum}",
                                 "context.peak_flops=1.0"])
    mc = cfg.model.model_config
    set_context(cfg.context, 0)
    net = LlamaForCausalLM(LlamaConfig.from_dict(mc))
    rows = np.random.default_rng(0).integers(0, mc.vocab_size, ((a.steps + 3) * a.batch * a.accum, a.seq + 1)).astype(np.int32)
    tr = Trainer.from_config(net, cfg, mds.NumpySlicesDataset({"input_ids": rows, "labels": rows}, shuffle=False).batch(a.batch),
                 verbose=False)
    batches = tr.micro_batches()
    for _ in range(3):  # compile and warm up outside the profile
        tr.train_step(batches)
    prof = Profiler(output_path=str(out))
    t = time.perf_counter()
    for _ in range(a.steps):
        tr.train_step(batches)
    wall = time.perf_counter() - t
    prof.analyse()
    return wall, bool(cfg.context.enable_graph_kernel), (a.batch * a.seq, mc.hidden_size, mc.intermediate_size, mc.vocab_size)


MATMUL = """
import sys, time, numpy as np
rows, d, ff, vocab = map(int, sys.argv[2:6])
shapes = [(rows, d, ff), (rows, ff, d), (rows, d, vocab), (d, rows, ff)]
rng = np.random.default_rng(0)
def best(f):
    f(); ts = []
    for _ in range(10):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return min(ts)
if sys.argv[1] == "torch":
    import torch; torch.set_num_threads(2)
    run = lambda a, b: (lambda: a @ b)
    make = torch.tensor
else:
    import mindspore as ms
    from mindspore import nn, ops, Tensor
    ms.set_context(mode=ms.GRAPH_MODE)
    class MM(nn.Cell):
        def __init__(self): super().__init__(); self.mm = ops.MatMul()
        def construct(self, a, b): return self.mm(a, b)
    cell = MM()
    run = lambda a, b: (lambda: cell(a, b).asnumpy())
    make = Tensor
for m, k, n in shapes:
    a, b = make(rng.standard_normal((m, k), dtype=np.float32)), make(rng.standard_normal((k, n), dtype=np.float32))
    print(f"{m}x{k} @ {k}x{n} {2 * m * k * n / best(run(a, b)) / 1e9:.0f}")
"""


SLICES = """
import sys, time, numpy as np
import llmpt_nb, mindspore as ms
from mindspore import nn, Tensor
from llmpt_nb.attention import narrow
ms.set_context(mode=ms.GRAPH_MODE)
b, t = map(int, sys.argv[1:3])
class Take(nn.Cell):
    def __init__(self, end, skip): super().__init__(); self.end, self.skip = end, skip
    def construct(self, k): return (narrow(k, 2, 0, self.end) if self.skip else k[:, :, :self.end]) * 1.0
k = Tensor(np.random.default_rng(0).standard_normal((b, 2, t, 32), dtype=np.float32))
for name, cell in [(f"k[:, :, :{t}] (the whole axis)", Take(t, False)), (f"k[:, :, :{3 * t // 4}]", Take(3 * t // 4, False)),
                   (f"narrow(k, 2, 0, {t}) (no slice)", Take(t, True))]:
    cell(k).asnumpy(); ts = []
    for _ in range(10):
        s = time.perf_counter(); cell(k).asnumpy(); ts.append(time.perf_counter() - s)
    print(f"  {name:36s} {1e3 * min(ts):6.2f} ms")
"""


def slice_times(batch, seq):
    "A keys-sized tensor sliced in a GRAPH_MODE cell: MindSpore's CPU StridedSlice is slow on a whole-axis slice."
    script = Path(tempfile.mkdtemp()) / "slices.py"
    script.write_text(SLICES)
    return subprocess.run([sys.executable, str(script), str(batch), str(seq)], capture_output=True, text=True,
                          check=True).stdout


def matmul_rates(which, dims):
    script = Path(tempfile.mkdtemp()) / "matmul.py"  # MindSpore compiles a Cell only from a source file
    script.write_text(MATMUL)
    out = subprocess.run([sys.executable, str(script), which, *map(str, dims)], capture_output=True, text=True, check=True)
    return dict(line.rsplit(" ", 1) for line in out.stdout.strip().splitlines())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5); ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8); ap.add_argument("--accum", type=int, default=2)
    a = ap.parse_args()
    print(describe())
    out = Path(tempfile.mkdtemp())
    wall, fused, dims = profile(a, out)
    from llmpt_nb.monitor import op_times   # the table `llmpt pretrain --profile=true` prints
    table = op_times(out, a.steps)
    total = sum(ms for _, ms in table)
    print(f"train step, seq {a.seq}, micro-batch {a.batch} x {a.accum}, graph kernel {'on' if fused else 'off'}: "
          f"{wall / a.steps * 1e3:.0f} ms per step under the profiler, {total:.0f} ms in ops")
    for kind, ms_ in table[:14]:
        print(f"  {kind:28s} {ms_:7.1f} ms  {100 * ms_ / total:5.1f}%")
    ms_rates, pt_rates = matmul_rates("mindspore", dims), matmul_rates("torch", dims)
    print("the model's matmul shapes alone, GFLOP/s (best of 10): MindSpore MatMul vs PyTorch")
    for shape in ms_rates:
        print(f"  {shape:28s} {ms_rates[shape]:>5s} vs {pt_rates[shape]:>5s}")
    print(f"slicing keys of shape ({a.batch}, 2, {a.seq}, 32), each a multiplied copy (x 1.0), best of 10:")
    print(slice_times(a.batch, a.seq), end="")


if __name__ == "__main__":
    main()
