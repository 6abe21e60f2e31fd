"""The Gradescope autograder bundle: a zip that Gradescope builds an image from.

The bundle carries the key, the exact qkvquiz that made it (the package's own source under
``vendor/``, so nothing is fetched but the few packages grading imports: numpy, Jinja2, MarkupSafe
and PyYAML), and a roster: the student is the one Gradescope says submitted (by email, student id
or name), whatever the file claims, and is graded on their own variant; in a group submission
every member is, each on the file that names them, and the submission gets the lowest of their
scores (:func:`booked_score`). Without a roster only
the student id written in the uploaded file could say whose variant to grade, so a classmate's
file uploaded unchanged would score as its owner: :func:`build_bundle` refuses that unless told
``trust_file_ids`` (practice that does not count). ``QKVQUIZ_AUTOGRADER_ROOT`` replaces
``/autograder`` so that the bundle can be run locally on a folder laid out the same way.

Which Python: the image's own ``python3``, 3.10 or newer (the vendored code builds ``X | None``
unions at run time, in type aliases, which 3.9 and older refuse), so Gradescope's base image must be
Ubuntu 22.04 (its default; python3 is 3.10) or newer. On 18.04 (3.6) or 20.04 (3.8) ``setup.sh``
stops before pip runs, with a message naming the image to choose. It does not install a newer
Python there: neither release has 3.10 in Ubuntu's own archives, so that would take a third-party
archive or a build from source at every image build, where choosing the image is one setting of
the assignment.

``requirements.txt`` holds ranges, not the exporting machine's versions (those are only a comment
in it): the newest numpy here may need a newer Python than the image has. Each floor is the oldest
release checked to grade the same (numpy 1.26, Jinja2 3.1, MarkupSafe 2.0, PyYAML 6.0 on Python
3.10) or, by an environment marker, the oldest with wheels for the image's Python if that is
later; each cap is the next major release, which the vendored code has never met.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path


ROOT_ENV = "QKVQUIZ_AUTOGRADER_ROOT"
PYTHON_ENV = "QKVQUIZ_PYTHON"
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
VISIBILITY_DEFAULT = "after_due_date"
MAX_METADATA_BYTES = 1_000_000
MIN_PYTHON = (3, 10)  # of the image's python3 (see the module's docstring)

# What grading imports at run time, by distribution name (the tests derive the set from a real
# run), each with its range per Python: a marker where the oldest release with wheels for that
# Python is later than the oldest checked to grade the same, so that pip never has to build one.
RUNTIME_REQUIREMENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "numpy": ((">=1.26,<3", 'python_version < "3.13"'), (">=2.1,<3", 'python_version >= "3.13"')),
    "jinja2": ((">=3.1,<4", ""),),
    "markupsafe": ((">=2.0,<4", ""),),
    "pyyaml": ((">=6.0,<7", 'python_version < "3.12"'), (">=6.0.1,<7", 'python_version == "3.12"'),
               (">=6.0.2,<7", 'python_version >= "3.13"')),
}
RUNTIME_PACKAGES = tuple(RUNTIME_REQUIREMENTS)

SETUP_SH = """#!/usr/bin/env bash
# Runs once while Gradescope builds the autograder image, from /autograder/source where it lies.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if ! command -v python3 >/dev/null; then
  apt-get update && apt-get install -y python3 python3-pip
fi
# Checked before pip: on an older python3, pip would only say that no numpy fits.
if ! python3 -c 'import sys; sys.exit(sys.version_info < (@MAJOR@, @MINOR@))' 2>/dev/null; then
  found="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo unknown)"
  cat >&2 <<EOF
qkvquiz autograder: this image's python3 is $found; the bundled qkvquiz needs Python @MAJOR@.@MINOR@ or newer.
In Gradescope, open the assignment's "Configure Autograder" page, choose the base image
Ubuntu 22.04 (or a newer Ubuntu), and update the autograder so that it is built again.
EOF
  exit 1
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  apt-get update && apt-get install -y python3-pip
fi
# What grading imports, in ranges for this Python (requirements.txt); qkvquiz itself is vendor/qkvquiz.
# Ubuntu 24.04's pip refuses to install into the system's Python without PIP_BREAK_SYSTEM_PACKAGES;
# older pips ignore a setting they do not know.
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir --prefer-binary -r requirements.txt
""".replace("@MAJOR@", str(MIN_PYTHON[0])).replace("@MINOR@", str(MIN_PYTHON[1]))

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Runs once per submission. QKVQUIZ_AUTOGRADER_ROOT replaces /autograder (for a local test run).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SOURCE="${QKVQUIZ_AUTOGRADER_ROOT:-/autograder}/source"
[ -d "$SOURCE/vendor" ] || SOURCE="$HERE"
export PYTHONPATH="$SOURCE/vendor${PYTHONPATH:+:$PYTHONPATH}"
exec "${QKVQUIZ_PYTHON:-python3}" -m qkvquiz.exchange.autograder "$SOURCE"
"""


# What the always-visible Summary tells before the per-part tests show (see the module's docstring):
# no score, only the total, or every part's score. A part's score moves with each entry within
# tolerance, so where resubmissions are unlimited it lets a student search entry by entry; the
# total moves too (one entry per upload); only after-due tells nothing that depends on a value.
SHOWS = ("after-due", "total", "per-part")
SHOW_DEFAULT = "after-due"


def resolve_show(show: str | None, visibility: str) -> str:
    """``show`` as asked; unasked, per-part where the per-part tests are ``visible`` (they show every
    part's score at once, so the Summary has nothing to hold back), else :data:`SHOW_DEFAULT`."""
    if show is not None:
        return show
    return "per-part" if visibility == "visible" else SHOW_DEFAULT


@dataclass(frozen=True)
class BundleOptions:
    visibility: str = VISIBILITY_DEFAULT  # of the per-part tests (they show expected values)
    summary_visibility: str = "visible"
    show: str = SHOW_DEFAULT  # what the Summary tells before the per-part tests show
    # Without a roster, grade each upload as the student id its file names: a copied file then
    # scores as its owner, so this must be asked for (practice only).
    trust_file_ids: bool = False


NO_ROSTER = ("without a roster the autograder could only grade each upload as the student id written in its "
             "file, so a classmate's file uploaded unchanged would score as its owner; give a roster (with the "
             "emails Gradescope knows the students by), or trust_file_ids=True for practice that does not count")


def _package_files() -> dict[str, bytes]:
    """The running qkvquiz's own files (sources, schemas, templates, compiled catalogs), by their
    path under vendor/."""
    from ..core.resources import templates_dir

    package = Path(__file__).resolve().parent.parent
    files: dict[str, bytes] = {}
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if "__pycache__" in rel.parts or not path.is_file() or path.suffix not in (".py", ".json", ".j2", ".css", ".mo"):
            continue
        if rel.parts[0] in ("templates", "problem_bank"):
            continue  # taken below from wherever resources finds them
        files[f"vendor/qkvquiz/{rel.as_posix()}"] = path.read_bytes()
    templates = templates_dir()
    for path in sorted(templates.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[f"vendor/qkvquiz/templates/{path.relative_to(templates).as_posix()}"] = path.read_bytes()
    return files


def requirements() -> str:
    """requirements.txt: ranges of what grading imports, for whichever Python the image has (3.10
    or newer); the versions installed here are only a comment, for reproducing a run exactly."""
    here = []
    for name in RUNTIME_PACKAGES:
        try:
            here.append(f"{name} {importlib_metadata.version(name)}")
        except importlib_metadata.PackageNotFoundError:
            here.append(f"{name} (not installed)")
    python = ".".join(str(n) for n in sys.version_info[:3])
    minimum = f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]}"
    lines = [f"# What the bundled qkvquiz imports while grading, on Python {minimum}+ (setup.sh checks it).",
             f"# Exported with Python {python}: {', '.join(here)}."]
    for name, ranges in RUNTIME_REQUIREMENTS.items():
        lines += [f"{name}{spec}; {marker}" if marker else f"{name}{spec}" for spec, marker in ranges]
    return "\n".join(lines) + "\n"


def _entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16
    return info


def build_bundle(key_text: str, *, roster_csv: str | None = None, opts: BundleOptions = BundleOptions()) -> bytes:
    """The autograder zip: setup.sh and run_autograder at its top (Gradescope's rule), the key,
    the config, the requirements and the vendored qkvquiz."""
    from ..core.version import __version__

    if opts.visibility not in VISIBILITIES or opts.summary_visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}")
    if opts.show not in SHOWS:
        raise ValueError(f"show must be one of {', '.join(SHOWS)}")
    if opts.show != "per-part" and opts.visibility == "visible":
        raise ValueError(f"visibility 'visible' shows every part's score and expected values at once, which show "
                         f"{opts.show!r} is meant to hold back: choose show 'per-part' with it, or another visibility")
    if roster_csv is None and not opts.trust_file_ids:
        raise ValueError(NO_ROSTER)
    config = {"visibility": opts.visibility, "summary_visibility": opts.summary_visibility, "show": opts.show,
              "qkvquiz_version": __version__, "roster": roster_csv is not None,
              "trust_file_ids": roster_csv is None}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_entry("setup.sh", 0o755), SETUP_SH)
        zf.writestr(_entry("run_autograder", 0o755), RUN_AUTOGRADER)
        zf.writestr(_entry("requirements.txt", 0o644), requirements())
        zf.writestr(_entry("key.json", 0o600), key_text)
        zf.writestr(_entry("qkvquiz-autograder.json", 0o644), json.dumps(config, indent=2) + "\n")
        if roster_csv is not None:
            zf.writestr(_entry("roster.csv", 0o600), roster_csv)
        for name, data in _package_files().items():
            zf.writestr(_entry(name, 0o644), data)
    return buf.getvalue()
