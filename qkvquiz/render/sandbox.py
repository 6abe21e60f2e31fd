"""The Jinja sandbox every template renders in, bundled or supplied by a user.

A template someone shares (``generate --templates DIR``) is code. Jinja's
:class:`~jinja2.sandbox.SandboxedEnvironment` already refuses private attributes
(``__class__``, ``__globals__``), unsafe ``str.format`` and huge ``range``; what it cannot
know is that NumPy can read and write files. So templates get

- ``np``: a namespace of pure NumPy math (every ufunc such as ``exp`` and ``isfinite``, plus
  the reductions and shape functions listed below, and a ``linalg`` of pure functions), never
  the module itself (``np.save``, ``np.load``, ``np.fromfile`` are out of reach);
- arrays whose attributes are limited to reading them (``shape``, ``sum()``, ``round()``,
  ``reshape()`` …): ``tofile``, ``dump``, ``setflags``, ``fill`` and the like are refused.

Autoescaping is on for HTML and XML templates (``*.html``, ``*.html.j2`` …) and off for
Markdown, where LaTeX needs ``&`` and ``\\`` as they are; untrusted text in Markdown goes
through the ``md_code`` filter instead.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from jinja2.exceptions import SecurityError
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
_NUMPY_CONSTANTS = ("e", "pi", "inf", "nan", "newaxis", "float64", "int64", "bool_")
_LINALG_FUNCTIONS = (
    "cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq", "matrix_power",
    "matrix_rank", "norm", "pinv", "qr", "slogdet", "solve", "svd",
)

# What a template may read or call on an array (or a NumPy scalar).
ARRAY_ATTRIBUTES = frozenset({
    "T", "all", "any", "argmax", "argmin", "argsort", "astype", "clip", "conj", "copy", "cumprod",
    "cumsum", "diagonal", "dot", "dtype", "flatten", "imag", "item", "max", "mean", "min", "ndim",
    "nonzero", "prod", "ravel", "real", "reshape", "round", "shape", "size", "squeeze", "std",
    "sum", "swapaxes", "tolist", "trace", "transpose", "var",
})


def _namespace() -> SimpleNamespace:
    names: dict[str, Any] = {n: getattr(np, n) for n in dir(np) if isinstance(getattr(np, n, None), np.ufunc)}
    names.update({n: getattr(np, n) for n in (*_NUMPY_FUNCTIONS, *_NUMPY_CONSTANTS) if hasattr(np, n)})
    names["linalg"] = SimpleNamespace(**{n: getattr(np.linalg, n) for n in _LINALG_FUNCTIONS})
    return SimpleNamespace(**names)


SAFE_NUMPY = _namespace()
_UFUNC_ATTRIBUTES = frozenset({"nin", "nout", "nargs", "identity", "ntypes", "reduce", "accumulate", "outer"})


def _autoescape(template_name: str | None) -> bool:
    name = (template_name or "").lower().removesuffix(".j2").removesuffix(".jinja")
    return name.endswith((".html", ".htm", ".xml", ".svg"))


MAX_POWER = 1024  # largest integer exponent: 10 ** 10 ** 10 would run for ever
MAX_REPEAT = 1_000_000  # longest text or list made by "x" * n


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class TemplateSandbox(SandboxedEnvironment):
    """Jinja's sandbox, with NumPy arrays limited to reading (see the module docstring).

    Besides files and code, ``**`` and ``*`` are watched: an integer power with an exponent
    above ``MAX_POWER`` and a text or list repeated to more than ``MAX_REPEAT`` items are
    refused (:class:`jinja2.exceptions.SecurityError`). A template can still loop for long
    (``range`` is capped at 100 000, but loops nest); the sandbox guards the machine's files
    and the process, not its CPU time.
    """

    intercepted_binops = frozenset({"**", "*"})

    def __init__(self, **options: Any) -> None:
        options.setdefault("autoescape", _autoescape)
        super().__init__(**options)
        self.globals["np"] = SAFE_NUMPY

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and _is_int(left) and _is_int(right) and abs(right) > MAX_POWER and abs(left) > 1:
            raise SecurityError(f"the power {left} ** {right} is too large for a template")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and _is_int(n) and len(seq) * n > MAX_REPEAT:
                    raise SecurityError(f"repeating a text or list {n} times is too much for a template")
        return super().call_binop(context, operator, left, right)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, (np.ndarray, np.generic)):
            return attr in ARRAY_ATTRIBUTES
        if isinstance(obj, np.ufunc):
            return attr in _UFUNC_ATTRIBUTES  # not ``at``, which writes into its argument
        return super().is_safe_attribute(obj, attr, value)
