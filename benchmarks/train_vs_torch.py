"""Train the same tiny LLaMA with llmpt_nb (MindSpore GRAPH_MODE, the packaged config's context: graph kernel fusion
on) and with PyTorch eager (Hugging Face LlamaForCausalLM, identical initial weights, same batches, same AdamW /
schedule / clipping), and compare loss per step, steady tokens/s and peak RSS. Each framework runs in its own
process of this script, so each peak RSS is that framework's alone. The processes take turns step by step (one
computes while the others wait on a pipe), so a machine whose speed drifts slows every framework alike and the
ratio stays fair; run one after the other, the same script gave 0.85x to 1.11x on one machine.

PyTorch also trains a second time with Hugging Face's plain ("eager") attention instead of its default (`sdpa`,
PyTorch's fused kernel): the same model computed in another order. Their loss difference is the float32 noise floor
of two correct implementations at these sizes, printed beside the MindSpore - PyTorch difference.

    python benchmarks/train_vs_torch.py [--steps 20] [--batch B] [--seq T] [--accum A] [--threads 2] [--set KEY=VALUE]
                                        [--shape smollm2-135m]

Sizes not given are the packaged default config's; `--shape` takes a known model's (random weights, the same in both).
The MindSpore run also prints chapter 08a's memory estimate for its config, beside the peak RSS it measured.
"""
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe


def batches(vocab, batch, seq, steps, accum, seed=0):
    "Real text when the default corpus is installed, else random ids: the same arrays feed both frameworks."
    rng = np.random.default_rng(seed)
    try:
        from llmpt_nb.corpus import load_corpus, clean_documents
        from llmpt_nb.data import pack_documents
        from llmpt_nb.tokenizer import train_tokenizer
        docs = clean_documents(load_corpus("default", max_documents=6000))
        tok = train_tokenizer(docs, tempfile.mkdtemp() + "/tok", vocab_size=vocab, character_coverage=0.98)
        rows = pack_documents(tok.encode(docs), seq, tok.eos_id, tok.pad_id)["input_ids"]
        rows = rows[rng.permutation(len(rows))]
    except Exception as e:  # no corpus: random tokens still compare the two implementations
        print("random tokens:", e)
        rows = rng.integers(0, vocab, (steps * accum * batch, seq + 1)).astype(np.int32)
    need = steps * accum * batch
    rows = np.concatenate([rows] * (need // len(rows) + 1))[:need]
    return rows.reshape(steps, accum, batch, seq + 1)


SHAPES = {  # config.json of HuggingFaceTB/SmolLM2-135M, as overrides
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_layers=30, num_heads=9,
                         n_kv_heads=3, rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True)}


def config(a):
    "The packaged config with this run's sizes (the default's where not given); fills them into `a`."
    from llmpt_nb.config import load_config
    sizes = {"runner_config.batch_size": a.batch, "runner_config.gradient_accumulation_steps": a.accum,
             "model.model_config.seq_length": a.seq, "lr_schedule.learning_rate": a.lr}
    shape = [f"model.model_config.{k}={v}" for k, v in SHAPES.get(a.shape, {}).items()]
    cfg = load_config(overrides=[f"{k}={v}" for k, v in sizes.items() if v is not None] + shape + a.set + [
        f"runner_config.max_steps={a.steps}", f"output_dir={tempfile.mkdtemp()}", "callbacks.save_checkpoint_steps=100000",
        "context.peak_flops=1.0"])
    rc = cfg.runner_config
    a.batch, a.accum, a.seq = rc.batch_size, rc.gradient_accumulation_steps, cfg.model.model_config.seq_length
    a.lr = cfg.lr_schedule.learning_rate
    return cfg


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Turns:
    "Take turns with the other runs: wait for the parent's go before each step, report when it is done."
    order = 2  # after every other callback: the wait is not in the step's time

    def __init__(self, fds):
        self.go, self.done = (os.fdopen(int(fd), mode) for fd, mode in zip(fds.split(","), ("r", "w")))
        self.finished()  # ready: the framework is imported, so the first turn runs alone

    def wait(self, *_):
        assert self.go.readline() == "go\n"

    def finished(self, *_):
        self.done.write("done\n"); self.done.flush()

    def before_fit(self, *_): self.wait()

    def after_step(self, *_): self.finished(); self.wait()


def run_mindspore(a, work):
    "The project's Trainer on the prepared batches; writes the initial weights for the PyTorch run."
    import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP (a step took 1.8x as long without)
    import mindspore as ms, mindspore.dataset as mds
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    from llmpt_nb.trainer import Trainer
    from llmpt_nb.context import set_context
    from llmpt_nb.build import memory_estimate
    cfg = config(a)
    set_context(cfg.context, cfg.seed)
    net = LlamaForCausalLM(LlamaConfig.from_dict(cfg.model.model_config))
    np.savez(work / "init.npz", **{p.name: p.asnumpy() for p in net.get_parameters()})
    flat = np.load(work / "data.npy").reshape(-1, a.seq + 1)
    ds = mds.NumpySlicesDataset({"input_ids": flat, "labels": flat}, shuffle=False).batch(a.batch)
    turns = Turns(a.turns)
    tr = Trainer.from_config(net, cfg, ds, verbose=False, callbacks=[turns])
    hist = tr.fit()
    estimate = memory_estimate(cfg)["total"]
    return dict(loss=[h["loss"] for h in hist], step_s=[h["step_ms"] / 1e3 for h in hist], estimate_mib=estimate / 2**20,
                n_params=tr.n_params, graph_kernel=bool(cfg.context.enable_graph_kernel), version=ms.__version__)


def run_torch(a, work, attention="sdpa"):
    "Hugging Face LlamaForCausalLM from the same initial weights, torch.optim.AdamW, the same schedule and clipping."
    import torch
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM as HFLlama
    torch.set_num_threads(a.threads)
    turns = Turns(a.turns)
    turns.wait()  # MindSpore's run takes the first turn, after writing the initial weights
    cfg = config(a); mc, o = cfg.model.model_config, cfg.optimizer
    hf = HFLlama(HFConfig(vocab_size=mc.vocab_size, hidden_size=mc.hidden_size, intermediate_size=mc.intermediate_size,
                          num_hidden_layers=mc.num_layers, num_attention_heads=mc.num_heads, num_key_value_heads=mc.n_kv_heads,
                          max_position_embeddings=mc.seq_length, rms_norm_eps=mc.rms_norm_eps, rope_theta=mc.rope_theta,
                          tie_word_embeddings=mc.tie_word_embeddings, attention_bias=False, mlp_bias=False,
                          attn_implementation=attention))
    init = np.load(work / "init.npz")
    missing, unexpected = hf.load_state_dict({k: torch.tensor(init[k]) for k in init.files}, strict=False)
    tied = {"lm_head.weight"} if mc.tie_word_embeddings else set()  # the head is the embedding matrix
    assert not [m for m in missing if "rotary" not in m and m not in tied] and not unexpected, (missing, unexpected)
    data = np.load(work / "data.npy")
    decay = [p for p in hf.parameters() if p.ndim >= 2]; no_decay = [p for p in hf.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(o.beta1, o.beta2), eps=o.eps)
    lrs = np.load(work / "lrs.npy")  # chapter 05's schedule, computed by the parent (no MindSpore in this process)
    losses, times = [], []
    for s in range(a.steps):
        if s:
            turns.wait()
        t = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = float(lrs[s])
        total = 0.0
        for m in range(a.accum):
            x = torch.tensor(data[s, m].astype(np.int64))
            logits = hf(x[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            (loss / a.accum).backward(); total += loss.item() / a.accum
        torch.nn.utils.clip_grad_norm_(hf.parameters(), cfg.runner_wrapper.max_grad_norm)
        opt.step(); opt.zero_grad(set_to_none=True)
        losses.append(total); times.append(time.perf_counter() - t); turns.finished()
    turns.wait()  # the last turn, as MindSpore's run takes it: then every run has written its result
    return dict(loss=losses, step_s=times, version=torch.__version__)


RUNS = {"mindspore": run_mindspore, "torch": run_torch, "torch_eager": lambda a, work: run_torch(a, work, "eager")}


def child(which, a, work):
    out = RUNS[which](a, work)
    out["peak_rss_mb"] = peak_rss_mb()
    (work / f"{which}.json").write_text(json.dumps(out))


PAUSE_S = 0.5  # between turns: threads that spin after their work (OpenMP's, MindSpore's pool) go to sleep first


def start_child(which, work):
    "This script as one framework's run, with a pipe each way for taking turns."
    go_r, go_w = os.pipe(); done_r, done_w = os.pipe()
    proc = subprocess.Popen([sys.executable, __file__, "--child", which, "--work", str(work), "--turns", f"{go_r},{done_w}"]
                            + sys.argv[1:], pass_fds=(go_r, done_w))
    os.close(go_r); os.close(done_w)
    return proc, os.fdopen(go_w, "w"), os.fdopen(done_r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20); ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int); ap.add_argument("--accum", type=int)
    ap.add_argument("--threads", type=int, default=2); ap.add_argument("--lr", type=float)
    ap.add_argument("--shape", choices=list(SHAPES), help="a known model's shape instead of the packaged default's")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any other config override")
    ap.add_argument("--child", choices=list(RUNS)); ap.add_argument("--work"); ap.add_argument("--turns")
    a = ap.parse_args()
    if a.child:
        return child(a.child, a, Path(a.work))
    from llmpt_nb.optim import warmup_cosine_lr
    cfg = config(a)
    work = Path(tempfile.mkdtemp())
    np.save(work / "data.npy", batches(cfg.model.model_config.vocab_size, a.batch, a.seq, a.steps, a.accum))
    warm = max(1, int(cfg.lr_schedule.warmup_ratio * a.steps))
    np.save(work / "lrs.npy", [warmup_cosine_lr(s, a.lr, a.steps, warm, cfg.lr_schedule.lr_end) for s in range(a.steps)])
    print(describe())
    children = {which: start_child(which, work) for which in RUNS}
    for proc, go, done in children.values():
        done.readline()
    for _ in range(a.steps + 1):  # step by step, one process at a time; the extra turn lets each finish and write
        for proc, go, done in children.values():
            if proc.poll() is not None:  # finished, or failed: reported below
                continue
            time.sleep(PAUSE_S)
            try:
                go.write("go\n"); go.flush()
            except BrokenPipeError:
                continue
            done.readline()  # "done", or nothing when the run has ended
    for which, (proc, go, done) in children.items():
        if proc.wait() != 0:
            sys.exit(f"the {which} run failed (exit {proc.returncode}); its messages are above")
    res = {which: json.loads((work / f"{which}.json").read_text()) for which in RUNS}
    ms_, pt, pt_eager = res["mindspore"], res["torch"], res["torch_eager"]
    print(f"model {ms_['n_params'] / 1e6:.2f} M params, batch {a.batch}x{a.accum}, seq {a.seq}, {a.steps} steps; "
          f"MindSpore {ms_['version']} (graph kernel {'on' if ms_['graph_kernel'] else 'off'}), PyTorch {pt['version']} "
          f"({a.threads} threads)")
    print("step  mindspore  pytorch    |diff|   pytorch, eager attention  |diff to pytorch|")
    for s in range(a.steps):
        print(f"{s + 1:4d}  {ms_['loss'][s]:.6f}  {pt['loss'][s]:.6f}  {abs(ms_['loss'][s] - pt['loss'][s]):.1e}"
              f"   {pt_eager['loss'][s]:.6f}                 {abs(pt_eager['loss'][s] - pt['loss'][s]):.1e}")
    diff = lambda x, y: np.max(np.abs(np.array(x["loss"]) - np.array(y["loss"])))
    print(f"max |loss diff| over all steps: mindspore - pytorch {diff(ms_, pt):.2e}; "
          f"pytorch eager attention - pytorch sdpa {diff(pt_eager, pt):.2e} (the noise floor)")
    tokens = a.batch * a.accum * a.seq
    ms_step, pt_step = np.median(ms_["step_s"][2:]), np.median(pt["step_s"][2:])
    paired = np.median(np.array(pt["step_s"][2:]) / np.array(ms_["step_s"][2:]))  # the same step, moments apart
    print(f"steady tokens/s (medians from step 3): mindspore {tokens / ms_step:.0f}, pytorch eager {tokens / pt_step:.0f}, "
          f"ratio {pt_step / ms_step:.2f}x; step by step (median of the paired ratios) {paired:.2f}x")
    print(f"mindspore's first step (graph compilation) {ms_['step_s'][0]:.1f} s; pytorch with eager attention "
          f"{tokens / np.median(pt_eager['step_s'][2:]):.0f} tokens/s")
    print(f"peak RSS: mindspore {ms_['peak_rss_mb']:.0f} MiB, pytorch eager {pt['peak_rss_mb']:.0f} MiB, "
          f"ratio {ms_['peak_rss_mb'] / pt['peak_rss_mb']:.2f}x; chapter 08a's estimate for this config "
          f"{ms_['estimate_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
