"""The main job: a worksheet set for a class, written to a folder.

Layout of the output folder::

    key.json                      every student's givens, steps and answers (instructor only)
    key.md                        the answer key with worked solutions (instructor only)
    key.html                      the same, typeset for a browser (format html; instructor only)
    students/<name>/worksheet.md  the student's worksheet (format md, the default)
    students/<name>/worksheet.html     the same, typeset, one self-contained page (format html)
    students/<name>/answer-form.html   a page to type answers into; saves submission JSON (format html)
    students/<name>/worksheet.pdf      the worksheet printed, with answer cells made to be scanned (format pdf)
    cellmap.json                  where every cell of every printed page lies (format pdf; instructor only)
    key.pdf                       the key typeset, one student per page (format pdf)
    class.pdf                     every worksheet in one file for printing (format pdf, on request)
    students/<name>/submission.json  a blank submission to fill in
    keys/<name>.pdf               each student's key (format pdf)

The formats name the students' files; ``key.json`` and ``key.md`` are always written. These
entries are the *set* ``generate`` owns (:data:`OWNED`): it is written as one unit by
:mod:`qkvquiz.core.outputs` (staged, then switched into place), so the folder holds exactly the
previous set or exactly the new one; anything else in the folder is left alone.

Why one module of about 600 lines: it is the job's one orchestration (its options checked, solve, key, students'
files in a pool beside the key's Markdown, PDFs, the switch into place), and what it hands
down is done elsewhere (:mod:`qkvquiz.worksheet`, :mod:`qkvquiz.render`, :mod:`qkvquiz.core`).
"""

from __future__ import annotations

import contextvars
import functools
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import qkvquiz.capacity as capacity

from .capacity import class_size_problem
from .core.collector import settle_worker
from .core.i18n import ENGLISH_NAMES, UnknownLanguage, check_lang, using
from .core.i18n import chosen as language_chosen
from .core.options import OptionError, SetExists
from .core.outputs import OutputSet, owned_present, write_set
from .core.pool import Pool, cores, fork_context
from .engine.backend import BackendUnavailable, placed
from .files import safe_name
from .json_rows import Dumped, dumped, dumps
from .key import key_text
from .render.documents import key_cover_document, key_html_document, key_student_document, worksheet_document
from .render.fonts import cjk_font_problem
from .render.form import answer_form_html
from .render.markdown import (
    key_markdown,
    key_markdown_pieces,
    render_student,
    worksheet_markdown,
)
from .render.page import page_size_css
from .render.pdf import PdfRenderError, PdfUnavailable, weasyprint_module
from .render.pdf_batch import Deferred, render_pdfs
from .render.printed import PrintedLayoutError, part_combs, printed_cellmap
from .scan.cellmap import cellmap_json
from .spec import WorksheetSpec, parse_work_space
from .spec_types import WorkSpace
from .worksheet import Worksheet, build_worksheet, screening_seconds

FORMATS = ("md", "html", "pdf")
FORMATS_DEFAULT = ("md",)
#: Page size of the HTML and PDF documents (``"A4"`` or ``"Letter"``).
PAGE_SIZE_DEFAULT = "A4"

#: The top-level entries ``generate`` owns in its folder, and whether each is private (holds
#: answers: 0600 files, 0700 folders). A new set replaces all of them, so a key.pdf or a
#: student's folder from an earlier run never sits beside a key that does not match it.
OWNED: dict[str, bool] = {
    "key.json": True, "key.md": True, "key.html": True, "key.pdf": True, "keys": True, "cellmap.json": True,
    "class.pdf": False, "students": False,
}


def parse_formats(formats: str | Sequence[str]) -> tuple[str, ...]:
    """``"md,html"`` (or a list of names) → ``("md", "html")``: known names, in order, once each.

    Raises ValueError naming what is wrong: an unknown format, or none at all. (Whether PDFs
    can be printed here, WeasyPrint and its system libraries, :func:`generate_set` checks.)
    """
    names = formats.split(",") if isinstance(formats, str) else list(formats)
    chosen: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in FORMATS:
            raise OptionError("{formats}: unknown format {name}; choose from {known} (comma-separated)",
                              name=repr(raw.strip()), known=", ".join(FORMATS))
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise OptionError("{formats}: no format given; choose from {known} (comma-separated)", known=", ".join(FORMATS))
    return tuple(chosen)


@dataclass(frozen=True)
class GeneratedSet:
    worksheet: Worksheet
    out: Path
    folders: dict[str, Path]  # student id -> their folder
    formats: tuple[str, ...] = FORMATS_DEFAULT

    @property
    def key_path(self) -> Path:
        return self.out / "key.json"


def blank_submission(ws: Worksheet, student: int) -> dict:
    """The submission a student fills in: every asked part, entries null; the set and variant name it."""
    answers = {}
    for item, env in zip(ws.spec.items, ws.envs):
        for part in item.parts:
            shape = env[part.step].shape[1:]
            answers[part.id] = np.full(shape, None, dtype=object).tolist() if shape else None
    return {"student": ws.students[student], "variant": ws.codes[student], "set": ws.set_id, "answers": answers}


def generate_set(
    spec: WorksheetSpec,
    students: Sequence[str],
    out: str | Path,
    *,
    seed: str | int = 0,
    secret: bytes | Callable[[], bytes | None] | None = None,
    force: bool = False,
    xp: Any = np,
    progress: Callable[[], None] | None = None,
    formats: str | Sequence[str] = FORMATS_DEFAULT,
    templates: str | Path | None = None,
    page_size: str = PAGE_SIZE_DEFAULT,
    class_pdf: bool = False,
    pdf_progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    names: Mapping[str, str] | None = None,
    work_space: str | WorkSpace | None = None,
    lang: str | None = None,
    notes: Callable[[str], None] | None = None,
    allow_missing_fonts: bool = False,
) -> GeneratedSet:
    """Solve every student's variant (batched) and write worksheets, blank submissions and keys.

    ``formats`` (see :func:`parse_formats`) picks the students' files: ``md`` a Markdown
    worksheet, ``html`` a typeset ``worksheet.html`` (with answer boxes) and the
    ``answer-form.html`` that saves a submission, ``pdf`` a ``worksheet.pdf`` per student and
    ``key.pdf`` (one student per page); with ``class_pdf`` also ``class.pdf``, every worksheet
    in one file for printing. ``page_size`` (``"A4"`` or ``"Letter"``) sizes the HTML and PDF
    pages. PDFs render in a pool of ``workers`` processes (default: every core), and so do the
    students' other files for a class of :data:`POOL_MIN_STUDENTS` or more with the bundled
    templates (the same bytes as in one process); ``pdf_progress`` is called with ``(done,
    total)`` students whose PDFs are written, as they render.
    ``names`` maps student ids to names printed on their worksheets' headers (a roster's
    ``name`` column); ``work_space`` (``"4cm"``, ``"6 lines"``, see
    :func:`~qkvquiz.spec.parse_work_space`) is room to work under each part on the printed
    worksheets, for items that set no ``work_space`` of their own. With ``html``, the key is
    also written as ``key.html``.
    ``secret`` keys every variant with HMAC-SHA256 (see :mod:`qkvquiz.core.secret`); ``templates``
    is a folder of templates that replace bundled ones of the same name (rendered sandboxed).
    The files are written as one set (:mod:`qkvquiz.core.outputs`): staged beside the target and
    switched into place at the end, so a run that stops early (an error, Ctrl-C, SIGTERM,
    SIGKILL) leaves the previous set exactly as it was. Without ``force`` an existing set
    (any entry of :data:`OWNED`) is refused with FileExistsError; a second run into the same
    folder at the same time with :class:`qkvquiz.core.outputs.SetBusy`; a folder that cannot be
    written with :class:`qkvquiz.core.outputs.OutputError` naming the path.
    ``lang`` (``"en"``, ``"zh"``; default: the one chosen around the call, else the spec's ``lang:``)
    is the language of every built-in word and of the spec's own text where written in it
    (``title: {en: …, zh: …}``); it is recorded in the key, so that grading answers in it.
    ``xp`` is the array module (or its name, ``"numpy"`` or ``"cupy"``): a GPU is used only for
    work large enough to gain from it (:func:`qkvquiz.engine.backend.place`), else the CPU, said
    in a note. ``notes`` is told what is worth knowing before the work (the CPU kept it, a large
    class's memory, spec text not written in the set's language), in English; by default each
    note is a :class:`GenerationNote` warning.
    Every option is checked here, before anything is written: a value that cannot be used raises
    :class:`qkvquiz.core.options.OptionError` naming it (PDF output where WeasyPrint or its
    libraries are missing, with the packages to install; PDFs whose text needs a CJK font no
    installed font has, unless ``allow_missing_fonts``: then it is a note).
    ``secret`` may be a function that gives it: called once every option is good (a command
    line's first run creates the instructor's secret only then).
    """
    out = Path(out)
    note = notes if notes is not None else _warn_note
    spec, formats, space = _checked_options(spec, len(students), seed, formats, page_size, class_pdf, work_space,
                                            templates, lang, note)
    names = dict(names or {})
    if "pdf" in formats:
        _check_fonts(spec, names, note, allow_missing_fonts)
    xp = _placed(xp, spec, len(students), note)
    if callable(secret):
        secret = secret()
    with using(spec.lang), write_set(out, OWNED, anchor="key.json") as files:
        # Checked under the folder's lock, after any interrupted run was completed.
        present = owned_present(out, OWNED)
        if present and not force:
            raise SetExists("{out} already holds {present}; choose another folder or use {force} to replace that set",
                            out=str(out), present=", ".join(present))
        ws = build_worksheet(spec, students, seed, secret=secret, xp=xp)
        taken: set[str] = set()
        slugs = {student: safe_name(student, taken) for student in ws.students}  # student id -> folder name
        folders = {student: out / "students" / slug for student, slug in slugs.items()}
        job = _StudentFiles(ws, slugs, files, formats, templates, page_size, space, names, spec.lang)
        def write_key_md(texts: Iterable[Mapping[str, Sequence[str]]]) -> None:
            if templates is None:  # written as the students' texts arrive
                files.write_pieces("key.md", key_markdown_pieces(ws, texts))
            else:
                files.write("key.md", key_markdown(ws, templates=templates, rendered=list(texts)))

        # Key.json is made by this process, and key.md written, while the students' files render in the pool.
        rendered, key_json = _render_students(job, workers=workers if xp is np else 1, progress=progress,
                                              meanwhile=lambda: key_text(ws), key_md=write_key_md)
        if "html" in formats:  # the key for a browser, as private as the others
            files.write("key.html", key_html_document(ws, page_size=page_size, templates=templates, rendered=rendered,
                                                      names=names))
        if "pdf" in formats:  # and beside the key, where every printed page's cells lie
            files.write("cellmap.json", _write_pdfs(
                ws, slugs, files, page_size=page_size, templates=templates, class_pdf=class_pdf,
                progress=pdf_progress, workers=workers, names=names, work_space=space, rendered=rendered))
        files.write("key.json", key_json)
    return GeneratedSet(ws, out, folders, formats)


class GenerationNote(UserWarning):
    """Something :func:`generate_set` says before its work, where no ``notes`` callback was given."""


def _warn_note(text: str) -> None:
    warnings.warn(text, GenerationNote, stacklevel=3)


def _checked_options(spec: WorksheetSpec, students: int, seed: str | int, formats: str | Sequence[str], page_size: str,
                     class_pdf: bool, work_space: str | WorkSpace | None, templates: str | Path | None,
                     lang: str | None, note: Callable[[str], None]) -> tuple[WorksheetSpec, tuple[str, ...],
                                                                             WorkSpace | None]:
    """Every option checked before any work (OptionError naming the one that cannot be used); the
    spec in the set's language (its built-in words and its own text), the formats, the work space."""
    if lang is not None:
        try:
            lang = check_lang(lang)
        except UnknownLanguage as exc:
            raise OptionError("{lang}: {problem}", problem=str(exc)) from None
    spec = spec.in_language(lang or language_chosen() or spec.lang)  # as i18n.entered chooses
    missing = spec.untranslated()
    if missing:  # said in English, as every note of the library and the command line is
        note(f"{spec.source}: no {ENGLISH_NAMES[spec.lang]} text for {', '.join(missing)}; shown in English")
    if class_size_problem(students):
        raise OptionError("{students}: {problem}", problem=class_size_problem(students))
    chosen = parse_formats(formats)
    if class_pdf and "pdf" not in chosen:
        raise OptionError("{class_pdf} needs {formats} with pdf (for example md,pdf)")
    try:
        page_size_css(page_size)  # a size no page of this set uses is a mistake all the same
    except ValueError as exc:
        raise OptionError("{page_size}: {problem}", problem=str(exc)) from None
    if "pdf" in chosen:
        try:
            weasyprint_module()
        except PdfUnavailable as exc:
            raise OptionError("{formats}: pdf: {problem}", problem=str(exc)) from None
    try:
        space = parse_work_space(work_space, "work_space") if isinstance(work_space, str) else work_space
    except ValueError as exc:
        raise OptionError("{work_space}{problem}", problem=str(exc).removeprefix("work_space")) from None
    if templates is not None and not Path(templates).is_dir():
        raise OptionError("{templates}: {path}: not a folder", path=str(templates))
    if students >= capacity.REPORT_FROM_STUDENTS:  # read when used: a test lowers it
        _check_memory(spec, students, seed, note)
    return spec, chosen, space


def _check_fonts(spec: WorksheetSpec, names: Mapping[str, str], note: Callable[[str], None], allowed: bool) -> None:
    """Where PDFs would print the spec's or the names' CJK text as empty boxes: refused, or a note."""
    texts = [spec.title, spec.instructions, *(i.title for i in spec.items), *(i.intro for i in spec.items),
             *names.values()]
    problem = cjk_font_problem(texts, lang=spec.lang)
    if problem is None:
        return
    if not allowed:
        raise OptionError("{problem} To write them anyway, use {allow_missing_fonts}.", problem=problem)
    note(problem)


def _check_memory(spec: WorksheetSpec, students: int, seed: str | int, note: Callable[[str], None]) -> None:
    """Say what a large class will cost before solving it; refuse one this machine cannot hold."""
    guess = capacity.estimate(spec, students, seed)
    note(guess.describe())
    memory = capacity.physical_memory()
    if memory is not None and guess.memory > memory:
        raise OptionError("{students}: this machine has {gb} GB of memory; split the class into several sets",
                          gb=f"{memory / 1e9:.1f}")


def _placed(xp: Any, spec: WorksheetSpec, students: int, note: Callable[[str], None]) -> Any:
    """The array module the work runs on: a GPU only where the class's work pays for it."""
    try:
        return placed(xp, lambda: screening_seconds(spec, students), note)
    except BackendUnavailable as exc:
        raise OptionError("{xp}: {problem}", problem=str(exc)) from None


@dataclass(frozen=True)
class _StudentFiles:
    """What is written for each student: their files, and their problems and solutions for the key."""

    ws: Worksheet
    slugs: Mapping[str, str]
    files: OutputSet
    formats: tuple[str, ...]
    templates: str | Path | None
    page_size: str
    work_space: WorkSpace | None
    names: Mapping[str, str]
    lang: str

    def blank_answers(self) -> Dumped:
        # Every student's blank submission has the same answers (shapes only): written once.
        return dumped(blank_submission(self.ws, 0)["answers"], 1) if self.ws.students else dumped({}, 1)

    def write(self, students: range, progress: Callable[[], None] | None = None) -> list[dict[str, list[str]]]:
        """The files of ``students`` written into the set; returns each one's rendered problems
        and solutions.

        Written here, between renders: a writer thread beside the rendering (tried) took the GIL
        back after every system call, and the rendering waited for it; a pool's worker rendered
        at half its speed."""
        ws, out, put = self.ws, [], self.files.write
        answers = self.blank_answers()
        for i in students:
            student = ws.students[i]
            here = f"students/{self.slugs[student]}"
            texts = render_student(ws, i, templates=self.templates)  # problems and solutions, rendered once
            if "md" in self.formats:
                put(f"{here}/worksheet.md",
                    worksheet_markdown(ws, i, templates=self.templates, problems=texts["problem"],
                                       name=self.names.get(student, "")))
            if "html" in self.formats:
                sheet = worksheet_document(ws, i, page_size=self.page_size, templates=self.templates,
                                           work_space=self.work_space,
                                           name=self.names.get(student, ""), rendered=texts)
                put(f"{here}/worksheet.html", sheet)
                put(f"{here}/answer-form.html", answer_form_html(ws, i))
            put(f"{here}/submission.json",
                dumps({"student": student, "variant": ws.codes[i], "set": ws.set_id, "answers": answers}))
            out.append(texts)
            if progress is not None:
                progress()
        return out


#: Classes from this size on render in a pool of processes (where fork is available); a
#: smaller class renders in this process, sooner than workers would start.
POOL_MIN_STUDENTS = 64
_STUDENTS_PER_CHUNK = 32
_JOB: _StudentFiles | None = None  # the job of the pool's forked workers (set before they fork)


def _render_students(
    job: _StudentFiles,
    *,
    workers: int | None,
    progress: Callable[[], None] | None,
    meanwhile: Callable[[], str],
    key_md: Callable[[Iterable[Mapping[str, Sequence[str]]]], None],
) -> tuple[list[dict[str, list[str]]], str]:
    """Every student's files written (:meth:`_StudentFiles.write`), in a pool of ``workers``
    forked processes (default: every core) for a class of the bundled templates, else here;
    returns each student's problems and solutions, in order, and what ``meanwhile`` returned
    (work for this process while the pool renders). ``key_md`` is given every student's texts,
    in order: with a pool, in a thread of its own, as they arrive.

    A user's templates render in their own sandboxed worker (:mod:`qkvquiz.render.worker`), so
    a set with ``templates`` renders here. The pool's output is the same text, file for file.
    """
    global _JOB
    n = len(job.ws.students)
    count = min(workers or cores(), max(1, n // _STUDENTS_PER_CHUNK))
    # Where there is no fork (macOS' default, Windows) the class renders in this process: a
    # forked worker starts at once with the solved worksheet in its memory.
    if count <= 1 or n < POOL_MIN_STUDENTS or job.templates is not None or fork_context() is None:
        rendered = job.write(range(n), progress)
        key_md(rendered)
        return rendered, meanwhile()
    chunks = _chunks(n, count)
    # One student rendered here first: the templates are compiled (and their imports made) once,
    # before the fork, instead of once in every worker.
    render_student(job.ws, 0)
    worksheet_markdown(job.ws, 0)
    _JOB = job
    try:
        with Pool(count, initializer=settle_worker) as pool:
            results = pool.ordered([pool.submit(_write_chunk, chunk) for chunk in chunks])
            # The workers are forked; this process's own work runs beside them in a thread, so
            # that the progress bar moves as their students come back.
            extra = _Beside(meanwhile)
            arriving = _Arriving()
            writer = _Beside(lambda: key_md(arriving), name="qkvquiz-key-md")
            try:
                for texts in results:  # a worker's error is raised here (the thread, a daemon, is left to end)
                    arriving.extend(texts)
                    if progress is not None:
                        for _ in texts:
                            progress()
                arriving.finish()
                writer.result()
            except BaseException:
                # The writer stops at its next student and is waited for: nothing of this run
                # writes into the staging folder once it is being discarded.
                arriving.abandon()
                writer.join()
                raise
            done = extra.result()
    finally:
        _JOB = None
    return arriving.items, done


class _Arriving:
    """Items that one thread adds in order, read by another as they arrive: iterating waits for
    the next, ends after :meth:`finish`, and raises :class:`_Abandoned` after :meth:`abandon`."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._finished = self._abandoned = False
        self._changed = threading.Condition()

    def extend(self, items: Sequence[Any]) -> None:
        with self._changed:
            self.items.extend(items)
            self._changed.notify_all()

    def finish(self) -> None:
        with self._changed:
            self._finished = True
            self._changed.notify_all()

    def abandon(self) -> None:
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    def __iter__(self) -> Iterator[Any]:
        done = 0
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._abandoned or self._finished or len(self.items) > done)
                if self._abandoned:
                    raise _Abandoned
                batch = self.items[done:]
                if not batch:  # finished, every item read
                    return
            done += len(batch)
            yield from batch


class _Abandoned(Exception):
    """The items stopped arriving: the run they belong to failed."""


def _chunks(n: int, workers: int) -> list[tuple[int, int]]:
    """Students ``0 … n−1`` cut into chunks for ``workers``: at most :data:`_STUDENTS_PER_CHUNK`,
    smaller towards the end (half a worker's share of what is left, down to 4), so that the
    workers run out of work together: with equal chunks one worker rendered the last chunk
    alone while the others idled (a tenth of rendering 300 all-families students)."""
    out, start = [], 0
    while start < n:
        size = max(_STUDENTS_LAST_CHUNK, min(_STUDENTS_PER_CHUNK, -(-(n - start) // (2 * workers))))
        out.append((start, min(n, start + size)))
        start += size
    return out


_STUDENTS_LAST_CHUNK = 4


class _Beside(threading.Thread):
    """``work()`` in a thread; :meth:`result` waits for it and returns it (or raises its error)."""

    def __init__(self, work: Callable[[], Any], name: str = "qkvquiz-key") -> None:
        super().__init__(name=name, daemon=True)
        self._work, self._value, self._error = work, "", None
        self._context = contextvars.copy_context()  # the language chosen here holds there too
        self.start()

    def run(self) -> None:
        try:
            self._value = self._context.run(self._work)
        except BaseException as exc:  # noqa: BLE001  (raised again by result())
            self._error = exc

    def result(self) -> Any:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value


def _write_chunk(bounds: tuple[int, int]) -> list[dict[str, list[str]]]:
    """A pool worker's chunk of students written; their rendered texts go home as the task's
    result, through the pool's pipe (a worker that dies halfway through sending them ends the
    run with an error: :mod:`qkvquiz.core.pool`). Through files in the staging folder instead,
    300 students of all-families took as long (12.6 and 13.0 s at best, on 2 loaded cores)."""
    job = _JOB
    assert job is not None, "a rendering worker without its job"
    with using(job.lang):
        return job.write(range(*bounds))


def _write_pdfs(
    ws: Worksheet,
    slugs: dict[str, str],
    files: OutputSet,
    *,
    page_size: str,
    templates: str | Path | None,
    class_pdf: bool,
    progress: Callable[[int, int], None] | None,
    workers: int | None,
    names: Mapping[str, str] | None = None,
    work_space: WorkSpace | None = None,
    rendered: Sequence[Mapping[str, Sequence[str]]] | None = None,
) -> str:
    """Every student's ``worksheet.pdf`` and key (``keys/<name>.pdf``), in one batch on a process
    pool; with ``class_pdf`` also ``class.pdf`` (every worksheet) and ``key.pdf`` (a cover, then
    every student's key) for printing. Returns the text of ``cellmap.json``: where the cells, marks
    and QR code of every page of the worksheets lie, as their layout put them.

    Separate files render in parallel; a combined file is laid out by one worker, so the
    combined files are on request (they are the long pole for a large class). The workers
    write into the set's staging folder only, and end with this run (see render_pdfs). With the
    bundled templates each document is built when the pool takes its job (pdf_batch.Deferred), so the
    workers start at once; a document that two files print (a worksheet in class.pdf, a key in
    key.pdf) is built once.
    """
    names = names or {}
    students = range(len(ws.students))
    combs = part_combs(ws)  # the class's: every student's sheet has the same cells

    @functools.cache
    def sheet(i: int) -> str:
        return worksheet_document(ws, i, page_size=page_size, templates=templates, work_space=work_space,
                                  name=names.get(ws.students[i], ""), rendered=done(i), combs=combs)

    @functools.cache
    def key(i: int) -> str:
        return key_student_document(ws, i, page_size=page_size, templates=templates, rendered=done(i))

    def done(i: int) -> Mapping[str, Sequence[str]] | None:
        # The problems and solutions rendered for the Markdown files: not rendered again.
        return rendered[i] if rendered is not None else None

    def later(build: Callable[[], str | list[str]], documents: int = 1) -> Any:
        # A user's templates render in a worker that this process forks when it needs one
        # (again, if the last one was stopped): their documents are built before the pool's
        # threads start, since a fork should not copy a live thread.
        return Deferred(build, documents) if templates is None else build()

    # The keys first: they take longer to render than the worksheets, and the longest jobs
    # go first so that no worker waits long for the others at the end.
    jobs: list[tuple[Any, Path]] = [
        *((later(functools.partial(key, i)), files.path(f"keys/{slugs[ws.students[i]]}.pdf")) for i in students),
        *((later(functools.partial(sheet, i)), files.path(f"students/{slugs[ws.students[i]]}/worksheet.pdf"))
          for i in students),
    ]
    if class_pdf:  # the long jobs first, so that the pool's other workers fill in around them
        jobs[:0] = [
            (later(lambda: [key_cover_document(ws, page_size=page_size, names=names), *map(key, students)], len(students) + 1),
             files.path("key.pdf")),
            (later(lambda: [sheet(i) for i in students], len(students)), files.path("class.pdf")),
        ]
    try:
        results = render_pdfs(jobs, page_size=page_size, workers=workers,
                              progress=_per_student(progress, len(ws.students)) if progress is not None else False)
    except PdfUnavailable as exc:
        raise ValueError(str(exc)) from exc
    except PdfRenderError as exc:  # name the file where it was to go, not the staging folder
        raise PdfRenderError(files.shown(str(exc))) from None
    # The worksheets are the last jobs, in roster order (render_pdfs returns results in job order).
    try:
        return cellmap_json(printed_cellmap(ws, [r.anchors for r in results[len(results) - len(ws.students):]]))
    except PrintedLayoutError as exc:
        raise PdfRenderError(f"the printed worksheets cannot be read back: {exc}") from None


def _per_student(progress: Callable[[int, int], None], students: int) -> Callable[[int, int], None]:
    """Documents laid out, told as students done: every student has the same share of the
    documents (a worksheet and a key, and their pages of the combined files), so a bar of
    "12/30" counts students, never the renderer's internal jobs."""

    def report(done: int, total: int) -> None:
        progress(students if done >= total else done * students // max(total, 1), students)

    return report
