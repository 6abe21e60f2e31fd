"""Tolerance modes: what passes, the exact-zero and ±∞ rules, and the spec forms."""

from __future__ import annotations

import math
import warnings
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkvquiz.core.tolerance import TOLERANCE_DEFAULT, Tolerance

FAST = settings(max_examples=120, deadline=None)
MODES = ("abs", "rel", "decimals", "sigfigs")


def oracle_band(mode: str, value: float, floor: float, x: float) -> float:
    """The documented band, one entry at a time, with decimal arithmetic for the digit counts."""
    if not math.isfinite(x):
        return 0.0
    if mode == "abs":
        return value
    if mode == "rel":
        return value * abs(x) if x != 0 else floor
    if mode == "decimals":
        return float(Decimal(1).scaleb(-int(value)))
    if x == 0:
        return floor
    leading = Decimal(repr(abs(x))).adjusted()  # ⌊log10|x|⌋ of the value as written
    return float(Decimal(1).scaleb(leading - int(value) + 1))


# ------------------------------------------------------------------------------ worked examples


@pytest.mark.parametrize(
    ("spec", "exact", "answer", "ok"),
    [
        # decimals: one unit in the p-th place, inclusive, despite binary rounding
        ("2 decimals", 0.24, 0.25, True),
        ("2 decimals", 0.24, 0.23, True),
        ("2 decimals", 0.24, 0.2501, False),
        ("2 decimals", 0.2449, 0.24, True),  # correctly rounded
        ("2 decimals", 0.2449, 0.25, True),  # rounded from rounded intermediates
        ("2 decimals", 0.2449, 0.26, False),
        ("0 decimals", 3.0, 4.0, True),
        ("0 decimals", 3.0, 4.01, False),
        ("3 decimals", -1.2345, -1.2355, True),
        ("3 decimals", -1.2345, -1.2356, False),
        # abs
        ("abs 0.25", 0.5, 0.75, True),
        ("abs 0.25", 0.5, 0.7500001, False),
        ("abs 0.01", 100.0, 100.01, True),
        ("abs 0", 0.1 + 0.2, 0.3, True),  # only float noise is forgiven
        ("abs 0", 0.3, 0.3000001, False),
        # rel: relative to the exact value, not the answer
        ("rel 10%", 10.0, 11.0, True),
        ("rel 10%", 10.0, 9.0, True),
        ("rel 10%", 10.0, 11.01, False),
        ("rel 10%", 9.0, 9.9, True),
        ("rel 10%", 9.0, 10.0, False),  # would pass if measured against the answer
        # sigfigs: one unit in the s-th significant digit of the exact value
        ("3 sigfigs", 1.234, 1.24, True),
        ("3 sigfigs", 1.234, 1.2441, False),
        ("2 sigfigs", 0.002449, 0.0024, True),
        ("2 sigfigs", 0.002449, 0.0026, False),
        ("2 sigfigs", 1234.0, 1300.0, True),
        ("2 sigfigs", 1234.0, 1400.0, False),
        ("1 sigfig", 0.001, 0.002, True),  # 0.001 counts as 10^-3 exactly
        ("1 sigfig", 1e-5, 2e-5, True),
        ("1 sigfig", 1e-5, 2.01e-5, False),
    ],
)
def test_worked_examples(spec: str, exact: float, answer: float, ok: bool) -> None:
    assert bool(Tolerance.from_spec(spec).passes(answer, exact)) is ok


def test_default_is_two_decimals() -> None:
    assert TOLERANCE_DEFAULT == Tolerance() == Tolerance("decimals", 2)
    assert TOLERANCE_DEFAULT.describe() == (
        "within 0.01 of the exact value (one unit in the 2nd decimal place), inclusive"
    )


# ------------------------------------------------------------------------------ bands


@st.composite
def tolerances(draw: st.DrawFn) -> Tolerance:
    mode = draw(st.sampled_from(MODES))
    if mode == "abs":
        return Tolerance("abs", draw(st.floats(1e-6, 10.0)))
    if mode == "rel":
        return Tolerance("rel", draw(st.floats(1e-6, 0.5)))
    if mode == "decimals":
        return Tolerance("decimals", draw(st.integers(0, 6)))
    return Tolerance("sigfigs", draw(st.integers(1, 8)))


magnitudes = st.floats(1e-6, 1e3)
exact_values = st.one_of(
    st.just(0.0),
    st.builds(lambda m, s: s * m, magnitudes, st.sampled_from([-1.0, 1.0])),
    st.sampled_from([1e-5, 0.001, 0.01, 0.1, 1.0, 10.0, 100.0, -0.001, 9.999, 0.0999]),
)


@given(tolerances(), st.lists(exact_values, min_size=1, max_size=6))
@FAST
def test_band_matches_the_documented_formula(tol: Tolerance, xs: list[float]) -> None:
    xs = xs + [math.inf, -math.inf]
    got = tol.band(np.array(xs))
    want = [oracle_band(tol.mode, tol.value, tol.floor, x) for x in xs]
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


@given(tolerances(), exact_values, st.floats(0.0, 1.0), st.sampled_from([-1.0, 1.0]))
@FAST
def test_an_answer_within_the_band_passes(tol: Tolerance, x: float, u: float, sign: float) -> None:
    answer = x + sign * u * oracle_band(tol.mode, tol.value, tol.floor, x)
    assert tol.passes(answer, x)


@given(tolerances(), exact_values, st.floats(0.01, 100.0), st.sampled_from([-1.0, 1.0]))
@FAST
def test_an_answer_clearly_beyond_the_band_fails(
    tol: Tolerance, x: float, margin: float, sign: float
) -> None:
    answer = x + sign * (1 + margin) * oracle_band(tol.mode, tol.value, tol.floor, x)
    assert not tol.passes(answer, x)


def test_sigfigs_find_the_leading_digit_at_and_beside_every_power_of_ten() -> None:
    # log10 of a double just below 10^k can round up to k; and 1e-5 must count as 10^-5.
    powers = np.array([float(f"1e{k}") for k in range(-300, 300)])
    xs = np.concatenate([powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf)])
    xs = np.concatenate([xs, -xs, [5e-324, 2.5e-320, 1.7976931348623157e308]])
    for s in (1, 3, 12):
        tol = Tolerance("sigfigs", s)
        want = [oracle_band("sigfigs", s, tol.floor, float(x)) for x in xs]
        np.testing.assert_array_equal(tol.band(xs), want)


@pytest.mark.parametrize("tol", [Tolerance("abs", 0), Tolerance("rel", 0.01, floor=0.0), Tolerance("sigfigs", 2, floor=0.0)])
def test_inclusive_even_where_the_band_is_zero(tol: Tolerance) -> None:
    # With no band and no slack (exact value 0) only ≤ lets an exactly right answer through.
    assert tol.passes(0.0, 0.0) and tol.passes(-0.0, 0.0)
    assert not tol.passes(1e-300, 0.0)


@pytest.mark.parametrize("spec", ["2 decimals", "3 sigfigs", "abs 0.05", "rel 1%"])
def test_batched_passes_agree_with_an_entry_by_entry_check(spec: str) -> None:
    tol = Tolerance.from_spec(spec)
    rng = np.random.default_rng(0)
    exact = rng.normal(size=(3, 4))
    exact[0, 0], exact[1, 2], exact[2, 3] = 0.0, -np.inf, np.inf
    band = np.vectorize(lambda x: oracle_band(tol.mode, tol.value, tol.floor, x))(exact)
    given_ = exact + rng.uniform(-2, 2, size=(5, 2, 3, 4)) * np.where(np.isfinite(band), band, 0)
    given_[0, 0, 1, 2] = 0.0  # −∞ answered with 0
    given_[1, 1, 2, 3] = np.inf  # +∞ answered exactly
    out = tol.passes(given_, exact)
    assert out.shape == given_.shape and out.dtype == bool
    for idx in np.ndindex(given_.shape):
        g, x = given_[idx], exact[idx[2:]]
        want = g == x if not math.isfinite(x) else abs(g - x) <= band[idx[2:]] * (1 + 1e-9)
        assert out[idx] == want, (idx, g, x)


# ------------------------------------------------------------------------------ masks: 0 and ±∞


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("inf", [math.inf, -math.inf])
def test_an_infinite_exact_value_passes_only_itself(mode: str, inf: float) -> None:
    tol = Tolerance(mode, 1 if mode in ("decimals", "sigfigs") else 0.5)
    answers = np.array([inf, -inf, 1e300 * np.sign(inf), 0.0, np.nan])
    np.testing.assert_array_equal(tol.passes(answers, inf), [True, False, False, False, False])
    assert tol.band(np.array([inf]))[0] == 0.0


@pytest.mark.parametrize("spec", ["rel 1%", "3 sigfigs"])
def test_an_exact_zero_uses_the_absolute_floor_not_a_relative_band(spec: str) -> None:
    tol = Tolerance.from_spec(spec)
    answers = np.array([0.0, -0.0, 1e-9, -1e-9, 0.9e-9, 1.1e-9, 1e-3])
    np.testing.assert_array_equal(tol.passes(answers, 0.0), [True, True, True, True, True, False, False])
    wide = Tolerance(tol.mode, tol.value, floor=1e-3)
    assert wide.passes(1e-3, 0.0) and not wide.passes(1.01e-3, 0.0)


def test_an_exact_zero_in_absolute_modes_uses_their_band() -> None:
    assert Tolerance("decimals", 2).passes(0.01, 0.0) and not Tolerance("decimals", 2).passes(0.0101, 0.0)
    assert Tolerance("abs", 0.1).passes(-0.1, 0.0) and not Tolerance("abs", 0.1).passes(-0.11, 0.0)


def test_a_tiny_exact_value_keeps_its_relative_band() -> None:
    # 0 is 100% off from 1e-13: relative modes must not let it through on float slack.
    assert not Tolerance("rel", 0.01).passes(0.0, 1e-13)
    assert not Tolerance("sigfigs", 3).passes(0.0, 1e-13)
    assert Tolerance("sigfigs", 3).passes(1.001e-13, 1e-13)


@pytest.mark.parametrize("mode", MODES)
def test_nan_never_passes_and_nothing_warns(mode: str) -> None:
    tol = Tolerance(mode, 2 if mode in ("decimals", "sigfigs") else 0.5)
    exact = np.array([0.0, 1.0, -np.inf, np.inf, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not tol.passes(np.full(5, np.nan), exact).any()
        assert not tol.passes(np.zeros(5), np.nan).any()
        tol.passes(np.array([np.inf, -np.inf, 0.0, np.inf, 1.0]), exact)


# ------------------------------------------------------------------------------ spec forms


@pytest.mark.parametrize(
    ("spec", "json"),
    [
        ("2 decimals", {"mode": "decimals", "value": 2}),
        ("0 decimals", {"mode": "decimals", "value": 0}),
        ("1 decimal", {"mode": "decimals", "value": 1}),
        ("3 decimal places", {"mode": "decimals", "value": 3}),
        ("4 dp", {"mode": "decimals", "value": 4}),
        ("3 sigfigs", {"mode": "sigfigs", "value": 3}),
        ("1 sigfig", {"mode": "sigfigs", "value": 1}),
        ("3 sig figs", {"mode": "sigfigs", "value": 3}),
        ("2 significant figures", {"mode": "sigfigs", "value": 2}),
        ("abs 0.01", {"mode": "abs", "value": 0.01}),
        ("abs 1e-3", {"mode": "abs", "value": 0.001}),
        ("rel 1%", {"mode": "rel", "value": 0.01}),
        ("rel 0.7%", {"mode": "rel", "value": 0.007}),
        ("rel 0.001", {"mode": "rel", "value": 0.001}),
        ("  REL 5 %  ", {"mode": "rel", "value": 0.05}),
    ],
)
def test_shorthands_read_and_round_trip(spec: str, json: dict) -> None:
    tol = Tolerance.from_spec(spec)
    assert tol.to_json() == json
    assert Tolerance.from_spec(tol.to_json()) == tol
    assert Tolerance.from_spec(tol) is tol


@given(tolerances(), st.sampled_from([1e-9, 0.0, 1e-6]))
@FAST
def test_every_tolerance_round_trips_through_json(tol: Tolerance, floor: float) -> None:
    tol = Tolerance(tol.mode, tol.value, floor)
    data = tol.to_json()
    assert ("floor" in data) is (floor != 1e-9)
    assert Tolerance.from_spec(data) == tol


@given(
    st.one_of(
        st.integers(0, 12).map(lambda n: (f"{n} decimals", Tolerance("decimals", n))),
        st.integers(1, 12).map(lambda n: (f"{n} sigfigs", Tolerance("sigfigs", n))),
        st.decimals(0, 10, places=4).map(lambda d: (f"abs {d}", Tolerance("abs", float(d)))),
        st.decimals(0, 1, places=5).map(lambda d: (f"rel {d}", Tolerance("rel", float(d)))),
        st.decimals(0, 100, places=3).map(lambda d: (f"rel {d}%", Tolerance("rel", float(d / 100)))),
    )
)
@FAST
def test_shorthand_means_the_same_as_the_mapping(pair: tuple[str, Tolerance]) -> None:
    spec, want = pair
    got = Tolerance.from_spec(spec)
    assert got == want
    assert Tolerance.from_spec(got.to_json()) == want


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("2", None),
        ("decimals", None),
        ("2 decimal digits please", None),
        ("rel -1%", None),
        ("abs x", None),
        ("13 decimals", "from 0 to 12"),
        ("0 sigfigs", "from 1 to 12"),
        ({"mode": "percent", "value": 1}, "mode must be one of abs, rel, decimals, sigfigs"),
        ({"mode": "abs"}, "missing mode or value"),
        ({"mode": "abs", "value": 0.1, "tol": 2}, "unknown keys ['tol']"),
        ({"mode": "decimals", "value": 2.5}, "whole number"),
        ({"mode": "abs", "value": -0.1}, "≥ 0"),
        ({"mode": "abs", "value": float("inf")}, "finite"),
        ({"mode": "abs", "value": True}, "finite number"),
        ({"mode": "rel", "value": 0.1, "floor": -1}, "floor"),
        (2, None),
        (None, None),
    ],
)
def test_bad_specs_say_what_is_allowed(bad: object, why: str | None) -> None:
    with pytest.raises(ValueError) as info:
        Tolerance.from_spec(bad)
    message = str(info.value)
    for form in ('"2 decimals"', '"3 sigfigs"', '"abs 0.01"', '"rel 1%"', '"mode"'):
        assert form in message
    if why is not None:
        assert why in message


def test_whole_number_values_are_stored_as_int_counts() -> None:
    tol = Tolerance("sigfigs", 3.0)
    assert tol.value == 3 and type(tol.value) is int
    assert Tolerance("abs", 1) == Tolerance("abs", 1.0) and type(Tolerance("abs", 1).value) is float


# ------------------------------------------------------------------------------ descriptions


@pytest.mark.parametrize(
    ("spec", "sentence"),
    [
        ("3 decimals", "within 0.001 of the exact value (one unit in the 3rd decimal place), inclusive"),
        ("0 decimals", "within 1 of the exact value (one unit in the ones place), inclusive"),
        ("11 decimals", "within 1e-11 of the exact value (one unit in the 11th decimal place), inclusive"),
        ("abs 0.05", "within 0.05 of the exact value, inclusive"),
        ("rel 1%", "within 1% of the exact value (|answer − exact| ≤ 0.01·|exact|), inclusive; "
         "where the exact value is 0, within 1e-09"),
        ("3 sigfigs", "within one unit in the 3rd significant figure of the exact value "
         "(within 0.01 for an exact value from 1 to 10), inclusive; where the exact value is 0, within 1e-09"),
    ],
)
def test_describe_states_the_band(spec: str, sentence: str) -> None:
    assert Tolerance.from_spec(spec).describe() == sentence


def test_describe_matches_behaviour_for_sigfigs_example() -> None:
    # The sentence says ±0.01 for an exact value from 1 to 10 at 3 sigfigs; hold it to that.
    tol = Tolerance("sigfigs", 3)
    assert tol.passes(5.01, 5.0) and not tol.passes(5.0101, 5.0)


@pytest.mark.gpu
def test_cupy_gives_the_same_answers() -> None:
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(1)
    exact = rng.normal(size=(4, 5)) * 10.0 ** rng.integers(-4, 4, size=(4, 5))
    exact[0, 0], exact[1, 1] = 0.0, -np.inf
    given_ = exact * (1 + rng.normal(scale=0.01, size=(3, 4, 5)))
    for spec in ("2 decimals", "3 sigfigs", "abs 0.05", "rel 1%"):
        tol = Tolerance.from_spec(spec)
        got = tol.passes(cupy.asarray(given_), cupy.asarray(exact), xp=cupy)
        np.testing.assert_array_equal(cupy.asnumpy(got), tol.passes(given_, exact))
