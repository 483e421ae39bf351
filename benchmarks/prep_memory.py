"""Where the main process of chapter 02c's `prepare_corpus` holds its memory: a thread samples the process's RSS and
the main thread's Python stack every `--interval` seconds while one corpus is prepared, then prints the samples of
highest RSS with their stacks and the RSS over the run. Linux only (/proc). A sample's stack is where the process
was, not what allocated: a long call shows up often whatever its memory.

    python benchmarks/prep_memory.py CORPUS [--tokenizer MODEL] [--vocab-size 8000] [--interval 0.1]

Without --tokenizer the preparation trains one, as the `trained` rows of data_prep.py. glibc's allocator settings
can be tried from outside, e.g. `MALLOC_MMAP_THRESHOLD_=131072 python benchmarks/prep_memory.py ...`.
"""
import argparse, resource, sys, tempfile, threading, time, traceback

from machine import describe


def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))


def sample(samples, done, interval):
    main = threading.main_thread().ident
    while not done.is_set():
        frame = sys._current_frames().get(main)
        stack = [f"{f.f_code.co_name}:{line}" for f, line in traceback.walk_stack(frame)][:6] if frame else []
        samples.append((time.perf_counter(), rss_mb(), stack))
        done.wait(interval)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus"); ap.add_argument("--tokenizer"); ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--interval", type=float, default=0.1); ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    from llmpt_nb.prepare import PrepareSettings, prepare_corpus
    print(describe())
    samples, done = [], threading.Event()
    threading.Thread(target=sample, args=(samples, done, a.interval), daemon=True).start()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        tok = dict(vocab_file=a.tokenizer) if a.tokenizer else dict(vocab_size=a.vocab_size)
        prepare_corpus(a.corpus, out, PrepareSettings(seq_length=128, **tok), verbose=False)
    done.set()
    print(f"{time.perf_counter() - t0:.1f} s; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024:,} MB")
    print(f"the {a.top} samples of highest RSS (seconds, MB, innermost frame first):")
    for t, mb, stack in sorted(samples, key=lambda s: -s[1])[:a.top]:
        print(f"{t - t0:7.1f} {mb:6,}  {' < '.join(stack)}")
    step = max(1, len(samples) // 40)
    print("RSS over the run (seconds: MB):", ", ".join(f"{t - t0:.0f}: {mb:,}" for t, mb, _ in samples[::step]))


if __name__ == "__main__":
    main()
