"""CPU seconds (user, system) and peak RSS of each process of chapter 02c's `prepare_corpus` (the main process, the
MindRecord writer, the workers at nice 10), sampled from /proc every 0.2 s while it prepares one corpus. Linux only.

    python benchmarks/process_cpu.py CORPUS TOKENIZER_MODEL [--seq-length 128]
"""
import argparse, os, subprocess, sys, tempfile, time

CHILD = ("import sys, llmpt_nb; from llmpt_nb.prepare import PrepareSettings, prepare_corpus; "
         "prepare_corpus(sys.argv[1], sys.argv[2], PrepareSettings(seq_length=int(sys.argv[3]), vocab_file=sys.argv[4]), "
         "verbose=False)")


def tree(root):
    "Pid -> /proc stat fields of `root` and its descendants."
    stats = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try: stats[int(d)] = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
        except OSError: pass
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats: out[pid] = stats[pid]
        todo += [p for p, st in stats.items() if int(st[1]) == pid]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus"); ap.add_argument("tokenizer"); ap.add_argument("--seq-length", type=int, default=128)
    a = ap.parse_args()
    tick, seen = os.sysconf("SC_CLK_TCK"), {}
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", CHILD, a.corpus, out, str(a.seq_length), a.tokenizer])
        while p.poll() is None:
            for pid, st in tree(p.pid).items():
                try: hwm = int(open(f"/proc/{pid}/status").read().split("VmHWM:")[1].split()[0]) // 1024
                except (OSError, IndexError): continue
                seen[pid] = dict(user=int(st[11]) / tick, system=int(st[12]) / tick, nice=int(st[16]), peak_mb=hwm)
            time.sleep(0.2)
    print(f"{time.perf_counter() - t:.1f} s wall (exit code {p.returncode}), MindSpore import included")
    for pid, s in seen.items():
        role = "main" if pid == p.pid else "worker" if s["nice"] > 0 else "writer"
        print(f"{role:<7} user {s['user']:6.1f} s  system {s['system']:5.1f} s  peak {s['peak_mb']:,} MB")


if __name__ == "__main__":
    main()
