"""The page code: what the QR code holds, drawn and read back whatever way the page lies."""

from __future__ import annotations

import numpy as np
import pytest
import segno
from hypothesis import given
from hypothesis import strategies as st

from qkvquiz.scan.qr import PageCode, find_codes, parse_payload, payload, qr_modules, qr_svg_path
from qkvquiz.scan.requirements import ScanDependencyMissing, need

CODE = PageCode("3f9c0a12be47", "AB12-CD34", 2)


def picture(modules: np.ndarray, at=(80, 60), unit=6, size=(400, 300)) -> np.ndarray:
    image = np.full(size, 255, np.uint8)
    big = np.kron(modules, np.ones((unit, unit), bool))
    image[at[0]:at[0] + big.shape[0], at[1]:at[1] + big.shape[1]][big] = 0
    return image


def test_the_payload_holds_set_variant_and_page_only():
    assert payload(CODE) == "QKVQ1/3F9C0A12BE47/AB12-CD34/2"
    assert parse_payload(payload(CODE)) == CODE


@given(st.text(max_size=60))
def test_any_other_text_is_no_page_code(text):
    code = parse_payload(text)
    assert code is None or payload(code) == text.strip()


@pytest.mark.parametrize("bad", [PageCode("3F9C0A12BE47", "AB12-CD34", 1), PageCode("3f9c0a12be47", "ab12-cd34", 1),
                                 PageCode("3f9c0a12be47", "AB12-CD34", 0)])
def test_a_code_that_is_not_one_is_not_encoded(bad):
    with pytest.raises(ValueError):
        payload(bad)


def test_the_symbol_is_small():
    assert qr_modules(CODE).shape == (25, 25)  # version 2: large modules on a small square


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_a_code_reads_back_on_a_turned_page_with_its_own_top_left_corner(turns):
    image = np.rot90(picture(qr_modules(CODE)), turns)
    found = find_codes(image)
    assert [f.code for f in found] == [CODE]
    # The symbol's own top-left corner, wherever the turn put it.
    corners = found[0].corners
    edge = corners[1] - corners[0]  # along the symbol's top edge
    expected = {0: (1, 0), 1: (0, -1), 2: (-1, 0), 3: (0, 1)}[turns]  # np.rot90 turns counter-clockwise
    assert np.allclose(edge / np.linalg.norm(edge), expected, atol=0.05)


def test_another_qr_code_on_the_page_is_left_out():
    other = np.array([list(r) for r in segno.make_qr("https://example.org/worksheet").matrix], dtype=bool)
    image = picture(other)
    assert find_codes(image) == []


def test_a_missing_library_is_named_with_the_extra_to_install():
    with pytest.raises(ScanDependencyMissing) as caught:
        need("qkvquiz_no_such_module")
    assert "pip install 'qkvquiz[scan]'" in str(caught.value)


def test_the_svg_path_draws_every_dark_module_once():
    path = qr_svg_path(CODE, 50.0)
    assert path.count("M") == int(qr_modules(CODE).sum())
    assert path.startswith("M0.000 0.000h2.000v2.000")  # a finder pattern's corner, 50/25 units a module
