"""`import llmpt_nb as lp`: the entry points at top level, MindSpore loaded only when one is used; the README's script runs."""
import importlib, re, subprocess, sys
from conftest import ROOT


def test_import_does_not_load_mindspore(env):
    check = ("import sys, llmpt_nb as lp; assert 'mindspore' not in sys.modules; assert set(lp.__all__) <= set(dir(lp)); "
             "import llmpt_nb.cli; assert lp.launch.__module__ == 'llmpt_nb.launch'; assert 'mindspore' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_every_name_comes_from_its_module():
    import llmpt_nb as lp
    assert set(lp.__all__) == set(lp._API)
    for name, module in lp._API.items():
        obj = getattr(lp, name)
        assert callable(obj) and obj.__module__ == f"llmpt_nb.{module}", (name, obj)
        assert obj is getattr(importlib.import_module(f"llmpt_nb.{module}"), name)


def test_readme_script_runs(tmp_path, env):
    "The README's 'Use it from Python' script, on a corpus folder of the user's own, as a smoke run."
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    my_yaml, script = (re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1) for lang in ("yaml", "python"))
    assert "SMOKE = False" in script
    from llmpt_nb.corpus import load_corpus
    (tmp_path / "data" / "my_corpus").mkdir(parents=True)           # "your own text": one document per line
    docs = [d.replace("\n", " ") for d in load_corpus("default", max_documents=600)]
    (tmp_path / "data" / "my_corpus" / "news.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (tmp_path / "my.yaml").write_text(my_yaml)
    (tmp_path / "train.py").write_text(script.replace("SMOKE = False", "SMOKE = True"))
    r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert list((tmp_path / "runs").rglob("summary.json")), r.stdout[-3000:]
