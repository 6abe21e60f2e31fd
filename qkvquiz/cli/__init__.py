"""The ``qkvquiz`` command line: a thin shell over the library (see ``qkvquiz/__init__.py``).

One module per command group (``generate``, ``grade``, ``browse``, ``export``, ``practice``, ``scan``), what they share in
``_common``; this module makes the app and registers them, in the order ``--help`` lists them."""

from __future__ import annotations

import typer

from ..core.collector import skip_final_collection
from . import browse, generate, grade, practice
from ._common import HELP_MARKUP, TolerantHelpCommand
from .export import export_app
from .scan import scan_app

app = typer.Typer(
    help=(
        "Write, render and grade exercises on transformer attention math.\n\n"
        "Typical term: `qkvquiz generate SPEC --students 30 --out week3` writes one worksheet and a "
        "blank submission.json per student plus key.json/key.md for you; students fill in their "
        "submission.json; `qkvquiz grade week3/key.json week3/submissions --out week3/grades` scores the folder of their files."
    ),
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    pretty_exceptions_enable=False,
)


app.command()(generate.generate)
app.command()(generate.init)
app.command(cls=TolerantHelpCommand)(grade.grade)
app.command()(grade.audit)
app.command()(browse.families)
app.command()(browse.specs)
app.command()(browse.show)
app.command()(browse.schema)
app.add_typer(export_app, name="export")
app.command()(practice.practice)
app.add_typer(scan_app, name="scan")


def main() -> None:
    """The ``qkvquiz`` command: the console script and ``python -m qkvquiz``."""
    try:
        app(prog_name="qkvquiz")
    finally:
        skip_final_collection()  # the process ends here
