"""Where a one-off `llmpt generate` spends its time and memory (chapter 10d), on the SmolLM2-135M-shaped Hugging Face
folder of `generate_speed.py --e2e` (random weights, max_position_embeddings 8,192): `load_generator` under cProfile
(its most expensive calls), then one generation of 32 new tokens as `llmpt generate` runs it, timed with the time spent
in MindSpore's graph compiler; peak RSS after each part; then the operators of a second generation (its graphs already
compiled) under MindSpore's profiler, in ms per new token.

    python benchmarks/generate_profile.py [--folder DIR]   # DIR: an existing folder instead of a new one
"""
import argparse, cProfile, io, pstats, re, resource, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

peak_mb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--folder", default=None)
    a = ap.parse_args()
    import llmpt_nb  # noqa: F401  first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
    from generate_speed import smollm2_folder
    from llmpt_nb.generation import load_generator
    from llmpt_nb.context import set_context
    print(describe())
    folder = Path(a.folder or Path(tempfile.mkdtemp()) / "smollm2")
    if not (folder / "config.json").exists():
        smollm2_folder(folder)
    base = peak_mb()
    prof, t = cProfile.Profile(), time.perf_counter()
    prof.runcall(load_generator, folder)
    print(f"load_generator: {time.perf_counter() - t:.1f} s, peak RSS {peak_mb():,.0f} MB (before it: {base:,.0f} MB)")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(r"llmpt_nb|safetensors|initializer", 12)
    rows = [l for l in out.getvalue().splitlines() if "(" in l and ":" in l]       # the calls, without the header
    print("\n".join(re.sub(r"/\S*/(llmpt_nb|mindspore)/", r"\1/", l) for l in rows))   # paths from the package down
    gen, _, _ = load_generator(folder)
    set_context(gen.context)
    gen.stepwise_prompt = 64                                   # as llmpt generate sets it
    prof, t = cProfile.Profile(), time.perf_counter()
    prof.runcall(gen.generate, ["def forward(self, x):"], max_new_tokens=32, temperature=0)
    compile_s = sum(v[3] for k, v in pstats.Stats(prof).stats.items() if k[2] == "<built-in method mindspore._c_expression.compile>")
    print(f"generate 32 tokens: {time.perf_counter() - t:.1f} s, of it {compile_s:.1f} s in MindSpore's graph compiler; "
          f"{len(gen.decoders)} decoder(s) of {[k[1] for k in gen.decoders]} cache slots; peak RSS {peak_mb():,.0f} MB")
    import mindspore as ms
    from llmpt_nb.monitor import format_op_table, op_times
    out = Path(tempfile.mkdtemp())
    profiler = ms.Profiler(output_path=str(out))
    gen.generate(["def forward(self, x):"], max_new_tokens=32, temperature=0)
    profiler.stop(); profiler.analyse()
    print("operators of a 32-token generation, ms per new token:\n" + format_op_table(op_times(out, 32), top=8))


if __name__ == "__main__":
    main()
