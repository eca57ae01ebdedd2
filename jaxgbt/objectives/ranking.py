"""Ranking: per-query losses over one query's rows, padded to M with a mask
(``loss(y_q, f_q, mask_q)``): RankNet's pairwise logistic, LambdaRank for NDCG and a
ListNet-style listwise softmax."""

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
    return 1.0 / jnp.log2(rank + 2.0)


def _lambdarank_weights(y, f, mask):
    """f32[M, M]: |delta NDCG| of swapping i and j in the current ranking, for the pairs
    with y_i > y_j (0 elsewhere), held constant (stop_gradient)."""
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    discount = jax.lax.stop_gradient(_dcg_discount(f, mask))
    ideal = jnp.sort(gain)[::-1]
    max_dcg = jnp.sum(ideal / jnp.log2(jnp.arange(gain.shape[0]) + 2.0))
    delta = jnp.abs((gain[:, None] - gain[None, :]) * (discount[:, None] - discount[None, :]))
    delta = delta / jnp.maximum(max_dcg, 1e-9)
    return jnp.where(_pair_mask(y, mask), delta, 0.0)


def lambdarank_ndcg_loss(y, f, mask):
    """LambdaRank for NDCG (Burges 2010): pairwise logistic losses weighted by
    |delta NDCG| of swapping the pair in the current ranking. The weights are held
    constant (stop_gradient), so autodiff gives exactly the lambda gradients."""
    pair_loss = jnp.logaddexp(0.0, -(f[:, None] - f[None, :]))
    return jnp.sum(_lambdarank_weights(y, f, mask) * pair_loss)


def _lambdarank_ndcg_curvature(y, f, mask):
    return _pair_curvature(_lambdarank_weights(y, f, mask), f)


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
listwise_softmax = Objective("listwise_softmax", listwise_softmax_loss,
                             init_score=lambda y, weight: jnp.zeros(1), kind="group",
                             metric="ndcg@10")
