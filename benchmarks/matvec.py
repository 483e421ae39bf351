"""One row times a weight matrix, the product a decode step is made of (chapter 10d): every way MindSpore offers to
compute it in GRAPH_MODE beside PyTorch on the same float32 weights, in one process, with the memory bandwidth each
reaches (a one-row product reads every weight once and does little else) and how many cores it kept busy.

    python benchmarks/matvec.py [--out 49152] [--in 576] [--calls 30]

The default shape is SmolLM2-135M's output head (vocabulary 49,152 x hidden 576, 113 MB); the 30 products of a layer's
gate matrices (1536 x 576) behave the same way. Each row: best of 3 rounds of `--calls` calls, the result read back.
"""
import argparse, resource, sys, time
from pathlib import Path
import numpy as np
import llmpt_nb  # noqa: F401  first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
import mindspore as ms
from mindspore import mint, nn, ops, Parameter, Tensor

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(run, calls):
    "(seconds per call, cores busy) of `run()`, best of 3 rounds."
    run(); run()
    best = (float("inf"), 0.0)
    for _ in range(3):
        t, c = time.perf_counter(), cpu_seconds()
        for _ in range(calls): run()
        dt, busy = (time.perf_counter() - t) / calls, (cpu_seconds() - c) / calls
        best = min(best, (dt, busy / dt))
    return best


# the products, each as MindSpore's GRAPH_MODE parser wants them: named functions of (row, weight)
def matmul_transpose_b(x, w):
    return ops.MatMul(transpose_b=True)(x, w)

def dense(x, w):
    return ops.dense(x, w)

def mint_linear(x, w):
    return mint.nn.functional.linear(x, w)

def matmul_in_out(x, w):
    return ops.matmul(x, w)

def mint_matmul_in_out(x, w):
    return mint.matmul(x, w)

def mv(x, w):
    return ops.mv(w, x.reshape(-1)).reshape(1, -1)

def batch_matmul(x, w):
    return ops.BatchMatMul(transpose_b=True)(x.reshape(1, 1, -1), w.reshape((1,) + w.shape))

def multiply_and_sum(x, w):
    return (w * x).sum(-1).reshape(1, -1)

# (name, function, weight layout): (out, in) as a Linear stores it, or (in, out) transposed once beforehand
WAYS = [("ops.MatMul(transpose_b=True)", matmul_transpose_b, "out,in"), ("ops.dense", dense, "out,in"),
        ("mint.nn.functional.linear", mint_linear, "out,in"), ("ops.matmul, weight (in, out)", matmul_in_out, "in,out"),
        ("mint.matmul, weight (in, out)", mint_matmul_in_out, "in,out"), ("ops.mv", mv, "out,in"),
        ("ops.BatchMatMul", batch_matmul, "out,in"), ("multiply, then sum", multiply_and_sum, "out,in")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=int, default=49152); ap.add_argument("--in", dest="inp", type=int, default=576)
    ap.add_argument("--calls", type=int, default=30)
    a = ap.parse_args()
    import torch
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    torch.set_num_threads(2)
    print(describe(mindspore=ms.__version__, torch=torch.__version__))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((a.out, a.inp)).astype(np.float32)
    x = rng.standard_normal((1, a.inp)).astype(np.float32)
    mb = w.nbytes / 1e6
    ref, tw, tx = x @ w.T, torch.from_numpy(w), torch.from_numpy(x)
    with torch.no_grad():
        torch_s, torch_busy = timed(lambda: (tx @ tw.T).numpy(), a.calls)
    print(f"one row x ({a.out} x {a.inp}) float32, {mb:.0f} MB of weights; PyTorch {torch.__version__}, 2 threads: "
          f"{torch_s * 1e3:.2f} ms ({mb / 1e3 / torch_s:.1f} GB/s), {torch_busy:.1f} cores busy")
    print(f"{'MindSpore':32s} {'ms/call':>8s} {'GB/s':>6s} {'cores':>6s} {'PyTorch/this':>13s}  largest difference")
    for name, fn, layout in WAYS:
        weight = Parameter(Tensor(np.ascontiguousarray(w.T) if layout == "in,out" else w), name="w")

        class Product(nn.Cell):
            def __init__(self): super().__init__(); self.w = weight
            def construct(self, row): return fn(row, self.w)

        cell, row = Product(), Tensor(x)
        try:
            got = cell(row).asnumpy()
        except Exception as e:   # an operator this MindSpore has no CPU kernel for
            print(f"{name:32s} fails: {str(e).strip().splitlines()[0][:80]}")
            continue
        s, busy = timed(lambda: cell(row).asnumpy(), a.calls)
        diff = float(np.abs(got - ref).max() / np.abs(ref).max())
        print(f"{name:32s} {s * 1e3:8.2f} {mb / 1e3 / s:6.1f} {busy:6.1f} {torch_s / s:12.2f}x  {diff:.1e} relative")


if __name__ == "__main__":
    main()
