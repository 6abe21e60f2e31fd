"""A digest of everything qkvquiz writes for every bundled spec, in English and Chinese.

    python tools/output_digest.py > before.txt      # before a change that should change no output
    python tools/output_digest.py > after.txt
    diff before.txt after.txt                        # empty: every file is byte-identical

For each spec of ``problem_bank/`` and each language it runs, through the real CLI, in a temporary
folder with a fixed seed and no secret: ``generate`` (md and html: worksheets, answer forms, keys),
``grade`` of a class whose first student hands in the key's own answers, the second a wrong
answer in every part and the third a blank template, every ``export grades`` target and every
``export questions`` target (in the set's language). It prints one line per file written: the
spec, language, path and SHA-256. PDFs are left out (their bytes hold creation times; compare
their pages as pictures). Times, paths and ``saved_at`` stamps in outputs are kept out by fixing
what the commands take.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGS = ("en", "zh")
GRADE_TARGETS = ("canvas", "moodle-gradebook", "blackboard", "plain")
QUESTION_FORMATS = "moodle,qti,canvas"


def cli(*args: str, cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "qkvquiz", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"qkvquiz {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def hand_ins(key_path: Path, folder: Path) -> None:
    """The first student hands in the key's answers, the second a wrong number everywhere."""
    doc = json.loads(key_path.read_text(encoding="utf-8"))
    folder.mkdir()
    for k, student in enumerate(doc["students"][:2]):
        answers = student["answers"] if k == 0 else {part: 123456 for part in student["answers"]}
        submission = {"student": student["student"], "variant": student["variant"], "set": doc["set"],
                      "answers": answers}
        (folder / f"{student['student']}.json").write_text(json.dumps(submission), encoding="utf-8")


def digest(root: Path) -> list[tuple[str, str]]:
    return sorted((str(p.relative_to(root)), hashlib.sha256(p.read_bytes()).hexdigest())
                  for p in root.rglob("*") if p.is_file() and not p.name.startswith(".") and p.suffix != ".pdf")


def main() -> None:
    specs = sorted(p.stem for p in (ROOT / "problem_bank").glob("*.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        env = {**os.environ, "XDG_CONFIG_HOME": str(base / "config"), "XDG_CACHE_HOME": str(base / "cache"),
               "PYTHONPATH": str(ROOT), "COLUMNS": "120", "SOURCE_DATE_EPOCH": "0"}
        for spec in specs:
            for lang in LANGS:
                work = base / f"{spec}-{lang}"
                work.mkdir()
                cli("generate", spec, "--students", "3", "--seed", "digest", "--public", "--lang", lang,
                    "--format", "md,html", "--out", "set", cwd=work, env=env)
                hand_ins(work / "set" / "key.json", work / "handed-in")
                (work / "set" / "students" / "s03" / "submission.json").replace(work / "handed-in" / "s03.json")
                cli("grade", "set/key.json", "handed-in", "--out", "grades", "--lang", lang, cwd=work, env=env)
                for target in GRADE_TARGETS:
                    cli("export", "grades", "grades", "--to", target, "--out", f"exports/{target}.csv",
                        cwd=work, env=env)
                cli("export", "questions", spec, "--to", QUESTION_FORMATS, "--variants", "2", "--seed", "digest",
                    "--lang", lang, "--out", "bank", cwd=work, env=env)
                for path, sha in digest(work):
                    print(f"{spec} {lang} {path} {sha}")


if __name__ == "__main__":
    main()
