"""A qkvquiz Markdown worksheet (and its submission.json) as a LaTeX `exam`-class sheet, for a
side-by-side reference. Usage: md2exam.py worksheet.md submission.json lang > sheet.tex

The sheets here were made from `qkvquiz generate SPEC -o OUT -n 1 --public -f md --lang en|zh`
(student s01, seed 0), then `pdflatex` (en) or `xelatex` (zh, with ctex) and `pdftoppm -r 40`."""

import json
import re
import sys

md_path, sub_path, lang = sys.argv[1:4]
md = open(md_path, encoding="utf-8").read()
shapes = {}


def shape_of(v):
    if not isinstance(v, list):
        return ()
    if v and isinstance(v[0], list):
        if v[0] and isinstance(v[0][0], list):
            return (len(v), len(v[0]), len(v[0][0]))
        return (len(v), len(v[0]))
    return (len(v),)


for k, v in json.load(open(sub_path, encoding="utf-8"))["answers"].items():
    shapes[k] = shape_of(v)

zh = lang == "zh"


def inline(text: str) -> str:
    """Markdown inline → LaTeX: math kept, code as \\texttt, bold, escapes."""
    out, pos = [], 0
    for m in re.finditer(r"\$\$.*?\$\$|\$[^$]+\$|`[^`]+`|\*\*[^*]+\*\*", text, re.S):
        out.append(esc(text[pos:m.start()]))
        tok = m.group(0)
        if tok.startswith("$"):
            out.append(tok.replace("−", "-"))
        elif tok.startswith("`"):
            out.append(r"\texttt{" + esc(tok[1:-1]) + "}")
        else:
            out.append(r"\textbf{" + inline(tok[2:-2]) + "}")
        pos = m.end()
    out.append(esc(text[pos:]))
    return "".join(out)


def esc(s: str) -> str:
    s = s.replace("\\", r"\textbackslash{}")
    for a, b in (("&", r"\&"), ("%", r"\%"), ("#", r"\#"), ("_", r"\_"), ("−∞", r"$-\infty$"),
                 ("−", "$-$"), ("∞", r"$\infty$"), ("×", r"$\times$"), ("σ", r"$\sigma$")):
        s = s.replace(a, b)
    return s


BOX = r"\framebox(53.9,25.5){}"


def grid(shape, label):
    lab = f"${label} = $" if label else ""
    if shape == ():
        return lab + BOX
    if len(shape) == 3:
        def own(i):
            if not label:
                return ""
            if "_" in label:
                return re.sub(r"_\{?\w+\}?", "_{%d}" % (i + 1), label, count=1)
            return f"{label}_{{{i + 1}}}"
        return r"\\[2pt]".join(grid(shape[1:], own(i)) for i in range(shape[0]))
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape
    body = r"\\[-1pt]".join("&".join([BOX] * cols) for _ in range(rows))
    return (lab + r"$\left[\begin{array}{@{\,}" + "@{\\hspace{1.5pt}}".join(["c"] * cols) + r"@{\,}}" + body
            + r"\end{array}\right]$")


def box_width_cm(shape):
    if shape == ():
        return 2.8
    cols = shape[-1] if len(shape) >= 2 else shape[0]
    return 1.95 * cols + 1.6


lines = md.splitlines()
out = []
i = 0
title = lines[0].lstrip("# ").strip()
in_parts = False
in_questions = False
while i < len(lines):
    line = lines[i]
    if line.startswith("# ") or line.startswith("**Name") or line.startswith("**姓名"):
        i += 1
        continue
    m = re.match(r"### (.*?)[:：]\s*(.*?)\s*[(（]([\d.]+)\s*(?:points?|分)[)）]\s*$", line)
    if m:
        if in_parts:
            out.append(r"\end{parts}")
            in_parts = False
        if not in_questions:
            out.append(r"\begin{questions}")
            in_questions = True
        out.append(r"\titledquestion{" + inline(m.group(2)) + "}")
        i += 1
        continue
    if line.startswith("$$"):
        block = [line]
        while not block[-1].rstrip().endswith("$$") or len(block[-1].strip()) == 2 and len(block) == 1:
            i += 1
            block.append(lines[i])
        out.append(r"\[" + " ".join(block).strip()[2:-2].replace("−", "-") + r"\]")
        i += 1
        continue
    pm = re.match(r"- \*\*\(([a-z])\)\*\* (.*)", line)
    if pm:
        text = pm.group(2)
        answer = lines[i + 1].strip() if i + 1 < len(lines) else ""
        i += 2
        while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
            answer += " " + lines[i].strip()
            i += 1
        pid = re.search(r"`([^`]+)`", answer).group(1)
        pts = re.search(r"([\d.]+)\s*(?:pt|分)", answer).group(1)
        shape = shapes.get(pid, ())
        label = re.search(r"\$\s*((?:\\[a-zA-Z]+\s*)?[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?(?:\^\{?\\top\}?)?)\s*=", text)
        label = re.sub(r"_\{?ij\}?$", "", label.group(1)) if label else ""
        if not in_parts:
            out.append(r"\begin{parts}")
            in_parts = True
        w = box_width_cm(shape)
        g = grid(shape, label)
        if w > 9 or (len(shape) == 3):
            out.append(rf"\part[{pts}] {inline(text)}\par\nopagebreak\hfill\begin{{minipage}}{{{min(w, 16):.1f}cm}}\raggedleft {g}\end{{minipage}}")
        else:
            out.append(rf"\part[{pts}] \begin{{minipage}}[t]{{\dimexpr\linewidth-{w:.2f}cm-0.5em}}\raggedright {inline(text)}\end{{minipage}}\hfill"
                       rf"\begin{{minipage}}[t]{{{w:.2f}cm}}\vspace{{-0.6\baselineskip}}\raggedleft {g}\end{{minipage}}")
        out.append(r"\vspace{4pt}")
        continue
    if line.startswith("- "):
        items = []
        while i < len(lines) and lines[i].startswith("- ") and not re.match(r"- \*\*\(", lines[i]):
            items.append(lines[i][2:])
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                items[-1] += " " + lines[i].strip()
                i += 1
        out.append(r"\begin{itemize}" + "".join(r"\item " + inline(t) for t in items) + r"\end{itemize}")
        continue
    if line.strip():
        para = [line]
        i += 1
        while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "- ", "$$")):
            para.append(lines[i])
            i += 1
        text = " ".join(para)
        if "submission.json" in text or "Rounding as you go" in text or "边算边" in text or "提交" in text and not in_questions:
            continue
        out.append(inline(text) + "\n")
        continue
    i += 1
if in_parts:
    out.append(r"\end{parts}")
out.append(r"\end{questions}")

head = r"""\documentclass[11pt,a4paper]{exam}
% A LaTeX `exam` setting of one qkvquiz worksheet (the same problems, the same numbers), made as
% the reference the printed page is judged against (docs/internals.md#the-printed-page).
""" + (r"""\usepackage{ctex}
\setCJKmainfont{Noto Serif CJK SC}
\pointname{ 分}
\cfoot{第 \thepage\ 页}
\renewcommand{\questionlabel}{第 \thequestion\ 题}
""" if zh else r"\usepackage[T1]{fontenc}" + "\n") + r"""\usepackage{amsmath,amssymb}
\usepackage[margin=16mm,top=14mm,bottom=18mm]{geometry}
\pointsinrightmargin
\bracketedpoints
\qformat{\textbf{""" + (r"第 \thequestion\ 题：" if zh else r"Problem \thequestion: ") + r"""\thequestiontitle}\hfill}
\setlength{\parindent}{0pt}
\allowdisplaybreaks
\begin{document}
\noindent{\Large\bfseries """ + inline(title) + r"""}\par\vspace{4pt}
\noindent """ + (r"姓名：\underline{\hspace{5cm}}" if zh else r"Name: \underline{\hspace{5cm}}") + r"""\par\vspace{8pt}
"""
print(head + "\n".join(out) + "\n\\end{document}")
