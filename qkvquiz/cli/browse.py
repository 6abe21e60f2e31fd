"""``qkvquiz families``, ``specs``, ``show`` and ``schema``: what qkvquiz offers, looked at."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..core.resources import bank_dir, schemas_dir
from ._common import LangOpt, chosen_lang, console, fail

if TYPE_CHECKING:
    pass



def families() -> None:
    """List every family (topic) with one line each; `qkvquiz show FAMILY` shows a sample."""
    from rich.table import Table

    from ..families import REGISTRY

    table = Table(show_header=True)
    table.add_column("family")
    table.add_column("what the student computes")
    for name in sorted(REGISTRY):
        table.add_row(name, REGISTRY[name].summary)
    console.print(table)


def specs() -> None:
    """List the bundled worksheet specs (usable by name in `generate`)."""
    from ..spec import load_spec

    for path in sorted(bank_dir().glob("*.yaml")):
        console.print(f"{path.stem:24} {load_spec(path).title}", highlight=False)


def show(
    family: Annotated[str, typer.Argument(help="Family name, e.g. attention.output (see `qkvquiz families`).")],
    seed: Annotated[str, typer.Option(help="Seed of the sample.")] = "0",
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="Override a param: NAME=VALUE (YAML value), repeatable.")] = None,
    lang: LangOpt = None,
) -> None:
    """Print one sample problem of a family with its worked solution."""
    from ..core.bounded_yaml import load_yaml
    from ..core.i18n import using
    from ..core.inputs import InputError
    from ..families import get_family
    from ..render.markdown import render_items
    from ..spec import SpecError, parse_spec
    from ..worksheet import GenerationError, build_worksheet

    lang = chosen_lang(lang)
    try:
        fam = get_family(family)
    except KeyError as exc:
        fail(exc.args[0])
    params = {}
    for text in param or []:
        name, sep, value = text.partition("=")
        if not sep:
            fail(f"--param {text!r}: write NAME=VALUE")
        try:
            params[name.strip()] = load_yaml(value, f"--param {name.strip()}")
        except InputError as exc:
            fail(str(exc))
    try:
        ws = build_worksheet(parse_spec({"title": fam.title, "items": [{"family": fam.name, "params": params}]},
                                        source="--param"), ["sample"], seed)
    except (SpecError, GenerationError) as exc:
        fail(str(exc))
    # Raw Markdown: a terminal Markdown renderer would eat the LaTeX's backslashes.
    with using(lang):
        for kind in ("problem", "solution"):
            console.print(render_items(ws, 0, kind)[0], markup=False, highlight=False, soft_wrap=True)
    console.print("Params: " + ", ".join(f"{k}={v!r}" for k, v in ws.spec.items[0].params.items()), highlight=False)


def schema(which: Annotated[str, typer.Argument(help="key | submission")]) -> None:
    """Print the JSON Schema of the key file or of a submission file."""
    if which not in ("key", "submission"):
        fail("choose key or submission")
    print(json.dumps(json.loads((schemas_dir() / f"{which}.schema.json").read_text(encoding="utf-8")), indent=2))
