"""Worksheets, keys and worked solutions as Markdown with LaTeX math, from Jinja templates.

Each family may have ``templates/families/<name>.problem.md.j2`` (how the problem is stated)
and ``<name>.solution.md.j2`` (the worked solution); families without their own use the
generic ones, which show the givens and every step's formula and value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from ..resources import templates_dir
from ..spec import ItemSpec
from ..untrusted import md_code
from ..worksheet import Worksheet
from .latex import bmatrix, mask_sentences, num, shape_text
from .sandbox import TemplateSandbox


@lru_cache(maxsize=4)
def environment(directory: str | None = None) -> jinja2.Environment:
    """The Jinja environment: sandboxed, Markdown output (no HTML escaping), strict about undefined names.

    ``directory`` holds a user's templates: any template found there (``worksheet.md.j2``,
    ``families/attention.output.problem.md.j2`` …) replaces the bundled one of the same name,
    and every other name falls back to the bundled templates. Bundled or not, templates
    render in :class:`~qkvquiz.render.sandbox.TemplateSandbox`.
    """
    bundled = jinja2.FileSystemLoader(str(templates_dir()))
    loader = bundled if directory is None else jinja2.ChoiceLoader([jinja2.FileSystemLoader(directory), bundled])
    env = TemplateSandbox(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(bmatrix=bmatrix, num=num, shape=shape_text, mask_sentences=mask_sentences, md_code=md_code)
    env.globals.update(zip=zip, len=len, enumerate=enumerate)  # np and a bounded range come with the sandbox
    return env


def _copy(value: Any) -> Any:
    """What a template may hold of a value: a copy of an array, a scalar as an (immutable) float."""
    return np.array(value) if np.ndim(value) else np.float64(value)


def _templates_key(templates: str | Path | None) -> str | None:
    return None if templates is None else str(Path(templates).resolve())


def _family_template(env: jinja2.Environment, family: str, kind: str) -> jinja2.Template:
    return env.select_template([f"families/{family}.{kind}.md.j2", f"families/_generic.{kind}.md.j2"])


def only_asked_text(entries: Sequence[tuple[int, ...]] | None, shape: tuple[int, ...]) -> str:
    """For a part asking some entries: a sentence naming them (from 1); "" for a whole part."""
    if entries is None:
        return ""
    if len(shape) == 1:
        listed = [str(e[0] + 1) for e in entries]
        return f" Only entr{'y' if len(listed) == 1 else 'ies'} {_and(listed)} asked; leave the other boxes empty."
    rows = sorted({e[0] for e in entries})
    per_row = math.prod(shape[1:])
    if all(sum(1 for e in entries if e[0] == r) == per_row for r in rows) and len(entries) == len(rows) * per_row:
        listed = [str(r + 1) for r in rows]
        return f" Only row{'' if len(listed) == 1 else 's'} {_and(listed)} asked; leave the other boxes empty."
    listed = ["(" + ", ".join(str(i + 1) for i in e) + ")" for e in entries]
    return f" Only entr{'y' if len(listed) == 1 else 'ies'} {_and(listed)} asked; leave the other boxes empty."


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def item_context(item: ItemSpec, number: int, givens: dict, steps: dict) -> dict[str, Any]:
    """What a family's templates see for one student's variant of one item."""
    fam = item.family
    # A family may word a step's formula for the item's params (attention: QKᵀ without √d_k).
    formula = fam.extra.get("formula", lambda params, step: None)
    parts = [
        {"id": p.id, "step": fam.step(p.step), "points": p.points, "shape": np.shape(steps[p.step]),
         "formula": formula(item.params, p.step) or fam.step(p.step).formula,
         "only": only_asked_text(p.entries, np.shape(steps[p.step]))}
        for p in item.parts
    ]
    # Templates get copies: whatever one does to an array cannot reach the solved worksheet or the key.
    givens = {k: _copy(v) for k, v in givens.items()}
    steps = {k: _copy(v) for k, v in steps.items()}
    # A family may add values its templates need (attention: the scale and the query/key counts).
    extra = fam.extra.get("context")
    return {
        **(extra(item.params) if extra is not None else {}),
        "item": item, "family": fam, "p": item.params, "g": givens, "s": steps, "parts": parts,
        "number": number, "d": item.params.get("decimals", 3),
        "title": item.title or fam.title,
    }


def render_items(ws: Worksheet, student: int, kind: str, *, templates: str | Path | None = None) -> list[str]:
    """Each item of one student's variant rendered with its ``problem`` or ``solution`` template."""
    env = environment(_templates_key(templates))
    out = []
    for number, variant in enumerate(ws.variant(student), start=1):
        item = variant["item"]
        ctx = item_context(item, number, variant["givens"], variant["steps"])
        out.append(_family_template(env, item.family.name, kind).render(ctx))
    return out


def worksheet_markdown(ws: Worksheet, student: int, *, templates: str | Path | None = None) -> str:
    """The worksheet one student works on: givens and questions, no answers."""
    return environment(_templates_key(templates)).get_template("worksheet.md.j2").render(
        spec=ws.spec, student=ws.students[student], code=ws.codes[student], set_id=ws.set_id,
        problems=render_items(ws, student, "problem", templates=templates), items=ws.spec.items,
    )


def key_markdown(ws: Worksheet, students: Sequence[int] | None = None, *, templates: str | Path | None = None) -> str:
    """The instructor's key: every student's givens, answers and worked steps."""
    chosen = range(len(ws.students)) if students is None else students
    entries = [
        {"student": ws.students[i], "code": ws.codes[i],
         "problems": render_items(ws, i, "problem", templates=templates),
         "solutions": render_items(ws, i, "solution", templates=templates)}
        for i in chosen
    ]
    return environment(_templates_key(templates)).get_template("key.md.j2").render(
        spec=ws.spec, entries=entries, seed=ws.seed, keyed=ws.keyed,
    )
