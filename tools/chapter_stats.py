"""Per chapter, what a reader meets: code lines exported into the package against the lines that teach (every other
code cell a reader sees: not `#| hide`), the longest exported cell, stored figures, whether it opens with what the
reader will learn, and its exercises. Part I's notebooks (nbs/pN_*.ipynb) export nothing: for them, the code lines,
the median and largest code cell, figures and exercises (`part_one_stats`, which tests/test_part_one.py holds to
Part I's limits).

    python tools/chapter_stats.py [--json FILE]
"""
import argparse, json, re, statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIRECTIVE = re.compile(r"^#\|\s*([\w-]+)")
OPENING = re.compile(r"(?i)in this chapter you will|what you will (?:learn|see)")
EXERCISE = re.compile(r"(?m)^#{2,3} Exercise\b(?!s?\s*$)")   # "### Exercise 1: ...", "## Exercise: ...", not "## Exercises"


def code_lines(src):
    "(directives, the non-blank lines after them) of a code cell."
    lines, flags = src.splitlines(), []
    while lines and DIRECTIVE.match(lines[0]): flags.append(DIRECTIVE.match(lines.pop(0)).group(1))
    return flags, [l for l in lines if l.strip()]


def chapter_stats(path):
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    exported = teaching = longest = figures = 0
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] == "code":
            flags, lines = code_lines(src)
            if {"export", "exports"} & set(flags): exported += len(lines); longest = max(longest, len(lines))
            elif "hide" not in flags and "default_exp" not in flags: teaching += len(lines)
            figures += sum("image/png" in o.get("data", {}) for o in c.get("outputs", []))
    markdown = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    figures += sum("image/png" in o.get("data", {}) for m in state.values() if m["model_name"] == "OutputModel"
                   for o in m["state"].get("outputs", []))
    return {"exported": exported, "teaching": teaching, "longest_exported_cell": longest, "figures": figures,
            "opening": bool(markdown[1:] and OPENING.search(markdown[1])),
            "exercises": sum(len(EXERCISE.findall(m)) for m in markdown)}


def part_one_stats(path):
    "A Part I notebook's code lines, median and largest code cell (directive lines left out), figures and exercises."
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    sizes = [len(code_lines("".join(c["source"]))[1]) for c in nb["cells"] if c["cell_type"] == "code"]
    markdown = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    return {"code_lines": sum(sizes), "median_cell": statistics.median(sizes) if sizes else 0,
            "largest_cell": max(sizes, default=0), "figures": chapter_stats(path)["figures"],
            "exercises": sum(len(EXERCISE.findall(m)) for m in markdown)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the table to this JSON file")
    args = ap.parse_args()
    rows = {p.stem: chapter_stats(p) for p in sorted((ROOT / "nbs").glob("[0-9]*.ipynb"))}
    print(f"{'chapter':22} {'exported':>8} {'teaching':>8} {'longest':>7} {'figures':>7} {'opening':>7} {'exercises':>9}")
    for name, r in rows.items():
        print(f"{name:22} {r['exported']:8} {r['teaching']:8} {r['longest_exported_cell']:7} {r['figures']:7} "
              f"{'yes' if r['opening'] else 'no':>7} {r['exercises']:9}")
    one = {p.stem: part_one_stats(p) for p in sorted((ROOT / "nbs").glob("p[0-9]_*.ipynb"))}
    print(f"\n{'Part I':22} {'code':>8} {'median':>8} {'largest':>7} {'figures':>7} {'exercises':>9}")
    for name, r in one.items():
        print(f"{name:22} {r['code_lines']:8} {r['median_cell']:8} {r['largest_cell']:7} {r['figures']:7} {r['exercises']:9}")
    if args.json: Path(args.json).write_text(json.dumps({**rows, **one}, indent=1) + "\n")


if __name__ == "__main__":
    main()
