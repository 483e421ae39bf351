"""Is a MindFormers 2.x hand-off (`llmpt export-config RUN --to mindformers2`, chapter 10i) what MindFormers 2.1.0
reads? Checked with MindFormers' own code, as far as it runs on this machine.

MindFormers 2.1.0 pins MindSpore 2.11 and hyper-parallel, which the package registry does not have, so its models and
trainer cannot run here; its YAML reader and its Megatron data pipeline can. The script makes an environment of its
own on first use: a venv that sees this project's packages (MindSpore 2.10 among them) through a .pth file, with
`pip install --no-deps mindformers==2.1.0` and the small packages its imports need. Then:

1. two tiny runs of `llmpt pretrain --smoke`, one on MindRecord (the default) and one with
   `--train_dataset.format=megatron`, each handed off with `llmpt export-config RUN --to mindformers2 --workers 2`;
2. what the hand-off must hold, from the run with this project's code: its training documents (the MindRecord rows
   cut at each EOS, or its own prefix), seq_length, EOS id, seed and sizes;
3. in MindFormers' environment: `MindFormerConfig` reads pretrain.yaml; `get_blend_from_list` parses its data_path;
   MindFormers' own `IndexedDataset` opens the prefix and gives back every document; its
   `BlendedMegatronDatasetDataLoader`, built from the YAML's data_loader section (its C++ helpers compiled by its
   `compile_helpers`), yields at least `sizes[0]` samples of seq_length ids whose labels are the ids shifted by one, and every
   document between two EOS ids of a sample is one of the run's, whole.

    python benchmarks/mindformers2_handoff.py [--env DIR] [--work DIR]
"""
import argparse, json, site, subprocess, sys, tempfile
from pathlib import Path
from machine import describe
from startup import llmpt_script

MINDFORMERS = "2.1.0"
DEFAULT_ENV = Path.home() / ".cache" / "llmpt_nb" / f"mindformers-{MINDFORMERS}"
IMPORTS_NEED = ["deprecated", "wrapt", "ftfy", "wcwidth", "jieba", "rouge_chinese", "astunparse", "tiktoken", "setproctitle",
                "pybind11", "mindpet==1.0.4"]   # what `import mindformers` reaches for that this project does not install


def mindformers_env(folder):
    "The Python of MindFormers 2.1.0's environment in `folder`, made (venv, .pth, pip --no-deps) if it is not there."
    python = Path(folder) / "bin" / "python"
    probe = [str(python), "-c", "import mindformers; print(mindformers.__version__)"]
    version = lambda: subprocess.run(probe, capture_output=True, text=True, cwd=tempfile.mkdtemp()).stdout.split()[-1:]
    if python.exists() and version() == [MINDFORMERS]:
        return python
    print(f"making MindFormers {MINDFORMERS}'s environment in {folder}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pth = next(Path(folder).glob("lib/python*/site-packages")) / "llmpt_nb_env.pth"
    pth.write_text(site.getsitepackages()[0] + "\n")                 # this project's packages, MindSpore 2.10 included
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", f"mindformers=={MINDFORMERS}", *IMPORTS_NEED],
                   check=True)
    if version() != [MINDFORMERS]: raise SystemExit(f"MindFormers {MINDFORMERS} did not import in {folder}")
    return python


def expected(run):
    "What the hand-off must hold, from the run, with this project's code."
    from llmpt_nb.handoff import read_run
    from llmpt_nb.evaluation import run_documents
    parts = read_run(run)
    cfg, tok = parts["cfg"], parts["tokenizer"]
    return dict(documents=[d + [tok.eos_id] for d in run_documents(parts["data"], "train", tok.eos_id)],
                seq_length=cfg.model.model_config.seq_length, eod=tok.eos_id, seed=cfg.seed)


CHECK = r'''
import json, os, sys
import numpy as np
os.chdir(sys.argv[3])                                       # MindFormers writes its logs under ./output
from mindformers.tools.register.config import MindFormerConfig
from mindformers.dataset.blended_datasets.utils import get_blend_from_list, compile_helpers
from mindformers.dataset.blended_datasets.indexed_dataset import IndexedDataset
want = json.loads(open(sys.argv[2]).read())
out = {}
cfg = MindFormerConfig(sys.argv[1])
loader = cfg.train_dataset.data_loader
out["yaml"] = dict(use_legacy=cfg.use_legacy, type=loader.type, seq_length=loader.config.seq_length, eod=loader.config.eod,
                   seed=loader.config.seed, model_dir_has_config=os.path.isfile(os.path.join(cfg.pretrained_model_dir, "config.json")))
prefixes, weights = get_blend_from_list(list(loader.config.data_path))
out["blend"] = dict(prefixes=prefixes, weights=weights)
data = IndexedDataset(prefixes[0])
docs = [np.concatenate(data[data.document_indices[i]:data.document_indices[i + 1]]).tolist()
        for i in range(len(data.document_indices) - 1)]
out["documents"] = dict(count=len(docs), equal=docs == want["documents"])
compile_helpers()
from mindformers.dataset.dataloader.blended_megatron_dataloader import BlendedMegatronDatasetDataLoader
ds = BlendedMegatronDatasetDataLoader(datasets_type=loader.datasets_type, sizes=list(loader.sizes), config=loader.config.to_dict()
                                      if hasattr(loader.config, "to_dict") else dict(loader.config),
                                      column_names=list(cfg.train_dataset.input_columns))
whole = set(np.array(d, np.int64).tobytes() for d in want["documents"])    # each document with its EOS
n = shifted = inside = 0
for row in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
    ids, labels = row[0].astype(np.int64), row[1].astype(np.int64)
    ends = np.flatnonzero(np.append(ids, labels[-1]) == want["eod"])       # every document whole between two EOS
    n += 1; shifted += bool((ids[1:] == labels[:-1]).all())
    inside += all(np.append(ids, labels[-1])[a + 1:b + 1].tobytes() in whole for a, b in zip(ends[:-1], ends[1:]))
out["samples"] = dict(count=n, sizes=list(loader.sizes), row_length=int(len(ids)), labels_shifted=shifted, in_documents=inside)
print("RESULT " + json.dumps(out))
'''


def check(python, handoff, want, work):
    "Run CHECK with MindFormers' Python on the hand-off's YAML; returns its result."
    (work / "want.json").write_text(json.dumps(want))
    (work / "check.py").write_text(CHECK)
    r = subprocess.run([str(python), str(work / "check.py"), str(Path(handoff) / "pretrain.yaml"), str(work / "want.json"),
                        str(work)], capture_output=True, text=True)
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None: raise SystemExit(f"MindFormers' check failed:\n{r.stderr[-4000:]}")
    return json.loads(line[7:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", type=Path, default=DEFAULT_ENV, help="where MindFormers' environment is (made if missing)")
    ap.add_argument("--work", type=Path, default=None, help="a folder for the runs and hand-offs (default: a temporary one)")
    a = ap.parse_args()
    print(describe())
    work = a.work or Path(tempfile.mkdtemp())
    python = mindformers_env(a.env)
    llmpt = llmpt_script()
    ok = True
    for name, extra in (("MindRecord run", []), ("Megatron run", ["--train_dataset.format=megatron"])):
        run, handoff = work / name.split()[0].lower(), work / f"{name.split()[0].lower()}_mf2"
        subprocess.run([llmpt, "pretrain", "--smoke", f"--output_dir={run}", "--overwrite", *extra], check=True,
                       capture_output=True)
        subprocess.run([llmpt, "export-config", str(run), "--to", "mindformers2", "--workers", "2", "-o", str(handoff),
                        "--overwrite"], check=True, capture_output=True)
        want = expected(run)
        got = check(python, handoff, want, work)
        y, s = got["yaml"], got["samples"]
        good = (y["seq_length"] == want["seq_length"] and y["eod"] == want["eod"] and y["seed"] == want["seed"]
                and not y["use_legacy"] and y["model_dir_has_config"] and got["documents"]["equal"]
                and s["count"] >= s["sizes"][0] and s["labels_shifted"] == s["count"] == s["in_documents"]
                and s["row_length"] == want["seq_length"])
        ok &= good
        print(f"{name}: MindFormerConfig read it ({y['type']}, seq_length {y['seq_length']}, eod {y['eod']}, seed {y['seed']}); "
              f"data_path -> {got['blend']['weights']} x {[Path(p).name for p in got['blend']['prefixes']]}; MindFormers' "
              f"IndexedDataset: {got['documents']['count']} documents, {'all equal to' if got['documents']['equal'] else 'NOT'} "
              f"the run's; its BlendedMegatronDatasetDataLoader: {s['count']} samples of {s['row_length']} ids (sizes "
              f"{s['sizes'][0]}: a weighted data_path adds its 0.5% surplus), labels shifted by one in {s['labels_shifted']}, the documents between its EOS ids whole "
              f"run documents in {s['in_documents']}: {'OK' if good else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
