"""What MindRecord costs per file: one file of packed rows as chapter 02c writes them (130,055 rows of 129 tokens: 128 MB
of two int32 columns), written by chapter 02's `MindRecordWriter`, the time to hand it the rows apart from the time of
closing it (MindRecord writes the file's SQLite index then, and the writer reads a first and a last row back). Two
layouts: input_ids alone (what chapter 02c writes for a tokenizer with a pad piece of its own) and input_ids with
labels (a tokenizer that pads with EOS). Both run in one process, holding the GIL; chapter 02c runs them in a writer
process of their own.

    python benchmarks/mindrecord_cost.py [--repeat 3]
"""
import argparse, json, tempfile, time
from pathlib import Path

from machine import describe


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import llmpt_nb  # noqa: F401  OMP_NUM_THREADS before MindSpore
    import mindspore, numpy as np
    from llmpt_nb.data import MindRecordWriter
    from llmpt_nb.prepare import FILE_BYTES
    print(describe(MindSpore=mindspore.__version__, NumPy=np.__version__))
    width = 129
    rows = FILE_BYTES // (width * 8)
    ids = np.random.default_rng(0).integers(0, 4500, (rows, width), dtype=np.int32)
    results = {}
    for columns in (("input_ids",), ("input_ids", "labels")):
        runs = results[",".join(columns)] = []
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory() as d:
                w = MindRecordWriter(Path(d) / "t.mindrecord", width, columns, max_bytes=rows * width * 8)
                t = time.perf_counter()
                w.write(dict.fromkeys(columns, ids))          # every row handed to MindRecord's writer
                t1 = time.perf_counter()
                w.commit()
                t2 = time.perf_counter()
            runs.append(dict(write=t1 - t, close=t2 - t1))
        best = {k: min(r[k] for r in runs) for k in ("write", "close")}
        print(f"{rows:,} rows of {width} int32 x {len(columns)} ({' + '.join(columns)}), best of {a.repeat}: "
              f"write {best['write']:.2f} s, close (index + check) {best['close']:.2f} s, "
              f"{(best['write'] + best['close']) / rows * 1e6:.1f} us per row")
    out = Path(__file__).parent / "results" / "mindrecord_cost.json"
    out.write_text(json.dumps(dict(rows=rows, width=width, date=time.strftime("%Y-%m-%d"), runs=results), indent=1))


if __name__ == "__main__":
    main()
