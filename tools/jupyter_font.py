"""Make the font JupyterLab shows Chinese with (jupyter/labextension/static/NotoSansSC-llmpt.woff): Noto Sans SC, the
font the figures use (package pylopdf-fonts-zh-cn, SIL OFL 1.1), cut to GB2312 and every CJK character the chapters
contain, as WOFF. Run it again when a chapter gains a character outside GB2312:

    python tools/jupyter_font.py
"""
from pathlib import Path
from fontTools import subset
from fontTools.ttLib import TTFont
from llmpt_nb.figures import cjk_font_path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "jupyter" / "labextension" / "static" / "NotoSansSC-llmpt.woff"


def gb2312():
    "Every character of GB2312: its symbols (rows 0xA1-0xA9) and its 6,763 Chinese characters."
    pairs = (bytes([a, b]) for a in range(0xA1, 0xF8) for b in range(0xA1, 0xFF))
    return {c for p in pairs for c in [p.decode("gb2312", "ignore")] if c}


def main():
    chapters = "".join(f.read_text(encoding="utf-8") for f in sorted((ROOT / "nbs").glob("*.ipynb")))
    text = gb2312() | {c for c in chapters if ord(c) >= 0x2E80}
    options = subset.Options()
    options.flavor, options.layout_features = "woff", ["*"]
    font = TTFont(cjk_font_path())
    sub = subset.Subsetter(options)
    sub.populate(text="".join(sorted(text)))
    sub.subset(font)
    font.flavor = "woff"
    font.save(OUT)
    print(f"{OUT.relative_to(ROOT)}: {len(text):,} characters, {OUT.stat().st_size / 2**20:.1f} MB")


if __name__ == "__main__":
    main()
