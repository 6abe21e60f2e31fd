"""The ``qkvquiz`` command line: a thin shell over the library (see ``qkvquiz/__init__.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .engine.backend import BACKENDS, BackendUnavailable, get_xp
from .families import REGISTRY, get_family
from .grade.tolerance import TOLERANCE_DEFAULT
from .resources import bank_dir, schemas_dir
from .spec import SpecError, load_spec

app = typer.Typer(
    help=(
        "Write, render and grade exercises on transformer attention math.\n\n"
        "Typical term: `qkvquiz generate SPEC --students 30 --out week3` writes one worksheet and a "
        "blank submission.json per student plus key.json/key.md for you; students fill in their "
        "submission.json; `qkvquiz grade week3/key.json week3/students --out week3/grades` scores them."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)

TOLERANCE_HELP = (
    f"Default tolerance (when a spec sets none): {TOLERANCE_DEFAULT.to_json()['value']} decimals, i.e. an entry "
    f"passes when it is {TOLERANCE_DEFAULT.describe()}. Masked entries (−∞, 0) must match exactly or "
    "within an absolute floor."
)


def _fail(message: str, code: int = 2) -> None:
    # Escaped: messages quote user text and commands such as pip install 'qkvquiz[gpu]',
    # whose brackets Rich would otherwise take for markup and drop.
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True,
    )


def resolve_spec(spec: str) -> Path:
    """A spec path, or the name of a bundled spec (``attention-basics``)."""
    path = Path(spec)
    if path.exists():
        return path
    bundled = bank_dir() / (spec if spec.endswith((".yaml", ".yml")) else f"{spec}.yaml")
    if bundled.exists():
        return bundled
    names = ", ".join(sorted(p.stem for p in bank_dir().glob("*.yaml")))
    _fail(f"no spec file {spec!r}, and no bundled spec of that name (bundled: {names})")
    raise AssertionError  # unreachable


def _xp(backend: str):
    try:
        return get_xp(backend)
    except BackendUnavailable as exc:
        _fail(str(exc))


BackendOpt = Annotated[str, typer.Option(
    help=f"Array backend that computes: {' | '.join(BACKENDS)} (cupy needs a CUDA GPU and "
    "pip install 'qkvquiz[gpu]'). Results are identical on either.")]


@app.command()
def generate(
    spec: Annotated[str, typer.Argument(help="Worksheet spec (YAML file), or a bundled spec name such as attention-basics.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into (created if needed).")],
    students: Annotated[Optional[int], typer.Option("--students", "-n", min=1, help="Number of students: ids s01, s02, …")] = None,
    roster: Annotated[Optional[Path], typer.Option(help="Roster file: one student id per line, or a CSV with a 'student' or 'id' column.")] = None,
    seed: Annotated[str, typer.Option(help="Seed: the same spec, student and seed always give the same variant.")] = "0",
    force: Annotated[bool, typer.Option(help="Overwrite an existing key.json in OUT.")] = False,
    backend: BackendOpt = "numpy",
    formats: Annotated[str, typer.Option(
        "--format", "-f",
        help="Students' files, comma-separated: md (worksheet.md), html (worksheet.html and "
             "answer-form.html, a page that saves the submission file), pdf (where installed).",
    )] = "md",
) -> None:
    """Generate a personalised worksheet set: per student a worksheet (`--format`) and a blank
    `submission.json`; for you `key.json` (what `grade` reads) and `key.md` (answers with worked steps).

    Each student's variant depends only on the spec, their id and the seed, so adding or removing
    students never changes anyone else's problems.
    """
    from .files import read_roster
    from .generate import generate_set, parse_formats
    from .worksheet import GenerationError

    if (students is None) == (roster is None):
        _fail("give exactly one of --students N or --roster FILE")
    try:
        chosen = parse_formats(formats)
    except ValueError as exc:
        _fail(f"--format: {exc}")
    if roster is not None:
        try:
            ids = read_roster(roster)
        except (OSError, ValueError) as exc:
            _fail(str(exc))
    else:
        width = max(2, len(str(students)))
        ids = [f"s{i:0{width}d}" for i in range(1, students + 1)]
    xp = _xp(backend)
    try:
        parsed = load_spec(resolve_spec(spec))
        with _progress() as bar:
            task = bar.add_task("writing worksheets", total=len(ids))
            result = generate_set(parsed, ids, out, seed=seed, force=force, xp=xp,
                                  progress=lambda: bar.advance(task), formats=chosen)
    except (SpecError, GenerationError, FileExistsError, ValueError) as exc:
        _fail(str(exc))
    console.print(
        f"Wrote {len(ids)} worksheets of [bold]{parsed.title}[/] ({len(parsed.items)} problems, "
        f"{parsed.points:g} points; {', '.join(chosen)}) to {out}/students/, and the key to {result.key_path}.",
        highlight=False,
    )
    console.print(f"Seed {seed!r}: anyone with the spec and this seed can rebuild the key; keep it private.")


def _submission_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*.json") if f.name not in ("key.json", "results.json")))
        else:
            files.append(p)
    return files


@app.command(epilog=TOLERANCE_HELP)
def grade(
    key: Annotated[Path, typer.Argument(help="The key.json written by `generate`.")],
    submissions: Annotated[list[Path], typer.Argument(help="Submission files, or folders searched for *.json.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the results, item analysis and feedback.")],
    feedback: Annotated[bool, typer.Option(help="Write feedback/STUDENT.md, one Markdown file per student.")] = True,
    backend: BackendOpt = "numpy",
) -> None:
    """Grade students' submission files against a key.

    Writes `results.csv` (one row per student: each part's score and the total), `results.json`
    (every entry: expected, given, verdict, diagnosis), `item-analysis.md`/`.csv` (per part: mean
    score, share correct, the most common mistakes) and `feedback/<student>.md` (one Markdown file
    per student, readable on its own). A file that cannot be read is reported by name and the rest
    are still graded. Tolerance and credit come from the spec (stored in the key).
    """
    from .grade.grader import grade_files
    from .grade.report import write_reports
    from .key import KeyFileError, load_key

    xp = _xp(backend)
    try:
        loaded = load_key(key)
    except KeyFileError as exc:
        _fail(str(exc))
    files = _submission_files(submissions)
    if not files:
        _fail("no submission files found")
    with _progress() as bar:
        task = bar.add_task("grading", total=len(files))
        report = grade_files(loaded, files, progress=lambda: bar.advance(task), xp=xp)
        writing = bar.add_task("writing feedback", total=len(report.results) if feedback else 0)
        paths = write_reports(report, out, feedback=feedback, progress=lambda: bar.advance(writing))
    if feedback:
        paths.append(out / "feedback")

    table = Table(title=f"{loaded.title}: {len(report.results)} graded")
    for col in ("student", "score", "of", "format errors"):
        table.add_column(col)
    for r in sorted(report.results, key=lambda r: r.student):
        fmt = sum(p.verdict in ("format", "missing") for p in r.parts)
        table.add_row(r.student, f"{r.score:.2f}", f"{r.total:g}", str(fmt or ""))
    console.print(table)
    for problem in report.problems:
        err.print(f"[yellow]not graded:[/] {problem.source}: {problem.message}", highlight=False)
    console.print(f"Wrote {', '.join(str(p) for p in paths)}", highlight=False)
    if report.problems:
        raise typer.Exit(1)


@app.command()
def audit(
    file: Annotated[Path, typer.Argument(help="A spec whose items fix every given and add `claimed: {step: answer}`.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Also write the audit as Markdown to this file.")] = None,
) -> None:
    """Check a hand-written key: say which claimed answers are wrong, with the right values and,
    where a known mistake or a wrong earlier claim explains one, which.

    Exits with status 1 when a claimed answer is wrong or cannot be read, 2 when the file cannot be used.
    """
    from rich.markdown import Markdown

    from .files import write_atomic
    from .grade.audit import audit_file, audit_markdown

    try:
        report = audit_file(file)
    except SpecError as exc:
        _fail(str(exc))
    text = audit_markdown(report)
    if out is not None:
        write_atomic(out, text)
    console.print(Markdown(text))
    if report.wrong:
        raise typer.Exit(1)


@app.command()
def families() -> None:
    """List every family (topic) with one line each; `qkvquiz show FAMILY` shows a sample."""
    table = Table(show_header=True)
    table.add_column("family")
    table.add_column("what the student computes")
    for name in sorted(REGISTRY):
        table.add_row(name, REGISTRY[name].summary)
    console.print(table)


@app.command()
def specs() -> None:
    """List the bundled worksheet specs (usable by name in `generate`)."""
    for path in sorted(bank_dir().glob("*.yaml")):
        console.print(f"{path.stem:24} {load_spec(path).title}", highlight=False)


@app.command()
def show(
    family: Annotated[str, typer.Argument(help="Family name, e.g. attention.output (see `qkvquiz families`).")],
    seed: Annotated[str, typer.Option(help="Seed of the sample.")] = "0",
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="Override a param: NAME=VALUE (YAML value), repeatable.")] = None,
) -> None:
    """Print one sample problem of a family with its worked solution."""
    import yaml

    from .render.markdown import render_items
    from .spec import parse_spec
    from .worksheet import GenerationError, build_worksheet

    try:
        fam = get_family(family)
    except KeyError as exc:
        _fail(exc.args[0])
    params = {}
    for text in param or []:
        name, sep, value = text.partition("=")
        if not sep:
            _fail(f"--param {text!r}: write NAME=VALUE")
        params[name.strip()] = yaml.safe_load(value)
    try:
        ws = build_worksheet(parse_spec({"title": fam.title, "items": [{"family": fam.name, "params": params}]},
                                        source="--param"), ["sample"], seed)
    except (SpecError, GenerationError) as exc:
        _fail(str(exc))
    # Raw Markdown: a terminal Markdown renderer would eat the LaTeX's backslashes.
    for kind in ("problem", "solution"):
        console.print(render_items(ws, 0, kind)[0], markup=False, highlight=False, soft_wrap=True)
    console.print("Params: " + ", ".join(f"{k}={v!r}" for k, v in ws.spec.items[0].params.items()), highlight=False)


@app.command()
def schema(which: Annotated[str, typer.Argument(help="key | submission")]) -> None:
    """Print the JSON Schema of the key file or of a submission file."""
    if which not in ("key", "submission"):
        _fail("choose key or submission")
    print(json.dumps(json.loads((schemas_dir() / f"{which}.schema.json").read_text()), indent=2))


def main() -> None:  # pragma: no cover - console script entry
    app()


_ = np  # numpy is imported for backends that need it loaded before typer parses
