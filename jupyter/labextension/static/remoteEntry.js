// llmpt_nb: Chinese text in JupyterLab on a machine without a CJK font. JupyterLab loads this file as a prebuilt
// ("federated") extension and asks it for "./style": a font face for CJK code points (a subset of Noto Sans SC,
// SIL OFL 1.1, made by tools/jupyter_font.py), put into the UI, content and code font stacks. The browser fetches the
// font only when a page shows a character in its unicode-range. Written by hand: it needs no build step.
var _JUPYTERLAB;
(function () {
  var here = document.currentScript.src.replace(/[^/]*$/, "");
  var face = "'llmpt Noto Sans SC'";
  var css =
    "@font-face { font-family: " + face + "; src: url('" + here + "NotoSansSC-llmpt.woff') format('woff'); " +
    "unicode-range: U+2E80-2FDF, U+3000-303F, U+3100-312F, U+3190-31FF, U+3400-4DBF, U+4E00-9FFF, U+F900-FAFF, " +
    "U+FE30-FE4F, U+FF00-FFEF; font-display: swap; }\n" +
    "body {\n" +
    "  --jp-ui-font-family: system-ui, -apple-system, blinkmacsystemfont, 'Segoe UI', helvetica, arial, " + face +
    ", sans-serif, 'Apple Color Emoji', 'Segoe UI Emoji', 'Segoe UI Symbol';\n" +
    "  --jp-content-font-family: system-ui, -apple-system, blinkmacsystemfont, 'Segoe UI', helvetica, arial, " + face +
    ", sans-serif, 'Apple Color Emoji', 'Segoe UI Emoji', 'Segoe UI Symbol';\n" +
    "  --jp-code-font-family-default: menlo, consolas, 'DejaVu Sans Mono', " + face + ", monospace;\n" +
    "  --jp-code-font-family: var(--jp-code-font-family-default);\n" +
    "}\n";
  _JUPYTERLAB = _JUPYTERLAB || {};
  _JUPYTERLAB["llmpt-nb-cjk-font"] = {
    init: function () {},
    get: function (module) {
      return Promise.resolve(function () {
        if (module === "./style") {
          var style = document.createElement("style");
          style.id = "llmpt-nb-cjk-font";
          style.textContent = css;
          document.head.appendChild(style);
        }
        return {};
      });
    }
  };
})();
