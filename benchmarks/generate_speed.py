"""Generation speed beside Hugging Face transformers' `generate(use_cache=True)` on identical weights (chapter 10d): the
trained running example (the packaged default's shape) and a SmolLM2-135M-shaped LLaMA (30 layers, hidden 576, 9
query heads over 3 kv heads, vocabulary 49,152, tied embeddings) with random weights from its config, exported by
chapter 07's `export_hf` and loaded by transformers. Greedy, a prompt of 32 random tokens per row, 64 new tokens, batch
1 and 8, in one process, best of 3 after a run that compiles. Timed per call: the time to the first tokens (the prompt's
call, prefill) and the decode rate (new tokens of all rows per second over the calls after it); transformers' calls
are timed the same way, by a logits processor that notes the time it is called. Also checked: the greedy tokens of
both, and the cached logits against the full forward pass.

    python benchmarks/generate_speed.py [--models default smollm2] [--batch 1 8] [--prompt 32] [--new 64]

`--e2e` measures what a user waits for instead: a fresh process per call, `llmpt generate FOLDER --greedy` beside a
transformers script (`from_pretrained` + `generate`) on the same Hugging Face folder and prompt tokens, for 32 and 256
new tokens, on a SmolLM2-135M-shaped model with random weights and `max_position_embeddings` 8,192 as the real one has,
and on the running example converted by `llmpt convert-weights`: wall time (load and compilation included), time to
the first new token, the peak RSS of the process and whether the greedy texts are equal; best of 3 on each side, every
run kept in the results.

    python benchmarks/generate_speed.py --e2e [--new 32 256]
"""
import argparse, json, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

SMOLLM2_135M = dict(vocab_size=49152, seq_length=2048, hidden_size=576, num_layers=30, num_heads=9, n_kv_heads=3,
                    intermediate_size=1536, rope_theta=100000.0, tie_word_embeddings=True, rms_norm_eps=1e-5)


def write_results(name, rows):
    "results/NAME.json: the machine and the rows."
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.write_text(json.dumps(dict(machine=describe(), rows=rows), indent=1) + "\n")
    print(f"wrote {out}")


def timed_calls(fn, repeats=3):
    "Best (decode tokens/s, time to first tokens, ids) of `repeats` runs of fn() -> (ids, call times), after one warm-up."
    fn()
    best = None
    for _ in range(repeats):
        ids, t = fn()
        rate, first = ids.shape[0] * (len(t) - 2) / (t[-1] - t[1]), t[1] - t[0]
        if best is None or rate > best[0]: best = (rate, first, ids)
    return best


THEIRS = """
import json, sys, time, torch
from transformers import AutoModelForCausalLM
torch.set_num_threads(2)
job = json.loads(open(sys.argv[1]).read())         # folder, prompt ids, max_new_tokens, eos id, ids never to write
model = AutoModelForCausalLM.from_pretrained(job["folder"], local_files_only=True).float().eval()
t = [time.perf_counter()]
clock = lambda ids, scores: (t.append(time.perf_counter()), scores)[1]
with torch.no_grad():
    out = model.generate(torch.tensor([job["ids"]]), max_new_tokens=job["max_new_tokens"], do_sample=False, use_cache=True,
                         eos_token_id=job["eos"], pad_token_id=0, suppress_tokens=job["banned"] or None,
                         logits_processor=[clock])
print(json.dumps([i for i in out[0, len(job["ids"]):].tolist() if i != job["eos"]]))
print(f"first token after {(t[1] - t[0]) * 1e3:.0f} ms; generated in {time.perf_counter() - t[0]:.3f} s", file=sys.stderr)
"""


def smollm2_folder(folder):
    "A SmolLM2-135M-shaped Hugging Face folder: random weights, max_position_embeddings 8,192, a byte-level BPE."
    import llmpt_nb
    from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    from llmpt_nb.weights import export_hf
    export_hf(LlamaForCausalLM(LlamaConfig(**dict(SMOLLM2_135M, seq_length=8192))), folder)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    text = [l for f in Path(llmpt_nb.__file__).parent.glob("*.py") for l in f.read_text().splitlines()]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=4000, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))


def timed_process(cmd, env=None):
    "(wall seconds, peak RSS MB, stdout, stderr) of a command run as a new process, its RSS sampled every 20 ms."
    import psutil
    t0, peak = time.perf_counter(), 0
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    proc = psutil.Process(p.pid)
    while p.poll() is None:
        try: peak = max(peak, proc.memory_info().rss)
        except psutil.Error: pass
        time.sleep(0.02)
    out, err = p.communicate()
    if p.returncode: raise RuntimeError(f"{cmd[:3]} failed: {err[-2000:]}")
    return time.perf_counter() - t0, peak / 2**20, out, err


def e2e_models(root):
    "{name: (Hugging Face folder, prompt)}: the SmolLM2-135M shape and the running example converted by llmpt."
    from llmpt_nb.generation import RUNNING_EXAMPLE
    smollm2, example = root / "smollm2", root / "running_example"
    smollm2_folder(smollm2)
    subprocess.run([str(Path(sys.executable).parent / "llmpt"), "convert-weights", "--from", "ms", "--to", "hf",
                    str(RUNNING_EXAMPLE), str(example)], check=True, capture_output=True)
    return {"smollm2-135m shape": (smollm2, "def forward(self, x):"), "running example": (example, "中国")}


def end_to_end(news, repeats=3):
    """Fresh-process rows on each model: `llmpt generate` (it compiles its graph in every process) and transformers, best
    of `repeats` each, run in turns; greedy texts compared."""
    import re
    from llmpt_nb.generation import load_generator
    print(describe())
    root, llmpt, rows = Path(tempfile.mkdtemp()), str(Path(sys.executable).parent / "llmpt"), []
    first = lambda err: float(re.search(r"first token?s? after (\d+) ms", err).group(1)) / 1e3
    gen_s = lambda err: float(re.search(r"(?:texts in|generated in) ([\d.]+) s", err).group(1))  # generation alone
    for name, (folder, prompt) in e2e_models(root).items():
        gen = load_generator(folder)[0]                       # its tokenizer, and the ids it never writes
        ids, weights_mb = gen.encode([prompt])[0], (folder / "model.safetensors").stat().st_size / 2**20
        for n in news:
            job = root / "job.json"                       # the same request: stops at EOS and at seq_length, same bans
            job.write_text(json.dumps(dict(folder=str(folder), ids=ids, eos=gen.tok.eos_id, banned=gen.banned,
                                           max_new_tokens=min(n, gen.net.config.seq_length - len(ids)))))
            ours, theirs = [], []
            for _ in range(repeats):                      # in turns: a slow spell of the machine falls on both sides
                ours.append(timed_process([llmpt, "generate", str(folder), "--prompt", prompt, "--greedy",
                                           "--max_new_tokens", str(n), "--verbose"]))
                theirs.append(timed_process([sys.executable, "-c", THEIRS, str(job)]))
            o, t, written = min(ours), min(theirs), json.loads(theirs[0][2])
            same = {r[2] for r in ours} == {prompt + gen.tok.decode_continuation(ids, written) + "\n"}
            row = dict(model=name, new_tokens=n, written_tokens=len(written), weights_mb=weights_mb,
                       ours_s=o[0], ours_rss_mb=o[1], ours_first_token_s=first(o[3]), ours_generate_s=gen_s(o[3]),
                       theirs_s=t[0], theirs_rss_mb=t[1], theirs_first_token_s=first(t[3]), theirs_generate_s=gen_s(t[3]),
                       ours_runs_s=[r[0] for r in ours], theirs_runs_s=[r[0] for r in theirs], greedy_text_equal=same)
            rows.append(row)
            print(f"  {name}, {n} new tokens ({len(written)} written): llmpt generate {o[0]:.1f} s, peak {o[1]:,.0f} MB; "
                  f"transformers {t[0]:.1f} s, {t[1]:,.0f} MB: {o[0] / t[0]:.2f}x the time, {o[1] / weights_mb:.2f}x the "
                  f"float32 weights ({weights_mb:.0f} MB); greedy text equal: {same}")
    write_results("generate_e2e", rows)


def main():
    if "--e2e" in sys.argv:
        ap = argparse.ArgumentParser(); ap.add_argument("--e2e", action="store_true")
        ap.add_argument("--new", type=int, nargs="+", default=[32, 256])
        return end_to_end(ap.parse_args().new)
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["default", "smollm2"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--prompt", type=int, default=32); ap.add_argument("--new", type=int, default=64)
    a = ap.parse_args()
    import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
    import torch
    from mindspore import Tensor
    from llmpt_nb.config import load_config
    from llmpt_nb.generation import KVCacheDecoder, RUNNING_EXAMPLE, load_generator
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    from llmpt_nb.context import set_context
    from llmpt_nb.weights import export_hf
    from llmpt_nb.testing import hf_model
    torch.set_num_threads(2)
    set_context(load_config().context, 0)
    print(describe())
    P, N, rows = a.prompt, a.new, []
    for name in a.models:
        net = (load_generator(RUNNING_EXAMPLE)[0].net if name == "default" else
               LlamaForCausalLM(LlamaConfig(**SMOLLM2_135M)))
        folder = Path(tempfile.mkdtemp()) / "hf"
        export_hf(net, folder)
        hf, c = hf_model(folder).eval(), net.config
        print(f"{name}: {c.num_layers} layers, hidden {c.hidden_size}, {c.num_heads}/{c.n_kv_heads} heads, vocabulary "
              f"{c.vocab_size}; {'the trained running example' if name == 'default' else 'random weights'}")
        ids = np.random.default_rng(0).integers(3, c.vocab_size, P + N).astype(np.int32)   # cached vs full logits
        one, full = KVCacheDecoder(net, 1, P + N), net(Tensor(ids[None])).asnumpy()[0]
        got = [one.step(ids[None, :P], 0, [0])[0]] + [one.step(ids[None, [i]], i, [0])[0] for i in range(P, P + N)]
        logit_diff = float(np.abs(np.array(got) - full[P - 1:]).max() / np.abs(full).max())
        for b in a.batch:
            prompts = np.random.default_rng(b).integers(3, c.vocab_size, (b, P)).astype(np.int32)
            dec = KVCacheDecoder(net, b, P + N)
            def ours():
                t, out = [time.perf_counter()], []
                logits = dec.step(prompts, 0, np.zeros(b, int)); t.append(time.perf_counter())
                for j in range(N):
                    out.append(logits.argmax(-1)[:, None])
                    if j < N - 1: logits = dec.step(out[-1], P + j, np.zeros(b, int)); t.append(time.perf_counter())
                return np.concatenate(out, 1), t
            def theirs():
                t = [time.perf_counter()]
                clock = lambda ids, scores: (t.append(time.perf_counter()), scores)[1]
                with torch.no_grad():
                    out = hf.generate(torch.tensor(prompts, dtype=torch.long), max_new_tokens=N, min_new_tokens=N,
                                      do_sample=False, use_cache=True, pad_token_id=0, logits_processor=[clock])
                return out[:, P:].numpy(), t
            (r_o, f_o, i_o), (r_t, f_t, i_t) = timed_calls(ours), timed_calls(theirs)
            row = dict(model=name, batch=b, prompt=P, new_tokens=N, ours_decode_tokens_per_s=r_o, ours_first_token_s=f_o,
                       hf_decode_tokens_per_s=r_t, hf_first_token_s=f_t, decode_ratio=r_o / r_t,
                       greedy_tokens_equal=float((i_o == i_t).mean()), cached_vs_full_relative=logit_diff)
            rows.append(row)
            print(f"  batch {b}: llmpt_nb {r_o:7.0f} tokens/s after {f_o * 1e3:5.0f} ms; transformers {r_t:7.0f} tokens/s "
                  f"after {f_t * 1e3:5.0f} ms: {r_o / r_t:.2f}x; greedy tokens equal {row['greedy_tokens_equal']:.0%}; "
                  f"cached vs full logits {logit_diff:.1e} (relative)")
    write_results("generate_speed", rows)


if __name__ == "__main__":
    main()
