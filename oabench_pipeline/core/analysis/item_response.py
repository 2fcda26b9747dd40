"""Rasch (1PL) abilities of model keys and difficulties of questions, on one scale.

The model (docs/item_response.md says why each choice):

    P(key i answers question j right) = expit(θ_i − b_j),   b_j = μ_e + u_j,   u_j ~ N(0, σ²)

where e is the question's edition. Abilities θ_i and edition means μ_e are fixed effects; the question's
own deviation u_j is a random effect, integrated out (marginal maximum likelihood). Why random
questions: a question is answered by a few dozen keys at most, so a free difficulty per question (joint
maximum likelihood) is estimated from a handful of answers, which biases every ability outward by about
K/(K − 1) with K keys, and sends questions every key got right (or wrong) to ±∞. Integrating them out
keeps the abilities consistent however few keys there are; edition means keep one edition's being
easier from passing as the ability of the key that alone took it.

Identification: in each linked set of editions (keys and editions joined by answers), the mean edition
difficulty weighted by questions is 0, so `ability` is the log-odds of a right answer on a question of
average difficulty (`link_group` tells which keys share a scale). Perfect and zero scores: a weak normal
prior on each ability (sd `ABILITY_PRIOR_SD`) keeps θ finite; on log σ a weak prior (sd
`LOG_SIGMA_PRIOR_SD`, centred on σ = 1) keeps the fit defined with a single key.

Estimation: Newton's method on the exact gradient and Hessian (Louis' identity) of the marginal
log-likelihood, each question's integral by adaptive Gauss-Hermite quadrature (`QUADRATURE_NODES` nodes
at the question's posterior mode and curvature), with a backtracking line search. Deterministic: no
random numbers, a fixed start. Intervals: Wald, from the inverse of the observed information.
Difficulties: each question's posterior mean and standard deviation given the fitted parameters.

`leave_one_out` gives, for one key, each question's difficulty distribution from every other key's
answers (the offset of the training-cutoff analysis, `analysis/cutoff_effect.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

QUADRATURE_NODES = 7
ABILITY_PRIOR_SD = 5.0
LOG_SIGMA_PRIOR_SD = 2.0
# `leave_one_out`'s re-solve: its largest Newton step (logits for a mean, log σ for ρ), and how far ρ = log σ
# may go (σ from e^-7 ≈ 0.001 to e^7 ≈ 1,100 logits).
MAX_STEP = 1.0
RHO_BOUND = 7.0
Z95 = 1.959963984540054
_MAX_ITERATIONS = 100
# Stop when the Newton decrement (the squared length of the remaining step in standard errors) is below
# this: the estimates are then within 0.001 standard errors of the optimum.
_TOLERANCE = 1e-6
# Newton's steps use the exact Hessian while keys² × questions × nodes stays below this, else its
# delta-method approximation (the intervals always use the exact one).
_EXACT_HESSIAN_CELLS = 200_000_000
_FULL_STEP_DECREMENT = 0.5
# Items per chunk so that a keys × items × nodes block stays around 2M doubles (16 MB).
_CHUNK_CELLS = 2_000_000


@dataclass(frozen=True)
class RaschFit:
    """A fitted Rasch model over K keys and J questions (NaN where a key or question had no answer)."""

    ability: FloatArray  # (K,)
    ability_se: FloatArray  # (K,)
    difficulty: FloatArray  # (J,) posterior mean of b_j
    difficulty_sd: FloatArray  # (J,) posterior standard deviation of b_j
    group_mean: FloatArray  # (G,) μ_e, NaN for an edition nobody answered
    group_mean_se: FloatArray  # (G,)
    sigma: float
    link_group: IntArray  # (K,) linked set of each key, -1 without answers
    iterations: int
    converged: bool
    # What leave_one_out needs, over the fitted keys/questions only.
    _keys: IntArray
    _items: IntArray
    _item_group: IntArray
    _group_mu: FloatArray  # (G',) μ of the edition groups that have answers
    _nodes: FloatArray  # (J', Q) quadrature nodes in b
    _log_weights: FloatArray  # (J', Q) log quadrature weights (Gauss-Hermite, adaptive)
    _node_loglik: FloatArray  # (J', Q) Σ_i log P(answer_ij | b = node)
    _responders: IntArray  # (J',) keys that answered each question

    @property
    def n_keys(self) -> int:
        return int(self.ability.size)


@dataclass(frozen=True)
class ItemPosteriors:
    """Difficulty distributions of some questions, as weighted quadrature nodes (rows sum to 1)."""

    items: IntArray  # question indices (into the fit's J)
    nodes: FloatArray  # (n, Q)
    weights: FloatArray  # (n, Q)

    @property
    def mean(self) -> FloatArray:
        return (self.weights * self.nodes).sum(axis=1)


@dataclass
class _Data:
    y: FloatArray  # (K', J') 1.0 right, 0.0 wrong or unanswered
    e: FloatArray  # (K', J') 1.0 answered
    group: IntArray  # (J',) group index 0..G'-1
    n_groups: int
    basis: FloatArray  # (G', G' - C) μ = basis @ φ: the identification constraints built in

    wrong: FloatArray = field(init=False)  # (K', J') 1.0 answered and not right

    def __post_init__(self) -> None:
        self.wrong = self.e * (1.0 - self.y)


def _posterior(joint: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Row-wise normalised weights exp(joint) / Σ exp(joint) and the log of the sum (stable)."""
    top = joint.max(axis=1, keepdims=True)
    weights = np.exp(joint - top)
    total = weights.sum(axis=1, keepdims=True)
    return weights / total, (np.log(total) + top)[:, 0]


def _gauss_hermite(n: int) -> tuple[FloatArray, FloatArray]:
    nodes, weights = np.polynomial.hermite.hermgauss(n)
    return nodes, np.log(weights) + nodes**2  # ∫ f(x) dx ≈ Σ w e^{t²} f(t)


def _components(e: FloatArray, group: IntArray, n_groups: int) -> tuple[IntArray, IntArray]:
    """Linked sets: keys and groups joined by at least one answer. Returns (key component, group component)."""
    n_keys = e.shape[0]
    parent = list(range(n_keys + n_groups))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    answered = np.zeros((n_keys, n_groups), dtype=bool)
    for g in range(n_groups):
        answered[:, g] = e[:, group == g].any(axis=1)
    for k, g in zip(*np.nonzero(answered), strict=True):
        a, b = find(int(k)), find(n_keys + int(g))
        if a != b:
            parent[max(a, b)] = min(a, b)
    roots = [find(x) for x in range(n_keys + n_groups)]
    labels = {root: i for i, root in enumerate(dict.fromkeys(roots))}
    codes = np.array([labels[r] for r in roots], dtype=np.int64)
    return codes[:n_keys], codes[n_keys:]


def _constraint_basis(group_component: IntArray, group_sizes: FloatArray) -> FloatArray:
    """μ = B φ with Σ_g n_g μ_g = 0 within each linked set (the set's first group absorbs the rest)."""
    n_groups = group_component.size
    columns = []
    for component in np.unique(group_component):
        members = np.flatnonzero(group_component == component)
        first = members[0]
        for g in members[1:]:
            column = np.zeros(n_groups)
            column[g] = 1.0
            column[first] = -group_sizes[g] / group_sizes[first]
            columns.append(column)
    return np.array(columns).T if columns else np.zeros((n_groups, 0))


class _Evaluation:
    """Objective, gradient and Hessian of the quadrature-approximated log-posterior, nodes held fixed."""

    def __init__(self, data: _Data, nodes: FloatArray, log_weights: FloatArray) -> None:
        self.data, self.nodes, self.log_weights = data, nodes, log_weights

    def _chunks(self) -> list[slice]:
        n_keys, n_items = self.data.y.shape
        step = max(1, _CHUNK_CELLS // max(1, n_keys * self.nodes.shape[1]))
        return [slice(s, min(s + step, n_items)) for s in range(0, n_items, step)]

    def _node_terms(
        self, theta: FloatArray, items: slice
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Per key × item × node: log-likelihood of the answer, P(right); summed log-likelihood per node."""
        e = self.data.e[:, items, None]
        eta = theta[:, None, None] - self.nodes[None, items, :]
        # One exponential for both: t = e^{−η}, p = 1/(1 + t), log p = −log1p(t); |η| stays far below
        # the 700 where e^{−η} overflows (abilities and difficulties are a few logits).
        t = np.exp(-eta)
        p = 1.0 / (1.0 + t)
        loglik = -e * np.log1p(t) - self.data.wrong[:, items, None] * eta  # log(1 − p) = log p − η
        return loglik, p, loglik.sum(axis=0), e

    def _prior_terms(self, mu: FloatArray, sigma: float, items: slice) -> tuple[FloatArray, FloatArray]:
        """log N(node; μ_e, σ²) and the standardised deviation (node − μ_e)/σ² per item × node."""
        deviation = self.nodes[items] - mu[self.data.group[items], None]
        log_density = -0.5 * np.log(2 * np.pi * sigma**2) - deviation**2 / (2 * sigma**2)
        return log_density, deviation / sigma**2

    def objective(self, theta: FloatArray, mu: FloatArray, rho: float) -> float:
        sigma = float(np.exp(rho))
        total = 0.0
        for items in self._chunks():
            _, _, node_loglik, _ = self._node_terms(theta, items)
            log_density, _ = self._prior_terms(mu, sigma, items)
            total += float(_posterior(self.log_weights[items] + node_loglik + log_density)[1].sum())
        return total - float(theta @ theta) / (2 * ABILITY_PRIOR_SD**2) - rho**2 / (2 * LOG_SIGMA_PRIOR_SD**2)

    def derivatives(
        self, theta: FloatArray, mu: FloatArray, rho: float, exact: bool = True
    ) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
        """(objective, gradient, Hessian, per-item posterior weights, per-node summed log-likelihood).

        `exact=False` replaces the keys × keys posterior covariance by its delta-method value (rank one
        per question: the covariance of two keys' P(right) ≈ their slopes × Var(b)), a keys² × questions
        product instead of keys² × questions × nodes: Newton's steps need only a good Hessian, the
        intervals the exact one.

        Parameters are ordered θ (K'), μ (G'), ρ = log σ. Louis' identity per question:
        H_j = E_post[∇²ℓ] + Cov_post[∇ℓ], with the posterior over the question's quadrature nodes.
        """
        data = self.data
        n_keys, n_items = data.y.shape
        n_groups = data.n_groups
        sigma = float(np.exp(rho))
        size = n_keys + n_groups + 1
        grad = np.zeros(size)
        hess = np.zeros((size, size))
        total = 0.0
        weights = np.empty_like(self.nodes)
        node_loglik_all = np.empty_like(self.nodes)
        one_hot = np.zeros((n_items, n_groups))
        one_hot[np.arange(n_items), data.group] = 1.0
        g_mu, g_rho = slice(n_keys, n_keys + n_groups), n_keys + n_groups
        for items in self._chunks():
            _, p, node_loglik, e = self._node_terms(theta, items)
            log_density, d = self._prior_terms(mu, sigma, items)
            joint = self.log_weights[items] + node_loglik + log_density
            w, log_marginal = _posterior(joint)  # posterior weights per item × node
            total += float(log_marginal.sum())
            weights[items], node_loglik_all[items] = w, node_loglik
            # Posterior moments of P(right) per key × question: everything below needs only these
            # (keys × questions), except the exact keys × keys covariance.
            s = (d * sigma**2) ** 2 / sigma**2 - 1.0  # ∂ℓ/∂ρ = (b − μ)²/σ² − 1
            e_kn = e[:, :, 0]
            p_bar = np.einsum("knq,nq->kn", p, w)
            p_sq = np.einsum("knq,knq,nq->kn", p, p, w)
            p_d = np.einsum("knq,nq->kn", p, w * d)
            p_s = np.einsum("knq,nq->kn", p, w * s)
            grad[:n_keys] += (e_kn * (self.data.y[:, items] - p_bar)).sum(axis=1)  # ∂ℓ/∂θ = y − p
            d_bar, s_bar = (w * d).sum(axis=1), (w * s).sum(axis=1)
            hot = one_hot[items]
            grad[g_mu] += d_bar @ hot
            grad[g_rho] += s_bar.sum()
            # Second derivatives, expected over the posterior ...
            slope = e_kn * (p_bar - p_sq)  # E[p(1 − p)] per key × question
            hess[np.arange(n_keys), np.arange(n_keys)] -= slope.sum(axis=1)
            hess[g_mu, g_mu] -= np.diag(np.full(n_groups, 1.0 / sigma**2) * hot.sum(axis=0))
            e_rho_mu = (w * (-2.0 * d)).sum(axis=1)
            e_rho_rho = (w * (-2.0 * (s + 1.0))).sum(axis=1)
            # ... plus the posterior covariance of the first derivatives (∂ℓ/∂θ_i centred: −(p − p̄)).
            root = np.sqrt(w)
            if exact:
                centred = (e * (p - p_bar[:, :, None])) * root[None]
                flat = centred.reshape(n_keys, -1)
                hess[:n_keys, :n_keys] += flat @ flat.T
            else:
                b_bar = (w * self.nodes[items]).sum(axis=1)
                b_var = np.maximum((w * self.nodes[items] ** 2).sum(axis=1) - b_bar**2, 0.0)
                hess[:n_keys, :n_keys] += (slope * b_var[None, :]) @ slope.T
            cross_mu = (-e_kn * (p_d - p_bar * d_bar[None, :])) @ hot
            cross_rho = (-e_kn * (p_s - p_bar * s_bar[None, :])).sum(axis=1)
            d_c = (d - d_bar[:, None]) * root
            s_c = (s - s_bar[:, None]) * root
            hess[:n_keys, g_mu] += cross_mu
            hess[g_mu, :n_keys] += cross_mu.T
            hess[:n_keys, g_rho] += cross_rho
            hess[g_rho, :n_keys] += cross_rho
            var_d = (d_c**2).sum(axis=1)
            cov_ds = (d_c * s_c).sum(axis=1)
            var_s = (s_c**2).sum(axis=1)
            hess[g_mu, g_mu] += np.diag(var_d @ hot)
            mu_rho = (e_rho_mu + cov_ds) @ hot
            hess[g_mu, g_rho] += mu_rho
            hess[g_rho, g_mu] += mu_rho
            hess[g_rho, g_rho] += float((e_rho_rho + var_s).sum())
        grad[:n_keys] -= theta / ABILITY_PRIOR_SD**2
        hess[np.arange(n_keys), np.arange(n_keys)] -= 1.0 / ABILITY_PRIOR_SD**2
        grad[g_rho] -= rho / LOG_SIGMA_PRIOR_SD**2
        hess[g_rho, g_rho] -= 1.0 / LOG_SIGMA_PRIOR_SD**2
        total -= float(theta @ theta) / (2 * ABILITY_PRIOR_SD**2) + rho**2 / (2 * LOG_SIGMA_PRIOR_SD**2)
        return total, grad, hess, weights, node_loglik_all


def _modes(
    data: _Data, theta: FloatArray, mu: FloatArray, sigma: float, start: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Each question's posterior mode of b and the posterior's scale there (1-D Newton, vectorised)."""
    from scipy import special  # imported by the analyses that use it: scipy is most of a second to import

    b = start.copy()
    prior_mean = mu[data.group]
    for _ in range(50):
        p = special.expit(theta[:, None] - b[None, :])
        slope = (data.e * (p - data.y)).sum(axis=0) - (b - prior_mean) / sigma**2
        curvature = (data.e * p * (1.0 - p)).sum(axis=0) + 1.0 / sigma**2
        step = slope / curvature
        b += step
        if np.max(np.abs(step), initial=0.0) < 1e-10:
            break
    p = special.expit(theta[:, None] - b[None, :])
    curvature = (data.e * p * (1.0 - p)).sum(axis=0) + 1.0 / sigma**2
    return b, 1.0 / np.sqrt(curvature)


def _quadrature(centre: FloatArray, scale: FloatArray, n_nodes: int) -> tuple[FloatArray, FloatArray]:
    t, log_w = _gauss_hermite(n_nodes)
    nodes = centre[:, None] + np.sqrt(2.0) * scale[:, None] * t[None, :]
    return nodes, np.log(np.sqrt(2.0) * scale)[:, None] + log_w[None, :]


def fit_rasch(
    correct: npt.ArrayLike,
    covered: npt.ArrayLike,
    groups: npt.ArrayLike,
    n_groups: int | None = None,
    *,
    n_nodes: int = QUADRATURE_NODES,
) -> RaschFit:
    """Fit the model to a keys × questions matrix of answers.

    `covered[i, j]`: key i answered question j (an active question; an unparseable reply is an answer,
    and wrong); `correct[i, j]`: it was right. `groups[j]`: the question's edition as 0..G-1.
    """
    # One BLAS thread: the matrices are small (keys × keys), so threads mostly spin on a shared machine,
    # and a fixed summation order makes the same answers give the same bits (stable data versions).
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit(correct, covered, groups, n_groups, n_nodes)


def _fit(
    correct: npt.ArrayLike, covered: npt.ArrayLike, groups: npt.ArrayLike, n_groups: int | None, n_nodes: int
) -> RaschFit:
    covered_arr = np.asarray(covered, dtype=bool)
    correct_arr = np.asarray(correct, dtype=bool) & covered_arr
    group_arr = np.asarray(groups, dtype=np.int64)
    n_all_keys, n_all_items = covered_arr.shape
    n_all_groups = int(n_groups if n_groups is not None else (group_arr.max(initial=-1) + 1))
    keys = np.flatnonzero(covered_arr.any(axis=1))
    items = np.flatnonzero(covered_arr.any(axis=0))
    used_groups, item_group = np.unique(group_arr[items], return_inverse=True)
    e = covered_arr[np.ix_(keys, items)].astype(np.float64)
    y = correct_arr[np.ix_(keys, items)].astype(np.float64)
    key_component, group_component = _components(e, item_group, used_groups.size)
    sizes = np.bincount(item_group, minlength=used_groups.size).astype(np.float64)
    data = _Data(y, e, item_group, used_groups.size, _constraint_basis(group_component, sizes))
    theta, mu, rho, iterations, converged, evaluation = _newton(data, n_nodes)
    _, _, hess, weights, node_loglik = evaluation.derivatives(theta, mu, rho)
    covariance = _covariance(hess, data)
    n_keys = keys.size
    post_mean = (weights * evaluation.nodes).sum(axis=1)
    post_sd = np.sqrt(np.maximum((weights * evaluation.nodes**2).sum(axis=1) - post_mean**2, 0.0))

    def spread(values: FloatArray, index: IntArray, size: int) -> FloatArray:
        out = np.full(size, np.nan)
        out[index] = values
        return out

    cov_theta = covariance[:n_keys, :n_keys]
    cov_mu = covariance[n_keys : n_keys + data.n_groups, n_keys : n_keys + data.n_groups]
    link = np.full(n_all_keys, -1, dtype=np.int64)
    link[keys] = key_component
    responders = e.sum(axis=0).astype(np.int64)
    return RaschFit(
        ability=spread(theta, keys, n_all_keys),
        ability_se=spread(_standard_errors(cov_theta), keys, n_all_keys),
        difficulty=spread(post_mean, items, n_all_items),
        difficulty_sd=spread(post_sd, items, n_all_items),
        group_mean=spread(mu, used_groups, n_all_groups),
        group_mean_se=spread(_standard_errors(cov_mu), used_groups, n_all_groups),
        sigma=float(np.exp(rho)),
        link_group=link,
        iterations=iterations,
        converged=converged,
        _keys=keys,
        _items=items,
        _item_group=item_group,
        _group_mu=mu,
        _nodes=evaluation.nodes,
        _log_weights=evaluation.log_weights,
        _node_loglik=node_loglik,
        _responders=responders,
    )


def _standard_errors(covariance: FloatArray) -> FloatArray:
    """√ of the variances; NaN where one is not positive: the information is singular there (a
    degenerate fit, e.g. keys that answered every question alike leave the questions' spread free)."""
    variance = np.diag(covariance)
    return np.where(variance > 0, np.sqrt(np.abs(variance)), np.nan)


def _reduced(hess: FloatArray, grad: FloatArray, data: _Data) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Gradient and Hessian in the free parameters (θ, φ, ρ), μ = B φ; and the map back.

    Only the μ rows and columns change, so the keys × keys block is copied, not multiplied."""
    n_keys, n_groups = data.y.shape[0], data.n_groups
    basis = data.basis
    size = n_keys + basis.shape[1] + 1
    to_full = np.zeros((n_keys + n_groups + 1, size))
    to_full[:n_keys, :n_keys] = np.eye(n_keys)
    to_full[n_keys : n_keys + n_groups, n_keys : n_keys + basis.shape[1]] = basis
    to_full[-1, -1] = 1.0
    mu = slice(n_keys, n_keys + n_groups)
    other = np.r_[np.arange(n_keys), n_keys + n_groups]  # θ and ρ
    free = np.r_[np.arange(n_keys), size - 1]
    reduced = np.empty((size, size))
    phi = slice(n_keys, n_keys + basis.shape[1])
    reduced[np.ix_(free, free)] = hess[np.ix_(other, other)]
    cross = hess[np.ix_(other, np.arange(n_keys, n_keys + n_groups))] @ basis
    reduced[free, phi] = cross
    reduced[phi, free] = cross.T
    reduced[phi, phi] = basis.T @ hess[mu, mu] @ basis
    reduced_grad = np.concatenate([grad[:n_keys], basis.T @ grad[mu], grad[-1:]])
    return reduced_grad, reduced, to_full


def _ascent_direction(hess: FloatArray, grad: FloatArray) -> FloatArray:
    """Newton's step; where the Hessian is not negative definite (far from the optimum), the step of
    −H + λI with the smallest λ (a power of ten times the largest curvature) that makes it so."""
    from scipy import linalg

    information = -hess
    shift = 0.0
    scale = max(float(np.abs(np.diag(information)).max(initial=1.0)), 1.0)
    while True:
        try:
            factor = linalg.cho_factor(information + shift * np.eye(information.shape[0]))
        except linalg.LinAlgError:
            shift = scale * 1e-8 if shift == 0.0 else shift * 10.0
            continue
        return np.asarray(linalg.cho_solve(factor, grad))


def _covariance(hess: FloatArray, data: _Data) -> FloatArray:
    _, reduced_hess, to_full = _reduced(hess, np.zeros(hess.shape[0]), data)
    reduced_cov = np.linalg.inv(-reduced_hess)
    return to_full @ reduced_cov @ to_full.T


def _newton(data: _Data, n_nodes: int) -> tuple[FloatArray, FloatArray, float, int, bool, _Evaluation]:
    """Newton's method with re-centred quadrature each iteration and a backtracking line search."""
    from scipy import special

    n_keys = data.y.shape[0]
    answered = data.e.sum(axis=1)
    theta = special.logit((data.y.sum(axis=1) + 0.5) / (answered + 1.0))
    phi = np.zeros(data.basis.shape[1])
    rho = 0.0
    centre = np.zeros(data.y.shape[1])
    exact = n_keys**2 * data.y.shape[1] * n_nodes <= _EXACT_HESSIAN_CELLS
    converged = False
    iteration = 0
    evaluation = None
    for iteration in range(1, _MAX_ITERATIONS + 1):  # noqa: B007 (the count is returned)
        mu = data.basis @ phi
        centre, scale = _modes(data, theta, mu, float(np.exp(rho)), centre)
        evaluation = _Evaluation(data, *_quadrature(centre, scale, n_nodes))
        value, grad, hess, _, _ = evaluation.derivatives(theta, mu, rho, exact=exact)
        reduced_grad, reduced_hess, _ = _reduced(hess, grad, data)
        step = _ascent_direction(reduced_hess, reduced_grad)
        decrement = float(reduced_grad @ step)
        if decrement < _TOLERANCE:  # the Newton decrement: nothing left to gain
            converged = True
            break
        t = 1.0
        params = np.concatenate([theta, phi, [rho]])
        # Close to the optimum (a Newton decrement under 1/2: the quadratic model is good) the full step
        # is taken without evaluating it; further out, backtrack until the objective increases.
        while decrement >= _FULL_STEP_DECREMENT and t > 1e-6:
            trial = params + t * step
            trial_mu = data.basis @ trial[n_keys:-1]
            if evaluation.objective(trial[:n_keys], trial_mu, float(trial[-1])) >= value:
                break
            t /= 2
        params = params + t * step
        theta, phi, rho = params[:n_keys], params[n_keys:-1], float(params[-1])
    mu = data.basis @ phi
    centre, scale = _modes(data, theta, mu, float(np.exp(rho)), centre)
    evaluation = _Evaluation(data, *_quadrature(centre, scale, n_nodes))
    return theta, mu, rho, iteration, converged, evaluation


def leave_one_out(fit: RaschFit, key: int, correct: npt.ArrayLike, covered: npt.ArrayLike) -> ItemPosteriors:
    """The difficulty distribution of each question `key` answered, from every other key's answers.

    The other keys' abilities and σ stay at the full fit (each rests on thousands of answers, which one
    key's leaving barely moves); each edition mean the key took part in is re-estimated without it (with
    few keys on an edition, its answers would otherwise leak into its own baseline); each question's
    posterior is its quadrature nodes re-weighted without the key's answer. Questions no other key
    answered are left out: nothing says how hard they are.
    """
    from scipy import special

    covered_row = np.asarray(covered, dtype=bool)[key]
    correct_row = np.asarray(correct, dtype=bool)[key] & covered_row
    theta = fit.ability[key]
    if np.isnan(theta):
        return ItemPosteriors(np.zeros(0, np.int64), np.zeros((0, 1)), np.zeros((0, 1)))
    sigma = fit.sigma
    mine = covered_row[fit._items]
    eta = theta - fit._nodes[mine]
    y = correct_row[fit._items][mine][:, None]
    own = y * special.log_expit(eta) + (1.0 - y) * special.log_expit(-eta)
    others_loglik = fit._node_loglik.copy()
    others_loglik[mine] -= own
    others = fit._responders - mine.astype(np.int64)
    informative = others > 0
    touched = np.zeros(fit._group_mu.size, dtype=bool)
    touched[fit._item_group[mine]] = True
    mu, sigma = _distribution_without(
        fit._nodes[informative],
        fit._log_weights[informative] + others_loglik[informative],
        fit._item_group[informative],
        fit._group_mu,
        touched,
        np.log(fit.sigma),
    )
    keep = mine & informative
    nodes = fit._nodes[keep]
    deviation = nodes - mu[fit._item_group[keep], None]
    weights, _ = _posterior(fit._log_weights[keep] + others_loglik[keep] - deviation**2 / (2 * sigma**2))
    return ItemPosteriors(fit._items[keep], nodes, weights)


def _distribution_without(
    nodes: FloatArray, log_base: FloatArray, group: IntArray, mu: FloatArray, touched: BoolArray, rho: float
) -> tuple[FloatArray, float]:
    """Re-solve the edition means of `touched` groups and σ = e^ρ, the abilities held, each question's
    posterior ∝ base × N(b; μ_g, σ²): alternating Newton steps on the score equations (a few).

    When the other keys' answers give an edition mean or σ no finite maximum (the one key left on an
    edition got nearly everything wrong, or right), Newton walks off towards infinity until e^{2ρ} or
    (b − μ)² overflows and the posteriors turn NaN. The posteriors are the nodes re-weighted, so a μ past
    the nodes' span only piles their weight further onto the outermost nodes: μ stays within the span, ρ
    within ±`RHO_BOUND`, and no step moves either by more than `MAX_STEP` (a converging solve takes far
    smaller steps: it starts at the full fit).
    """
    mu = mu.copy()
    update = touched & (np.bincount(group, minlength=mu.size) > 0)
    lowest, highest = (float(nodes.min()), float(nodes.max())) if nodes.size else (-np.inf, np.inf)
    for _ in range(50):
        sigma2 = float(np.exp(2 * rho))
        weights, _ = _posterior(log_base - (nodes - mu[group, None]) ** 2 / (2 * sigma2))
        mean = (weights * nodes).sum(axis=1)
        var = np.maximum((weights * nodes**2).sum(axis=1) - mean**2, 0.0)
        score = np.bincount(group, mean - mu[group], minlength=mu.size)
        slope = np.bincount(group, var / sigma2 - 1.0, minlength=mu.size)
        step_mu = np.clip(np.where(update, -score / np.where(update, slope, -1.0), 0.0), -MAX_STEP, MAX_STEP)
        moved_mu = np.where(update, np.clip(mu + step_mu, lowest, highest), mu)
        step_mu, mu = moved_mu - mu, moved_mu
        # ρ: Σ_j E[(b − μ)²/σ² − 1] − ρ/s² = 0 (the fit's weak prior on log σ included).
        weights, _ = _posterior(log_base - (nodes - mu[group, None]) ** 2 / (2 * sigma2))
        z = (nodes - mu[group, None]) ** 2 / sigma2
        ez = (weights * z).sum(axis=1)
        score_rho = float((ez - 1.0).sum()) - rho / LOG_SIGMA_PRIOR_SD**2
        slope_rho = (
            float((-2.0 * ez + (weights * z**2).sum(axis=1) - ez**2).sum()) - 1.0 / LOG_SIGMA_PRIOR_SD**2
        )
        moved_rho = float(
            np.clip(rho + np.clip(-score_rho / slope_rho, -MAX_STEP, MAX_STEP), -RHO_BOUND, RHO_BOUND)
        )
        step_rho, rho = moved_rho - rho, moved_rho
        if max(float(np.abs(step_mu).max(initial=0.0)), abs(step_rho)) < 1e-6:  # logits: nothing left
            break
    return mu, float(np.exp(rho))
