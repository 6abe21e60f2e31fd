"""Worksheet specs: the YAML files an instructor writes (``problem_bank/*.yaml``).

A spec has a title, instructions and items; each item names a family, its params, points,
tolerance, the steps asked and, optionally, givens fixed by the instructor. Every error
names the file, the item and the field, and says what is allowed.

Prose (the title, the instructions, an item's title and intro) is a plain string, shown as
written in every language, or a mapping ``{en: …, zh: …}``: the spec then shows the text of
its language (:meth:`WorksheetSpec.in_language`), and English where that one is not written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .core.bounded_yaml import read_yaml
from .core.i18n import DEFAULT_LANG, LANGUAGES, LangText, UnknownLanguage, check_lang
from .core.inputs import MAX_SPEC_BYTES, InputError, shown_path
from .core.ragged import pad_nested
from .core.resources import bank_dir
from .core.tolerance import TOLERANCE_DEFAULT, Tolerance
from .families import REGISTRY, Family, Params, get_family
from .spec_types import (
    CREDIT_KEYS,
    Credit,
    ItemSpec,
    Part,
    SpecError,
    WorksheetSpec,
    parse_work_space,
)

SPEC_KEYS = {"title", "instructions", "tolerance", "items", "credit", "lang"}
MAX_GIVEN = 1e6  # largest magnitude of an entry of a fixed given
PART_TOLERANCE_DEFAULT = "default"  # in a per-part tolerance mapping: the item's other parts
ITEM_KEYS = {"id", "family", "title", "intro", "params", "points", "ask", "tolerance", "givens", "credit", "work_space"}


def load_spec(path: str | Path) -> WorksheetSpec:
    """Read and validate a YAML spec file through :mod:`qkvquiz.core.inputs` (size, file kind,
    UTF-8, depth, aliases and duplicate keys bounded; errors name the file and the line)."""
    return parse_spec(read_spec_data(path, "spec"), source=shown_path(path))


def bundled_spec_names() -> list[str]:
    """The names of the bundled specs (``attention-basics``, …), sorted."""
    return sorted(p.stem for p in bank_dir().glob("*.yaml"))


def find_spec(name: str | Path) -> Path:
    """The spec file that ``name`` names: a path that exists, else a bundled spec's name
    (``attention-basics`` or ``attention-basics.yaml``). FileNotFoundError where neither is, naming
    the path as given and saying that it does not exist (and the bundled specs)."""
    path = Path(name)
    if path.exists():
        return path
    text = str(name)
    bundled = bank_dir() / (text if text.endswith((".yaml", ".yml")) else f"{text}.yaml")
    if "/" not in text and "\\" not in text and bundled.is_file():
        return bundled
    raise FileNotFoundError(f"{text}: no such spec file (it does not exist), and no bundled "
                            f"spec has that name (bundled: {', '.join(bundled_spec_names())})")


def read_spec_data(path: str | Path, what: str = "spec") -> Any:
    """The YAML of a spec or audit file as Python objects; SpecError names the file (and line)."""
    try:
        return read_yaml(path, MAX_SPEC_BYTES, what)
    except InputError as exc:
        raise SpecError(exc.source, "" if exc.line is None else f"line {exc.line}", exc.message) from None


def parse_spec(data: Any, source: str = "<spec>") -> WorksheetSpec:
    """Validate a spec already read into Python objects."""
    if not isinstance(data, Mapping):
        raise SpecError(source, "", "a spec is a mapping with title, instructions and items")
    unknown = set(data) - SPEC_KEYS
    if unknown:
        raise SpecError(source, f"field {sorted(unknown)[0]!r}", f"unknown field; allowed: {', '.join(sorted(SPEC_KEYS))}")
    wording = {"title": _prose(data.get("title"), source, "", "title", required=True),
               "instructions": _prose(data.get("instructions", ""), source, "", "instructions")}
    lang = data.get("lang", DEFAULT_LANG)
    try:
        lang = check_lang(lang)
    except UnknownLanguage as exc:
        raise SpecError(source, "field 'lang'", str(exc)) from None
    default_tol = _tolerance(data.get("tolerance"), TOLERANCE_DEFAULT, source, "field 'tolerance'")
    default_credit = _credit(data.get("credit"), Credit(), source, "field 'credit'")
    raw_items = data.get("items")
    if not isinstance(raw_items, list) or not raw_items:
        raise SpecError(source, "field 'items'", "a non-empty list of items is required")
    items = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_items, start=1):
        item = _item(raw, index, source, default_tol, default_credit)
        if item.id in seen:
            raise SpecError(source, f"item {index} field 'id'", f"id {item.id!r} is used twice")
        seen.add(item.id)
        items.append(item.in_language(lang))
    return WorksheetSpec(wording["title"].text(lang), wording["instructions"].text(lang), tuple(items),
                         source, lang, wording)


PROSE_FORM = "text, or the text in each language: {en: …, zh: …}"


def _prose(raw: Any, source: str, where: str, name: str, required: bool = False) -> LangText:
    """A prose field: a plain string, or a mapping of language code to text with ``en`` in it
    (English is what the set is known by, and what a missing language falls back to). A code is
    read as ``--lang`` reads it (``zh-CN`` is ``zh``)."""

    def at(path: str) -> str:
        return f"{where} field {path!r}".strip()

    if raw is None and required:
        raw = ""
    if isinstance(raw, str):
        if required and not raw.strip():
            raise SpecError(source, at(name), f"a non-empty text is required: {PROSE_FORM}")
        return LangText.plain(raw.strip())
    if not isinstance(raw, Mapping):
        raise SpecError(source, at(name), f"must be {PROSE_FORM}; got {_kind(raw)}")
    texts: dict[str, str] = {}
    for code, text in raw.items():
        try:
            lang = check_lang(code)
        except UnknownLanguage:
            raise SpecError(source, at(f"{name}.{code}"),
                            f"unknown language {code!r}; a text is written in: {', '.join(LANGUAGES)}") from None
        if lang in texts:
            raise SpecError(source, at(f"{name}.{code}"), f"{LANGUAGES[lang]} ({lang}) is written twice")
        if not isinstance(text, str) or not text.strip():
            got = "an empty text" if isinstance(text, str) else _kind(text)
            raise SpecError(source, at(f"{name}.{code}"),
                            f"must be a non-empty text, got {got} (leave a language out to show English)")
        texts[lang] = text.strip()
    if DEFAULT_LANG not in texts:
        raise SpecError(source, at(name), f"the text in each language needs {DEFAULT_LANG} (other languages fall "
                                          f"back to it); a text in one language only is written plain, without "
                                          f"a mapping")
    # English first: LangText.written
    return LangText(tuple(sorted(texts.items(), key=lambda pair: pair[0] != DEFAULT_LANG)))


def _kind(value: Any) -> str:
    """What a YAML value is, in words, for a message about a field that wanted text."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "a mapping"
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


def _tolerance(raw: Any, default: Tolerance, source: str, where: str) -> Tolerance:
    if raw is None:
        return default
    try:
        return Tolerance.from_spec(raw)
    except ValueError as exc:
        raise SpecError(source, where, str(exc)) from exc


def _item_tolerance(
    raw: Any, default: Tolerance, parts: tuple[Part, ...], source: str, where: str
) -> tuple[Tolerance, dict[str, Tolerance]]:
    """An item's tolerance and its parts' own: one tolerance, or a mapping step: tolerance.

    The per-part form names asked steps, plus ``default`` for the item's other parts
    (``{default: 2 decimals, weights: 3 sigfigs}``). A mapping with ``mode`` or ``value`` is
    one tolerance written out (``{mode: rel, value: 0.01}``), not the per-part form.
    """
    if not isinstance(raw, Mapping) or set(raw) & {"mode", "value", "floor"}:
        return _tolerance(raw, default, source, f"{where} field 'tolerance'"), {}
    asked = [p.step for p in parts]
    per_step: dict[str, Tolerance] = {}
    for step, value in raw.items():
        field_where = f"{where} field 'tolerance.{step}'"
        if step != PART_TOLERANCE_DEFAULT and step not in asked:
            raise SpecError(source, field_where,
                            f"not an asked step; a per-part tolerance names one of: {', '.join(asked)} "
                            f"(or {PART_TOLERANCE_DEFAULT} for the rest)")
        if isinstance(value, Mapping) and not set(value) & {"mode", "value", "floor"}:
            raise SpecError(source, field_where, "must be one tolerance, such as \"3 decimals\"")
        per_step[step] = _tolerance(value, default, source, field_where)
    return per_step.pop(PART_TOLERANCE_DEFAULT, default), per_step


def _credit(raw: Any, default: Credit, source: str, where: str) -> Credit:
    if raw is None:
        return default
    if not isinstance(raw, Mapping) or set(raw) - set(CREDIT_KEYS):
        raise SpecError(source, where, "a mapping with per_entry (true/false), carried_forward (0 to 1), "
                                       "format_error (0 to 1) and mask_weight (above 0, at most 1)")
    per_entry = raw.get("per_entry", default.per_entry)
    if not isinstance(per_entry, bool):
        raise SpecError(source, f"{where}.per_entry", f"must be true or false, got {per_entry!r}")
    shares = []
    for name in ("carried_forward", "format_error"):
        share = raw.get(name, getattr(default, name))
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise SpecError(source, f"{where}.{name}", f"must be a number from 0 to 1, got {share!r}")
        shares.append(float(share))
    mask_weight = raw.get("mask_weight", default.mask_weight)
    if isinstance(mask_weight, bool) or not isinstance(mask_weight, (int, float)) or not 0 < mask_weight <= 1:
        raise SpecError(source, f"{where}.mask_weight",
                        f"must be a number above 0 and at most 1 (the share of a part the masked entries carry "
                        f"together), got {mask_weight!r}")
    return Credit(per_entry, *shares, float(mask_weight))


def _item(raw: Any, index: int, source: str, default_tol: Tolerance, default_credit: Credit) -> ItemSpec:
    where = f"item {index}"
    if not isinstance(raw, Mapping):
        raise SpecError(source, where, "an item is a mapping with at least 'family'")
    unknown = set(raw) - ITEM_KEYS
    if unknown:
        raise SpecError(source, f"{where} field {sorted(unknown)[0]!r}", f"unknown field; allowed: {', '.join(sorted(ITEM_KEYS))}")
    name = raw.get("family")
    if not isinstance(name, str):
        raise SpecError(source, f"{where} field 'family'",
                        f"must be one family name, such as attention.output; known: {', '.join(sorted(REGISTRY))}")
    if name not in REGISTRY:
        raise SpecError(source, f"{where} field 'family'", f"unknown family {name!r}; known: {', '.join(sorted(REGISTRY))}")
    family = get_family(name)
    item_id = str(raw.get("id", f"q{index}"))
    if not item_id.replace("_", "").replace("-", "").isalnum():
        raise SpecError(source, f"{where} field 'id'", "use letters, digits, '-' and '_' only")
    where = f"item {index} ({item_id}, {name})"

    raw_params = raw.get("params") or {}
    if not isinstance(raw_params, Mapping):
        raise SpecError(source, f"{where} field 'params'", "must be a mapping of param: value")
    params = _params(family, raw_params, source, where)
    fixed = _fixed(_ragged_givens(raw.get("givens"), family, params, source, where), family, source, where)
    settled = _settled(family, fixed, params, frozenset(raw_params), source, where)
    if settled:
        params = _params(family, {**raw_params, **settled}, source, where)

    points = raw.get("points", 1)
    # Bounded so that a share counted in hundredths (split_points) stays an exact whole number.
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points <= MAX_POINTS:
        raise SpecError(source, f"{where} field 'points'", f"must be a positive number up to {MAX_POINTS:,}, got {points!r}")
    if "points" in raw and isinstance(raw.get("ask"), Mapping):
        raise SpecError(source, f"{where} field 'points'",
                        "an 'ask' mapping (step: points) already gives each part its points; "
                        "leave 'points' out, or ask a list of steps to split 'points' among them")
    parts = _parts(raw.get("ask"), family, float(points), item_id, source, where, params)
    tolerance, per_step = _item_tolerance(raw.get("tolerance"), default_tol, parts, source, where)
    parts = tuple(Part(p.id, p.step, p.points, per_step.get(p.step), p.entries) for p in parts)
    if any(p.entries is not None for p in parts):
        parts = _check_entries(family, params, fixed, parts, source, where)
    parts = _present_entries(family, params, fixed, parts)
    wording = {key: _prose(raw.get(key, ""), source, where, key) for key in ("title", "intro")}
    try:
        work_space = parse_work_space(raw.get("work_space"))
    except ValueError as exc:
        raise SpecError(source, f"{where} field 'work_space'", str(exc).split(": ", 1)[-1]) from None
    return ItemSpec(
        id=item_id, family=family, params=params, parts=parts,
        tolerance=tolerance,
        credit=_credit(raw.get("credit"), default_credit, source, f"{where} field 'credit'"),
        title=wording["title"].written, intro=wording["intro"].written, fixed=fixed, work_space=work_space,
        wording=wording,
    )


def _params(family: Family, raw_params: Mapping[str, Any], source: str, where: str) -> Params:
    try:
        return family.resolve(raw_params)
    except KeyError as exc:
        raise SpecError(source, f"{where} field 'params.{exc.args[0]}'",
                        f"unknown param; {family.name} takes: {', '.join(family.params)}") from None
    except ValueError as exc:
        bad = next((k for k in raw_params if _rejects(family, k, raw_params[k])), None)
        field_name = f"params.{bad}" if bad else "params"
        raise SpecError(source, f"{where} field {field_name!r}", str(exc)) from None


def _settled(
    family: Family, fixed: Mapping[str, np.ndarray], params: Params, written: frozenset, source: str, where: str
) -> dict[str, Any]:
    """Params the fixed givens decide (a hand-written mask is the explicit mask kind)."""
    settled: dict[str, Any] = {}
    for given in family.givens:
        if given.name in fixed and given.settles is not None:
            try:
                settled.update(given.settles(fixed[given.name], params, written))
            except ValueError as exc:
                raise SpecError(source, f"{where} field 'givens.{given.name}'", str(exc)) from None
    return settled


def _rejects(family: Family, key: str, value: Any) -> bool:
    try:
        family.params[key].check(value)
    except (KeyError, ValueError):
        return True
    return False


#: The units a share may be counted in, largest first, in hundredths of a point: every
#: share prints exactly with two decimals, so the printed shares add up on paper (a third of a
#: point would print as 0.67 three times, 2.01 in all).
POINT_UNITS = (100, 50, 25, 10, 5, 1)


#: The most points one item may carry: far beyond any sheet, small enough for exact hundredths.
MAX_POINTS = 1_000_000


def split_points(points: float, n: int) -> list[float] | None:
    """``points`` split among ``n`` parts in shares that print exactly and add up to it.

    An even split when it is exact in hundredths (3 among 2 is 1.5 each, 2 among 5 is 0.4);
    otherwise the largest of :data:`POINT_UNITS` that gives every part a share, the remainder
    going one unit each to the earliest parts (2 among 3 is 1, 0.5, 0.5). ``None`` when the
    points are not whole hundredths or too few for a hundredth each.
    """
    if n == 1:
        return [points]
    hundredths = round(points * 100)
    if abs(points * 100 - hundredths) > 1e-6 or hundredths < n:
        return None
    if hundredths % n == 0:
        return [hundredths // n / 100] * n
    unit = next(u for u in POINT_UNITS if hundredths % u == 0 and hundredths // u >= n)
    base, extra = divmod(hundredths // unit, n)
    return [(base + (i < extra)) * unit / 100 for i in range(n)]


def _parts(raw: Any, family: Family, points: float, item_id: str, source: str, where: str,
           params: Params) -> tuple[Part, ...]:
    askable = family.askable_steps
    allowed = f"{family.name} can ask: {', '.join(askable)}"
    if raw is None:
        raw = list(family.asked_by_default(params))
    if isinstance(raw, str):
        raw = [raw]
    chosen: dict[str, list[tuple[int, ...]] | None] = {}
    if isinstance(raw, Mapping) and raw:
        steps, weights = list(raw), []
        for step, w in raw.items():
            if isinstance(w, Mapping):  # {points: 2, rows: [1]} or {entries: [[1, 2], [1, 3]]}
                w, chosen[step] = _asked_entries(w, source, f"{where} field 'ask.{step}'")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < float("inf"):
                raise SpecError(source, f"{where} field 'ask.{step}'", f"points must be a positive number, got {w!r}")
            weights.append(w)
        share = [float(w) for w in weights]
    elif isinstance(raw, list) and raw:
        steps = raw
        share = split_points(points, len(raw))
        if share is None:
            raise SpecError(source, f"{where} field 'points'",
                            f"{points:g} points do not split among {len(raw)} asked parts in shares that print "
                            "exactly: give whole hundredths of a point, at least 0.01 a part, "
                            "or an 'ask' mapping step: points")
    else:
        raise SpecError(source, f"{where} field 'ask'",
                        f"a non-empty list of steps or a mapping step: points; {allowed}")
    for step in steps:
        if step not in askable:
            raise SpecError(source, f"{where} field 'ask'", f"unknown step {step!r}; {allowed}")
    if len(set(steps)) != len(steps):
        raise SpecError(source, f"{where} field 'ask'", "a step is asked twice")
    return tuple(Part(f"{item_id}.{s}", s, w, None, _raw_entries(chosen.get(s))) for s, w in zip(steps, share))


ASK_ENTRY_KEYS = ("points", "rows", "entries")


def _asked_entries(raw: Mapping[str, Any], source: str, where: str) -> tuple[Any, Any]:
    """``{points, rows | entries}``: the points and the asked entries as written (from 1).

    ``rows: [1, 3]`` asks rows 1 and 3 whole (for a vector, entries 1 and 3); ``entries:
    [[1, 2], [1, 3]]`` asks those (row, column) entries, one index per axis of the step.
    Checked against the step's shape once the params are known (:func:`_check_entries`).
    """
    unknown = set(raw) - set(ASK_ENTRY_KEYS)
    if unknown or ("rows" in raw) == ("entries" in raw):
        raise SpecError(source, where, "a part asking some entries is a mapping with points (default 1) and either "
                                       "rows: [i, …] (whole rows, counting from 1) or entries: [[i, j], …] "
                                       "(one index per axis, counting from 1)")
    points = raw.get("points", 1)
    if "rows" in raw:
        rows = raw["rows"]
        if not isinstance(rows, list) or not rows or not all(_index(i) for i in rows):
            raise SpecError(source, f"{where}.rows", f"a non-empty list of row numbers counting from 1, got {rows!r}")
        return points, ("rows", [int(i) for i in rows])
    entries = raw["entries"]
    if (not isinstance(entries, list) or not entries
            or not all(isinstance(e, list) and e and all(_index(i) for i in e) or _index(e) for e in entries)):
        raise SpecError(source, f"{where}.entries",
                        f"a non-empty list of entries, each a list of indices counting from 1 ([1, 2]: row 1, "
                        f"column 2), got {entries!r}")
    return points, ("entries", [[int(i) for i in e] if isinstance(e, list) else [int(e)] for e in entries])


def _index(i: Any) -> bool:
    return isinstance(i, int) and not isinstance(i, bool) and i >= 1


def _raw_entries(chosen: Any) -> Any:
    # Kept as written until the step's shape is known; _check_entries turns it into indices.
    return None if chosen is None else (chosen,)


def step_shapes(family: Family, params: Params, fixed: Mapping[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    """The shape of every step for these params (one probe variant drawn and solved)."""
    from .core.seeding import Draw

    draw = Draw.candidates([0], 0, 1)
    givens = family.sample(draw, params)
    for name, value in fixed.items():
        if tuple(givens[name].shape[1:]) == value.shape:
            givens[name] = value[None]
    with np.errstate(all="ignore"):
        env = family.solve(givens, params, np)
    return {name: tuple(env[name].shape[1:]) for name in family.step_names}


def _check_entries(family: Family, params: Params, fixed: Mapping[str, np.ndarray], parts: tuple[Part, ...],
                   source: str, where: str) -> tuple[Part, ...]:
    """Asked entries as indices from 0, each checked against its step's shape."""
    shapes = step_shapes(family, params, fixed)
    out = []
    for part in parts:
        if part.entries is None:
            out.append(part)
            continue
        (kind, written), = part.entries  # type: ignore[misc]
        shape = shapes[part.step]
        field_where = f"{where} field 'ask.{part.step}.{kind}'"
        if not shape:
            raise SpecError(source, field_where, "this step is a single number: ask it whole")
        if kind == "rows":
            for r in written:
                if r > shape[0]:
                    raise SpecError(source, field_where, f"row {r} does not exist: the step has {shape[0]} rows")
            indices = [(r - 1, *rest) for r in written for rest in np.ndindex(*shape[1:])]
        else:
            indices = []
            for e in written:
                if len(e) != len(shape) or any(i > n for i, n in zip(e, shape)):
                    raise SpecError(source, field_where,
                                    f"entry {e} is not in the step's {'×'.join(map(str, shape))} shape "
                                    f"(one index per axis, counting from 1)")
                indices.append(tuple(i - 1 for i in e))
        unique = tuple(dict.fromkeys(tuple(int(i) for i in index) for index in indices))
        out.append(Part(part.id, part.step, part.points, part.tolerance, unique))
    return tuple(out)


def _present(family: Family, params: Params, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where a given or step holds real entries (a ragged delta chunk's padding is not); None: everywhere."""
    present = family.extra.get("present")
    return None if present is None else present(params, name, tuple(shape))


def _present_entries(family: Family, params: Params, fixed: Mapping[str, np.ndarray],
                     parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """A part asks only the real entries of its step: padding is never asked, shown or graded."""
    if family.extra.get("present") is None:
        return parts
    shapes = step_shapes(family, params, fixed)
    out = []
    for part in parts:
        shape = shapes[part.step]
        real = _present(family, params, part.step, shape)
        if real is None:
            out.append(part)
            continue
        asked = part.asked(shape)
        asked = real if asked is None else asked & real
        entries = tuple(tuple(int(i) for i in index) for index in np.argwhere(asked))
        out.append(Part(part.id, part.step, part.points, part.tolerance, entries))
    return tuple(out)


def _ragged_givens(raw: Any, family: Family, params: Params, source: str, where: str) -> Any:
    """Fixed givens written with a shorter last chunk, padded to the rectangular shape with zeros.

    Only for a family whose values have padding (``present``); the chunk must be written at
    exactly its own length (a full-length last chunk would state tokens that are not there).
    """
    if not isinstance(raw, Mapping) or family.extra.get("present") is None:
        return raw
    from .core.seeding import Draw

    probe = family.sample(Draw.candidates([0], 0, 1), params)
    out = dict(raw)
    for name, value in raw.items():
        if name not in probe:
            continue
        shape = tuple(probe[name].shape[1:])
        real = _present(family, params, name, shape)
        if real is None:
            continue
        padded = pad_nested(value, shape, 0)
        if padded is None or not np.array_equal(padded[1], ~real):
            r = params.get("last_chunk")
            raise SpecError(source, f"{where} field 'givens.{name}'",
                            f"a list of {params.chunks} chunks, chunk 1 first; every chunk has {params.chunk} tokens "
                            f"but the last, which has {r} (last_chunk: {r})")
        out[name] = padded[0]
    return out


def _fixed(raw: Any, family: Family, source: str, where: str) -> dict[str, np.ndarray]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(source, f"{where} field 'givens'", "must be a mapping of given: matrix")
    fixed = {}
    for name, value in raw.items():
        if name not in family.given_names:
            raise SpecError(source, f"{where} field 'givens.{name}'",
                            f"unknown given; {family.name} has: {', '.join(family.given_names)}")
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise SpecError(source, f"{where} field 'givens.{name}'", "must be a number or a rectangular list of numbers") from None
        if not np.isfinite(arr).all():
            raise SpecError(source, f"{where} field 'givens.{name}'", "entries must be finite numbers")
        if arr.size and np.abs(arr).max() > MAX_GIVEN:
            # Beyond this, exp() in a softmax or a product of givens overflows, or prints unreadably.
            raise SpecError(source, f"{where} field 'givens.{name}'",
                            f"entries must be between {-MAX_GIVEN:g} and {MAX_GIVEN:g}")
        check = next(g.check for g in family.givens if g.name == name)
        problem = check(arr) if check is not None else None
        if problem:
            raise SpecError(source, f"{where} field 'givens.{name}'", problem)
        fixed[name] = arr
    return fixed
