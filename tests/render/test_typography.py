"""Every character printed is in the face it is set in, and no LaTeX is left in prose.

Run over one problem of every family (``problem_bank/all-families.yaml``) and over every
bundled spec: the worksheet, the key and the answer form of one student. The HTML check
reads the stylesheet's faces from the markup and needs no system library; the PDF check
asks WeasyPrint which face each laid-out text box is set in, and where poppler is installed
``pdffonts`` confirms that only the shipped faces are embedded.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.spec import parse_spec
from qkvquiz.render.documents import key_student_document, worksheet_document
from qkvquiz.render.fonts import (
    FACES,
    SERIF,
    TextRun,
    cjk_warning,
    coverage,
    face_for,
    fonts_dir,
    html_text_runs,
    latex_leaks,
    missing_glyphs,
)
from qkvquiz.render.form import answer_form_html
from qkvquiz.render.pdf import pdf_available
from qkvquiz.core.resources import bank_dir

SPECS = sorted(p.name for p in bank_dir().glob("*.yaml"))


def _documents(spec_name: str) -> dict[str, str]:
    spec = load_spec(bank_dir() / spec_name)
    ws = build_worksheet(spec, ["ada"], seed="glyphs")
    return {
        "worksheet": worksheet_document(ws, 0),
        "key": key_student_document(ws, 0),
        "form": answer_form_html(ws, 0),
    }


@pytest.fixture(scope="module")
def every_family() -> dict[str, str]:
    return _documents("all-families.yaml")


def _report(found: dict[tuple[str, str], str]) -> str:
    return "\n".join(f"{face}: {ch!r} (U+{ord(ch):04X}) in {where}" for (face, ch), where in sorted(found.items()))


def test_shipped_fonts_and_licence() -> None:
    for face in FACES:
        assert (fonts_dir() / face.file).is_file(), face.file
    assert (fonts_dir() / "LICENSE-DejaVu.txt").read_text(encoding="utf-8").count("Bitstream")


@pytest.mark.slow
@pytest.mark.parametrize("spec_name", SPECS)
def test_every_character_in_its_face_and_no_latex_in_prose(spec_name: str) -> None:
    for kind, document in _documents(spec_name).items():
        runs, _code = html_text_runs(document, f"{spec_name} {kind}")
        assert runs, kind
        missing = missing_glyphs(runs)
        assert not missing, _report(missing)
        leaks = latex_leaks(runs)
        assert not leaks, "\n".join(leaks)


def test_the_check_finds_what_it_should() -> None:
    bold_serif = face_for([SERIF], True, False)
    assert bold_serif is not None
    # DejaVu Serif Bold draws U+1D40 (ᵀ) as a superscript S; a bar over β floats free.
    found = missing_glyphs([TextRun("Through S⁺ = S + XᵀK", bold_serif, "h")])
    assert ("DejaVuSerif-Bold.ttf", "\u1d40") in found
    assert missing_glyphs([TextRun("Compute β\u0304", face_for([SERIF], False, False), "p")])
    assert not missing_glyphs([TextRun("Compute X\u0304 and σ\u0302", face_for([SERIF], False, False), "p")])
    assert missing_glyphs([TextRun("汉字", face_for([SERIF], False, False), "p")])
    assert latex_leaks([TextRun("Compute B̄_K", None, "p")])
    assert latex_leaks([TextRun(r"the \frac{a}{b}", None, "p")])
    assert not latex_leaks([TextRun("Compute B̄ and −∞ at 5 %", None, "p")])
    assert "\u2212" in coverage(bold_serif)


@pytest.mark.slow
def test_code_and_part_ids_may_hold_underscores(every_family: dict[str, str]) -> None:
    # The key names each part by its id (attention-qk_swap.weights and the like); the printed
    # worksheet no longer does: its parts are their letters, its captions say where a grid is.
    runs, code = html_text_runs(every_family["key"])
    ids = {r.text for r in code if "_" in r.text and " " not in r.text}
    # In prose such an underscore is LaTeX left over (B̄_K); in code it is the id's own.
    assert latex_leaks([r for r in code if r.text in ids])
    assert not latex_leaks(runs)
    runs, code = html_text_runs(every_family["worksheet"])
    printed = "".join(r.text for r in runs + code)
    assert not [part_id for part_id in ids if part_id in printed]


def test_cjk_text_without_a_cjk_font_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    from qkvquiz.render import fonts

    monkeypatch.setattr(fonts, "cjk_font_available", lambda: False)
    assert cjk_warning(["Attention", "注意力"]) is not None
    assert "fonts-noto-cjk" in (cjk_warning(["注意力"]) or "")
    assert cjk_warning(["Attention: √dₖ, −∞"]) is None
    monkeypatch.setattr(fonts, "cjk_font_available", lambda: True)
    assert cjk_warning(["注意力"]) is None


pdf_only = pytest.mark.skipif(not pdf_available(), reason="WeasyPrint's system libraries (Pango) are not installed")


@pytest.mark.slow
@pdf_only
@pytest.mark.skipif(shutil.which("pdffonts") is None, reason="poppler-utils (pdffonts) is not installed")
def test_pdf_embeds_only_the_shipped_faces(every_family: dict[str, str], tmp_path: Path) -> None:
    from qkvquiz.render.pdf import render_pdf

    target = tmp_path / "key.pdf"
    render_pdf([every_family["worksheet"], every_family["key"]], target)
    listing = subprocess.run(["pdffonts", str(target)], capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in listing.splitlines()[2:] if line.strip()]
    assert names
    assert all(name.split("+")[-1].startswith("qkvquiz-") for name in names), names


# --------------------------------------------------------------------------- numbers and labels


def test_key_numbers_are_formatted_one_way() -> None:
    from qkvquiz.render.latex import bmatrix, label_symbol, num

    assert [num(x, 2) for x in (2.5, 1.0, 0.26894, -0.001, -0.0, 1 / 3)] == ["2.5", "1", "0.27", "0", "0", "0.33"]
    # A matrix: every entry the decimals the matrix needs (aligned), never "-0"; an exact integer
    # as the worked steps write it (−2, not −2.0), a rounded entry with its decimals (0.00).
    assert bmatrix([[1, -2], [1.5, -0.0]], 2) == r"\begin{bmatrix} 1 & -2 \\ 1.5 & 0 \end{bmatrix}"
    assert bmatrix([[1, -2], [1.5, -0.001]], 2) == r"\begin{bmatrix} 1 & -2 \\ 1.50 & 0.00 \end{bmatrix}"
    assert bmatrix([[[0.5, -2]], [[1, 3]]], 2) == r"\begin{bmatrix} 0.5 & -2 \end{bmatrix},\ \begin{bmatrix} 1 & 3 \end{bmatrix}"
    assert label_symbol("S", 0) == "s" and label_symbol("Z", 1) == "z" and label_symbol("S", 2) == "S"
    assert label_symbol(r"\nabla X", 1) == r"\nabla x"
    assert label_symbol(r"N_{\text{dot}}", 0) == r"N_{\text{dot}}"


def test_key_prints_the_asked_decimals_and_no_minus_zero() -> None:
    from qkvquiz.render.markdown import key_markdown

    spec = load_spec(bank_dir() / "attention-basics.yaml")  # tolerance: 2 decimals
    md = key_markdown(build_worksheet(spec, ["ada", "bob", "cy"], seed="numbers"))
    assert "- 0}" not in md and "- 0 " not in md
    import re

    # Never 3 decimals where 2 are asked, but for a weighted sum's coefficients, which take the
    # digit that makes the printed terms add up to the printed row (worked.output_rows).
    coefficients = re.compile(r"\(?-?\d+\.\d+\)?\s*(?:\\,)?\s*(?=\\begin\{bmatrix\})")
    assert not re.search(r"\d\.\d{3}", coefficients.sub("", md))


def test_scalar_boxes_are_labelled_as_the_prompt_names_them() -> None:
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    ws = build_worksheet(spec, ["ada"], seed="labels")
    sheet = worksheet_document(ws, 0)
    first = sheet[sheet.index('data-part="q1.scores"') :][:600]
    assert "<i>s</i>" in first and "<i>S</i>" not in first
    form = answer_form_html(ws, 0)
    block = form[form.index('data-part="q1.scores"') :][:3000]
    assert "<i>s</i>" in block or ">s<" in block or "s =" in block


def test_a_capital_that_a_lower_case_letter_would_confuse_keeps_its_case() -> None:
    """The count of weights N was labelled "n =" beside n tokens: a scalar's capital is written
    in lower case only where that letter names nothing else of the problem."""
    from qkvquiz.render.answer_areas import problem_areas

    ws = build_worksheet(parse_spec({"title": "t", "items": [{"family": "theory.shapes", "ask": ["params"]}]}), ["a"], "n")
    ((_part, area),) = problem_areas(ws, 0)[0]
    assert "<i>N</i>" in area and "<i>n</i>" not in area, area


# --------------------------------------------------------------------------- layout


def test_work_space_per_part_or_problem_and_the_roster_name(tmp_path: Path) -> None:
    from qkvquiz.spec import parse_work_space

    spec = load_spec(bank_dir() / "attention-basics.yaml")
    ws = build_worksheet(spec, ["ada"], seed="space")
    per_part = worksheet_document(ws, 0, work_space=parse_work_space("3 lines"), name="Ada Lovelace")
    parts = sum(len(item.parts) for item in spec.items)
    assert per_part.count('class="work-space ruled"') == parts
    assert "Ada Lovelace" in per_part
    per_problem = worksheet_document(ws, 0, work_space=parse_work_space({"problem": "6cm"}))
    assert per_problem.count('class="work-space"') == len(spec.items)
    assert '<div class="work-space' not in worksheet_document(ws, 0)
    with pytest.raises(ValueError):
        parse_work_space("4 parsecs")


def test_work_space_in_a_spec_item(tmp_path: Path) -> None:
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "title: T\nitems:\n  - family: attention.scores\n    work_space: 4cm\n"
        "  - family: attention.weights\n", encoding="utf-8"
    )
    spec = load_spec(spec_file)
    assert spec.items[0].work_space is not None and spec.items[1].work_space is None
    ws = build_worksheet(spec, ["ada"], seed="space")
    assert worksheet_document(ws, 0).count('style="height:4.00cm"') == len(spec.items[0].parts)
    spec_file.write_text("title: T\nitems:\n  - family: attention.scores\n    work_space: lots\n", encoding="utf-8")
    from qkvquiz.spec import SpecError

    with pytest.raises(SpecError, match="work_space"):
        load_spec(spec_file)


def test_roster_names_reach_the_header_and_key_html_is_private(tmp_path: Path) -> None:
    from qkvquiz.files import read_roster
    from qkvquiz.generate import generate_set
    from qkvquiz.roster import read_roster_entries

    roster = tmp_path / "roster.csv"
    roster.write_text("student,name\nada,Ada Lovelace\nalan,\n", encoding="utf-8")
    read = read_roster_entries(roster)
    assert read.students == read_roster(roster) == ["ada", "alan"]
    assert read.names == {"ada": "Ada Lovelace"}
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    made = generate_set(spec, read.students, tmp_path / "out", formats="html", names=read.names)
    assert "Ada Lovelace" in (made.folders["ada"] / "worksheet.html").read_text(encoding="utf-8")
    key_html = made.out / "key.html"
    text = key_html.read_text(encoding="utf-8")
    assert 'id="student-1"' in text and 'id="student-2"' in text and "Answer key" in text
    assert key_html.stat().st_mode & 0o077 == 0  # as private as key.md
    assert not any(p.name == "key.html" for p in (made.out / "students").rglob("*"))


@pytest.mark.slow
@pdf_only
def test_attention_basics_for_one_student_fits_on_three_pages(tmp_path: Path) -> None:
    """Five problems on three pages: each problem is kept whole on its page (two pages held
    them only by cutting problem 4 between its givens and its parts)."""
    from qkvquiz.render.pdf import layout

    spec = load_spec(bank_dir() / "attention-basics.yaml")
    for seed in ("a", "b", "c"):
        ws = build_worksheet(spec, ["ada"], seed=seed)
        assert len(layout(worksheet_document(ws, 0)).pages) <= 3, seed


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_negative_numbers_in_the_key_are_set_as_math(lang: str) -> None:
    """A negative number in the worked steps is math (a minus sign, −0.5), never prose with
    a hyphen (-0.5): the softmax rows named their row maximum outside the formula."""
    import dataclasses
    import re

    from qkvquiz.render.markdown import key_markdown

    spec = dataclasses.replace(load_spec(bank_dir() / "all-families.yaml"), lang=lang)
    md = key_markdown(build_worksheet(spec, [f"s{i}" for i in range(6)], seed="minus"))
    prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`", " ", md, flags=re.DOTALL)
    assert "row maximum" in md or "行最大值" in md  # the softmax rows are there to check
    hyphenated = re.findall(r".{0,40}(?<![\w-])-\d.{0,10}", prose)
    assert not hyphenated, hyphenated[:5]
