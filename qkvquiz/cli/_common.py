"""What every command group of the CLI shares: the consoles, how a failure is said, spec names."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from ..core.resources import bank_dir
from ..core.untrusted import terminal_text

# soft_wrap: a message is one line however long its paths (the terminal may fold it; logs and
# pipes keep it whole, so it can be searched), never cut at 80 columns where stdout is no terminal.
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def _shown(text: str) -> str:
    """Text from a file or a file name, safe to print: no Rich markup, no terminal escapes."""
    return escape(terminal_text(text))


def _fail(message: str, code: int = 2) -> None:
    # Escaped and stripped of terminal escapes: messages quote user text and commands such as
    # pip install 'qkvquiz[gpu]', whose brackets Rich would otherwise take for markup and drop.
    # Line by line: a YAML error's own line breaks stay line breaks, other controls are escaped.
    shown = "\n".join(_shown(line) for line in message.split("\n"))
    err.print(f"[bold red]error:[/] {shown}", highlight=False)
    raise typer.Exit(code)


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
