"""The launcher: exit codes, the failed rank named with its log, hangs ended by a timeout, a worker killed mid-training."""
import contextlib, io, subprocess, sys, time
import psutil
import pytest
from conftest import ROOT
from llmpt_nb.launch import launch, task_command


def run(command, **kw):
    "launch() with its stdout and stderr captured: (exit code, stdout, stderr, seconds)."
    out, err, t = io.StringIO(), io.StringIO(), time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = launch(command, **kw)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - t


def leftovers(marker):
    return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def test_two_workers_succeed_and_show_their_output(tmp_path):
    code, out, err, _ = run(["python", "-c", "import os; print('hello from rank', os.environ['RANK_ID'])"],
                            workers=2, log_dir=tmp_path, echo="all")
    assert code == 0, err
    assert "[rank 0] hello from rank 0" in out and "[rank 1] hello from rank 1" in out
    assert (tmp_path / "worker_1.log").read_text().strip().endswith("hello from rank 1")


def test_failed_worker_is_named_with_the_tail_of_its_log(tmp_path):
    src = ("import os, sys; r = int(os.environ['RANK_ID']); print('rank', r, 'loading data')\n"
           "if r == 1: raise FileNotFoundError('shard train.mindrecord1 is missing')")
    code, out, err, _ = run(["python", "-c", src], workers=2, log_dir=tmp_path)
    assert code == 1, err
    assert "rank 1 failed (exit code 1)" in err and "shard train.mindrecord1 is missing" in err
    assert "rank 0 failed" not in err and "failed rank(s): 1" in err


def test_exit_code_of_the_failed_worker_is_returned(tmp_path):
    code, _, err, _ = run(["python", "-c", "import os, sys; sys.exit(7 if os.environ['RANK_ID'] == '0' else 0)"],
                          workers=2, log_dir=tmp_path)
    assert code == 7 and "rank 0 failed (exit code 7)" in err


def test_hung_job_ends_at_the_timeout_and_leaves_no_process(tmp_path):
    marker = "time.sleep(987)"
    code, _, err, seconds = run(["python", "-c", f"import time; {marker}"], workers=2, log_dir=tmp_path, timeout=3)
    assert code == 124 and seconds < 30 and "timeout=3" in err, err
    time.sleep(0.5)
    assert not leftovers(marker)


def test_bad_commands_fail_before_starting():
    with pytest.raises(FileNotFoundError, match="no-such-command"):
        task_command(["no-such-command"])
    with pytest.raises(ValueError, match="not a Python program"):
        task_command(["ls"])
    with pytest.raises(TypeError, match="list of arguments"):
        task_command("llmpt pretrain")


def test_command_line(tmp_path):
    "python -m llmpt_nb.launch (what `llmpt launch` calls) returns the job's exit code."
    py = str(sys.executable)
    ok = subprocess.run([py, "-m", "llmpt_nb.launch", "--workers", "2", "--log-dir", str(tmp_path / "a"), "--echo", "all",
                         "--", "python", "-c", "import os; print('rank', os.environ['RANK_ID'], 'ok')"],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "[rank 1] rank 1 ok" in ok.stdout, ok.stdout + ok.stderr
    bad = subprocess.run([py, "-m", "llmpt_nb.launch", "--workers", "2", "--log-dir", str(tmp_path / "b"), "--",
                          "python", "-c", "import sys; sys.exit(5)"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 5 and "failed (exit code 5)" in bad.stderr, bad.stderr
    usage = subprocess.run([py, "-m", "llmpt_nb.launch", "--workers", "2"], cwd=ROOT, capture_output=True, text=True)
    assert usage.returncode == 2 and "no command to launch" in usage.stderr


def test_worker_killed_mid_training(tmp_path):
    """Rank 1 SIGKILLs itself at its third step while rank 0 waits for it in an AllReduce: the launcher names rank 1
    and stops the job a few seconds after msrun reports it (msrun alone waits ~30 s for the scheduler)."""
    code, out, err, seconds = run(["python", str(ROOT / "benchmarks" / "parallel_worker.py"), "--stage", "0", "--layers", "1", "--steps", "6",
                                   "--die-at-step", "2", "--die-rank", "1", "--out", str(tmp_path / "out")],
                                  workers=2, log_dir=tmp_path / "logs", timeout=300, echo="all")
    assert code != 0, out + err
    assert "rank 1 failed (exit code -9, killed by signal 9)" in err, err
    assert "killing myself at step 2" in err
    assert "stopped the scheduler" in err
    assert seconds < 200, seconds
    time.sleep(0.5)
    assert not leftovers("--die-at-step")
