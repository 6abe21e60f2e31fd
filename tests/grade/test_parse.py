"""Reading answers: exact forms in text, strict shapes, and format errors that say what was found."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkvquiz.grade.parse import AnswerFormatError, describe_shape, parse_answer, parse_entry

FAST = settings(max_examples=150, deadline=None)

# ------------------------------------------------------------------------------ entries


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.25", 0.25),
        ("0,25", 0.25),
        ("-0,5", -0.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e-3", 0.001),
        ("2.5E2", 250.0),
        ("1,5e3", 1500.0),
        ("\u22122", -2.0),  # unicode minus
        ("\u2013 2", -2.0),  # en dash
        ("+3", 3.0),
        ("  7  ", 7.0),
        ("5/3", 5 / 3),
        ("-5/3", -5 / 3),
        ("-inf", -math.inf),
        ("\u2212\u221e", -math.inf),
        ("inf", math.inf),
        ("\u221e", math.inf),
        ("-infinity", -math.inf),
        ("Infinity", math.inf),
        ("+inf", math.inf),
        ("sqrt(2)", math.sqrt(2)),
        ("\u221a2", math.sqrt(2)),
        ("5/\u221a2", 5 / math.sqrt(2)),
        ("5/sqrt(2)", 5 / math.sqrt(2)),
        ("2\u221a3", 2 * math.sqrt(3)),
        ("\u221a(2)/2", math.sqrt(2) / 2),
        ("sqrt 2", math.sqrt(2)),
        ("e", math.e),
        ("pi", math.pi),
        ("\u03c0", math.pi),
        ("2pi", 2 * math.pi),
        ("2\u03c0", 2 * math.pi),
        ("exp(1.5)", math.exp(1.5)),
        ("exp(-1)", math.exp(-1)),
        ("e^2", math.e**2),
        ("e**-1", math.e**-1),
        ("e^-2", math.e**-2),
        ("2^10", 1024.0),
        ("(1+\u221a5)/2", (1 + math.sqrt(5)) / 2),
        ("2(3+1)", 8.0),
        ("3\u00d74", 12.0),
        ("3\u00b74", 12.0),
        ("1\u00f78", 0.125),
        ("1 - 2 - 3", -4.0),  # left-associative
        ("8/4/2", 1.0),
        ("1+2*3", 7.0),
        ("-2^2", -4.0),  # the power binds before the sign
        ("2^3^2", 512.0),  # right-associative
        ("2e3", 2000.0),  # scientific notation, not 2·e·3
        ("2e", 2 * math.e),
        ("e-1", math.e - 1),
        ("1/(2e)", 1 / (2 * math.e)),
        ("exp(1)/(exp(1)+exp(2))", math.exp(1) / (math.exp(1) + math.exp(2))),
        ("-inf*2", -math.inf),
        ("1/inf", 0.0),
        ("((((1))))", 1.0),
    ],
)
def test_exact_forms_are_read(text: str, expected: float) -> None:
    assert parse_entry(text) == pytest.approx(expected, rel=1e-15, abs=0)


@pytest.mark.parametrize("x", [0, 3, -7, 2.5, -0.0, 1e-300, math.inf, -math.inf, np.float64(0.5), np.int64(4), np.float32(0.25)])
def test_numbers_pass_through_as_float(x: object) -> None:
    value = parse_entry(x)
    assert type(value) is float
    assert value == float(x)  # type: ignore[arg-type]


@given(st.floats(allow_nan=False, allow_infinity=False))
@FAST
def test_every_float_reads_back_from_its_repr(x: float) -> None:
    assert parse_entry(repr(x)) == x
    assert parse_entry(repr(x).replace("-", "\u2212")) == x


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda x: f"{x:.6f}"))
@FAST
def test_decimal_comma_reads_like_decimal_point(text: str) -> None:
    assert parse_entry(text.replace(".", ",")) == float(text)


@given(st.integers(-10**6, 10**6), st.integers(1, 10**6))
@FAST
def test_fractions_read_as_the_quotient(p: int, q: int) -> None:
    assert parse_entry(f"{p}/{q}") == p / q


_PIECES = st.sampled_from(
    ["1", "2.5", "0,3", "e", "pi", "π", "√", "sqrt", "exp", "inf", "∞", "(", ")", "+", "-", "−",
     "*", "/", "^", "**", " ", "x", ",", ".", "nan", "1e5", "e3", "0"]
)


@given(st.lists(_PIECES, max_size=14).map("".join))
@settings(max_examples=300, deadline=None)
def test_any_text_is_a_float_or_a_format_error(text: str) -> None:
    # No exception of another kind leaks out, and nothing read is NaN.
    try:
        value = parse_entry(text)
    except AnswerFormatError as err:
        assert str(err)
    else:
        assert isinstance(value, float) and not math.isnan(value)


# ------------------------------------------------------------------------------ entry errors


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("abc", 'unknown name "abc"'),
        ("x", 'unknown name "x"'),
        ("nan", "NaN"),
        ("NaN", "NaN"),
        ("-nan", "NaN"),
        ("1/0", "divides by zero"),
        ("0^-1", "divides by zero"),
        ("inf-inf", "no value"),
        ("0*inf", "no value"),
        ("1e400", "too large"),
        ("10^400", "too large"),
        ("exp(1000)", "too large"),
        ("1e300*1e300", "too large"),
        ("sqrt(-1)", "square root of a negative number"),
        ("(-8)^(1/3)", "negative number to a fractional power"),
        ("(1+2", '"(" is not closed'),
        ("1+2)", 'the ")" is out of place'),
        ("5/", "ends too early"),
        ("2 3", "it holds two numbers"),
        ("1, 2", '"," cannot be part of a number'),
        ("1,2,3", '"," cannot be part of a number'),
        ("1.2.3", "it holds two numbers (a second decimal point"),
        ("$5", '"$" cannot be part of a number'),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_unreadable_text_names_the_text_and_why(text: str, reason: str) -> None:
    with pytest.raises(AnswerFormatError) as info:
        parse_entry(text)
    message = str(info.value)
    assert message.startswith(f'cannot read "{text.strip()}" as a number')
    assert reason in message


@pytest.mark.parametrize(
    "text",
    ["__import__('os')", "().__class__", "1 if 1 else 2", "[1]", "0x10", "1_000", "abs(-1)", "2**3**'1'", "lambda: 1"],
)
def test_python_syntax_is_not_evaluated(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec/compile must never be called")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    with pytest.raises(AnswerFormatError):
        parse_entry(text)


def test_long_text_is_refused() -> None:
    with pytest.raises(AnswerFormatError, match="longer than 200 characters"):
        parse_entry("1+" * 100 + "1")  # 201 characters
    assert parse_entry("1+" * 99 + "1") == 100.0  # 199 characters


def test_deep_nesting_is_refused() -> None:
    assert parse_entry("(" * 20 + "1" + ")" * 20) == 1.0
    with pytest.raises(AnswerFormatError, match="nested more than 20 levels"):
        parse_entry("(" * 21 + "1" + ")" * 21)
    with pytest.raises(AnswerFormatError, match="nested more than 20 levels"):
        parse_entry("√" * 21 + "2")
    with pytest.raises(AnswerFormatError, match="nested more than 20 levels"):
        parse_entry("-" * 21 + "2")


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (None, "expected a number, found nothing (null)"),
        (True, "expected a number, found true"),
        (False, "expected a number, found false"),
        (np.bool_(True), "expected a number, found true"),
        ([1.0], "expected a single number, found a list of 1 entry"),
        ({"a": 1}, "expected a number, found an object"),
        (float("nan"), "found NaN"),
        (np.float64("nan"), "found NaN"),
        (10**400, "too large"),
        (1j, "found a value of type complex"),
    ],
)
def test_non_numbers_are_format_errors(value: object, found: str) -> None:
    with pytest.raises(AnswerFormatError) as info:
        parse_entry(value)
    assert found in str(info.value)


def test_format_error_is_a_value_error() -> None:
    assert issubclass(AnswerFormatError, ValueError)


# ------------------------------------------------------------------------------ shapes


def test_scalar_part() -> None:
    out = parse_answer("5/√2", ())
    assert out.shape == () and out.dtype == np.float64
    assert float(out) == 5 / math.sqrt(2)
    assert float(parse_answer(np.float64(2.0), ())) == 2.0


def test_matrix_part_reads_numbers_and_exact_forms() -> None:
    out = parse_answer([[1, "0,5", "-inf"], ["e", 2.5, "1/4"]], (2, 3))
    assert out.dtype == np.float64 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, [[1.0, 0.5, -np.inf], [math.e, 2.5, 0.25]])


@pytest.mark.parametrize("shape", [(1,), (4,), (2, 2), (3, 1), (2, 1, 3), (1, 2, 2, 2)])
def test_nested_lists_of_any_shape_read_into_that_shape(shape: tuple[int, ...]) -> None:
    expected = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) / 4
    as_text = np.vectorize(lambda v: f"{v:g}".replace(".", ","), otypes=[object])(expected)
    np.testing.assert_array_equal(parse_answer(expected.tolist(), shape), expected)
    np.testing.assert_array_equal(parse_answer(as_text.tolist(), shape), expected)
    np.testing.assert_array_equal(parse_answer(expected, shape), expected)  # an ndarray is fine


def test_tuples_are_lists() -> None:
    np.testing.assert_array_equal(parse_answer(((1, 2), (3, 4)), (2, 2)), [[1, 2], [3, 4]])


def test_one_element_list_is_read_for_shape_1_only() -> None:
    np.testing.assert_array_equal(parse_answer([3], (1,)), [3.0])
    with pytest.raises(AnswerFormatError, match=r"expected a single number, found a list of 1 entry"):
        parse_answer([3], ())
    with pytest.raises(AnswerFormatError, match=r"expected a list of 1 number, found a single number \(3\)"):
        parse_answer(3, (1,))
    with pytest.raises(AnswerFormatError, match=r"expected a 1×1 matrix"):
        parse_answer(3, (1, 1))
    with pytest.raises(AnswerFormatError, match=r"row 1 is a single number \(3\), expected a list of 1 number"):
        parse_answer([3], (1, 1))


@pytest.mark.parametrize(
    ("value", "shape", "message"),
    [
        # a missing part
        (None, (3, 3), "expected a 3×3 matrix (a list of 3 rows of 3 numbers), found nothing (null)"),
        (None, (), "expected a single number, found nothing (null)"),
        # wrong outer length
        ([[1, 2, 3], [4, 5, 6]], (3, 3), "expected a 3×3 matrix (a list of 3 rows of 3 numbers), found a list of 2 rows"),
        ([1, 2], (3,), "expected a list of 3 numbers, found a list of 2 entries"),
        ([1, 2, 3, 4], (3,), "expected a list of 3 numbers, found a list of 4 entries"),
        ([[[1]]], (2, 1, 1), "expected a 2×1×1 array (a list of 2 matrices, each 1 row of 1 number), found a list of 1 matrix"),
        # not a list at all
        ("[[1,2],[3,4]]", (2, 2), 'expected a 2×2 matrix (a list of 2 rows of 2 numbers), found the text "[[1,2],[3,4]]"'),
        ({"row1": [1, 2]}, (2,), "expected a list of 2 numbers, found an object"),
        (2.5, (2,), "expected a list of 2 numbers, found a single number (2.5)"),
        # ragged rows
        ([[1, 2, 3], [4, 5], [7, 8, 9]], (3, 3), "row 2 has 2 entries, expected 3; the answer should be a 3×3 matrix (a list of 3 rows of 3 numbers)"),
        ([[1, 2], [3, 4, 5]], (2, 2), "row 2 has 3 entries, expected 2"),
        ([[1, 2], 3], (2, 2), "row 2 is a single number (3), expected a list of 2 numbers"),
        ([[1, 2], None], (2, 2), "row 2 is nothing (null), expected a list of 2 numbers"),
        ([[[1, 2]], [[3, 4], [5, 6]]], (2, 1, 2), "matrix 2 has 2 rows, expected 1; the answer should be a 2×1×2 array"),
        ([[[1, 2]], [[3]]], (2, 1, 2), "matrix 2, row 1 has 1 entry, expected 2"),
        # unreadable entries, located counting from 1
        ([[1, 2, 3], [4, 5, "x"], [7, 8, 9]], (3, 3), 'row 2, column 3: cannot read "x" as a number'),
        ([1, "abc"], (2,), 'entry 2: cannot read "abc" as a number'),
        ([1, float("nan")], (2,), "entry 2: found NaN"),
        ([1, "nan"], (2,), 'entry 2: cannot read "nan" as a number'),
        ([[1, 2], [3, [4]]], (2, 2), "row 2, column 2: expected a single number, found a list of 1 entry"),
        ([[1, None]], (1, 2), "row 1, column 2: expected a number, found nothing (null)"),
        ([[[1, 2]], [[3, True]]], (2, 1, 2), "matrix 2, row 1, column 2: expected a number, found true"),
        ([[[[1, "1/0"]]]], (1, 1, 1, 2), 'block 1, matrix 1, row 1, column 2: cannot read "1/0" as a number'),
    ],
)
def test_format_errors_name_the_expected_shape_and_what_was_found(
    value: object, shape: tuple[int, ...], message: str
) -> None:
    with pytest.raises(AnswerFormatError) as info:
        parse_answer(value, shape)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("shape", "words"),
    [
        ((), "a single number"),
        ((1,), "a list of 1 number"),
        ((3,), "a list of 3 numbers"),
        ((1, 1), "a 1×1 matrix (a list of 1 row of 1 number)"),
        ((3, 3), "a 3×3 matrix (a list of 3 rows of 3 numbers)"),
        ((2, 3, 4), "a 2×3×4 array (a list of 2 matrices, each 3 rows of 4 numbers)"),
        ((2, 2, 3, 3), "a 2×2×3×3 array (a list of 2 lists of 2 matrices, each 3 rows of 3 numbers)"),
    ],
)
def test_shapes_in_words(shape: tuple[int, ...], words: str) -> None:
    assert describe_shape(shape) == words


@pytest.mark.parametrize("shape", [(2, 2, 2, 2, 2), (101, 100), (0,), (2, -1), "3x3", (2.0, 2)])
def test_bad_shapes_are_programming_errors_not_format_errors(shape: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_answer([1], shape)  # type: ignore[arg-type]
    assert not isinstance(info.value, AnswerFormatError)


def test_largest_allowed_shapes_read() -> None:
    assert parse_answer(np.zeros((100, 100)).tolist(), (100, 100)).shape == (100, 100)
    assert parse_answer(np.zeros((1, 1, 1, 1)), (1, 1, 1, 1)).shape == (1, 1, 1, 1)


def test_an_oversized_answer_is_refused_without_reading_it() -> None:
    huge = ["x"] * 1_000_000
    start = time.perf_counter()
    with pytest.raises(AnswerFormatError, match="found a list of 1000000 entries"):
        parse_answer(huge, (3,))
    assert time.perf_counter() - start < 0.05
