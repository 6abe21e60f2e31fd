"""One student's flood in an LMS download, and files naming students no roster has.

    python benchmarks/lms_flood.py [--files 99998] [--file-bytes 20000] [--roster 10000] [--unknown 3000]

Two rows, each a subprocess so that its peak memory is its own:

- ``flood``: a Canvas "Download Submissions" zip (names as ``content_zipper.rb`` writes them) in
  which one student uploaded ``--files`` JSON files of ``--file-bytes`` bytes and two others one
  each (100,000 entries: the most a zip may list); ``collect`` then ``grade_collected``. Time, peak resident memory, files read, and whether
  the class was graded.
- ``unknown``: a key of ``--roster`` students and ``--unknown`` files naming ids not in it;
  ``select_submissions`` (which says, for each, the id probably meant). Time per unknown file.

Setup (the key, the zip) is not timed. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _flood(files: int, file_bytes: int) -> dict:
    from qkvquiz.exchange.collect import collect, grade_collected
    from qkvquiz.roster import read_roster_entries
    from tests.helpers import make_key
    from tests.lms_corpus import ZIP_TIME, answers_of, canvas_name

    key, doc = make_key(students=("ada", "alan", "grace"))
    tmp = Path(tempfile.mkdtemp())
    (tmp / "roster.csv").write_text("student,name,canvas_id\nada,Ada Lovelace,101\nalan,Alan Turing,102\n"
                                    "grace,Grace Hopper,103\n", encoding="utf-8")
    path = tmp / "canvas.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, (sortable, user, student) in enumerate((("Lovelace, Ada", 101, "ada"), ("Hopper, Grace", 103, "grace"))):
            zf.writestr(zipfile.ZipInfo(canvas_name(sortable, user, 9000 + n, "a.json"), ZIP_TIME),
                        json.dumps(answers_of(doc, student)), compress_type=zipfile.ZIP_DEFLATED)
        pad = ["x" * 500] * max(0, (file_bytes - 600) // 504)  # short texts: a long one is refused by itself
        for i in range(files):
            body = json.dumps({**answers_of(doc, "alan", wrong=i < files - 1), "pad": pad})
            zf.writestr(zipfile.ZipInfo(canvas_name("Turing, Alan", 102, 20000 + i, f"a{i}.json"), ZIP_TIME), body,
                        compress_type=zipfile.ZIP_DEFLATED)
    roster = read_roster_entries(tmp / "roster.csv")
    start = time.perf_counter()
    collected = collect([path], roster)
    report = grade_collected(key, collected)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "read": len(collected.handins), "graded": len(report.results), "zip_mb": path.stat().st_size / 1e6}


def _unknown(roster: int, unknown: int) -> dict:
    from qkvquiz.core.submissions import Submission
    from qkvquiz.grade.choose import select_submissions

    key = type("Key", (), {})()
    key.students, key.parts = [f"s{i:05d}" for i in range(roster)], []  # only the ids are read
    subs = [Submission(f"u{i}.json", f"x{i:05d}-z", {}) for i in range(unknown)]
    start = time.perf_counter()
    chosen = select_submissions(key, subs)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "per_file_ms": 1000 * seconds / max(unknown, 1), "problems": len(chosen.problems)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=99_998)
    parser.add_argument("--file-bytes", type=int, default=20_000)
    parser.add_argument("--roster", type=int, default=10_000)
    parser.add_argument("--unknown", type=int, default=3_000)
    parser.add_argument("--row", choices=("flood", "unknown"))
    args = parser.parse_args()
    if args.row:  # a child: one row, its result as JSON
        row = _flood(args.files, args.file_bytes) if args.row == "flood" else _unknown(args.roster, args.unknown)
        print(json.dumps(row))
        return
    rows = {}
    for name in ("flood", "unknown"):
        out = subprocess.run([sys.executable, __file__, "--row", name, *sys.argv[1:]], capture_output=True, text=True,
                             check=True, cwd=ROOT)
        rows[name] = json.loads(out.stdout.strip().splitlines()[-1])
    f, u = rows["flood"], rows["unknown"]
    print("| job | measured |")
    print("|---|---|")
    print(f"| flood: one student's {args.files:,} files of {args.file_bytes:,} B in a {f['zip_mb']:.1f} MB Canvas zip, "
          f"2 classmates | {f['seconds']:.2f} s, peak {f['peak_mb']:.0f} MB resident, {f['read']} files read, "
          f"{f['graded']} of 3 students graded |")
    print(f"| unknown: {args.unknown:,} files naming ids not among {args.roster:,} | {u['seconds']:.2f} s "
          f"({u['per_file_ms']:.2f} ms per file) |")


if __name__ == "__main__":
    main()
