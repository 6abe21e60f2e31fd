"""Spec text in a question bank is shown as written and never read as a format's own syntax:
a title holding ``{1:NUMERICAL:=42}`` is no cloze field in Moodle, ``[b1_1_1]`` no blank in
Canvas, and a control character does not make the XML unreadable.

Moodle's parser is checked twice: with a port of its regexes (always), and with its own PHP
code where ``php`` is installed and ``QKVQUIZ_MOODLE_SRC`` names a Moodle checkout (its
``question/type/multianswer/questiontype.php`` is read from there; nothing of it is kept here).
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.exchange.canvas_qti import QTI12_NS
from qkvquiz.exchange.qti21 import QTI_NS
from qkvquiz.exchange.questions import export_questions
from qkvquiz.spec import parse_spec

# What a spec author might type, with every character Moodle's cloze syntax gives meaning to:
# fields of several types, a "{#1}" placeholder, answer lists, feedback, credit and tolerance
# marks, backslash escapes, an unclosed opener that /s would carry into our own fields, and
# Canvas's "[blank]" names. Markdown keeps all of it as text.
SHOWN = "{1:NUMERICAL:=42:1} {#1} {2:MULTICHOICE:=a~b#no} {:SA:=x} %50% = ~ # } {"
PLANTED = SHOWN + " [b1_1_1] [b1] `{3:NM:=3}` $x_{4:NM:=4}$ \\{5:SA:=y\\} {6:SHORTANSWER:="
CONTROL = "\x01\x0b"  # no XML 1.0 file can hold these


def planted_spec(control: str = ""):
    return parse_spec({"title": "T " + PLANTED + control, "instructions": PLANTED, "items": [
        {"family": "attention.scores", "title": "It " + PLANTED + control, "intro": PLANTED + control,
         "params": {"queries": 2, "keys": 2, "d_k": 2}, "ask": ["scores"]},
        {"family": "attention.weights", "title": "{1:NM:=1}", "intro": "{#2} {2:SA:=b}",
         "params": {"queries": 2, "keys": 3}, "ask": ["weights"]},
    ]})


@pytest.fixture(scope="module")
def bank():
    return export_questions(planted_spec(), 2, "planted")


def entries(ws, item_index: int, student: int) -> list[float]:
    item, env = ws.spec.items[item_index], ws.envs[item_index]
    out = []
    for part in item.parts:
        exact = np.asarray(env[part.step][student], dtype=np.float64)
        asked = part.asked(exact.shape)
        out += [float(exact[i]) for i in np.ndindex(exact.shape) if asked is None or asked[i]]
    return out


def cloze_texts(xml: str) -> list[str]:
    """Each cloze question's text as Moodle stores it (the XML's text, references and all)."""
    return [q.find("questiontext/text").text for q in ET.fromstring(xml) if q.get("type") == "cloze"]


def shown(fragment: str) -> str:
    """What a browser shows of an HTML fragment: its text, references decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", fragment))


# ---------------------------------------------------------------- Moodle's cloze parser, ported
# question/type/multianswer/questiontype.php: ANSWER_REGEX, run with /s. PCRE's one lookbehind
# with alternatives of different lengths, (?<!\\|&|&amp;), is three lookbehinds in Python.
_FRACTION = r"=|%(-?[0-9]+(?:[.,][0-9]*)?)%"
_ANSWER = r".+?(?<!\\)(?<!&)(?<!&amp;)(?=[~#}]|$)"
_FEEDBACK = r".*?(?<!\\)(?=[~}]|$)"
_ALTERNATIVE = f"({_FRACTION})?({_ANSWER})(#({_FEEDBACK}))?"
_TYPES = ("(NUMERICAL|NM)|(MULTICHOICE|MC)|(MULTICHOICE_V|MCV)|(MULTICHOICE_H|MCH)|"
          "(SHORTANSWER|SA|MW)|(SHORTANSWER_C|SAC|MWC)|"
          "(MULTICHOICE_S|MCS)|(MULTICHOICE_VS|MCVS)|(MULTICHOICE_HS|MCHS)|"
          "(MULTIRESPONSE|MR)|(MULTIRESPONSE_H|MRH)|(MULTIRESPONSE_S|MRS)|(MULTIRESPONSE_HS|MRHS)")
ANSWER_REGEX = re.compile(r"\{([0-9]*):(" + _TYPES + "):(" + _ALTERNATIVE + "(~" + _ALTERNATIVE + r")*)\}", re.DOTALL)
PLACE = re.compile(r"\{#(\d+)\}")  # initialise_question_instance splits the stored text at these


def moodle_extract(text: str) -> tuple[list[str], list[str]]:
    """qtype_multianswer_extract_question's loop: each field found is replaced by "{#N}" in turn.
    Returns the fields and the placeholders the stored text then holds, in order."""
    fields: list[str] = []
    while (m := ANSWER_REGEX.search(text)) is not None:
        fields.append(m.group(0))
        text = text.replace(m.group(0), f"{{#{len(fields)}}}", 1)
    return fields, PLACE.findall(text)


def test_the_port_reads_fields_as_moodle_does():
    fields, places = moodle_extract("a {1:NUMERICAL:=42:1} b {2:SA:=x~%50%y#fb} {#7} c &#123;1:NM:=1&#125;")
    assert fields == ["{1:NUMERICAL:=42:1}", "{2:SA:=x~%50%y#fb}"] and places == ["1", "2", "7"]


def test_moodle_finds_exactly_our_fields_and_shows_the_text_as_written(bank):
    ws, files = bank
    texts = cloze_texts(files["questions-moodle.xml"])
    k = 0
    for i in range(len(ws.spec.items)):
        for s in range(len(ws.students)):
            text = texts[k]
            k += 1
            fields, places = moodle_extract(text)
            expected = entries(ws, i, s)
            assert len(fields) == len(expected)
            assert places == [str(n) for n in range(1, len(expected) + 1)]  # no "{#N}" but ours
            values = [float(f.split(":=")[1].split(":")[0]) for f in fields if ":NUMERICAL:" in f]
            assert values == [v for v in expected if np.isfinite(v)]
            if i == 0:
                assert SHOWN in shown(text) and "x_{4:NM:=4}" in shown(text)


def test_qti_and_canvas_show_the_text_as_written(bank):
    ws, files = bank
    with zipfile.ZipFile(io.BytesIO(files["questions-qti21.zip"])) as zf:
        item = ET.fromstring(zf.read(f"items/{ws.spec.items[0].id}-{ws.students[0]}.xml"))
    assert SHOWN in item.get("title") and SHOWN in "".join(item.find(f"{{{QTI_NS}}}itemBody").itertext())
    with zipfile.ZipFile(io.BytesIO(files["questions-canvas-qti.zip"])) as zf:
        xml = next(zf.read(n) for n in zf.namelist() if n != "imsmanifest.xml")
    N = f"{{{QTI12_NS}}}"
    for node in ET.fromstring(xml).iter(f"{N}item"):
        text = node.find(f"{N}presentation/{N}material/{N}mattext").text
        # Canvas cleans the HTML (references become characters), then turns the first "[name]"
        # of each blank into its box: every one must be ours, in the grid.
        cleaned = html.unescape(text)
        for response in node.findall(f"{N}presentation/{N}response_lid"):
            name = response.find(f"{N}material/{N}mattext").text
            assert cleaned.count(f"[{name}]") == 1 and cleaned.index(f"[{name}]") > cleaned.index("<table>")
        if "It " in node.get("title"):
            assert SHOWN + " [b1_1_1] [b1]" in shown(text).replace("\u2060", "")


def test_control_characters_leave_every_file_readable():
    _, files = export_questions(planted_spec(CONTROL), 1, "control")
    ET.fromstring(files["questions-moodle.xml"])
    for name in ("questions-qti21.zip", "questions-canvas-qti.zip"):
        with zipfile.ZipFile(io.BytesIO(files[name])) as zf:
            for member in zf.namelist():
                ET.fromstring(zf.read(member))  # raises on a character XML cannot hold


# ---------------------------------------------------------------- Moodle's own PHP code

_MOODLE = os.environ.get("QKVQUIZ_MOODLE_SRC", "")
_QTYPE = Path(_MOODLE) / "question" / "type" / "multianswer" / "questiontype.php" if _MOODLE else None
needs_moodle = pytest.mark.skipif(
    shutil.which("php") is None or _QTYPE is None or not _QTYPE.is_file(),
    reason="needs php and QKVQUIZ_MOODLE_SRC set to a Moodle checkout")

# Just enough of Moodle for its parser to run: the constants and classes it names.
_PHP_HEAD = """<?php
define('FORMAT_HTML', 1);
class qtype_multichoice_base { const LAYOUT_DROPDOWN = 0; const LAYOUT_VERTICAL = 1; const LAYOUT_HORIZONTAL = 2; }
class moodle_exception extends Exception {}
"""
_PHP_MAIN = r"""
$out = [];
foreach (json_decode(file_get_contents('php://stdin'), true) as $text) {
    $q = qtype_multianswer_extract_question(['text' => $text, 'format' => FORMAT_HTML, 'itemid' => '']);
    preg_match_all('/\{#(\d+)\}/', $q->questiontext['text'], $places);
    $fields = [];
    foreach ($q->options->questions as $w) {
        $fields[] = ['qtype' => $w->qtype, 'answer' => array_values($w->answer)];
    }
    $out[] = ['fields' => $fields, 'places' => $places[1]];
}
echo json_encode($out);
"""


def moodle_php(texts: list[str]) -> list[dict]:
    """Run Moodle's own qtype_multianswer_extract_question (with its regex constants) on ``texts``."""
    source = _QTYPE.read_text(encoding="utf-8")
    defines = re.findall(r"^define\(.*?\);$", source, re.MULTILINE | re.DOTALL)
    functions = [re.search(rf"^function {name}\(.*?^\}}$", source, re.MULTILINE | re.DOTALL).group(0)
                 for name in ("qtype_multianswer_initialise_multichoice_subquestion",
                              "qtype_multianswer_extract_question")]
    program = _PHP_HEAD + "\n".join(defines + functions) + _PHP_MAIN
    done = subprocess.run(["php", "-d", "display_errors=stderr", "-r", program.removeprefix("<?php")],
                          input=json.dumps(texts), capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@needs_moodle
def test_moodles_own_parser_finds_exactly_our_fields(bank):
    ws, files = bank
    texts = cloze_texts(files["questions-moodle.xml"])
    read = moodle_php(texts)
    k = 0
    for i in range(len(ws.spec.items)):
        for s in range(len(ws.students)):
            expected = entries(ws, i, s)
            got = read[k]
            k += 1
            assert len(got["fields"]) == len(expected)
            assert got["places"] == [str(n) for n in range(1, len(expected) + 1)]
            numbers = [float(f["answer"][0]) for f in got["fields"] if f["qtype"] == "numerical"]
            assert numbers == [v for v in expected if np.isfinite(v)]
