"""Merge a message catalog after `git merge` stopped on it: ``python tools/merge_catalog.py BRANCH``.

Two branches that each added translations conflict in ``qkvquiz.po`` (and always in the compiled
``.mo``). This takes the catalog of the current branch, adds every entry the other branch has and
this one lacks, and takes the other branch's translation where it changed an entry since the merge
base and this branch did not. Then run the usual extract / update / compile (docs/languages.md),
which drops what the merged code no longer uses and writes the ``.mo`` anew.
"""

from __future__ import annotations

import argparse
import io
import subprocess

from babel.messages.pofile import read_po, write_po

CATALOG = "qkvquiz/locale/zh/LC_MESSAGES/qkvquiz.po"


def _catalog(rev: str, path: str):
    data = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, check=True).stdout
    return read_po(io.BytesIO(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("branch", help="the branch being merged")
    parser.add_argument("--catalog", default=CATALOG, help=f"the .po file (default {CATALOG})")
    args = parser.parse_args()
    base_rev = subprocess.run(["git", "merge-base", "HEAD", args.branch], capture_output=True, text=True,
                              check=True).stdout.strip()
    ours, theirs, base = (_catalog(rev, args.catalog) for rev in ("HEAD", args.branch, base_rev))
    for message in theirs:
        if not message.id:
            continue  # the header: ours
        mine, before = ours.get(message.id, message.context), base.get(message.id, message.context)
        if mine is None:
            ours[message.id] = message
        elif before is not None and before.string != message.string and mine.string == before.string:
            mine.string, mine.flags = message.string, message.flags
    with open(args.catalog, "wb") as fh:
        write_po(fh, ours, sort_output=True, no_location=True, width=76)
    print(f"merged {args.catalog}: {len(ours)} entries")


if __name__ == "__main__":
    main()
