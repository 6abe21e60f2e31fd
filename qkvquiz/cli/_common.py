"""What every command group of the CLI shares: the consoles, how a failure is said, spec names."""

from __future__ import annotations

import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from ..core.untrusted import terminal_text

# soft_wrap: a message is one line however long its paths (the terminal may fold it; logs and
# pipes keep it whole, so it can be searched), never cut at 80 columns where stdout is no terminal.
console = Console(soft_wrap=True)
#: Help pages drawn by Rich (Markdown, boxes) on a terminal wide enough for its table of options;
#: elsewhere (a narrower terminal, a pipe, a file, a test) Click's plain text, wrapped between
#: words, no option name or default cut. Rich cuts a cell's long word with "…" (an option's name,
#: "~/.config/qkvquiz/secret", a template's path) on terminals below about 110 columns.
RICH_HELP_COLUMNS = 120
HELP_MARKUP = ("markdown" if sys.stdout.isatty() and shutil.get_terminal_size().columns >= RICH_HELP_COLUMNS
               else None)
err = Console(stderr=True, soft_wrap=True)
T = TypeVar("T")


def safe_text(text: str) -> str:
    """Text from a file or a file name, safe to print: no Rich markup, no terminal escapes."""
    return escape(terminal_text(text))


def fail(message: str, code: int = 2) -> None:
    # Escaped and stripped of terminal escapes: messages quote user text and commands such as
    # pip install 'qkvquiz[gpu]', whose brackets Rich would otherwise take for markup and drop.
    # Line by line: a YAML error's own line breaks stay line breaks, other controls are escaped.
    shown = "\n".join(safe_text(line) for line in message.split("\n"))
    err.print(f"[bold red]error:[/] {shown}", highlight=False)
    raise typer.Exit(code)


#: The command line's name of a library option, where it is not ``--`` and the name with dashes.
_FLAGS = {"formats": "--format", "xp": "--backend"}


def option_flag(option: str) -> str:
    """How the command line names a library option (``page_size`` → ``--page-size``): messages
    of :class:`qkvquiz.core.options.OptionError` are spelled with it."""
    return _FLAGS.get(option, "--" + option.replace("_", "-"))


def missing_font(problem: str, allowed: bool) -> None:
    """Stop before any work where PDFs would print their CJK text as empty boxes (``problem``:
    :func:`qkvquiz.render.fonts.cjk_font_problem`'s message, naming the font package), exit 2;
    or, where the user said to go on (``--allow-missing-fonts``), warn once."""
    if not allowed:
        fail(f"{problem} To write them anyway, pass --allow-missing-fonts.")
    err.print(f"[yellow]warning:[/] {escape(problem)}", highlight=False)


def renamed(name: str, value: T, default: T, old_name: str, old_value: T | None) -> T:
    """An option given by its name or by its old one, a hidden alias that still works (``export
    questions --format`` is now ``--to``, as every export names its target): the value given,
    with a note on the new name; both given with different values is an error."""
    from ..core.i18n import _

    if old_value is None:
        return value
    if value != default and value != old_value:
        fail(_("%(name)s and %(old)s (its old name) say different things: give %(name)s only")
              % {"name": name, "old": old_name})
    err.print("[dim]note:[/] " + escape(_("%(old)s is the old name of %(name)s; it still works")
                                        % {"name": name, "old": old_name}), highlight=False)
    return old_value


def resolve_spec(spec: str) -> Path:
    """A spec path, or the name of a bundled spec (``attention-basics``); exit 2 naming a missing one."""
    from ..spec import find_spec

    try:
        return find_spec(spec)
    except FileNotFoundError as exc:
        fail(safe_text(str(exc)))


# What a command needs is imported inside it: `qkvquiz --help` loads neither NumPy nor a family
# (the help text is built from the constants below, each checked against its source by a test).

#: The backends of qkvquiz.engine.backend.BACKENDS, named in the help of --backend.
BACKEND_NAMES = ("numpy", "cupy")
#: qkvquiz.core.secret.SECRET_ENV, named in the help of --secret-file.
SECRET_ENV = "QKVQUIZ_SECRET"

#: Largest class whose scores `grade` prints as a table; a larger one gets a one-line summary.
SUMMARY_TABLE_MAX = 200

def tolerance_help() -> str:
    """The epilog of `grade --help`: the default tolerance, in words (imports the grader's tolerance)."""
    from ..core.tolerance import TOLERANCE_DEFAULT

    return (
        f"Default tolerance (when a spec sets none): {TOLERANCE_DEFAULT.to_json()['value']} decimals, i.e. an entry "
        f"passes when it is {TOLERANCE_DEFAULT.describe()}. Masked entries (−∞, 0) must match exactly or "
        "within an absolute floor."
    )


class TolerantHelpCommand(TyperCommand):
    """A command whose epilog is :func:`tolerance_help`, built when the help is shown (not at start-up)."""

    @property
    def epilog(self) -> str:
        return tolerance_help()

    @epilog.setter
    def epilog(self, value: object) -> None:  # Click's __init__ sets it; the property answers instead
        pass


@contextmanager
def exit_on_terminate() -> Iterator[None]:
    """SIGTERM and SIGHUP exit the way Ctrl-C does, through ``finally`` blocks.

    Python's default for SIGTERM ends the process on the spot; raising SystemExit instead lets
    :mod:`qkvquiz.core.outputs` remove its staging folder and the PDF pool kill its workers, so an
    interrupted run leaves the previous set as it was and nothing half-written beside it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not None:
            previous[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class NoBar:
    """The progress bar where stderr is not a terminal (a script, a log file, CI): Rich would
    draw nothing there, and importing its progress bars is 10 ms of a small class's run."""

    def __enter__(self) -> NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **fields: object) -> int:
        return 0

    def update(self, task: int, **fields: object) -> None:
        return None

    def advance(self, task: int, advance: float = 1) -> None:
        return None

    def refresh(self) -> None:
        return None


def progress_bar(auto_refresh: bool = True):
    """A progress bar on stderr. Without ``auto_refresh`` it redraws only when told
    (``refresh()``) and runs no thread of its own, so a process pool may fork beside it.

    None where stderr is no terminal (a script, a log), nor on a dumb one (``TERM=dumb``: an
    editor's shell, a serial console): a bar redraws by moving the cursor, which neither does."""
    if not err.is_terminal or err.is_dumb_terminal:
        return NoBar()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True, auto_refresh=auto_refresh,
    )


BackendOpt = Annotated[str, typer.Option(
    help=f"Array backend that computes: {' | '.join(BACKEND_NAMES)} (cupy needs a CUDA GPU and "
    "pip install 'qkvquiz[gpu]'; it uses the GPU only for work large enough to gain from it, and says "
    "when it kept the work on the CPU). Results are identical on either.")]


LangOpt = Annotated[Optional[str], typer.Option(
    "--lang", help="Language of what students and instructors read: en or zh (default: the spec's "
    "`lang:`, else en; grade and audit: the key's or file's language).")]


def chosen_lang(lang: str | None) -> str | None:
    """``--lang`` checked (None when not given), or exit 2 naming the choices."""
    from ..core.i18n import UnknownLanguage, check_lang

    if lang is None:
        return None
    try:
        return check_lang(lang)
    except UnknownLanguage as exc:
        fail(f"--lang: {exc}")


def ticker(bar, task):
    """A progress callback that advances ``task`` by one and redraws the bar at most ten times a second."""
    last = 0.0

    def tick() -> None:
        nonlocal last
        bar.advance(task)
        now = time.monotonic()
        if now - last >= 0.1:
            bar.refresh()
            last = now

    return tick
