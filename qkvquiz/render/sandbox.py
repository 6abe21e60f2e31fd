"""The Jinja sandbox every template renders in, bundled or supplied by a user.

A template someone shares (``generate --templates DIR``) is code. Jinja's
:class:`~jinja2.sandbox.SandboxedEnvironment` already refuses private attributes
(``__class__``, ``__globals__``), unsafe ``str.format`` and huge ``range``; what it cannot
know is that NumPy can read and write files. So templates see plain data only:

- ``np``: a namespace of pure NumPy math (every ufunc such as ``exp`` and ``isfinite``, plus
  the reductions and shape functions listed below, and a ``linalg`` of pure functions), never
  the module itself and never a type (``np.float64.tofile`` would write any file): no
  attribute of a class, a dtype or a module can be read at all;
- arrays whose attributes are limited to reading them (``shape``, ``sum()``, ``round()``,
  ``reshape()`` …): ``tofile``, ``dump``, ``setflags``, ``fill`` and the like are refused;
- items, families, steps and the spec as :class:`Record` (fields only, no methods).

``include`` and ``import`` go through :class:`FolderLoader`: a name resolves only to a
regular file inside the templates folders (no ``..``, no absolute path, no link out).
Widths that make one huge string (``'%0999999999d' % 1``, ``'x'|center(2000000000)``,
``'{:>999999999}'.format(1)``) and NumPy arrays of more than ``MAX_ELEMENTS`` entries are
refused here; time and memory in general cannot be bounded inside the process, so a user's
templates render in a worker process with limits (:mod:`qkvquiz.render.worker`).

Autoescaping is on for HTML and XML templates (``*.html``, ``*.html.j2`` …) and off for
Markdown, where LaTeX needs ``&`` and ``\\`` as they are; untrusted text in Markdown goes
through the ``md_code`` filter instead.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import stat
import string
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import numpy as np
from jinja2.exceptions import SecurityError, TemplateError, TemplateNotFound
from jinja2.filters import do_batch, do_center, do_format, do_indent, do_slice
from jinja2.sandbox import SandboxedEnvironment

# Pure functions of arrays: no I/O, no global state, no in-place writes to their inputs.
_NUMPY_FUNCTIONS = (
    "abs", "all", "allclose", "any", "arange", "argmax", "argmin", "argsort", "around", "array",
    "array_equal", "asarray", "broadcast_to", "clip", "concatenate", "count_nonzero", "cumprod",
    "cumsum", "diag", "diagonal", "dot", "einsum", "expand_dims", "eye", "flatnonzero", "full",
    "full_like", "hstack", "inner", "isclose", "linspace", "matmul", "max", "mean", "median", "min",
    "moveaxis", "nonzero", "ones", "ones_like", "outer", "prod", "ravel", "repeat", "reshape",
    "round", "shape", "size", "sort", "split", "squeeze", "stack", "std", "sum", "swapaxes", "take",
    "tile", "trace", "transpose", "tril", "triu", "unique", "var", "vstack", "where", "zeros",
    "zeros_like", "ndim",
)
# Values only: ``float64``, ``int64`` and ``bool_`` were here once, and a type's unbound
# methods (``np.float64.tofile(x, path)``) take any instance, so no type is handed out.
_NUMPY_CONSTANTS = ("e", "pi", "inf", "nan", "newaxis")
_LINALG_FUNCTIONS = (
    "cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq", "matrix_power",
    "matrix_rank", "norm", "pinv", "qr", "slogdet", "solve", "svd",
)

# What a template may read or call on an array (or a NumPy scalar). Not ``dtype``: its
# ``type`` is a NumPy type again.
ARRAY_ATTRIBUTES = frozenset({
    "T", "all", "any", "argmax", "argmin", "argsort", "astype", "clip", "conj", "copy", "cumprod",
    "cumsum", "diagonal", "dot", "flatten", "imag", "item", "max", "mean", "min", "ndim",
    "nonzero", "prod", "ravel", "real", "reshape", "round", "shape", "size", "squeeze", "std",
    "sum", "swapaxes", "tolist", "trace", "transpose", "var",
})

MAX_ELEMENTS = 1_000_000  # largest array a template may make (8 MB of float64)
MAX_WIDTH = 10_000  # widest field of a %-format, str.format, center, ljust, indent …


def _elements(n: Any) -> int:
    return math.prod(int(k) for k in np.atleast_1d(n).ravel())


def _arange_size(*args: Any, start: Any = None, stop: Any = None, step: Any = None, **_: Any) -> int:
    given = [*args, *(v for v in (start, stop, step) if v is not None)]
    first, last, by = (0, given[0], 1) if len(given) == 1 else (*given[:2], given[2] if len(given) > 2 else 1)
    return 0 if by == 0 else max(0, math.ceil((last - first) / by))


# How many entries a call would make, worked out before NumPy allocates them (NumPy's own
# parameter names, so that keyword calls are checked too).
_SIZE_BEFORE_CALL: dict[str, Callable[..., int]] = {
    "ones": lambda shape, *a, **k: _elements(shape),
    "zeros": lambda shape, *a, **k: _elements(shape),
    "full": lambda shape, *a, **k: _elements(shape),
    "eye": lambda N, M=None, *a, **k: int(N) * int(N if M is None else M),
    "linspace": lambda start, stop, num=50, *a, **k: int(num),
    "arange": _arange_size,
    "tile": lambda A, reps: np.size(A) * _elements(reps),
    "repeat": lambda a, repeats, *r, **k: np.size(a) * int(np.max(repeats, initial=0)),
    "outer": lambda a, b, *r, **k: np.size(a) * np.size(b),
}


def _bounded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    size = _SIZE_BEFORE_CALL[name]

    def call(*args: Any, **kwargs: Any) -> Any:
        if size(*args, **kwargs) > MAX_ELEMENTS:
            raise SecurityError(f"np.{name}(...) would make more than {MAX_ELEMENTS} entries")
        return fn(*args, **kwargs)

    return call


def _namespace() -> SimpleNamespace:
    # The module's own namespace, not dir(np): getattr on every name dir lists would import
    # f2py, testing, the polynomial and random packages … (a third of a second at start-up).
    names: dict[str, Any] = {n: v for n, v in vars(np).items() if isinstance(v, np.ufunc)}
    names.update({n: getattr(np, n) for n in (*_NUMPY_FUNCTIONS, *_NUMPY_CONSTANTS) if hasattr(np, n)})
    names.update({n: _bounded(n, names[n]) for n in _SIZE_BEFORE_CALL})
    names["linalg"] = SimpleNamespace(**{n: getattr(np.linalg, n) for n in _LINALG_FUNCTIONS})
    return SimpleNamespace(**names)


SAFE_NUMPY = _namespace()
_UFUNC_ATTRIBUTES = frozenset({"nin", "nout", "nargs", "identity", "ntypes", "reduce", "accumulate", "outer"})


class Record:
    """Plain, read-only data for templates: ``r.name`` and ``r["name"]``, nothing else.

    Items, families and steps are objects with methods (and step functions); a template
    gets a Record of their fields instead, so nothing it reaches can run code or touch files.
    Unlike a dict, a Record has no methods that a field called ``items`` or ``values`` hides.
    """

    __slots__ = ("_fields",)

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)  # pickle and copy look up dunders first
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._fields[name]

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def __iter__(self) -> Any:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Record is read-only")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_record, (self._fields,))

    def __repr__(self) -> str:
        return f"Record({', '.join(f'{k}={v!r}' for k, v in self._fields.items())})"


def _record(fields: dict[str, Any]) -> Record:
    return Record(**fields)


def _autoescape(template_name: str | None) -> bool:
    name = (template_name or "").lower().removesuffix(".j2").removesuffix(".jinja")
    return name.endswith((".html", ".htm", ".xml", ".svg"))


MAX_POWER = 1024  # largest integer exponent: 10 ** 10 ** 10 would run for ever
MAX_REPEAT = 1_000_000  # longest text or list made by "x" * n
MAX_TEMPLATE_BYTES = 1 << 20  # a template file larger than 1 MiB is not a template


class TemplateFailed(TemplateError):
    """A user's template was refused or stopped; the message names the template file."""


class UnsafeTemplate(TemplateFailed):
    """A template name that resolves to no regular file inside the templates folders."""


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# %-format conversions: %(key)flags width .precision; a width or precision of * comes from the args.
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_percent(fmt: str) -> None:
    for width, precision in _PERCENT_SPEC.findall(fmt):
        for n in (width, precision):
            if n == "*" or (n and int(n) > MAX_WIDTH):
                raise SecurityError(f"a %-format width or precision above {MAX_WIDTH} (or *) is not allowed in a template")


def _check_format_spec(fmt: str) -> None:
    for _, _, spec, _ in string.Formatter().parse(fmt):
        if spec and ("{" in spec or any(int(n) > MAX_WIDTH for n in re.findall(r"\d+", spec))):
            raise SecurityError(f"a format width or precision above {MAX_WIDTH} (or a nested one) is not allowed in a template")


def _check_width(width: Any) -> None:
    if _is_int(width) and width > MAX_WIDTH:
        raise SecurityError(f"a width above {MAX_WIDTH} is not allowed in a template")


_PADDING_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


def _center(value: str, width: int = 80) -> str:
    _check_width(width)
    return do_center(value, width)


def _indent(s: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    _check_width(width)
    return do_indent(s, width, first, blank)


def _format(value: str, *args: Any, **kwargs: Any) -> str:
    _check_percent(str(value))
    return do_format(value, *args, **kwargs)


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    if _is_int(linecount) and linecount > MAX_REPEAT:  # fill_with pads the last batch to linecount
        raise SecurityError(f"batches of more than {MAX_REPEAT} items are too much for a template")
    return do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    if _is_int(slices) and slices > MAX_REPEAT:
        raise SecurityError(f"more than {MAX_REPEAT} slices are too much for a template")
    return do_slice(value, slices, fill_with)


def _offer_plain_data(env: jinja2.Environment) -> None:
    """What every environment of ours offers its templates: ``np`` the pure-math namespace and no
    ``lipsum`` (``lipsum(10**9)`` writes paragraphs for ever)."""
    env.globals["np"] = SAFE_NUMPY
    env.globals.pop("lipsum", None)


def _format_string(obj: Any) -> str | None:
    """The format string of a ``str.format`` or ``str.format_map`` about to be called, whether
    Jinja hands over the bound method or its own sandboxing wrapper of it (a wrapper made the
    standard way, :func:`functools.update_wrapper`, which :func:`inspect.unwrap` follows).
    ``""`` for such a method whose string cannot be found (refused), None for anything else."""
    if getattr(obj, "__qualname__", None) not in ("str.format", "str.format_map"):
        return None
    text = getattr(inspect.unwrap(obj), "__self__", None)
    return text if isinstance(text, str) else ""


class TemplateSandbox(SandboxedEnvironment):
    """Jinja's sandbox with plain data only (see the module docstring), through its documented
    hooks alone (:meth:`is_safe_attribute`, :meth:`is_safe_callable`, :meth:`call_binop`).

    Besides files and code, ``**``, ``*`` and ``%`` are watched: an integer power with an
    exponent above ``MAX_POWER``, a text or list repeated to more than ``MAX_REPEAT`` items
    and a format wider than ``MAX_WIDTH`` are refused (:class:`jinja2.exceptions.SecurityError`).
    A text's own padding methods (``'x'.ljust(n)``, ``center``, ``rjust``, ``zfill``,
    ``expandtabs``) are not offered: no hook sees their width before they run; the ``center``
    and ``indent`` filters, which check it, remain.
    Loops and other ways to use time or memory are not bounded here: that is the worker's job.
    """

    intercepted_binops = frozenset({"**", "*", "%"})

    def __init__(self, **options: Any) -> None:
        options.setdefault("autoescape", _autoescape)
        super().__init__(**options)
        _offer_plain_data(self)
        self.filters.update(center=_center, indent=_indent, format=_format, batch=_batch, slice=_slice)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and _is_int(left) and _is_int(right) and abs(right) > MAX_POWER and abs(left) > 1:
            raise SecurityError(f"the power {left} ** {right} is too large for a template")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and _is_int(n) and len(seq) * n > MAX_REPEAT:
                    raise SecurityError(f"repeating a text or list {n} times is too much for a template")
        if operator == "%" and isinstance(left, str):
            _check_percent(left)
        return super().call_binop(context, operator, left, right)

    def is_safe_callable(self, obj: Any) -> bool:
        # '{:>999999999}'.format(1): the widths are in the format string, known before the call.
        fmt = _format_string(obj)
        if fmt == "":
            return False
        if fmt is not None:
            _check_format_spec(fmt)
        return super().is_safe_callable(obj)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, (type, types.ModuleType, np.dtype)):
            return False  # a class's unbound methods take any instance; a module is everything
        if isinstance(obj, (np.ndarray, np.generic)):
            return attr in ARRAY_ATTRIBUTES
        if isinstance(obj, np.ufunc):
            return attr in _UFUNC_ATTRIBUTES  # not ``at``, which writes into its argument
        if isinstance(obj, str) and attr in _PADDING_METHODS:
            return False  # "x".center(2000000000): its width comes only with the call
        return super().is_safe_attribute(obj, attr, value)


def trusted_environment(**options: Any) -> jinja2.Environment:
    """The environment of the bundled templates: our own code, so a plain :class:`jinja2.Environment`.

    It offers templates what :class:`TemplateSandbox` offers (``np`` is the same pure-math
    namespace, autoescaping is on for HTML and XML, no ``lipsum``), so a bundled template copied
    into a user's folder renders there, sandboxed, to the same text. A user's folder
    (``--templates``) never renders here: a bundled template may import a user's macros, so
    with a folder every template renders in :class:`TemplateSandbox`, in a worker process.
    """
    options.setdefault("autoescape", _autoescape)
    env = jinja2.Environment(**options)
    _offer_plain_data(env)
    return env


class FolderLoader(jinja2.BaseLoader):
    """Templates from ``folders``, the first that has a name winning.

    A name is a relative path of plain parts (no ``..``, no absolute path, no backslash); it
    resolves only to a regular file whose real path is inside that folder, so a link to the
    instructor's secret, ``/dev/zero`` or a FIFO is refused with an error naming it, never read.
    """

    def __init__(self, folders: Sequence[str | Path]) -> None:
        self.folders = [Path(f).resolve() for f in folders]

    def find(self, name: str) -> Path | None:
        """The file ``name`` resolves to, None where no folder has it; raises UnsafeTemplate."""
        parts = name.split("/")
        if "\\" in name or "\0" in name or any(p in ("", ".", "..") for p in parts):
            raise TemplateNotFound(name)
        for folder in self.folders:
            candidate = folder.joinpath(*parts)
            if not os.path.lexists(candidate):
                continue
            real = candidate.resolve()
            if not real.is_relative_to(folder):
                raise UnsafeTemplate(f"{candidate}: a link to a file outside the templates folder {folder}; refused")
            if not stat.S_ISREG(real.stat().st_mode):
                raise UnsafeTemplate(f"{candidate}: not a regular file; refused")
            return real
        return None

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        path = self.find(template)
        if path is None:
            raise TemplateNotFound(template)
        # O_NOFOLLOW | O_NONBLOCK: a file swapped for a link or a FIFO since find() is not followed or waited on.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UnsafeTemplate(f"{path}: not a regular file; refused")
            raw = f.read(MAX_TEMPLATE_BYTES + 1)
        if len(raw) > MAX_TEMPLATE_BYTES:
            raise UnsafeTemplate(f"{path}: larger than {MAX_TEMPLATE_BYTES} bytes; refused")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnsafeTemplate(f"{path}: not UTF-8 text (byte {exc.start})") from None
        mtime = info.st_mtime_ns

        def uptodate() -> bool:
            try:
                return os.stat(path).st_mtime_ns == mtime
            except OSError:
                return False

        return text, str(path), uptodate

    def list_templates(self) -> list[str]:
        found: set[str] = set()
        for folder in self.folders:
            for path in folder.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    found.add(path.relative_to(folder).as_posix())
        return sorted(found)
