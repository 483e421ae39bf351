"""Train the same tiny LLaMA with llmpt_nb (MindSpore GRAPH_MODE) and with PyTorch eager (Hugging Face
LlamaForCausalLM, identical initial weights, same batches, same AdamW / schedule / clipping), and compare
loss per step and tokens/s in one process.

    python benchmarks/train_vs_torch.py [--steps 30] [--batch 8] [--seq 256] [--accum 1] [--threads 2]
"""
import argparse, os, platform, tempfile, time
import numpy as np


def batches(vocab, batch, seq, steps, accum, seed=0):
    "Real text when the default corpus is installed, else random ids: the same arrays feed both frameworks."
    rng = np.random.default_rng(seed)
    try:
        from llmpt_nb.data import load_corpus, clean_documents, pack_documents
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30); ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256); ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2); ap.add_argument("--lr", type=float, default=1e-3)
    a = ap.parse_args()
    import torch, mindspore as ms
    from mindspore import Tensor
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM as HFLlama
    from llmpt_nb.config import load_config
    from llmpt_nb.models.llama import LlamaConfig, LlamaForCausalLM
    from llmpt_nb.trainer import Trainer, set_context, warmup_cosine_lr
    torch.set_num_threads(a.threads)
    cfg = load_config(overrides=[f"runner_config.batch_size={a.batch}", f"runner_config.gradient_accumulation_steps={a.accum}",
                                 f"model.model_config.seq_length={a.seq}", f"runner_config.max_steps={a.steps}",
                                 f"lr_schedule.learning_rate={a.lr}", f"output_dir={tempfile.mkdtemp()}", "callbacks.save_checkpoint_steps=100000"])
    mc, rc = cfg.model.model_config, cfg.runner_config
    data = batches(mc.vocab_size, a.batch, a.seq, a.steps, a.accum)
    set_context(cfg.context, cfg.seed)
    net = LlamaForCausalLM(LlamaConfig.from_dict(mc))

    hf = HFLlama(HFConfig(vocab_size=mc.vocab_size, hidden_size=mc.hidden_size, intermediate_size=mc.intermediate_size,
                          num_hidden_layers=mc.num_layers, num_attention_heads=mc.num_heads, num_key_value_heads=mc.n_kv_heads,
                          max_position_embeddings=mc.seq_length, rms_norm_eps=mc.rms_norm_eps, rope_theta=mc.rope_theta,
                          tie_word_embeddings=mc.tie_word_embeddings, attention_bias=False, mlp_bias=False))
    sd = {p.name: torch.tensor(p.asnumpy()) for p in net.get_parameters()}
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    assert not [m for m in missing if "rotary" not in m] and not unexpected, (missing, unexpected)

    # --- MindSpore: the project's Trainer cells on the prepared batches
    import mindspore.dataset as mds
    flat = data.reshape(-1, a.seq + 1)
    ds = mds.NumpySlicesDataset({"input_ids": flat, "labels": flat}, shuffle=False).batch(a.batch)
    tr = Trainer(net, cfg, ds, verbose=False, peak_flops=1.0)
    t0 = time.perf_counter(); ms_hist = tr.fit(); ms_time = time.perf_counter() - t0
    ms_loss = [h["loss"] for h in ms_hist]
    ms_steady = np.median([h["step_ms"] for h in ms_hist[2:]]) / 1e3

    # --- PyTorch eager, same schedule; weight decay only on >= 2-D weights, as ours
    o = cfg.optimizer
    decay = [p for p in hf.parameters() if p.ndim >= 2]; no_decay = [p for p in hf.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(o.beta1, o.beta2), eps=o.eps)
    warm = max(1, int(cfg.lr_schedule.warmup_ratio * a.steps))
    pt_loss, pt_times = [], []
    for s in range(a.steps):
        t = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = warmup_cosine_lr(s, a.lr, a.steps, warm, cfg.lr_schedule.lr_end)
        total = 0.0
        for m in range(a.accum):
            x = torch.tensor(data[s, m].astype(np.int64))
            logits = hf(x[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            (loss / a.accum).backward(); total += loss.item() / a.accum
        torch.nn.utils.clip_grad_norm_(hf.parameters(), cfg.runner_wrapper.max_grad_norm)
        opt.step(); opt.zero_grad(set_to_none=True)
        pt_loss.append(total); pt_times.append(time.perf_counter() - t)
    pt_steady = np.median(pt_times[2:])
    tokens = a.batch * a.accum * a.seq
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, torch threads {a.threads}; model {tr.n_params / 1e6:.2f} M params, "
          f"batch {a.batch}x{a.accum}, seq {a.seq}, {a.steps} steps")
    print("step  mindspore  pytorch")
    for s in range(0, a.steps, max(1, a.steps // 10)):
        print(f"{s + 1:4d}  {ms_loss[s]:.4f}     {pt_loss[s]:.4f}")
    print(f"max |loss diff| over all steps: {np.max(np.abs(np.array(ms_loss) - np.array(pt_loss))):.2e}")
    print(f"steady tokens/s: mindspore {tokens / ms_steady:.0f}, pytorch eager {tokens / pt_steady:.0f}, "
          f"ratio {pt_steady / ms_steady:.2f}x; mindspore total incl. compile {ms_time:.1f} s")


if __name__ == "__main__":
    main()
