"""`llmpt doctor` as a user runs it: every section, exit 0 on this machine, and a FAIL with its fix (exit 1) for each
condition broken for real in the subprocess's environment: no mocks."""
import re, subprocess
from conftest import ROOT, bin_path

SECTIONS = ["python", "numpy", "mindspore", "graph mode", "device", "threads", "memory", "disk", "compile cache",
            "msrun", "LD_LIBRARY_PATH", "transformers", "torch", "corpus", "font"]


def doctor(*args, env, cwd=ROOT):
    return subprocess.run([bin_path("llmpt"), "doctor", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def report(r):
    "{section: (status, found, fix)} from the printed report; asserts every section is there once, in order."
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    rows, lines = {}, r.stdout.splitlines()
    for i, line in enumerate(lines):
        for section in sorted(SECTIONS, key=len, reverse=True):
            m = re.match(rf"^(OK|WARN|FAIL) +{section} +(.*)$", line)
            if m:
                nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
                rows[section] = (m.group(1), m.group(2), nxt[5:] if nxt.startswith("fix: ") else "")
                break
    assert list(rows) == SECTIONS, r.stdout
    return rows


def test_doctor_passes_on_this_machine(tmp_path, env):
    r = doctor(f"--output_dir={tmp_path / 'run'}", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    rows = report(r)
    assert not [s for s, (status, _, _) in rows.items() if status == "FAIL"], r.stdout
    assert "MindSpore 2.10.0" in rows["mindspore"][1] and "the config asks for CPU" in rows["device"][1]
    assert r.stdout.rstrip().endswith("0 FAIL; ready"), r.stdout


def test_broken_conditions_fail_with_a_fix(tmp_path, env):
    (tmp_path / "a_file").write_text("not a folder")
    broken = {**env, "OMP_NUM_THREADS": "0", "MS_COMPILER_CACHE_ENABLE": "1",
              "MS_COMPILER_CACHE_PATH": str(tmp_path / "a_file" / "cache")}
    r = doctor(f"--output_dir={tmp_path / 'a_file' / 'run'}", "--model.model_config.seq_length=65536",
               "--runner_config.batch_size=512", "--context.enable_graph_kernel=false", env=broken, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    rows = report(r)
    assert {s for s, (status, _, _) in rows.items() if status == "FAIL"} == {"threads", "memory", "disk", "compile cache"}, r.stdout
    assert rows["threads"][2].startswith("export OMP_NUM_THREADS=1 before Python starts")
    assert "is a file" in rows["disk"][1] and "--output_dir" in rows["disk"][2]
    assert "unset MS_COMPILER_CACHE_ENABLE" in rows["compile cache"][2] and "gradient" in rows["compile cache"][1]
    assert "batch_size" in rows["memory"][2] and "gradient_accumulation_steps" in rows["memory"][2]
    assert "not ready" in r.stdout.splitlines()[-1]
    r = doctor(f"--output_dir={tmp_path / 'run'}", "--context.device_target=Ascend", env=env, cwd=tmp_path)
    rows = report(r)
    assert r.returncode == 1 and [s for s, (status, _, _) in rows.items() if status == "FAIL"] == ["device"], r.stdout
    assert "--context.device_target=CPU" in rows["device"][2]


def test_warnings_do_not_fail(tmp_path, env):
    "No msrun on PATH (`llmpt launch` does not need it) and an odd LD_LIBRARY_PATH are warnings: exit code 0."
    odd = {**env, "PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f":{tmp_path / 'gone'}"}
    r = doctor(f"--output_dir={tmp_path / 'run'}", env=odd, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    rows = report(r)
    assert rows["msrun"][0] == "WARN" and "not on PATH" in rows["msrun"][1] and "activate" in rows["msrun"][2]
    assert rows["LD_LIBRARY_PATH"][0] == "WARN" and "current folder" in rows["LD_LIBRARY_PATH"][1]
    assert "gone" in rows["LD_LIBRARY_PATH"][1] and rows["LD_LIBRARY_PATH"][2].startswith("unset LD_LIBRARY_PATH")


def test_without_mindspore_every_line_still_prints(tmp_path, env):
    "A MindSpore that does not import is a FAIL line, and the checks that need it say so instead of a traceback."
    (tmp_path / "mindspore").mkdir()
    (tmp_path / "mindspore" / "__init__.py").write_text("raise ImportError('libmindspore_core.so: cannot open shared object file')\n")
    r = doctor(f"--output_dir={tmp_path / 'run'}", env={**env, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    rows = report(r)
    assert rows["mindspore"][0] == "FAIL" and "libmindspore_core.so" in rows["mindspore"][1] and "pip install" in rows["mindspore"][2]
    assert rows["graph mode"][0] == "FAIL" and "could not check" in rows["graph mode"][1]
    assert rows["python"][0] == "OK" and rows["numpy"][0] == "OK"


def test_bad_config_is_exit_2(tmp_path, env):
    r = doctor("--runner_config.batch_szie=4", env=env, cwd=tmp_path)
    assert r.returncode == 2 and "batch_size" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
