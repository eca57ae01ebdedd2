"""Ranking: per-query losses over one query's rows, padded to M with a mask
(``loss(y_q, f_q, mask_q)``): RankNet's pairwise logistic, LambdaRank for NDCG (whole
list, or truncated at the top k) and a ListNet-style listwise softmax."""

import functools

import jax
import jax.numpy as jnp

from jaxgbt.objectives.base import Objective


def _pair_mask(y, mask):
    both = mask[:, None] & mask[None, :]
    return both & (y[:, None] > y[None, :])


def pairwise_logistic_loss(y, f, mask):
    """RankNet: logistic loss on every pair (i, j) of the query with y_i > y_j."""
    pairs = _pair_mask(y, mask)
    return jnp.sum(jnp.where(pairs, jnp.logaddexp(0.0, -(f[:, None] - f[None, :])), 0.0))


def _pair_curvature(pair_weight, f):
    """The Hessian diagonal of sum_ij w_ij log(1 + e^-(f_i - f_j)) with w held constant:
    row k gets w_ij s_ij (1 - s_ij), s_ij = sigmoid(f_i - f_j), from every pair it is in.
    Autodiff's diagonal takes M Hessian-vector products per query (M x the gradient's
    cost); this is one pass."""
    s = jax.nn.sigmoid(f[:, None] - f[None, :])
    c = pair_weight * s * (1.0 - s)
    return jnp.sum(c, axis=1) + jnp.sum(c, axis=0)


def _pairwise_logistic_curvature(y, f, mask):
    return _pair_curvature(_pair_mask(y, mask).astype(f.dtype), f)


def _dcg_discount(f, mask):
    # Rank of each row by descending score (0 = top); padding rows rank last.
    score = jnp.where(mask, f, -jnp.inf)
    rank = jnp.argsort(jnp.argsort(-score))
    return rank, 1.0 / jnp.log2(rank + 2.0)


def _query_norm(pair_weight, f):
    """XGBoost's and LightGBM's per-query scale of the lambdas (``lambdarank_norm``):
    log2(1 + S) / S, S = sum of |lambda| over the query's rows = 2 sum_ij w_ij rho_ij with
    rho_ij = sigmoid(-(f_i - f_j)); 1 for a query with nothing left to order (S = 0). A
    query's pull then grows with the log of its mis-ordered mass, so queries with many
    rows and grades do not outweigh the rest."""
    total = 2.0 * jnp.sum(pair_weight * jax.nn.sigmoid(-(f[:, None] - f[None, :])))
    positive = total > 0.0
    return jnp.where(positive, jnp.log2(1.0 + total) / jnp.where(positive, total, 1.0), 1.0)


def _lambdarank_weights(y, f, mask, top_k=None):
    """f32[M, M]: the weight of each pair's logistic loss, held constant (stop_gradient).

    For the pairs with y_i > y_j, |delta NDCG| of swapping i and j in the ranking by f,
    then times the query's ``_query_norm``; 0 for every other pair. With ``top_k`` (an
    int, LightGBM's ``lambdarank_truncation_level``) only pairs one of whose rows ranks in
    the top k count, and NDCG is normalised by the ideal DCG@k."""
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    rank, discount = _dcg_discount(f, mask)
    ideal = jnp.sort(gain)[::-1][:top_k]
    max_dcg = jnp.sum(ideal / jnp.log2(jnp.arange(ideal.shape[0]) + 2.0))
    delta = jnp.abs((gain[:, None] - gain[None, :]) * (discount[:, None] - discount[None, :]))
    delta = delta / jnp.maximum(max_dcg, 1e-9)
    pairs = _pair_mask(y, mask)
    if top_k is not None:
        pairs = pairs & (jnp.minimum(rank[:, None], rank[None, :]) < top_k)
    weight = jnp.where(pairs, delta, 0.0)
    return jax.lax.stop_gradient(weight * _query_norm(weight, f))


def lambdarank_ndcg_loss(y, f, mask, top_k=None):
    """LambdaRank for NDCG (Burges 2010), as XGBoost's ``rank:ndcg`` and LightGBM's
    ``lambdarank`` compute it: pairwise logistic losses weighted by |delta NDCG| of
    swapping the pair in the current ranking, each query's weights scaled by
    log2(1 + S) / S (``_query_norm``). The weights are held constant (stop_gradient), so
    autodiff gives exactly the lambda gradients. ``top_k``: see ``_lambdarank_weights``."""
    pair_loss = jnp.logaddexp(0.0, -(f[:, None] - f[None, :]))
    return jnp.sum(_lambdarank_weights(y, f, mask, top_k) * pair_loss)


def _lambdarank_ndcg_curvature(y, f, mask, top_k=None):
    return _pair_curvature(_lambdarank_weights(y, f, mask, top_k), f)


def listwise_softmax_loss(y, f, mask):
    """ListNet-style cross-entropy between the query's gain distribution
    (2^y - 1, normalised) and the softmax of its scores."""
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    target = gain / jnp.maximum(jnp.sum(gain), 1e-9)
    log_p = jax.nn.log_softmax(jnp.where(mask, f, -jnp.inf))
    return -jnp.sum(jnp.where(mask, target * log_p, 0.0))


pairwise_logistic = Objective("pairwise_logistic", pairwise_logistic_loss,
                              init_score=lambda y, weight: jnp.zeros(1), kind="group",
                              curvature="fisher", fisher=_pairwise_logistic_curvature,
                              metric="ndcg@10")
lambdarank_ndcg = Objective("lambdarank_ndcg", lambdarank_ndcg_loss,
                            init_score=lambda y, weight: jnp.zeros(1), kind="group",
                            curvature="fisher", fisher=_lambdarank_ndcg_curvature,
                            metric="ndcg@10")


@functools.cache  # one loss object per k: no recompiles
def lambdarank_ndcg_at(k: int) -> Objective:
    """``lambdarank_ndcg`` truncated at the top k positions (``"lambdarank_ndcg@k"``):
    only pairs with a row in the current top k, NDCG@k's normaliser, and ndcg@k as the
    default metric. LightGBM's ``lambdarank_truncation_level``, XGBoost's
    ``lambdarank_num_pair_per_sample`` with ``lambdarank_pair_method="topk"``."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"lambdarank_ndcg top k={k!r} must be an integer >= 1.")

    def loss(y, f, mask):
        return lambdarank_ndcg_loss(y, f, mask, top_k=k)

    def curvature(y, f, mask):
        return _lambdarank_ndcg_curvature(y, f, mask, top_k=k)

    return Objective(f"lambdarank_ndcg@{k}", loss, init_score=lambda y, weight: jnp.zeros(1),
                     kind="group", curvature="fisher", fisher=curvature, metric=f"ndcg@{k}")


listwise_softmax = Objective("listwise_softmax", listwise_softmax_loss,
                             init_score=lambda y, weight: jnp.zeros(1), kind="group",
                             metric="ndcg@10")
