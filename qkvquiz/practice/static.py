"""A practice site that needs no server: one ``index.html`` with N solved variants per item.

Each variant carries its problem and worked steps (rendered), and for every part what a browser
needs to check an answer without Python: the exact values and, per entry, the band the part's
tolerance allows (``Tolerance.band`` plus the float slack, so the comparison is the grader's
``|answer − exact| ≤ band``); the values of each known mistake with their bands (diagnosis);
and for a later part, its value re-run on each known mistake of an earlier part, kept only
where the grader itself gives that pair carried credit (the site credits carried work that
comes from a known mistake; the server credits any). The entries are read by the answer
form's parser. The set is written as one unit by :mod:`qkvquiz.core.outputs`.

The variants are public: drawn from public seeds (``<seed>-<k>``), never from the instructor's
secret; the site says so, and says that its source carries every answer (:data:`.pages.ANSWERS_NOTICE`,
for ``practice --static`` to print as well). Each topic's variants are one gzip-compressed JSON block (base64),
unpacked by the browser when the topic is chosen: the markup of 50 variants is much alike.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import _, entered
from ..core.outputs import owned_present, write_set
from ..core.tolerance import SLACK, Tolerance
from ..families import Env
from ..grade.checks import carried_inputs, count_sentence, fixed_entries, key_allowance, rerun_on_own
from ..key import encode
from .checking import check
from .pages import page_html, problem_html, worked_html
from .problem import MAX_SEED_CHARS, Problem, check_seed, new_problem, new_seed
from .topics import Topic, in_language, own_language

#: What ``practice --static`` owns in its folder (nothing private: the site is public).
OWNED = {"index.html": False}
MAX_VARIANTS = 500


def flat(values: Any) -> list[Any]:
    """Values as the page reads them: a flat list, ±∞ as "inf"/"-inf", NaN (no value) as null."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    out = encode(np.where(np.isnan(arr), 0.0, arr)) if arr.size else []
    return [None if np.isnan(x) else v for x, v in zip(arr.tolist(), out)]


def target(tol: Tolerance, values: Any, extra: Any = None) -> dict[str, list[Any]]:
    """``values`` and the band around each that ``tol.passes`` accepts (the slack included),
    widened by ``extra`` as ``tol.passes(..., extra=extra)`` widens it."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x)
        x0 = np.where(finite, x, 0.0)
        band = tol.band(x) + (0.0 if extra is None else np.asarray(extra, dtype=np.float64))
        total = band + SLACK * np.maximum(np.abs(x0), band)
    return {"values": flat(x), "band": [float(b) for b in total.ravel()]}


def check_data(problem: Problem) -> dict[str, Any]:
    """Everything the page needs to check answers to ``problem`` (one item) in the browser."""
    (item,) = problem.key.items
    env = item.env
    by_step = {p.step: p.id for p in item.parts}
    parts: dict[str, dict[str, Any]] = {}
    with entered(None, problem.lang):
        for part in item.parts:
            tol = item.tolerance_for(part.step)
            shape = item.shapes[part.id]
            asked = part.asked(shape)
            mistakes = []
            for m in item.family.mistakes_for(part.step, item.params):
                with np.errstate(all="ignore"):
                    wrong = np.asarray(m.fn(env, item.params, np), dtype=np.float64)
                if wrong.shape != env[part.step].shape:
                    continue
                mistakes.append({"name": m.name, "text": _(m.feedback), **target(tol, wrong[0]),
                                 "entrywise": m.entrywise, "_full": wrong})
            fixed = fixed_entries(item, part, env, 1)
            # Right also within what rounding the steps before it explains (the unasked ones, and the
            # asked ones, which the grader re-runs on the student's own rounded answers and this
            # page cannot), unless a known mistake explains the answer (grade.checks.check_part).
            with np.errstate(all="ignore"):
                extra, _free = key_allowance(item, part.step, env, inputs_rounded=True)
            wide = None if extra is None else target(tol, env[part.step][0], np.asarray(extra)[0])["band"]
            entries = int(np.size(env[part.step][0])) if asked is None else int(np.count_nonzero(asked))
            parts[part.id] = {
                "kind": item.family.step(part.step).kind, "shape": list(shape),
                "asked": None if asked is None else asked.ravel().tolist(),
                # The entries a mask fixes, which carry mask_weight of the part together (grade.checks.entry_credit).
                "fixed": None if fixed is None else fixed[0].tolist(),
                **target(tol, env[part.step][0]), "wide": wide, "mistakes": mistakes, "carried": [],
                "tolerance": tol.describe(),
                # The grader's sentence for the count, in its plural, the count of right entries
                # left for the page to fill in; the properties a right answer has, as data.
                # The grader's sentence, the number right left for the page to fill in.
                "counts": count_sentence("%(correct)s", entries, bool(item.credit.per_entry)),
                "invariants": [{**inv.page(env, item.params, env[part.step].shape), "text": _(inv.feedback)}
                               for inv in item.family.invariants_for(part.step, item.params)
                               if inv.page is not None],
            }
        if item.credit.carried_forward > 0:
            for part in item.parts:
                parts[part.id]["carried"] = _carried(problem, item, part, parts, by_step, env)
    for data in parts.values():
        for m in data["mistakes"]:
            m.pop("_full")
    return {"parts": parts, "order": [p.id for p in item.parts],
            "per_entry": bool(item.credit.per_entry), "carried_forward": float(item.credit.carried_forward),
            "mask_weight": float(item.credit.mask_weight)}


def _carried(problem: Problem, item: Any, part: Any, parts: dict[str, dict[str, Any]], by_step: dict[str, str],
             env: Env) -> list[dict[str, Any]]:
    """This part re-run on each known mistake of an earlier part it is computed from, where the
    grader credits the pair as carried (so the site credits no more than the grader does)."""
    steps, between = carried_inputs(item.family, part.step, by_step)
    tol = item.tolerance_for(part.step)
    out = []
    for step in steps:
        source = by_step[step]
        for index, mistake in enumerate(parts[source]["mistakes"]):
            own = {s: env[s] for s in steps}
            own[step] = mistake["_full"]
            with np.errstate(all="ignore"):
                redo = np.asarray(rerun_on_own(item.family, part.step, env, own, between, item.params, np))
            if redo.shape != env[part.step].shape or np.isnan(redo).any():
                continue
            answers = dict(problem.key.answers[0])
            answers[source] = encode(mistake["_full"][0])
            answers[part.id] = encode(redo[0])
            verdicts = {p.part: p.verdict for p in check(problem, answers).parts}
            if verdicts.get(part.id) == "carried":
                out.append({"input": source, "mistake": index, **target(tol, redo[0])})
    return out


def variant_data(problem: Problem) -> dict[str, Any]:
    return {"seed": problem.seed, "code": problem.code, "html": problem_html(problem),
            "worked": worked_html(problem), **check_data(problem)}


# A formula the page cannot set as text is a picture, a data: URL that every variant of an item
# repeats (the same "softmax(QKᵀ/√d_k)V"); each is stored once per topic and put back by the page.
_PICTURE = re.compile(r"data:image/svg\+xml;base64,[A-Za-z0-9+/=]+")
#: Marks a shared picture's place in a variant's HTML (a character no rendered HTML holds).
SHARED_MARK = "\u0001"


def shared_pictures(docs: list[dict[str, Any]]) -> list[str]:
    """Each picture of the variants' problems and worked steps replaced by ``\x01<n>\x01``; returns
    the pictures, in order of ``n``."""
    table: dict[str, int] = {}

    def mark(match: re.Match[str]) -> str:
        index = table.setdefault(match.group(), len(table))
        return f"{SHARED_MARK}{index}{SHARED_MARK}"

    for doc in docs:
        doc["html"] = _PICTURE.sub(mark, doc["html"])
        doc["worked"] = _PICTURE.sub(mark, doc["worked"])
    return list(table)


def packed(doc: Any) -> str:
    """``doc`` as JSON, gzip-compressed (no timestamp: the same site gives the same bytes), base64."""
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def build_static(topics: Sequence[Topic], variants: int, out: str | Path, *, lang: str | None = None, seed: str | None = None,
                 force: bool = False, progress: Callable[[], None] | None = None) -> Path:
    """Write ``out/index.html``: ``variants`` solved variants of each topic, seeds ``<seed>-1`` …
    (``seed``: a fresh public one if None). Returns the page's path. Without ``force`` an
    existing ``index.html`` is refused with FileExistsError. In ``lang`` (default: the language
    chosen around the call, else the first topic's)."""
    if not 1 <= variants <= MAX_VARIANTS:
        raise ValueError(f"--static takes 1 to {MAX_VARIANTS} variants per item, got {variants}")
    if not topics:
        raise ValueError("nothing to practise: no topics")
    base = check_seed(seed) if seed is not None else new_seed()
    room = MAX_SEED_CHARS - len(f"-{variants}")
    if len(base) > room:
        # Checked before any problem is solved: the variants' seeds are "<seed>-1" … "<seed>-N".
        raise ValueError(f"--seed {base!r} has {len(base)} characters; with --static {variants} the variants' "
                         f"seeds are {base[:12]}…-1 to …-{variants}, and a seed has at most {MAX_SEED_CHARS}, "
                         f"so the seed may have at most {room}")
    out = Path(out)
    with entered(lang, own_language(topics)) as code, write_set(out, OWNED, anchor="index.html") as files:
        topics = in_language(topics, code)
        present = owned_present(out, OWNED)
        if present and not force:
            raise FileExistsError(f"{out} already holds {', '.join(present)}; choose another folder or use --force")
        blocks = {}
        for topic in topics:
            docs = []
            for k in range(1, variants + 1):
                docs.append(variant_data(new_problem(topic, f"{base}-{k}")))
                if progress is not None:
                    progress()
            shared = shared_pictures(docs)
            blocks[topic.id] = {"family": topic.family, "title": topic.title(),
                               "variants": packed({"shared": shared, "variants": docs})}
        page = page_html(topics, mode="static", seed=base, data={"topics": blocks})
        files.write("index.html", page)
    return out / "index.html"
