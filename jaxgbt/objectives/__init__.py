"""Built-in objectives: plain JAX losses plus the facts boosting needs.

An objective is a loss written as a user would write it, together with its inverse
link (margin -> prediction), its constant start, the labels it accepts and its
default curvature. Built-ins take the same path as user losses: jaxgbt differentiates
them with ``jax.grad``; nothing is special-cased.

Three shapes of loss:

- per row, ``loss(y_i, f_i) -> scalar``: ``f_i`` has shape () or, for vector outputs,
  (K,); ``y_i`` is one row of ``y`` (a scalar, a vector, or a dict of them);
- per group (``kind="group"``, ranking), ``loss(y_q, f_q, mask_q) -> scalar`` over one
  query's rows padded to a fixed size M, ``mask_q`` marking real rows;
- per data set (``kind="dataset"``, Cox), the group form over all rows at once.

An Objective is callable: ``logistic(y_i, f_i)`` is ``logistic.loss(y_i, f_i)``.

Modules: ``base`` (the Objective type, shared starts and label checks), one per family
(``regression``, ``classification``, ``counts``, ``survival``, ``ranking``),
``registry`` (names -> objectives: ``resolve``, ``by_name``), ``naming`` (the
``"base@value"`` reader shared with the metrics) and ``derivatives`` (g and h).
"""

from jaxgbt.objectives.base import Link as Link
from jaxgbt.objectives.base import Loss as Loss
from jaxgbt.objectives.base import Objective as Objective
from jaxgbt.objectives.classification import exponential as exponential
from jaxgbt.objectives.classification import exponential_loss as exponential_loss
from jaxgbt.objectives.classification import focal as focal
from jaxgbt.objectives.classification import focal_loss as focal_loss
from jaxgbt.objectives.classification import logistic as logistic
from jaxgbt.objectives.classification import logistic_loss as logistic_loss
from jaxgbt.objectives.classification import softmax as softmax
from jaxgbt.objectives.classification import softmax_loss as softmax_loss
from jaxgbt.objectives.counts import gamma as gamma
from jaxgbt.objectives.counts import gamma_loss as gamma_loss
from jaxgbt.objectives.counts import poisson as poisson
from jaxgbt.objectives.counts import poisson_loss as poisson_loss
from jaxgbt.objectives.counts import tweedie as tweedie
from jaxgbt.objectives.counts import tweedie_loss as tweedie_loss
from jaxgbt.objectives.ranking import lambdarank_ndcg as lambdarank_ndcg
from jaxgbt.objectives.ranking import lambdarank_ndcg_at as lambdarank_ndcg_at
from jaxgbt.objectives.ranking import lambdarank_ndcg_loss as lambdarank_ndcg_loss
from jaxgbt.objectives.ranking import listwise_softmax as listwise_softmax
from jaxgbt.objectives.ranking import listwise_softmax_loss as listwise_softmax_loss
from jaxgbt.objectives.ranking import pairwise_logistic as pairwise_logistic
from jaxgbt.objectives.ranking import pairwise_logistic_loss as pairwise_logistic_loss
from jaxgbt.objectives.registry import BUILTIN as BUILTIN
from jaxgbt.objectives.registry import FAMILIES as FAMILIES
from jaxgbt.objectives.registry import by_name as by_name
from jaxgbt.objectives.registry import resolve as resolve
from jaxgbt.objectives.regression import absolute_error as absolute_error
from jaxgbt.objectives.regression import absolute_error_loss as absolute_error_loss
from jaxgbt.objectives.regression import huber as huber
from jaxgbt.objectives.regression import huber_loss as huber_loss
from jaxgbt.objectives.regression import multi_squared_error as multi_squared_error
from jaxgbt.objectives.regression import multi_squared_error_loss as multi_squared_error_loss
from jaxgbt.objectives.regression import pseudo_huber as pseudo_huber
from jaxgbt.objectives.regression import pseudo_huber_loss as pseudo_huber_loss
from jaxgbt.objectives.regression import quantile as quantile
from jaxgbt.objectives.regression import quantile_loss as quantile_loss
from jaxgbt.objectives.regression import squared_error as squared_error
from jaxgbt.objectives.regression import squared_error_loss as squared_error_loss
from jaxgbt.objectives.survival import aft as aft
from jaxgbt.objectives.survival import aft_loss_fn as aft_loss_fn
from jaxgbt.objectives.survival import cox as cox
from jaxgbt.objectives.survival import cox_loss as cox_loss
