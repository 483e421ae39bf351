"""Re-run chapters and keep their outputs, the way the notebooks are committed: executed top to bottom in their own
folder with IN_TEST=1 (tiny configs, `#| slow` cells skipped the way nbdev-test skips them), MindSpore's log lines
and this machine's temporary paths left out, widget state kept, then `nbdev-clean`.

    python tools/refresh_outputs.py nbs/05_train.ipynb [nbs/10_pretrain.ipynb ...]
"""
import os, re, subprocess, sys, tempfile
from pathlib import Path
import nbformat
from nbclient import NotebookClient

LOG_LINE = re.compile(r"^\[(WARNING|ERROR|INFO)\] [A-Z_]+\(\d+[,:].*$\n?", re.M)  # MindSpore's C++/Python log format
TMP_PATH = re.compile(re.escape(tempfile.gettempdir()) + r"/[\w.-]+")
SKIP_FLAGS = ("#| slow", "#| notest", "#|slow", "#|notest")


def tidy(text):
    "An output's text without MindSpore log lines, with temporary folders as <tmp> and the home folder as ~."
    text = LOG_LINE.sub("", text)
    text = TMP_PATH.sub("<tmp>", text)
    return text.replace(str(Path.home()), "~")


def refresh(path):
    nb = nbformat.read(path, as_version=4)
    skipped = [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith(SKIP_FLAGS)]
    for c in skipped:  # run as nbdev-test runs: flagged cells keep their source and stay unexecuted
        c.metadata["tags"] = c.metadata.get("tags", []) + ["skip-execution"]
    os.environ["IN_TEST"] = "1"
    # the kernel leaves C-level output (MindSpore's compiler log) on its own stdout/stderr: ipykernel's capture of
    # those can deadlock when a long compile fills the pipe while holding the GIL
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(Path(path).parent)}},
                   store_widget_state=True, skip_cells_with_tag="skip-execution",
                   extra_arguments=["--IPKernelApp.capture_fd_output=False"]).execute()
    for c in skipped:
        c.metadata["tags"].remove("skip-execution")
        if not c.metadata["tags"]:
            del c.metadata["tags"]
    for c in nb.cells:
        for out in c.get("outputs", []):
            if "text" in out:
                out["text"] = tidy(out["text"])
            for mime in ("text/plain", "text/html"):
                if mime in out.get("data", {}):
                    out["data"][mime] = tidy(out["data"][mime])
        if c.cell_type == "code":
            c.outputs = [o for o in c.outputs if not (o.output_type == "stream" and not o.text.strip())]
    nbformat.write(nb, path)
    subprocess.run(["nbdev-clean", "--fname", str(path)], check=True)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print("refreshing", p, flush=True)
        refresh(p)
