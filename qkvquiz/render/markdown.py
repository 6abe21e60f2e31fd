"""Worksheets, keys and worked solutions as Markdown with LaTeX math, from Jinja templates.

Each family may have ``templates/families/<name>.problem.md.j2`` (how the problem is stated)
and ``<name>.solution.md.j2`` (the worked solution); families without their own use the
generic ones, which show the givens and every step's formula and value.

Templates see plain data only (:func:`item_context`, :func:`spec_view`): records of fields,
copies of arrays, text; an instructor's text comes as Markdown without raw HTML.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from ..core.i18n import _, current, entered, kept_per_language, ngettext
from ..core.places import where
from ..core.ragged import real_box
from ..spec import ItemSpec, WorksheetSpec
from ..worksheet import Worksheet
from . import worked
from .prose_math import prose_math
from .environment import environment
from .latex import and_list
from .sandbox import Record
from .worker import render_custom

# The bundled template each list of names selects (the first that exists): found once per process.
_SELECTED: dict[tuple[str, ...], jinja2.Template] = {}


def bundled_template(names: Sequence[str]) -> jinja2.Template:
    """The first of ``names`` that the bundled templates have, compiled (once per process)."""
    env, key = environment(), tuple(names)
    template = _SELECTED.get(key)
    if template is None or template.environment is not env:
        template = _SELECTED[key] = env.select_template(list(names))
    return template


def render_template(names: Sequence[str], context: dict[str, Any], templates: str | None = None) -> str:
    """The first of ``names`` that exists, rendered with ``context`` (plain data only).

    Bundled templates are our own code and render here, without a sandbox. With a user's
    folder every template renders sandboxed in a worker process with a time, memory and output
    budget (:mod:`qkvquiz.render.worker`): even a bundled template may import a user's macros.
    """
    if templates is None:
        return bundled_template(names).render(context)
    return render_custom(templates, names, context)


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def spec_text(text: str) -> str:
    """An instructor's text (title, instructions, an item's intro) as Markdown without raw HTML.

    CommonMark reads ``<`` as the start of HTML (or of an autolink) only where a letter,
    ``/``, ``!`` or ``?`` follows; that ``<`` becomes ``&lt;``, which every Markdown reader
    shows as ``<``. ``a < b`` and the rest of the Markdown (emphasis, lists, math) stay as written.
    """
    return _TAG_START.sub("&lt;", text)


def _text(message: str) -> str:
    """A family's sentence (title, prompt …) in the current language; "" stays "" (gettext's
    "" is the catalog's header)."""
    return _(message) if message else message


def _step_view(step: Any) -> Record:
    # The prompt's notation (X̄, dₖ, A = softmax(S)) is set as math on a page: italic as in the
    # formulas (its Unicode form is for plain text: feedback files, LMS labels).
    return Record(name=step.name, symbol=step.symbol, formula=_text(step.formula), prompt=prose_math(_text(step.prompt)),
                  askable=step.askable, kind=step.kind)


def _family_view(fam: Any) -> Record:
    """A family as templates see it, its words in the current language."""
    return Record(
        name=fam.name, title=_text(fam.title), summary=_text(fam.summary),
        givens=tuple(Record(name=g.name, symbol=g.symbol, description=_text(g.description)) for g in fam.givens),
        steps=tuple(_step_view(s) for s in fam.steps), default_ask=tuple(fam.default_ask),
    )


def item_view(item: ItemSpec) -> Record:
    """What templates see of an item: its fields as plain data (its text without raw HTML)."""
    return Record(
        id=item.id, title=spec_text(item.title), intro=spec_text(item.intro), points=item.points,
        params=Record(**dict(item.params)),
        parts=tuple(Record(id=p.id, step=p.step, points=p.points) for p in item.parts),
        family=_family_view(item.family),
    )


def spec_view(spec: WorksheetSpec) -> Record:
    """What templates see of a spec: title, instructions, points and items, as plain data."""
    return Record(
        title=spec_text(spec.title), instructions=spec_text(spec.instructions), points=spec.points,
        items=tuple(item_view(i) for i in spec.items),
    )


# The views of the last few specs, in each language they were shown in: for a class of 300
# each item renders 900 times.
_SPEC_VIEWS: dict[tuple[int, str], tuple[WorksheetSpec, Record]] = {}


def _spec_view(spec: WorksheetSpec) -> Record:
    return kept_per_language(_SPEC_VIEWS, spec, 4, lambda: spec_view(spec))


# Worksheets whose spec was put in another language than its own, kept per language: a class
# renders each student's pages with the same one.
_IN_LANGUAGE: dict[tuple[int, str], tuple[Worksheet, Worksheet]] = {}


def worksheet_in_language(ws: Worksheet) -> Worksheet:
    """``ws`` with its spec's text (title, instructions, items' titles and intros) in the current
    language, as :meth:`qkvquiz.spec.WorksheetSpec.in_language` picks it."""
    if ws.spec.lang == current():
        return ws
    return kept_per_language(_IN_LANGUAGE, ws, 4,
                             lambda: dataclasses.replace(ws, spec=ws.spec.in_language(current())))


def in_spec_language(render: Callable[..., Any]) -> Callable[..., Any]:
    """A renderer of a worksheet (its first argument) that writes in the language of the
    worksheet's spec (``lang:``), unless its caller chose one (:func:`qkvquiz.core.i18n.entered`,
    as ``generate`` does with ``--lang`` or the spec's language): from a notebook,
    ``worksheet_markdown(ws, 0)`` of a Chinese spec is Chinese. The spec's own text follows
    the same language."""

    @functools.wraps(render)
    def in_language(ws: Worksheet, *args: Any, **kwargs: Any) -> Any:
        with entered(None, ws.spec.lang):
            return render(worksheet_in_language(ws), *args, **kwargs)

    return in_language


def _copy(value: Any) -> Any:
    """What a template may hold of a value: a copy of an array, a scalar as an (immutable) float."""
    kind = type(value)
    if kind is np.float64:  # a student's entry of a class's vector: immutable already
        return value
    if kind is np.ndarray:
        return value.copy() if value.ndim else np.float64(value)
    return np.array(value) if np.ndim(value) else np.float64(value)


def _templates_key(templates: str | Path | None) -> str | None:
    return None if templates is None else str(Path(templates).resolve())


def _family_names(family: str, kind: str) -> list[str]:
    return [f"families/{family}.{kind}.md.j2", f"families/_generic.{kind}.md.j2"]


def only_asked_text(entries: Sequence[tuple[int, ...]] | None, shape: tuple[int, ...],
                    real: np.ndarray | None = None) -> str:
    """For a part asking some entries: a sentence naming them (from 1); "" for a whole part.

    ``real`` (bool, ``shape``) marks the entries of a delta sequence whose last chunk is
    shorter: its boxes are one grid per chunk, so the entries are named per chunk, as the
    grids are captioned (``(1, 2) of matrix 2``)."""
    if entries is None:
        return ""
    if real is not None and len(shape) >= 2:
        return _per_chunk_text(entries, len(shape))
    if len(shape) == 1:
        listed = [str(e[0] + 1) for e in entries]
        return ngettext(" Only entry %(entries)s asked; leave the other boxes empty.",
                        " Only entries %(entries)s asked; leave the other boxes empty.", len(listed)) % {
            "entries": and_list(listed)}
    rows = sorted({e[0] for e in entries})
    per_row = math.prod(shape[1:])
    if all(sum(1 for e in entries if e[0] == r) == per_row for r in rows) and len(entries) == len(rows) * per_row:
        listed = [str(r + 1) for r in rows]
        return ngettext(" Only row %(rows)s asked; leave the other boxes empty.",
                        " Only rows %(rows)s asked; leave the other boxes empty.", len(listed)) % {
            "rows": and_list(listed)}
    listed = [_entry_text(e) for e in entries]
    return ngettext(" Only entry %(entries)s asked; leave the other boxes empty.",
                    " Only entries %(entries)s asked; leave the other boxes empty.", len(listed)) % {
        "entries": and_list(listed)}


def mask_share_text(item: ItemSpec, step: str) -> str:
    """For a part that asks for entries a mask fixes (−∞ scores, 0 weights of masked keys) with
    per-entry credit: a sentence saying the share they carry together (grade.checks.entry_credit)."""
    if item.family.step(step).fixed is None or item.params.get("mask", "") == "none" or not item.credit.per_entry:
        return ""
    return _(" The masked entries together carry %(percent)s%% of this part.") % {
        "percent": f"{round(100 * item.credit.mask_weight, 1):g}"}


def _entry_text(index: Sequence[int]) -> str:
    """``(1, 2)``: an entry's indices counted from 1 (one index alone: ``2``)."""
    return str(index[0] + 1) if len(index) == 1 else "(" + ", ".join(str(i + 1) for i in index) + ")"


def _per_chunk_text(entries: Sequence[tuple[int, ...]], ndim: int) -> str:
    """The asked entries of a per-chunk step, chunk by chunk: ``(3, 1) of matrix 1; (1, 1)
    and (2, 2) of matrix 2``, each chunk named as its grid's caption names it."""

    groups = []
    for chunk in sorted({e[0] for e in entries}):
        listed = [_entry_text(e[1:]) for e in entries if e[0] == chunk]
        groups.append(_("%(entries)s of %(chunk)s") % {"entries": and_list(listed), "chunk": where((chunk,), ndim)})
    # Translators: between the groups of entries of different chunks ("(1, 1) of matrix 1; (2, 1) of matrix 2").
    return _(" Only these entries asked: %(groups)s. Leave the other boxes empty.") % {"groups": _("; ").join(groups)}


#: Decimals of a key's numbers when the item's tolerance is not a number of decimals.
KEY_DECIMALS_DEFAULT = 3


def key_decimals(item: ItemSpec) -> int:
    """How many decimals a key prints: the item's ``decimals`` param where the spec sets
    it, else the decimals its tolerance asks for (``2 decimals``: 0.27), else 3."""
    declared = item.family.params.get("decimals")
    chosen = item.params.get("decimals")
    if chosen is not None and (declared is None or chosen != declared.default):
        return int(chosen)  # the spec set it
    tolerance = item.tolerance
    if tolerance.mode == "decimals":
        return max(1, int(tolerance.value))
    return KEY_DECIMALS_DEFAULT if chosen is None else int(chosen)


def trimmed(value: Any, real: np.ndarray | None) -> Any:
    """A padded per-chunk value as the student sees it: a list of chunks, the last one at its length."""
    if real is None:
        return value
    chunks = [np.array(value[c]) for c in range(len(value) - 1)]
    return chunks + [np.array(value[-1][real_box(real[-1])])]


def ragged_shape(shape: tuple[int, ...], real: np.ndarray | None) -> tuple[int, ...] | tuple[tuple[int, ...], ...]:
    """A step's shape, or for a padded per-chunk step the shape of each chunk as the student sees it."""
    if real is None:
        return shape
    last = tuple(b.stop for b in real_box(real[-1]))
    return tuple([tuple(shape[1:])] * (shape[0] - 1) + [last])


def item_frame(item: ItemSpec, steps: dict, view: Record | None = None) -> dict[str, Any]:
    """What a family's templates see of an item that is the same for every student: the
    parts, sizes and scale, the givens a problem shows, decimals and title (``steps``, any
    student's, gives the parts' shapes: every variant of an item has the same)."""
    view = item_view(item) if view is None else view
    fam = view.family
    by_name = {s.name: s for s in fam.steps}
    # A family may word a step's formula for the item's params (attention: QKᵀ without √d_k).
    formula = item.family.extra.get("formula", lambda params, step: None)
    parts = []
    for p in item.parts:
        shape = np.shape(steps[p.step])
        mask = _present(item, p.step, steps[p.step])
        padding_only = mask is not None and p.entries is not None and len(p.entries) == int(mask.sum())
        parts.append({"id": p.id, "step": by_name[p.step], "points": p.points, "shape": ragged_shape(shape, mask),
                      "formula": formula(item.params, p.step) or by_name[p.step].formula,
                      "only": ("" if padding_only else only_asked_text(p.entries, shape, mask))
                      + mask_share_text(item, p.step)})
    # A family may add values its templates need (attention: the scale and the query/key counts).
    extra = item.family.extra.get("context")
    # The givens an asked part depends on: a problem prints only these (``g`` keeps them all,
    # for the worked solution and for templates written before this list existed).
    shown = item.family.givens_needed(p.step for p in item.parts)
    return {
        **(extra(item.params) if extra is not None else {}),
        "item": view, "family": fam, "p": view.params, "parts": parts, "shown": shown, "d": key_decimals(item),
        # An item's title, the spec's or the family's, is plain text elsewhere (LMS question
        # names, feedback headings); in the problem's heading its notation is set as math.
        "title": prose_math(view.title or fam.title),
    }


def _present(item: ItemSpec, name: str, value: Any) -> np.ndarray | None:
    # A delta sequence with a shorter last chunk is stored padded; templates see each chunk at
    # its own length (a list of chunks), and a part's shape is each chunk's (never the padding).
    present = item.family.extra.get("present")
    return None if present is None else present(item.params, name, tuple(np.shape(value)))


def item_context(item: ItemSpec, number: int, givens: dict, steps: dict, view: Record | None = None,
                 frame: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a family's templates see for one student's variant of one item: plain data only.

    ``frame``: the item's :func:`item_frame`, where it is already made."""
    frame = item_frame(item, steps, view) if frame is None else frame
    # Templates get copies: whatever one does to an array cannot reach the solved worksheet or the key.
    if item.family.extra.get("present") is None:  # no padded values (all but the delta sequences)
        g = {k: _copy(v) for k, v in givens.items()}
        s = {k: _copy(v) for k, v in steps.items()}
    else:
        g = {k: trimmed(_copy(v), _present(item, k, v)) for k, v in givens.items()}
        s = {k: trimmed(_copy(v), _present(item, k, v)) for k, v in steps.items()}
    return {**frame, "g": g, "s": s, "number": number}


# Each item's frame in each language, for the bundled templates (which only read it): for a
# class of 300 each item renders 900 times. A user's templates get a fresh frame every time.
_FRAMES: dict[tuple[int, str], tuple[ItemSpec, dict[str, Any]]] = {}


def _shared_frame(item: ItemSpec, steps: dict, view: Record | None) -> dict[str, Any]:
    def made() -> dict[str, Any]:
        frame = item_frame(item, steps, view)
        return {**frame, "parts": worked.SharedParts(frame["parts"])}  # its list's text is kept (worked.parts_list)

    return kept_per_language(_FRAMES, item, 256, made)


@in_spec_language
def render_student(ws: Worksheet, student: int, kinds: Sequence[str] = ("problem", "solution"), *,
                   templates: str | Path | None = None) -> dict[str, list[str]]:
    """Each item of one student's variant rendered with each of its ``kinds`` of template
    (``problem``, ``solution``): kind -> one text per item. Each item's context is made once
    and serves every kind."""
    key = _templates_key(templates)
    views = {id(item): view for item, view in zip(ws.spec.items, _spec_view(ws.spec).items)}
    out: dict[str, list[str]] = {kind: [] for kind in kinds}
    for number, variant in enumerate(ws.variant(student), start=1):
        item = variant["item"]
        view = views.get(id(item))
        frame = _shared_frame(item, variant["steps"], view) if key is None else None
        ctx = item_context(item, number, variant["givens"], variant["steps"], view, frame)
        for kind in kinds:
            out[kind].append(render_template(_family_names(item.family.name, kind), ctx, key))
    return out


def problem_markdown(item: ItemSpec, givens: dict, steps: dict, number: int = 1) -> str:
    """One variant of ``item`` as its bundled problem template states it, in the current language."""
    return render_template(_family_names(item.family.name, "problem"), item_context(item, number, givens, steps))


@in_spec_language
def render_items(ws: Worksheet, student: int, kind: str, *, templates: str | Path | None = None) -> list[str]:
    """Each item of one student's variant rendered with its ``problem`` or ``solution`` template."""
    return render_student(ws, student, (kind,), templates=templates)[kind]


@in_spec_language
def worksheet_markdown(ws: Worksheet, student: int, *, templates: str | Path | None = None,
                       problems: Sequence[str] | None = None, name: str = "") -> str:
    """The worksheet one student works on: givens and questions, no answers.

    ``problems``: the student's problems already rendered (:func:`render_student`), if they are;
    ``name``: the roster's name, printed on the name line (left blank to write on without one)."""
    view = _spec_view(ws.spec)
    if problems is None:
        problems = render_items(ws, student, "problem", templates=templates)
    return render_template(["worksheet.md.j2"], dict(
        spec=view, student=ws.students[student], code=ws.codes[student], set_id=ws.set_id,
        problems=problems, items=view.items, name=name,
    ), _templates_key(templates))


class _KeyEntries:
    """Every student's entry of key.md from their rendered texts, which may still be arriving:
    the template may ask how many there are at once, and waits for each as it reaches it."""

    def __init__(self, ws: Worksheet, rendered: Iterable[Mapping[str, Sequence[str]]]) -> None:
        self._ws, self._rendered = ws, rendered

    def __len__(self) -> int:
        return len(self._ws.students)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        ws, count = self._ws, 0
        for i, r in enumerate(self._rendered):
            count += 1
            yield {"student": ws.students[i], "code": ws.codes[i], "problems": r["problem"], "solutions": r["solution"]}
        if count != len(ws.students):
            raise ValueError(f"key.md: rendered texts for {count} of {len(ws.students)} students")


def key_markdown_pieces(ws: Worksheet, rendered: Iterable[Mapping[str, Sequence[str]]]) -> Iterator[str]:
    """The instructor's key (:func:`key_markdown` of every student, bundled templates) as pieces
    of text, written as ``rendered`` (each student's problems and solutions, in order) arrives:
    a class's key is written while its last students still render, never held whole."""
    with entered(None, ws.spec.lang):
        ws = worksheet_in_language(ws)
        template = bundled_template(["key.md.j2"])
        yield from template.generate(dict(spec=_spec_view(ws.spec), entries=_KeyEntries(ws, rendered),
                                          seed=ws.seed, keyed=ws.keyed))


@in_spec_language
def key_markdown(ws: Worksheet, students: Sequence[int] | None = None, *, templates: str | Path | None = None,
                 rendered: Sequence[Mapping[str, Sequence[str]]] | None = None) -> str:
    """The instructor's key: every student's givens, answers and worked steps.

    ``rendered``: for each chosen student, their problems and solutions already rendered
    (:func:`render_student`), if they are."""
    chosen = range(len(ws.students)) if students is None else students
    if rendered is None:
        rendered = [render_student(ws, i, templates=templates) for i in chosen]
    entries = [
        {"student": ws.students[i], "code": ws.codes[i], "problems": r["problem"], "solutions": r["solution"]}
        for i, r in zip(chosen, rendered, strict=True)
    ]
    return render_template(["key.md.j2"], dict(
        spec=_spec_view(ws.spec), entries=entries, seed=ws.seed, keyed=ws.keyed,
    ), _templates_key(templates))
