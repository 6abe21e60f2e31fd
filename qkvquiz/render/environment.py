"""The Jinja environment every template renders in: the bundled templates plainly, a user's
folder sandboxed, with the filters and globals the templates use and the current language."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ..core.i18n import install_jinja
from ..core.resources import templates_dir
from ..core.untrusted import md_code, md_text
from . import worked
from .latex import bmatrix, mask_sentences, num, shape_text
from .sandbox import FolderLoader, Record, TemplateSandbox, trusted_environment
from .template_cache import attach


@lru_cache(maxsize=4)
def environment(directory: str | None = None) -> jinja2.Environment:
    """The Jinja environment: Markdown output (no HTML escaping), strict about undefined names.

    Without ``directory`` it holds the bundled templates, which are our own code: a plain
    :class:`jinja2.Environment` (:func:`~qkvquiz.render.sandbox.trusted_environment`), each template compiled
    once per process. ``directory`` holds a user's templates: any template found there
    (``worksheet.md.j2``, ``families/attention.output.problem.md.j2`` …) replaces the bundled
    one of the same name, and every other name falls back to the bundled templates; with a
    user's folder every template renders in :class:`~qkvquiz.render.sandbox.TemplateSandbox`
    and loads (``include``, ``import``) only regular files inside those folders
    (:class:`~qkvquiz.render.sandbox.FolderLoader`).
    """
    options: dict[str, Any] = dict(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                   keep_trailing_newline=True)
    env: jinja2.Environment
    if directory is None:
        # The bundled files do not change while we run: no stat per render to see if they did.
        env = trusted_environment(loader=FolderLoader([templates_dir()]), auto_reload=False, **options)
    else:
        env = TemplateSandbox(loader=FolderLoader([Path(directory), templates_dir()]), **options)
    env.filters.update(bmatrix=bmatrix, num=num, shape=shape_text, mask_sentences=mask_sentences, md_code=md_code,
                       md_text=md_text)
    env.globals.update(zip=zip, len=len, enumerate=enumerate)  # np (and for users a bounded range) come with it
    # The worked solutions' longest lines (score, softmax and output rows, gradient sums,
    # substitutions), one call per matrix.
    env.globals["worked"] = Record(**{name: getattr(worked, name) for name in worked.__all__})
    # {% trans %}, _() and ngettext() in the current language, for bundled and custom templates alike.
    install_jinja(env, trusted=directory is None)
    # The bundled templates' compiled code is kept between runs (template_cache); a user's are not.
    return attach(env) if directory is None else env
