"""qkvquiz: write, render and grade exercises on transformer attention math.

A notebook uses the same functions as the command line::

    from qkvquiz import load_spec, build_worksheet, generate_set, load_key, grade_files

    spec = load_spec("problem_bank/attention-basics.yaml")
    ws = build_worksheet(spec, ["ada", "alan"], seed=7)       # solved variants, NumPy arrays
    result = generate_set(spec, ["ada", "alan"], "out", seed=7)  # files on disk
    report = grade_files(load_key("out/key.json"), ["ada.json"])
"""

from .families import REGISTRY as FAMILIES
from .families import get_family
from .generate import generate_set
from .grade import Tolerance
from .grade.grader import grade_files
from .key import load_key
from .render.markdown import key_markdown, worksheet_markdown
from .spec import load_spec, parse_spec
from .worksheet import build_worksheet

__version__ = "0.1.0"

__all__ = [
    "FAMILIES", "Tolerance", "build_worksheet", "generate_set", "get_family", "grade_files",
    "key_markdown", "load_key", "load_spec", "parse_spec", "worksheet_markdown",
]
