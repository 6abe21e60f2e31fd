"""The delta rule (DeltaNet): the token recurrence, one chunk forward, one chunk backward.

Convention (state S is d_v × d_k): Sₜ = Sₜ₋₁(I − βₜkₜkₜᵀ) + βₜvₜkₜᵀ, oₜ = Sₜqₜ.

The chunk families take ``chunks`` equal chunks of length C. With one chunk every given and
step has its plain shape (Q is C × d_k). With two or more, every per-chunk given and step gets
a leading chunk axis (Q is chunks × C × d_k, A is chunks × C × C, …): chunk c starts from the
state the chunk before it ends with, and in the backward each chunk receives, as its S̄⁺, the
S̄ handed back by the chunk after it (the last chunk receives the given S̄⁺). The engine is
batched over leading axes, so the chunk axis costs nothing extra.

Hand-computable defaults use integer keys with entries in {−1, 0, 1} and β ∈ {½, 1}: every
answer is then a short exact decimal.

Why one module of about 700 lines: the three families share their sampling, the accept rules
that keep a draw hand-computable, the ragged last chunk and the per-chunk helpers, and a known
mistake of the backward is the forward's slip carried through; read apart, each would need the
others' private rules.
"""

from __future__ import annotations

import numpy as np

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.backend import DTYPE, swap
from ..engine.delta import (
    causal_mask,
    chunk_backward,
    chunk_forward,
    delta_recurrent,
    solve_unit_lower,
    solve_unit_lower_transposed,
    tril_strict_mask,
)
from .base import (
    DECIMALS,
    Env,
    Family,
    Given,
    Misconception,
    Param,
    Params,
    Step,
    closed_interval,
    int_range,
    transposable,
)

TAME = 100.0  # with integer keys a variant whose numbers grow past this is not for hand work
BETA_KINDS = ("half", "one", "half_or_one", "uniform")


# --------------------------------------------------------------------------- sampling


def _keys(draw: Draw, p: Params, shape: tuple[int, ...]):
    if p.unit_keys:
        # L2-normalised keys (as DeltaNet uses): β in (0, 2) keeps every transition stable. Two
        # decimals, so the keys printed on the worksheet are the keys the answers are solved with.
        u = draw.uniform(-1.0, 1.0, shape)
        norm = draw.xp.sqrt(draw.xp.sum(u * u, axis=-1, keepdims=True))
        return draw.xp.round(u / draw.xp.maximum(norm, 1e-12), 2)
    lo, hi = p.key_entries
    return draw.integers(lo, hi, shape)


def _betas(draw: Draw, p: Params, shape: tuple[int, ...]):
    xp = draw.xp
    if p.beta == "half":
        return xp.full((draw.size, *shape), 0.5, dtype=DTYPE)
    if p.beta == "one":
        return xp.ones((draw.size, *shape), dtype=DTYPE)
    if p.beta == "half_or_one":
        return 0.5 + 0.5 * draw.choice(2, shape).astype(DTYPE)
    # Two decimals, so the β printed on the worksheet is the β the key was solved with.
    return xp.round(draw.uniform(0.1, 1.9, shape), 2)


def _initial_state(draw: Draw, p: Params):
    lo, hi = p.entries
    # The chunk families always start from a drawn state: with S = 0 one chunk has X = U and W̄ = 0.
    if p.get("state", "drawn") == "zero":
        return draw.xp.zeros((draw.size, p.d_v, p.d_k), dtype=DTYPE)
    return draw.integers(lo, hi, (p.d_v, p.d_k))


def _keys_nonzero(k, xp, real=None):
    """True per variant when every key has a non-zero entry (a zero key writes nothing).

    ``real`` (bool, the keys' rows) leaves out the padding of a ragged last chunk.
    """
    flat = k.reshape(k.shape[0], -1, k.shape[-1])
    nonzero = (xp.abs(flat) > 1e-12).any(axis=-1)
    if real is not None:
        nonzero = nonzero | ~xp.asarray(real.reshape(-1))
    return nonzero.all(axis=-1)


def _tame(e: Env, p: Params, names, xp):
    """True per variant when, with integer keys, every listed value stays within ±TAME."""
    real = present(p, "beta", tuple(e.beta.shape[1:])) if "chunks" in p else None
    ok = _keys_nonzero(e.K, xp, real)
    if p.unit_keys:
        return ok
    for name in names:
        flat = e[name].reshape(e[name].shape[0], -1)
        ok = ok & (xp.abs(flat) <= TAME).all(axis=-1)
    return ok


# The state S (d_v × d_k) and its transpose.
_square = transposable("d_v", "d_k")


def _beta_varies(p: Params) -> bool:
    """Whether the tokens' β can differ (else scaling rows or columns by β is the same)."""
    return p.beta in ("half_or_one", "uniform")


def _beta_not_one(p: Params) -> bool:
    """Whether some β differs from 1 (else forgetting β changes nothing)."""
    return p.beta != "one"


def _state_read(p: Params) -> bool:
    """Whether some token reads a non-zero state (from S₀ = 0, one token erases nothing)."""
    return p.tokens > 1 or p.state != "zero"


def _rows_tell_beta(p: Params) -> bool:
    """Whether Ḡ with β on its columns can differ from both the right Ḡ and Ḡ without β.

    With C = 2, Ḡ has one entry, (2, 1): right β₂Ā₂₁, columns β₁Ā₂₁, no β Ā₂₁. With β ∈ {½, 1}
    the three are never all different, so asking for both slips forces β = (1, ½) on every
    student and makes the two slips the same number; a uniform β keeps them apart.
    """
    return _beta_varies(p) and (p.chunk > 2 or p.beta == "uniform")


# The delta rule is stable for β in [0, 2] with unit keys; β = 0 is a token that writes nothing
# and β = 2 reflects, both questions teachers ask.
BETA_DOMAIN = closed_interval(0.0, 2.0)


COMMON_PARAMS = {
    "d_k": Param(2, "key dimension d_k (columns of the state)", low=1, high=16),
    "d_v": Param(2, "value dimension d_v (rows of the state)", low=1, high=16),
    "entries": int_range((-2, 2), "range of the integer entries of queries, values and the initial state"),
    # Not named "keys": Params is a Mapping, whose keys() method an attribute of that name would hide.
    "unit_keys": Param(False, "L2-normalised random keys, to two decimals (numeric practice), instead of integer keys"),
    "key_entries": int_range((-1, 1), "range of the integer key entries (without unit_keys)"),
    "beta": Param("half_or_one", "writing strengths βₜ: all ½, all 1, each ½ or 1, or uniform in [0.1, 1.9]",
                  choices=BETA_KINDS),
    "decimals": DECIMALS,
}


# --------------------------------------------------------------------- delta.recurrent


def _sample_recurrent(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    t = p.tokens
    return {
        "Q": draw.integers(lo, hi, (t, p.d_k)),
        "K": _keys(draw, p, (t, p.d_k)),
        "V": draw.integers(lo, hi, (t, p.d_v)),
        "beta": _betas(draw, p, (t,)),
        "S0": _initial_state(draw, p),
    }


def _previous_states(s0, states, xp):
    """S₀, S₁, …, S_{T−1}: the state each token reads before its own update."""
    return xp.concatenate([s0[..., None, :, :], states[..., :-1, :, :]], axis=-3)


def _apply(s, x):
    """S x for a stack of states (..., T, d_v, d_k) and vectors (..., T, d_k)."""
    return (s @ x[..., :, None])[..., 0]


def _recalled(e: Env, p: Params, xp):
    fwd = delta_recurrent(e.Q, e.K, e.V, e.beta, e.S0, xp=xp)
    return _apply(_previous_states(e.S0, fwd.states, xp), e.K)


def _states_from(s0, k, v, beta, recalled, xp):
    # Sₜ = Sₜ₋₁ + βₜ(vₜ − rₜ)kₜᵀ, so Sₜ = S₀ + Σ_{τ≤t} β_τ(v_τ − r_τ)k_τᵀ given the recalls rₜ.
    writes = (beta[..., None] * (v - recalled))[..., :, None] * k[..., None, :]
    return s0[..., None, :, :] + xp.cumsum(writes, axis=-3)


def _loop_states(e: Env, update, xp):
    """The recurrence with a different update rule Sₜ = update(Sₜ₋₁, kₜ, vₜ, βₜ) (for mistakes)."""
    s, out = e.S0, []
    for t in range(e.K.shape[-2]):
        s = update(s, e.K[..., t, :], e.V[..., t, :], e.beta[..., t, None, None])
        out.append(s)
    return xp.stack(out, axis=-3)


def _no_delta_states(e: Env, p: Params, xp):
    writes = e.beta[..., :, None, None] * e.V[..., :, :, None] * e.K[..., :, None, :]
    return e.S0[..., None, :, :] + xp.cumsum(writes, axis=-3)


def _erase_without_beta(e: Env, p: Params, xp):
    def update(s, k, v, b):
        return s - (s @ k[..., :, None]) * k[..., None, :] + b * v[..., :, None] * k[..., None, :]
    return _loop_states(e, update, xp)


def _left_multiplied(e: Env, p: Params, xp):
    def update(s, k, v, b):
        return s - b * k[..., :, None] * (k[..., None, :] @ s) + b * v[..., :, None] * k[..., None, :]
    return _loop_states(e, update, xp)


RECURRENT = Family(
    name="delta.recurrent",
    title=N_("The delta rule, token by token"),
    summary=N_("Sₜ = Sₜ₋₁(I − βₜkₜkₜᵀ) + βₜvₜkₜᵀ and oₜ = Sₜqₜ for a few tokens: recalls, states, outputs."),
    params={
        "tokens": Param(2, "number of tokens T", low=1, high=16),
        **COMMON_PARAMS,
        "state": Param("drawn", "the initial state S₀: integer entries, or zero", choices=("drawn", "zero")),
    },
    givens=(
        Given("Q", "Q", N_("queries qₜ, one row per token")),
        Given("K", "K", N_("keys kₜ, one row per token")),
        Given("V", "V", N_("values vₜ, one row per token")),
        Given("beta", r"\beta", N_("writing strength βₜ of each token"), check=BETA_DOMAIN),
        Given("S0", "S_0", N_("the state before the first token (dᵥ × dₖ)")),
    ),
    sample=_sample_recurrent,
    steps=(
        Step("recalled", "r", r"r_t = S_{t-1} k_t",
             N_("Compute what the memory returns for each key before its update (one row per token)"),
             _recalled, ("Q", "K", "V", "beta", "S0")),
        Step("states", "S_t", r"S_t = S_{t-1} + \beta_t (v_t - r_t) k_t^\top",
             N_("Compute the state after each token"),
             lambda e, p, xp: _states_from(e.S0, e.K, e.V, e.beta, e.recalled, xp), ("S0", "K", "V", "beta", "recalled")),
        Step("outputs", "o", r"o_t = S_t q_t", N_("Compute the output of each token (one row per token)"),
             lambda e, p, xp: _apply(e.states, e.Q), ("states", "Q")),
        Step("final_state", "S_T", r"S_T", N_("Give the state after the last token"),
             lambda e, p, xp: e.states[..., -1, :, :], ("states",)),
    ),
    default_ask=("states", "outputs"),
    misconceptions=(
        Misconception("recalled", "after_update",
                      lambda e, p, xp: _apply(e.states, e.K),
                      N_("The recall uses the state before the update: rₜ = Sₜ₋₁kₜ, not Sₜkₜ.")),
        Misconception("recalled", "transposed_state",
                      lambda e, p, xp: _apply(swap(_previous_states(e.S0, e.states, xp)), e.K),
                      N_("S is dᵥ × dₖ and maps a key to a value: rₜ = Sₜ₋₁kₜ, not Sₜ₋₁ᵀkₜ."),
                      applies=lambda p: _square(p) and _state_read(p)),
        Misconception("states", "no_delta", _no_delta_states,
                      N_("The correction −βₜSₜ₋₁kₜkₜᵀ was left out (plain linear attention): the delta rule writes "
                      "βₜ(vₜ − Sₜ₋₁kₜ)kₜᵀ, the error against what the memory already recalls."), applies=_state_read),
        Misconception("states", "erase_without_beta", _erase_without_beta,
                      N_("β scales the erase as well as the write: Sₜ = Sₜ₋₁(I − βₜkₜkₜᵀ) + βₜvₜkₜᵀ."),
                      applies=lambda p: _beta_not_one(p) and _state_read(p)),
        Misconception("states", "left_multiplied", _left_multiplied,
                      N_("The transition multiplies the state from the right: Sₜ₋₁(I − βₜkₜkₜᵀ), not (I − βₜkₜkₜᵀ)Sₜ₋₁."),
                      applies=lambda p: _square(p) and _state_read(p)),
        Misconception("outputs", "previous_state",
                      lambda e, p, xp: _apply(_previous_states(e.S0, e.states, xp), e.Q),
                      N_("The output reads the state after this token's update: oₜ = Sₜqₜ, not Sₜ₋₁qₜ.")),
        Misconception("outputs", "transposed_state", lambda e, p, xp: _apply(swap(e.states), e.Q),
                      N_("oₜ = Sₜqₜ with S of shape dᵥ × dₖ; Sₜᵀqₜ transposes the memory."), applies=_square),
        Misconception("final_state", "no_delta", lambda e, p, xp: _no_delta_states(e, p, xp)[..., -1, :, :],
                      N_("The correction −βₜSₜ₋₁kₜkₜᵀ was left out (plain linear attention)."), applies=_state_read),
    ),
    accept=lambda e, p, xp: _tame(e, p, ("states", "outputs"), xp),
)


# ------------------------------------------------------------------------ the chunk form


def _chunked(p: Params) -> bool:
    return p.chunks > 1


def _chunk_shape(p: Params, *tail: int) -> tuple[int, ...]:
    return ((p.chunks,) if _chunked(p) else ()) + tuple(tail)


# --- a ragged last chunk ---------------------------------------------------------------------
#
# With ``last_chunk: r`` (1 ≤ r < C) the last of the ``chunks`` chunks holds r tokens. Arrays stay
# rectangular (chunks × C × …): the last chunk's C − r trailing tokens are padding with q = k =
# v = 0, β = 0 and Ō = 0. Such a token writes nothing, reads nothing and receives no gradient, so
# every real entry is exactly what the r-token chunk gives, and every padded entry is 0 (A's is
# the identity's). Padded entries are never asked, shown or graded: the parts' asked entries are
# the real ones (spec), worksheets trim each chunk to its tokens (render), and an answer may
# leave them out (the grader pads a shorter last chunk back).

# How many leading token axes each per-chunk value has after its chunk axis: 1 for rows of
# tokens (Q, W, Ō …) and β, 2 for C × C matrices (G, A, P …), 0 for states (S⁺, S̄ …).
_TOKEN_AXES = {
    **dict.fromkeys(("G", "A", "T", "P", "dP", "dT", "dA", "dG"), 2),
    **dict.fromkeys(("S", "S_in", "S_next", "dS_next", "dS_in", "dS"), 0),
}


def _ragged(p: Params) -> bool:
    return bool(p.get("last_chunk", 0)) and _chunked(p)


def present(p: Params, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where a value of ``name`` (one variant's ``shape``) holds real tokens; None: everywhere.

    Only the last chunk of a ragged sequence has padding: its token axes stop at ``last_chunk``.
    """
    axes = _TOKEN_AXES.get(name, 1)
    if not _ragged(p) or not axes or len(shape) < 1 + axes or shape[0] != p.chunks:
        return None
    mask = np.ones(shape, dtype=bool)
    r = p.last_chunk
    for axis in range(1, 1 + axes):
        index = [slice(None)] * len(shape)
        index[0], index[axis] = -1, slice(r, None)
        mask[tuple(index)] = False
    return mask


def _pad_tokens(out: dict, p: Params, xp) -> dict:
    """Zero the last chunk's padded tokens of every drawn per-chunk given (see ``present``)."""
    if not _ragged(p):
        return out
    for name in ("Q", "K", "V", "beta", "dO"):
        if name in out:
            keep = present(p, name, tuple(out[name].shape[1:]))
            out[name] = out[name] * xp.asarray(keep, dtype=DTYPE)
    return out


def _check_chunks(p: Params) -> None:
    r = p.get("last_chunk", 0)
    if r and (p.chunks < 2 or r >= p.chunk):
        raise ValueError(f"last_chunk is the length of a shorter last chunk: from 1 to chunk − 1 (chunk is {p.chunk}), "
                         f"with chunks ≥ 2 (one chunk of {r} tokens is chunk: {r}); got last_chunk {r} with "
                         f"chunks {p.chunks}")


def _sample_chunk(draw: Draw, p: Params, backward: bool) -> dict:
    lo, hi = p.entries
    c = p.chunk
    out = {
        "Q": draw.integers(lo, hi, _chunk_shape(p, c, p.d_k)),
        "K": _keys(draw, p, _chunk_shape(p, c, p.d_k)),
        "V": draw.integers(lo, hi, _chunk_shape(p, c, p.d_v)),
        "beta": _betas(draw, p, _chunk_shape(p, c)),
        "S": _initial_state(draw, p),
    }
    if backward:
        glo, ghi = p.grad_entries
        out["dO"] = draw.integers(glo, ghi, _chunk_shape(p, c, p.d_v))
        if p.final_grad == "zero":
            out["dS_next"] = draw.xp.zeros((draw.size, p.d_v, p.d_k), dtype=DTYPE)
        else:
            out["dS_next"] = draw.integers(glo, ghi, (p.d_v, p.d_k))
    return _pad_tokens(out, p, draw.xp)


def _chunk(e: Env, c: int, *names: str):
    """Chunk c's slice of each named per-chunk array (chunk axis just before the row axes)."""
    out = []
    for name in names:
        x = e[name]
        out.append(x[..., c, :] if name == "beta" else x[..., c, :, :])
    return out


def _states_in(e: Env, p: Params, xp):
    """The state entering each chunk: S for the first, then each chunk's S⁺."""
    if not _chunked(p):
        return e.S
    states = [e.S]
    for c in range(p.chunks - 1):
        q, k, v, beta = _chunk(e, c, "Q", "K", "V", "beta")
        states.append(chunk_forward(q, k, v, beta, states[-1], xp=xp).s_next)
    return xp.stack(states, axis=-3)


def _grads_in(e: Env, p: Params, xp):
    """The S̄⁺ each chunk receives: the given one for the last, the next chunk's S̄ for the others."""
    if not _chunked(p):
        return e.dS_next
    grads = [e.dS_next]
    for c in range(p.chunks - 1, 0, -1):
        q, k, v, beta, s, d_o = _chunk(e, c, "Q", "K", "V", "beta", "S_in", "dO")
        grads.insert(0, chunk_backward(chunk_forward(q, k, v, beta, s, xp=xp), d_o, grads[0], xp=xp).ds)
    return xp.stack(grads, axis=-3)


def _c(e: Env) -> int:
    return e.K.shape[-2]


def _unit_lower(g, beta, c: int, xp, mask=None):
    """A = I + tril(diag(β)G, −1); ``mask`` swaps in another triangle for the mistakes."""
    m = tril_strict_mask(c, xp) if mask is None else mask
    return xp.eye(c, dtype=DTYPE) + m * (beta[..., :, None] * g)


def _o(q, s, p_mat, x):
    return q @ swap(s) + p_mat @ x


def _substitution_rounding(a, half, transposed: bool, xp):
    """How far rows written rounded move a substitution's result: row i is off by its own
    half unit plus Σ_{j<i} |Aᵢⱼ| times row j's error (j>i by back substitution). The bound
    solves the same system with −|Aᵢⱼ| below the unit diagonal (the solvers read only the
    strict lower triangle)."""
    solve = solve_unit_lower_transposed if transposed else solve_unit_lower
    return solve(-xp.abs(xp.tril(a, -1)), half, xp=xp)


FORWARD_STEPS = (
    Step("S_in", "S", "S", "", _states_in, ("Q", "K", "V", "beta", "S")),
    Step("G", "G", r"G = KK^\top", N_("Compute the key Gram matrix"), lambda e, p, xp: e.K @ swap(e.K), ("K",)),
    Step("A", "A", r"A = I + \operatorname{tril}(\operatorname{diag}(\beta) G, -1)",
         N_("Compute A (ones on the diagonal, βᵣGᵣₛ strictly below it)"),
         lambda e, p, xp: _unit_lower(e.G, e.beta, _c(e), xp), ("G", "beta")),
    Step("BK", "B_K", r"B_K = \operatorname{diag}(\beta) K", "", lambda e, p, xp: e.beta[..., :, None] * e.K,
         ("beta", "K")),
    Step("BV", "B_V", r"B_V = \operatorname{diag}(\beta) V", "", lambda e, p, xp: e.beta[..., :, None] * e.V,
         ("beta", "V")),
    Step("W", "W", r"W = A^{-1} B_K", N_("Compute W by forward substitution"),
         lambda e, p, xp: solve_unit_lower(e.A, e.BK, xp=xp), ("A", "BK"),
         rounded_as_worked=lambda e, p, xp, h: _substitution_rounding(e.A, h, False, xp)),
    Step("U", "U", r"U = A^{-1} B_V", N_("Compute U by forward substitution"),
         lambda e, p, xp: solve_unit_lower(e.A, e.BV, xp=xp), ("A", "BV"),
         rounded_as_worked=lambda e, p, xp, h: _substitution_rounding(e.A, h, False, xp)),
    Step("X", "X", r"X = U - W S^\top", N_("Compute X, what each token writes"),
         lambda e, p, xp: e.U - e.W @ swap(e.S_in), ("U", "W", "S_in")),
    Step("T", "T", r"T = QK^\top", "", lambda e, p, xp: e.Q @ swap(e.K), ("Q", "K")),
    Step("P", "P", r"P = (QK^\top) \odot M", N_("Compute P (M keeps the diagonal and below)"),
         lambda e, p, xp: e.T * causal_mask(_c(e), xp), ("T",)),
    Step("O", "O", r"O = QS^\top + PX", N_("Compute the outputs of the chunk"),
         lambda e, p, xp: _o(e.Q, e.S_in, e.P, e.X), ("Q", "S_in", "P", "X")),
    Step("S_next", "S^+", r"S^+ = S + X^\top K", N_("Compute the state after the chunk"),
         lambda e, p, xp: e.S_in + swap(e.X) @ e.K, ("S_in", "X", "K")),
)

def _several_tokens(p: Params) -> bool:
    # With C = 1, A = I: solving, multiplying by A and skipping the solve all give the same.
    return p.chunk > 1


FORWARD_MISTAKES = (
    Misconception("A", "inclusive_triangle",
                  lambda e, p, xp: _unit_lower(e.G, e.beta, _c(e), xp, mask=causal_mask(_c(e), xp)),
                  N_("A keeps only the strict lower triangle of diag(β)G: its diagonal is 1, not 1 + βᵣ‖kᵣ‖².")),
    Misconception("A", "beta_on_columns",
                  lambda e, p, xp: xp.eye(_c(e), dtype=DTYPE) + tril_strict_mask(_c(e), xp) * (e.G * e.beta[..., None, :]),
                  N_("Row r of A carries βᵣ (diag(β)G scales rows): Aᵣₛ = βᵣ kᵣ·kₛ for r > s."), applies=lambda p: _beta_varies(p) and _several_tokens(p)),
    Misconception("W", "A_transposed", lambda e, p, xp: swap(e.A) @ e.BK,
                  N_("W = A⁻¹Bₖ, not AᵀBₖ: solve A W = Bₖ by forward substitution."), applies=_several_tokens),
    Misconception("W", "multiplied_by_A", lambda e, p, xp: e.A @ e.BK,
                  N_("W solves A W = Bₖ (W = A⁻¹Bₖ); multiplying by A goes the wrong way."), applies=_several_tokens),
    Misconception("W", "no_solve", lambda e, p, xp: e.BK,
                  N_("Bₖ = diag(β)K still has to be passed through A⁻¹: W = A⁻¹Bₖ."), applies=_several_tokens),
    Misconception("U", "A_transposed", lambda e, p, xp: swap(e.A) @ e.BV,
                  N_("U = A⁻¹Bᵥ, not AᵀBᵥ: solve A U = Bᵥ by forward substitution."), applies=_several_tokens),
    Misconception("U", "multiplied_by_A", lambda e, p, xp: e.A @ e.BV,
                  N_("U solves A U = Bᵥ (U = A⁻¹Bᵥ); multiplying by A goes the wrong way."), applies=_several_tokens),
    Misconception("U", "no_solve", lambda e, p, xp: e.BV,
                  N_("Bᵥ = diag(β)V still has to be passed through A⁻¹: U = A⁻¹Bᵥ."), applies=_several_tokens),
    Misconception("X", "plus_sign", lambda e, p, xp: e.U + e.W @ swap(e.S_in),
                  N_("X = U − WSᵀ: the state's recall is subtracted (the delta rule writes an error).")),
    Misconception("X", "no_state", lambda e, p, xp: e.U,
                  N_("The state entering the chunk matters: X = U − WSᵀ.")),
    Misconception("X", "untransposed_state", lambda e, p, xp: e.U - e.W @ e.S_in,
                  N_("S is dᵥ × dₖ, so the recall of W's rows is WSᵀ."),
                  applies=_square),
    Misconception("P", "strict_mask", lambda e, p, xp: e.T * tril_strict_mask(_c(e), xp),
                  N_("M includes the diagonal: token r reads its own write (oᵣ = Sᵣqᵣ after its update).")),
    Misconception("P", "no_mask", lambda e, p, xp: e.T,
                  N_("P keeps only s ≤ r: a token must not read what later tokens of the chunk write."), applies=_several_tokens),
    Misconception("O", "no_state_term", lambda e, p, xp: e.P @ e.X,
                  N_("The state entering the chunk adds QSᵀ: O = QSᵀ + PX.")),
    Misconception("O", "strict_mask",
                  lambda e, p, xp: _o(e.Q, e.S_in, e.T * tril_strict_mask(_c(e), xp), e.X),
                  N_("M includes the diagonal: token r reads its own write.")),
    Misconception("S_next", "transposed", lambda e, p, xp: e.S_in + swap(e.K) @ e.X,
                  N_("S⁺ = S + XᵀK keeps S's shape dᵥ × dₖ: value rows times key columns."), applies=_square),
    Misconception("S_next", "used_U", lambda e, p, xp: e.S_in + swap(e.U) @ e.K,
                  N_("The chunk writes X = U − WSᵀ (the error against the state), not U: S⁺ = S + XᵀK.")),
)


CHUNK_PARAMS = {
    "chunk": Param(3, "chunk length C (with C = 1, A = I: the chunk is one recurrent step)", low=1, high=16),
    "chunks": Param(1, "number of chunks; with 2 or more every per-chunk value gets a leading chunk axis",
                    low=1, high=4),
    "last_chunk": Param(0, "with chunks ≥ 2, the length of a shorter last chunk (1 to C − 1; 0: every chunk "
                           "has C tokens); the sequence then has (chunks − 1)·C + last_chunk tokens", low=0, high=15),
    **COMMON_PARAMS,
}

CHUNK_GIVENS = (
    Given("Q", "Q", N_("queries, one row per token of the chunk")),
    Given("K", "K", N_("keys, one row per token of the chunk")),
    Given("V", "V", N_("values, one row per token of the chunk")),
    Given("beta", r"\beta", N_("writing strength of each token"), check=BETA_DOMAIN),
    Given("S", "S", N_("the state entering the (first) chunk, dᵥ × dₖ")),
)

CHUNK_FORWARD = Family(
    name="delta.chunk_forward",
    title=N_("The delta rule, one chunk at a time"),
    summary=N_("One chunk of length C from state S: G, A, W = A⁻¹Bₖ, U, X, P, O, S⁺ (WY form)."),
    params=CHUNK_PARAMS,
    givens=CHUNK_GIVENS,
    sample=lambda draw, p: _sample_chunk(draw, p, backward=False),
    steps=FORWARD_STEPS,
    default_ask=("A", "W", "U", "X", "O", "S_next"),
    misconceptions=FORWARD_MISTAKES,
    accept=lambda e, p, xp: _tame(e, p, ("W", "U", "X", "O", "S_next"), xp),
    validate=_check_chunks,
    extra={"present": present},
)


# ------------------------------------------------------------------ the chunk backward


def _grad_nonzero(p: Params) -> bool:
    """Whether some chunk receives a non-zero S̄⁺."""
    return p.final_grad != "zero" or _chunked(p)


def _dk_terms(e: Env, p: Params, xp, *, state=True, t=True, b=True, g="both"):
    """K̄ = X S̄⁺ + T̄ᵀQ + diag(β)B̄_K + (Ḡ + Ḡᵀ)K; switches drop terms for the mistakes."""
    out = xp.zeros_like(e.K)
    if state:
        out = out + e.X @ e.dS_in
    if t:
        out = out + swap(e.dT) @ e.Q
    if b:
        out = out + e.beta[..., :, None] * e.dBK
    if g == "both":
        out = out + (e.dG + swap(e.dG)) @ e.K
    elif g == "one":
        out = out + e.dG @ e.K
    return out


def _dbeta(e: Env, xp, *, b=True, a=True, v=True):
    """β̄ᵢ = Σ_d (B̄_K)ᵢd Kᵢd + (B̄_V)ᵢd Vᵢd + Σ_{s<i} Āᵢs Gᵢs."""
    out = xp.zeros_like(e.beta)
    if b:
        out = out + xp.sum(e.dBK * e.K, axis=-1)
        if v:
            out = out + xp.sum(e.dBV * e.V, axis=-1)
    if a:
        out = out + xp.sum(tril_strict_mask(_c(e), xp) * e.dA * e.G, axis=-1)
    return out


def _ds(e: Env, *, identity=True, output=True, x_sign=-1.0):
    out = e.dS_in if identity else 0.0
    if output:
        out = out + swap(e.dO) @ e.Q
    return out + x_sign * (swap(e.dX) @ e.W)


BACKWARD_STEPS = (
    Step("dS_in", r"\bar S^+", r"\bar S^+", "", _grads_in, ("Q", "K", "V", "beta", "S_in", "dO", "dS_next")),
    Step("dX", r"\bar X", r"\bar X = K (\bar S^+)^\top + P^\top \bar O", N_("Compute X̄"),
         lambda e, p, xp: e.K @ swap(e.dS_in) + swap(e.P) @ e.dO, ("K", "dS_in", "P", "dO")),
    Step("dP", r"\bar P", r"\bar P = \bar O X^\top", N_("Compute P̄"),
         lambda e, p, xp: e.dO @ swap(e.X), ("dO", "X")),
    Step("dT", r"\bar T", r"\bar T = \bar P \odot M", N_("Compute T̄ (the gradient of T = QKᵀ)"),
         lambda e, p, xp: e.dP * causal_mask(_c(e), xp), ("dP",)),
    Step("dU", r"\bar U", r"\bar U = \bar X", "", lambda e, p, xp: e.dX, ("dX",)),
    Step("dW", r"\bar W", r"\bar W = -\bar X S", N_("Compute W̄"),
         lambda e, p, xp: -(e.dX @ e.S_in), ("dX", "S_in")),
    Step("dBK", r"\bar B_K", r"\bar B_K = A^{-\top} \bar W", N_("Compute B̄ₖ by back substitution"),
         lambda e, p, xp: solve_unit_lower_transposed(e.A, e.dW, xp=xp), ("A", "dW"),
         rounded_as_worked=lambda e, p, xp, h: _substitution_rounding(e.A, h, True, xp)),
    Step("dBV", r"\bar B_V", r"\bar B_V = A^{-\top} \bar U", N_("Compute B̄ᵥ by back substitution"),
         lambda e, p, xp: solve_unit_lower_transposed(e.A, e.dU, xp=xp), ("A", "dU"),
         rounded_as_worked=lambda e, p, xp, h: _substitution_rounding(e.A, h, True, xp)),
    Step("dA", r"\bar A", r"\bar A = -\bar B_K W^\top - \bar B_V U^\top",
         N_("Compute Ā (every entry, treating A as a free C×C matrix)"),
         lambda e, p, xp: -(e.dBK @ swap(e.W)) - e.dBV @ swap(e.U), ("dBK", "W", "dBV", "U")),
    Step("dG", r"\bar G", r"\bar G = \operatorname{tril}(\operatorname{diag}(\beta) \bar A, -1)", N_("Compute Ḡ"),
         lambda e, p, xp: tril_strict_mask(_c(e), xp) * (e.beta[..., :, None] * e.dA), ("beta", "dA")),
    Step("dbeta", r"\bar\beta",
         r"\bar\beta = \operatorname{rowsum}(\bar B_K \odot K + \bar B_V \odot V) + \operatorname{rowsum}(\operatorname{tril}(\bar A \odot G, -1))",
         N_("Compute β̄"), lambda e, p, xp: _dbeta(e, xp), ("dBK", "K", "dBV", "V", "dA", "G")),
    Step("dK", r"\bar K", r"\bar K = X \bar S^+ + \bar T^\top Q + \operatorname{diag}(\beta) \bar B_K + (\bar G + \bar G^\top) K",
         N_("Compute K̄"), lambda e, p, xp: _dk_terms(e, p, xp), ("X", "dS_in", "dT", "Q", "beta", "dBK", "dG", "K")),
    Step("dQ", r"\bar Q", r"\bar Q = \bar O S + \bar T K", N_("Compute Q̄"),
         lambda e, p, xp: e.dO @ e.S_in + e.dT @ e.K, ("dO", "S_in", "dT", "K")),
    Step("dV", r"\bar V", r"\bar V = \operatorname{diag}(\beta) \bar B_V", N_("Compute V̄"),
         lambda e, p, xp: e.beta[..., :, None] * e.dBV, ("beta", "dBV")),
    Step("dS", r"\bar S", r"\bar S = \bar S^+ + \bar O^\top Q - \bar X^\top W",
         N_("Compute S̄, the gradient handed to the previous chunk"),
         lambda e, p, xp: _ds(e), ("dS_in", "dO", "Q", "dX", "W")),
)

# With C = 1, A = I and P = T ⊙ M is one entry, and G = KKᵀ has no strict lower triangle: the
# slips of the solve, the mask and the G path then give the right answer (applies: C ≥ 2).
BACKWARD_MISTAKES = (
    Misconception("dX", "missing_state_path", lambda e, p, xp: swap(e.P) @ e.dO,
                  N_("X also reaches S⁺ = S + XᵀK: add K(S̄⁺)ᵀ to PᵀŌ."), applies=_grad_nonzero),
    Misconception("dX", "missing_output_path", lambda e, p, xp: e.K @ swap(e.dS_in),
                  N_("X also reaches O = QSᵀ + PX: add PᵀŌ to K(S̄⁺)ᵀ.")),
    Misconception("dX", "untransposed_P", lambda e, p, xp: e.K @ swap(e.dS_in) + e.P @ e.dO,
                  N_("Through O = PX the gradient is PᵀŌ (P transposed), not PŌ."), applies=_several_tokens),
    Misconception("dP", "masked", lambda e, p, xp: e.dP * causal_mask(_c(e), xp),
                  N_("P̄ = ŌXᵀ is the full matrix; the mask M applies one line later, in T̄ = P̄ ⊙ M."), applies=_several_tokens),
    Misconception("dT", "unmasked", lambda e, p, xp: e.dP,
                  N_("P = T ⊙ M, so T̄ = P̄ ⊙ M: the entries above the diagonal get no gradient."), applies=_several_tokens),
    Misconception("dT", "strict_mask", lambda e, p, xp: e.dP * tril_strict_mask(_c(e), xp),
                  N_("M includes the diagonal, so T̄ = P̄ ⊙ M keeps it.")),
    Misconception("dW", "sign", lambda e, p, xp: e.dX @ e.S_in,
                  N_("X = U − WSᵀ, so W̄ = −X̄S (the minus sign carries over).")),
    Misconception("dW", "transposed_state", lambda e, p, xp: -(e.dX @ swap(e.S_in)),
                  N_("From X = U − WSᵀ: W̄ = −X̄S (S, not Sᵀ)."), applies=_square),
    Misconception("dBK", "A_transposed", lambda e, p, xp: swap(e.A) @ e.dW,
                  N_("B̄ₖ = A⁻ᵀW̄ (a back substitution with Aᵀ), not AᵀW̄."), applies=_several_tokens),
    Misconception("dBK", "forward_solve", lambda e, p, xp: solve_unit_lower(e.A, e.dW, xp=xp),
                  N_("The adjoint of W = A⁻¹Bₖ is B̄ₖ = A⁻ᵀW̄: solve with Aᵀ (back substitution), not with A."), applies=_several_tokens),
    Misconception("dBK", "no_solve", lambda e, p, xp: e.dW,
                  N_("W = A⁻¹Bₖ, so W̄ must pass back through A⁻ᵀ: B̄ₖ = A⁻ᵀW̄."), applies=_several_tokens),
    Misconception("dBV", "A_transposed", lambda e, p, xp: swap(e.A) @ e.dU,
                  N_("B̄ᵥ = A⁻ᵀŪ (a back substitution with Aᵀ), not AᵀŪ."), applies=_several_tokens),
    Misconception("dBV", "forward_solve", lambda e, p, xp: solve_unit_lower(e.A, e.dU, xp=xp),
                  N_("The adjoint of U = A⁻¹Bᵥ is B̄ᵥ = A⁻ᵀŪ: solve with Aᵀ (back substitution), not with A."), applies=_several_tokens),
    Misconception("dBV", "no_solve", lambda e, p, xp: e.dU,
                  N_("U = A⁻¹Bᵥ, so Ū must pass back through A⁻ᵀ: B̄ᵥ = A⁻ᵀŪ."), applies=_several_tokens),
    Misconception("dA", "sign", lambda e, p, xp: e.dBK @ swap(e.W) + e.dBV @ swap(e.U),
                  N_("d(A⁻¹) = −A⁻¹(dA)A⁻¹, so Ā = −B̄ₖ Wᵀ − B̄ᵥ Uᵀ carries a minus sign.")),
    Misconception("dA", "missing_U_path", lambda e, p, xp: -(e.dBK @ swap(e.W)),
                  N_("A is used twice (W = A⁻¹Bₖ and U = A⁻¹Bᵥ): add −B̄ᵥ Uᵀ.")),
    Misconception("dG", "no_beta", lambda e, p, xp: tril_strict_mask(_c(e), xp) * e.dA,
                  N_("Aᵣₛ = βᵣGᵣₛ below the diagonal, so Ḡᵣₛ = βᵣĀᵣₛ."), applies=lambda p: _several_tokens(p) and _beta_not_one(p)),
    Misconception("dG", "inclusive_triangle", lambda e, p, xp: causal_mask(_c(e), xp) * (e.beta[..., :, None] * e.dA),
                  N_("Only the strict lower triangle of A depends on G: the diagonal of Ḡ is 0.")),
    Misconception("dG", "beta_on_columns",
                  lambda e, p, xp: tril_strict_mask(_c(e), xp) * (e.dA * e.beta[..., None, :]),
                  N_("Row r of A carries βᵣ, so Ḡᵣₛ = βᵣĀᵣₛ (scale rows, not columns)."), applies=lambda p: _several_tokens(p) and _rows_tell_beta(p)),
    Misconception("dbeta", "missing_A_path", lambda e, p, xp: _dbeta(e, xp, a=False),
                  N_("β also enters A = I + tril(diag(β)G, −1): add rowsum(tril(Ā ⊙ G, −1))."), applies=_several_tokens),
    Misconception("dbeta", "missing_B_path", lambda e, p, xp: _dbeta(e, xp, b=False),
                  N_("β also scales Bₖ = diag(β)K and Bᵥ = diag(β)V: add rowsum(B̄ₖ ⊙ K + B̄ᵥ ⊙ V).")),
    Misconception("dbeta", "missing_V", lambda e, p, xp: _dbeta(e, xp, v=False),
                  N_("β scales Bᵥ = diag(β)V as well as Bₖ: add rowsum(B̄ᵥ ⊙ V).")),
    Misconception("dK", "one_sided_G", lambda e, p, xp: _dk_terms(e, p, xp, g="one"),
                  N_("K appears twice in G = KKᵀ, so the G path gives (Ḡ + Ḡᵀ)K, not ḠK."), applies=_several_tokens),
    Misconception("dK", "missing_G_path", lambda e, p, xp: _dk_terms(e, p, xp, g="none"),
                  N_("K also builds G = KKᵀ (and so A): add (Ḡ + Ḡᵀ)K."), applies=_several_tokens),
    Misconception("dK", "missing_state_path", lambda e, p, xp: _dk_terms(e, p, xp, state=False),
                  N_("K also writes the state S⁺ = S + XᵀK: add X S̄⁺."), applies=_grad_nonzero),
    Misconception("dQ", "missing_state_term", lambda e, p, xp: e.dT @ e.K,
                  N_("Q also reads the state entering the chunk (O = QSᵀ + PX): add ŌS.")),
    Misconception("dQ", "missing_T_term", lambda e, p, xp: e.dO @ e.S_in,
                  N_("Q also builds T = QKᵀ: add T̄K.")),
    Misconception("dQ", "transposed_state", lambda e, p, xp: e.dO @ swap(e.S_in) + e.dT @ e.K,
                  N_("From O = QSᵀ: Q̄ = ŌS (S, not Sᵀ)."), applies=_square),
    Misconception("dV", "no_beta", lambda e, p, xp: e.dBV,
                  N_("Bᵥ = diag(β)V, so V̄ = diag(β)B̄ᵥ."), applies=_beta_not_one),
    Misconception("dS", "missing_X_path", lambda e, p, xp: _ds(e, x_sign=0.0),
                  N_("S also enters X = U − WSᵀ: add −X̄ᵀW.")),
    Misconception("dS", "sign", lambda e, p, xp: _ds(e, x_sign=1.0),
                  N_("X = U − WSᵀ, so that path gives −X̄ᵀW (the minus sign carries over).")),
    Misconception("dS", "missing_identity", lambda e, p, xp: _ds(e, identity=False),
                  N_("S⁺ = S + XᵀK passes S̄⁺ straight through: add S̄⁺."), applies=_grad_nonzero),
)

def _backward_ask(p: Params) -> tuple[str, ...]:
    # With C = 1, A = I makes B̄_K = W̄, and G has no strict lower triangle, so Ḡ = 0 and Ā reaches
    # nothing: ask what is left to compute.
    if p.chunk > 1:
        return CHUNK_BACKWARD.default_ask
    return ("dX", "dW", "dbeta", "dK", "dQ", "dV", "dS")


CHUNK_BACKWARD = Family(
    name="delta.chunk_backward",
    title=N_("Backprop through a delta-rule chunk"),
    summary=N_("Given Ō and S̄⁺ of one chunk (or a sequence of chunks): X̄, P̄, W̄, Ā, B̄ₖ, B̄ᵥ, Ḡ, β̄, K̄, Q̄, V̄, S̄."),
    params={
        **{**CHUNK_PARAMS, "chunk": Param(2, "chunk length C (with C = 1, A = I: each chunk is one recurrent "
                                               "step, and an item with no ask leaves out B̄_K = W̄, Ā and Ḡ = 0)",
                                      low=1, high=16)},
        "grad_entries": int_range((-1, 1), "range of the integer entries of Ō and S̄⁺"),
        "final_grad": Param("drawn", "S̄⁺ after the last chunk: integer entries, or zero (the loss reads only O)",
                            choices=("drawn", "zero")),
    },
    givens=(
        *CHUNK_GIVENS,
        Given("dO", r"\bar O", N_("upstream gradient ∂L/∂O, one row per token")),
        Given("dS_next", r"\bar S^+", N_("upstream gradient ∂L/∂S⁺ of the state after the (last) chunk")),
    ),
    sample=lambda draw, p: _sample_chunk(draw, p, backward=True),
    steps=FORWARD_STEPS + BACKWARD_STEPS,
    default_ask=("dX", "dW", "dBK", "dA", "dG", "dbeta", "dK", "dQ", "dV", "dS"),
    default_ask_for=_backward_ask,
    misconceptions=FORWARD_MISTAKES + BACKWARD_MISTAKES,
    accept=lambda e, p, xp: _tame(e, p, ("W", "U", "X", "O", "S_next", "dX", "dA", "dK", "dbeta", "dS"), xp),
    validate=_check_chunks,
    extra={"present": present},
)

FAMILIES = (RECURRENT, CHUNK_FORWARD, CHUNK_BACKWARD)
