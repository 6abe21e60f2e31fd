"""Pictures of the first page of every family's worksheet and key, for anyone to look at.

    python tools/preview.py OUT [--family attention.output ...] [--spec delta-rule]
                                [--dpi 80] [--form]

For each family (one problem with its defaults, one student) it writes
``OUT/<family>.worksheet.pdf`` and ``OUT/<family>.key.pdf`` and page 1 of each as
``OUT/<family>.worksheet.png`` and ``OUT/<family>.key.png`` (poppler's ``pdftoppm``); with
``--spec`` the same for a bundled spec or a spec file; with ``--form`` also a screenshot of
the answer form (``OUT/<name>.form.png``) where a headless chromium is installed. Typesetting
is judged by eye: these are the pages to look at before changing the stylesheet or a template.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from qkvquiz.families import REGISTRY
from qkvquiz.files import write_atomic
from qkvquiz.render.documents import key_student_document, worksheet_document
from qkvquiz.render.form import answer_form_html
from qkvquiz.spec import WorksheetSpec, load_spec
from qkvquiz.worksheet import build_worksheet

STUDENT = "s01"
SEED = "preview"
DPI_DEFAULT = 80
_CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def family_spec(family: str) -> WorksheetSpec:
    """A spec of one problem of ``family`` with its defaults."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{family}.yaml"
        write_atomic(path, f'title: "Preview: {family}"\ntolerance: 2 decimals\nitems:\n  - family: {family}\n')
        return load_spec(path)


def _first_page_png(pdf: Path, png: Path, dpi: int) -> None:
    stem = png.with_suffix("")
    subprocess.run(
        ["pdftoppm", "-f", "1", "-l", "1", "-r", str(dpi), "-png", "-singlefile", str(pdf), str(stem)],
        check=True,
    )


def _screenshot(page: Path, png: Path) -> bool:
    browser = next((b for b in map(shutil.which, _CHROMIUM) if b), None)
    if browser is None:
        return False
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
             "--hide-scrollbars", "--window-size=900,1400", f"--screenshot={png}", page.resolve().as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    return png.is_file()


def preview(spec: WorksheetSpec, name: str, out: Path, *, dpi: int = DPI_DEFAULT, form: bool = False) -> list[Path]:
    """Write page 1 of the worksheet and key of ``spec`` (one student) as PNGs; return them."""
    from .pdf import render_pdf

    ws = build_worksheet(spec, [STUDENT], SEED)
    written = []
    for kind, document in (("worksheet", worksheet_document(ws, 0)), ("key", key_student_document(ws, 0))):
        pdf = out / f"{name}.{kind}.pdf"
        render_pdf(document, pdf)
        png = out / f"{name}.{kind}.png"
        _first_page_png(pdf, png, dpi)
        written.append(png)
    if form:
        page = out / f"{name}.answer-form.html"
        write_atomic(page, answer_form_html(ws, 0))
        png = out / f"{name}.form.png"
        if _screenshot(page, png):
            written.append(png)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/preview.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the PDFs and PNGs")
    parser.add_argument("--family", action="append", default=[], help="only these families (repeatable)")
    parser.add_argument("--spec", action="append", default=[], help="also a bundled spec name or a spec file")
    parser.add_argument("--dpi", type=int, default=DPI_DEFAULT)
    parser.add_argument("--form", action="store_true", help="also screenshot the answer form (headless chromium)")
    args = parser.parse_args(argv)
    if shutil.which("pdftoppm") is None:
        print("pdftoppm is missing: install poppler-utils (Debian/Ubuntu: apt-get install poppler-utils)", file=sys.stderr)
        return 2
    from .pdf import PdfUnavailable, weasyprint_module

    try:
        weasyprint_module()
    except PdfUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    from ..core.resources import bank_dir

    args.out.mkdir(parents=True, exist_ok=True)
    unknown = [f for f in args.family if f not in REGISTRY]
    if unknown:
        print(f"unknown family {unknown[0]!r}; see `qkvquiz families`", file=sys.stderr)
        return 2
    families = args.family or ([] if args.spec else sorted(REGISTRY))
    jobs = [(family_spec(f), f) for f in families]
    for name in args.spec:
        path = Path(name) if Path(name).is_file() else bank_dir() / f"{name}.yaml"
        jobs.append((load_spec(path), path.stem))
    for spec, name in jobs:
        for png in preview(spec, name, args.out, dpi=args.dpi, form=args.form):
            print(png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
