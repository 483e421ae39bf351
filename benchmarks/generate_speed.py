"""Generation speed with and without the KV cache (chapter 10d), beside Hugging Face transformers' `generate` with and
without its cache on the identical model: the packaged default's LLaMA shape with random weights (seeded) at several
`seq_length`s, exported by chapter 07's `export_hf` and loaded by transformers, greedy decoding of 64 new tokens after
an 8-token prompt, in one process, best of 3. Without a cache llmpt_nb runs the model over all `seq_length` positions
per token (one shape, one graph), transformers over the text so far. Also: how many greedy tokens both agree on.

    python benchmarks/generate_speed.py [--seq 128 512 1024] [--new 64]
"""
import argparse, json, sys, tempfile, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe


def best(fn, repeats=3):
    fn()                                             # compile / warm up
    times = []
    for _ in range(repeats):
        t = time.perf_counter(); out = fn(); times.append(time.perf_counter() - t)
    return min(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, nargs="+", default=[128, 512, 1024]); ap.add_argument("--new", type=int, default=64)
    a = ap.parse_args()
    import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
    import torch
    from llmpt_nb.config import load_config
    from llmpt_nb.generation import KVCacheDecoder, generate_ids
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    from llmpt_nb.trainer import set_context
    from llmpt_nb.weights import export_hf, hf_model
    torch.set_num_threads(2)
    cfg = load_config()
    set_context(cfg.context, 0)
    prompt = np.random.default_rng(0).integers(3, cfg.model.model_config.vocab_size, 8).tolist()
    print(describe())
    rows, n = [], a.new
    for seq in a.seq:
        net = LlamaForCausalLM(LlamaConfig.from_dict({**cfg.model.model_config, "seq_length": seq}))
        folder = Path(tempfile.mkdtemp()) / "hf"
        export_hf(net, folder)
        hf, decoder, mc = hf_model(folder).eval(), KVCacheDecoder(net), net.config
        if seq == a.seq[0]:
            print(f"model: the packaged default's shape ({mc.num_layers} layers, hidden {mc.hidden_size}, {mc.num_heads}/"
                  f"{mc.n_kv_heads} heads, vocabulary {mc.vocab_size}), random weights; greedy, {n} new tokens after 8")
        ours = lambda cache: generate_ids(net, prompt, n, temperature=0, decoder=decoder if cache else None)
        def theirs(cache):
            with torch.no_grad():
                out = hf.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                  use_cache=cache, pad_token_id=0)
            return out[0, len(prompt):].tolist()
        (t_c, ids_c), (t_u, ids_u) = best(lambda: ours(True)), best(lambda: ours(False))
        (h_c, hf_c), (h_u, _) = best(lambda: theirs(True)), best(lambda: theirs(False))
        agree = next((i for i, (x, y) in enumerate(zip(ids_c, hf_c)) if x != y), min(len(ids_c), len(hf_c)))
        row = dict(seq_length=seq, new_tokens=n, ours_cache=n / t_c, ours_no_cache=n / t_u, hf_cache=n / h_c,
                   hf_no_cache=n / h_u, ours_cache_equals_no_cache=ids_c == ids_u, greedy_tokens_equal_to_hf=agree)
        rows.append(row)
        print(f"seq_length {seq:5d}: llmpt_nb {row['ours_cache']:5.0f} tok/s with the cache, {row['ours_no_cache']:5.0f} "
              f"without ({row['ours_cache'] / row['ours_no_cache']:.1f}x); transformers {row['hf_cache']:5.0f} with, "
              f"{row['hf_no_cache']:5.0f} without; cache = no cache: {ids_c == ids_u}; greedy tokens equal to "
              f"transformers' for the first {agree} of {n}")
    out = Path(__file__).parent / "results" / "generate_speed.json"
    out.write_text(json.dumps(dict(machine=describe(), rows=rows), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
