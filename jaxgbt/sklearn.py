"""scikit-learn estimators around ``jaxgbt.fit``: ``JaxGBTRegressor``,
``JaxGBTClassifier`` and ``JaxGBTRanker``.

Each estimator stores its constructor arguments as they are (``get_params``,
``set_params``, ``clone``), checks X and y with scikit-learn's own validation (so the
errors are the ones scikit-learn users know), and calls ``jaxgbt.fit`` with the same
settings under the same names. DataFrames go to ``jaxgbt.fit`` as they are, so that
their categorical columns and names are kept. The fitted ``jaxgbt.Booster`` is
``booster_``; predictions come back as NumPy arrays. scikit-learn is an optional
dependency of jaxgbt: this module needs it (``pip install 'jaxgbt[sklearn]'``).
"""

import inspect

import jax
import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
except ImportError as error:  # scikit-learn is optional for the rest of the package
    raise ImportError("jaxgbt's scikit-learn estimators need scikit-learn; install it with "
                      "pip install 'jaxgbt[sklearn]'.") from error
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import Tags, _safe_indexing
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    assert_all_finite,
    check_array,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from jaxgbt import spec
from jaxgbt.data.validation import keywords_checked
from jaxgbt.evaluation import metrics
from jaxgbt.fitting import fit
from jaxgbt.objectives import Objective

# The settings of ``jaxgbt.fit`` that are constructor parameters, with fit's defaults
# (the loss apart: each estimator picks its own default when ``loss=None``). Settings
# that depend on the data of one fit (weights, validation sets, categorical columns,
# query ids, a model to continue) are arguments of ``fit`` instead, as in LightGBM.
_FIT_SETTINGS = (
    "n_trees", "depth", "grow_policy", "max_leaves", "learning_rate", "n_bins", "l2", "l1",
    "min_split_gain", "min_child_weight", "min_data_in_leaf", "leaf_shrinkage",
    "max_delta_step", "random_strength", "noise_draws",
    "score_function", "split_curvature",
    "leaf_newton_steps",
    "base_score", "seed",
    "boosting", "link",
    "hessian", "multi_strategy", "hessian_floor", "subsample", "sampling", "bagging_temperature",
    "goss_top_rate",
    "goss_other_rate", "colsample_bytree", "colsample_bylevel", "colsample_bynode",
    "monotone_constraints", "interaction_constraints", "one_hot_max_size",
    "statistic_orders", "target_statistic", "verbose", "devices")


# XGBoost's and LightGBM's options of their estimators' predict, answered with the
# keyword or method that gives the same here.
_PREDICT_CHECKED = keywords_checked(
    renamed=dict.fromkeys(("num_iteration", "iteration_range", "ntree_limit"),
                          "n_trees, the count of first trees to use"),
    instead={**dict.fromkeys(("output_margin", "raw_score"),
                             "booster_.predict_raw(X) gives the margins, as does a "
                             "classifier's decision_function(X)"),
             "pred_contrib": "booster_.shap_values(X) gives them",
             "pred_leaf": "booster_.leaf_index(X) gives them"})


def _is_frame(X) -> bool:
    """Whether X is a DataFrame (pandas, polars, ...), passed to ``jaxgbt.fit`` as is."""
    return hasattr(X, "columns") and hasattr(X, "shape") and not isinstance(X, np.ndarray)


def _to_numpy(values) -> np.ndarray:
    """A device array from the Booster as a new, writable NumPy array."""
    return np.array(values)


class _JaxGBTModel(BaseEstimator):
    """What the three estimators share: parameters, X validation, fit and the fitted
    attributes. Subclasses set ``_default_loss`` and how labels are read."""

    # Other libraries' parameter names, answered with the estimator's own.
    _other_names = spec.ESTIMATOR_NAMES

    @spec.estimator_keywords_checked
    def __init__(self, *, loss=None, n_trees: int = 200, depth: int = 6,
                 grow_policy: str = "oblivious", max_leaves=None, learning_rate=0.1,
                 n_bins: int = 256,
                 l2=None, l1=0.0, min_split_gain=None, min_child_weight=1.0,
                 min_data_in_leaf=0, leaf_shrinkage=0.0, max_delta_step=0.0,
                 random_strength=1.0, noise_draws: str = "candidate",
                 score_function: str | None = None, split_curvature: str | None = None,
                 leaf_newton_steps: int = 1, base_score=None,
                 seed: int = 0, boosting: str = "plain", link=None, hessian=None,
                 multi_strategy: str = "multi_output_tree", hessian_floor=0.0,
                 subsample=1.0, sampling: str = "bernoulli",
                 bagging_temperature=1.0,
                 goss_top_rate=0.2, goss_other_rate=0.1, colsample_bytree=1.0,
                 colsample_bylevel=1.0, colsample_bynode=1.0, monotone_constraints=None,
                 interaction_constraints=None,
                 one_hot_max_size: int | None = None, statistic_orders: int | None = None,
                 target_statistic: str | None = None, verbose: int = 0, devices=None,
                 eval_fraction: float | None = None):
        self.loss = loss
        self.n_trees = n_trees
        self.depth = depth
        self.grow_policy = grow_policy
        self.max_leaves = max_leaves
        self.learning_rate = learning_rate
        self.n_bins = n_bins
        self.l2 = l2
        self.l1 = l1
        self.min_split_gain = min_split_gain
        self.min_child_weight = min_child_weight
        self.min_data_in_leaf = min_data_in_leaf
        self.leaf_shrinkage = leaf_shrinkage
        self.max_delta_step = max_delta_step
        self.random_strength = random_strength
        self.noise_draws = noise_draws
        self.score_function = score_function
        self.split_curvature = split_curvature
        self.leaf_newton_steps = leaf_newton_steps
        self.base_score = base_score
        self.seed = seed
        self.boosting = boosting
        self.link = link
        self.hessian = hessian
        self.multi_strategy = multi_strategy
        self.hessian_floor = hessian_floor
        self.subsample = subsample
        self.sampling = sampling
        self.bagging_temperature = bagging_temperature
        self.goss_top_rate = goss_top_rate
        self.goss_other_rate = goss_other_rate
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.one_hot_max_size = one_hot_max_size
        self.statistic_orders = statistic_orders
        self.target_statistic = target_statistic
        self.verbose = verbose
        self.devices = devices
        self.eval_fraction = eval_fraction

    def set_params(self, **params):
        """scikit-learn's ``set_params``; a name the estimator does not take raises its
        ValueError with jaxgbt's name for another library's parameter
        (``spec.check_keywords``: ``max_depth`` is ``depth``)."""
        spec.check_keywords([name for name in params if "__" not in name],
                            self._get_param_names(), type(self).__name__, error=ValueError,
                            renamed=self._other_names)
        return super().set_params(**params)

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN is a missing value, with its own bin
        tags.input_tags.categorical = True  # a DataFrame's category columns
        tags.input_tags.sparse = True  # scipy.sparse X is binned without densifying it
        tags.target_tags.required = True
        return tags

    # -- X ------------------------------------------------------------------------------

    def _validated_X(self, X, *, reset: bool, categorical_features=None):
        """X checked as scikit-learn checks it: a DataFrame goes on as it is (jaxgbt
        reads its columns, categorical ones included); anything else becomes a float
        array of shape (N, F) (a scipy.sparse one stays sparse, as CSR or CSC), NaN
        allowed and inf refused."""
        if _is_frame(X):
            return validate_data(self, X, reset=reset, skip_check_array=True)
        # Labels of categorical columns in an object array are read by jaxgbt itself.
        labels = categorical_features is not None
        return validate_data(self, X, reset=reset, accept_sparse=("csr", "csc"),
                             dtype=None if labels else (np.float64, np.float32),
                             ensure_all_finite=False if labels else "allow-nan",
                             ensure_min_samples=2 if reset else 1)

    # -- fit ----------------------------------------------------------------------------

    def _fit(self, X, y, *, loss, fit_y, sample_weight, eval_set, eval_metric,
             early_stopping_rounds, callbacks, categorical_features, init_model,
             group=None, n_outputs=None, link=None, base_margin=None, eval_base_margin=None,
             classes=None, class_weighted=None):
        """Fits the Booster on validated labels ``fit_y`` and sets the fitted attributes;
        with ``eval_fraction``, on the rows it does not hold out.

        Args:
          eval_set: entries as ``jaxgbt.fit`` takes them, labels already as ``fit_y``.
          link: replaces the ``link`` parameter when given (a classifier's default).
          classes: a classifier's labels, which the Booster keeps (``Booster.classes``);
            the rows held out are then drawn class by class.
          class_weighted: a classifier's ``(fit_y, sample_weight) -> weights`` of the
            training rows (its ``class_weight``).
        """
        _check_some_weight(sample_weight)
        if self.eval_fraction is not None:
            if eval_set is not None:
                raise ValueError("eval_set and eval_fraction were both given; the "
                                 "validation set is one or the other.")
            X, fit_y, sample_weight, base_margin, group, eval_set, eval_base_margin = (
                _held_out(self.eval_fraction, self.seed, X, fit_y, sample_weight,
                          base_margin, group, stratify=classes is not None))
            if early_stopping_rounds is None:
                early_stopping_rounds = spec.DEFAULT_EARLY_STOPPING_ROUNDS
        if class_weighted is not None:
            sample_weight = class_weighted(fit_y, sample_weight)
        settings = {name: getattr(self, name) for name in _FIT_SETTINGS}
        if link is not None:
            settings["link"] = link
        if isinstance(init_model, _JaxGBTModel):
            init_model = init_model.booster_
        booster = fit(loss, X, fit_y, sample_weight=sample_weight, group=group,
                      n_outputs=n_outputs, eval_set=eval_set, eval_metric=eval_metric,
                      early_stopping_rounds=early_stopping_rounds, callbacks=callbacks,
                      categorical_features=categorical_features, init_model=init_model,
                      base_margin=base_margin, eval_base_margin=eval_base_margin, **settings)
        self.booster_ = booster if classes is None else booster.with_classes(classes)
        self.best_iteration_ = (None if booster.best_round is None
                                else int(booster.best_round))
        self.evals_result_ = _evals_result(booster.history, eval_set)
        return self

    @property
    def feature_importances_(self) -> np.ndarray:
        """f64[F]: each column's share of the summed split gain (zeros without splits)."""
        check_is_fitted(self, "booster_")
        gain = self.booster_.feature_importance("gain")
        total = gain.sum()
        return gain / total if total > 0 else np.zeros_like(gain)

    def _raw(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """Raw margins: f32[N], or f32[N, K] for vector-output models."""
        check_is_fitted(self, "booster_")
        X = self._validated_X(X, reset=False)
        return _to_numpy(self.booster_.predict_raw(X, n_trees=n_trees, base_margin=base_margin))


def _read_eval_set(eval_set, labels) -> list | None:
    """The validation sets with their labels mapped by ``labels`` (a classifier's
    class encoding; the identity elsewhere); entries as ``jaxgbt.fit`` takes them."""
    if eval_set is None:
        return None
    if isinstance(eval_set, (tuple, dict)):
        raise TypeError("eval_set must be a list of validation sets, e.g. "
                        "eval_set=[(X_val, y_val)].")
    out = []
    for entry in eval_set:
        if isinstance(entry, dict):
            entry = {**entry, "y": labels(entry["y"])} if "y" in entry else entry
        elif isinstance(entry, (tuple, list)) and len(entry) >= 2:
            entry = (entry[0], labels(entry[1]), *entry[2:])
        out.append(entry)
    return out


def _evals_result(history, eval_set) -> dict | None:
    """{set name: {metric name: f64[T]}} from the Booster's ``{"set:metric": f32[T]}``."""
    if history is None:
        return None
    names = [entry.get("name", f"valid_{i}") if isinstance(entry, dict) else f"valid_{i}"
             for i, entry in enumerate(eval_set or [])]
    result = {str(name): {} for name in names}
    for key, values in history.items():
        name = next(str(n) for n in names if key.startswith(f"{n}:"))
        result[name][key[len(name) + 1:]] = np.asarray(values, np.float64)
    return result


class JaxGBTRegressor(RegressorMixin, _JaxGBTModel):
    """Gradient-boosted trees for regression, fitted by ``jaxgbt.fit``.

    Parameters are ``jaxgbt.fit``'s settings, with the same names and defaults; ``loss``
    is any loss ``jaxgbt.fit`` takes (a built-in name such as ``"huber@1.0"``, an
    ``Objective``, or a function ``loss(y_i, f_i)`` in ``jax.numpy``); None means
    ``"squared_error"``. ``eval_fraction`` (all three estimators): the share of the rows
    ``fit`` holds out as the validation set, with early stopping (after 50 rounds
    without improvement unless ``fit`` is given ``early_stopping_rounds``); None holds
    none out. See docs/sklearn.md.

    Attributes:
      booster_: the fitted ``jaxgbt.Booster``.
      n_features_in_, feature_names_in_: what scikit-learn records of X (the names for
        a DataFrame whose column names are all strings).
      feature_importances_: f64[F], normalized summed split gains.
      best_iteration_: the round early stopping chose, or None.
      evals_result_: ``{set: {metric: f64[T]}}`` of the validation sets, or None.
    """

    _default_loss = "squared_error"

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True  # y of shape (N, K): multi_squared_error
        return tags

    @spec.keywords_checked
    def fit(self, X, y, *, sample_weight=None, eval_set=None, eval_metric=None,
            early_stopping_rounds=None, callbacks=(), categorical_features=None,
            init_model=None, base_margin=None, eval_base_margin=None) -> "JaxGBTRegressor":
        """Fits the model.

        Args:
          X: array-like of shape (N, F) or a DataFrame; NaN marks a missing value.
          y: array-like of shape (N,), finite; or (N, K) for K targets, fitted as one
            model whose leaves hold K values (``loss=None``: ``"multi_squared_error"``;
            a loss function is given ``n_outputs=K``).
          sample_weight: array-like of shape (N,), non-negative, or None.
          eval_set: a list of ``(X, y)`` or ``(X, y, sample_weight)`` validation sets
            (or dicts as ``jaxgbt.fit`` takes them), scored after every round.
          eval_metric: a metric name or function, or a list of them (default: the
            loss's usual metric).
          early_stopping_rounds: stop when the first metric on the last validation set
            has not improved for this many rounds; predictions then use the best round.
          callbacks: functions called after every round with a ``jaxgbt.EvalState``;
            True stops training there (``jaxgbt.fit``; ``jaxgbt.Callback`` sets a period).
          categorical_features: column indices or names of categorical columns
            (default: a DataFrame's ``category`` columns).
          init_model: a fitted estimator or ``Booster`` to continue.
          base_margin: array-like of shape (N,) ((N, K) for vector outputs): each row's
            starting raw margin, replacing ``base_score`` (``jaxgbt.fit``); pass the new
            rows' margins to ``predict`` too.
          eval_base_margin: with ``base_margin``: one such array per ``eval_set`` entry.
        """
        X = self._validated_X(X, reset=True, categorical_features=categorical_features)
        y = _regression_targets(y)
        loss, n_outputs = self.loss, None
        if y.ndim == 2:  # several targets: one tree a round with a leaf value for each
            loss = "multi_squared_error" if loss is None else loss
            n_outputs = y.shape[1] if callable(loss) and not isinstance(
                loss, (str, Objective)) else None
        return self._fit(X, y, loss=self._default_loss if loss is None else loss,
                         n_outputs=n_outputs, fit_y=y, sample_weight=sample_weight,
                         eval_set=_read_eval_set(eval_set, _identity),
                         eval_metric=eval_metric, early_stopping_rounds=early_stopping_rounds,
                         callbacks=callbacks, categorical_features=categorical_features,
                         init_model=init_model, base_margin=base_margin,
                         eval_base_margin=eval_base_margin)

    @_PREDICT_CHECKED
    def predict(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """f32[N] (f32[N, K] for K targets): the predictions (the loss's inverse link
        applied to the margins); ``base_margin``: the rows' starting margins when the fit
        had them; ``n_trees``: the first trees to use (default: all, or up to
        ``best_iteration_``)."""
        check_is_fitted(self, "booster_")
        X = self._validated_X(X, reset=False)
        return _to_numpy(self.booster_.predict(X, n_trees=n_trees, base_margin=base_margin))


def _with_keyword(init, name: str, default=None) -> inspect.Signature:
    """``init``'s signature with one more keyword-only parameter ``name``."""
    signature = inspect.signature(init)
    extra = inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
    return signature.replace(parameters=[*signature.parameters.values(), extra])


class JaxGBTClassifier(ClassifierMixin, _JaxGBTModel):
    """Gradient-boosted trees for classification, fitted by ``jaxgbt.fit``.

    Labels may be of any type (strings, integers with gaps, booleans): ``classes_``
    holds them sorted, and the model is trained on their indices 0..K-1. ``loss=None``
    means ``"logistic"`` for two classes and ``"softmax"`` for more. A custom loss
    function sees those indices; it then gets one margin per row (two classes) or K
    (more), and ``link`` defaults to the sigmoid or the softmax to give probabilities.
    ``class_weight`` weighs the training rows by their class, as in scikit-learn's
    classifiers: None (every class 1), ``{label: weight}`` (labels not named weigh 1) or
    ``"balanced"`` (N / (K * the class's row count)), multiplying ``sample_weight``.
    Other parameters are ``jaxgbt.fit``'s settings; see ``JaxGBTRegressor`` for the
    attributes, plus ``classes_`` and ``n_classes_``.
    """

    _default_loss = None  # by the number of classes, at fit
    _other_names = spec.CLASSIFIER_NAMES

    def __init__(self, *, class_weight=None, **settings):
        super().__init__(**settings)
        self.class_weight = class_weight

    # scikit-learn reads an estimator's parameters from its constructor's signature, and
    # the check of the keywords reads the same signature.
    __init__.__signature__ = _with_keyword(_JaxGBTModel.__init__, "class_weight")
    __init__ = spec.classifier_keywords_checked(__init__)

    @spec.keywords_checked
    def fit(self, X, y, *, sample_weight=None, eval_set=None, eval_metric=None,
            early_stopping_rounds=None, callbacks=(), categorical_features=None,
            init_model=None, base_margin=None, eval_base_margin=None) -> "JaxGBTClassifier":
        """Fits the model; arguments as in ``JaxGBTRegressor.fit``, y holding class
        labels of any type (those of ``eval_set`` must be among them). ``class_weight``
        multiplies the training rows' ``sample_weight``; validation sets keep theirs."""
        X = self._validated_X(X, reset=True, categorical_features=categorical_features)
        y = _finite_labels(y, None)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        self.n_classes_ = len(self.classes_)
        if self.n_classes_ < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 classes in y; got 1 "
                             f"class ({self.classes_[0]!r}).")
        loss, n_outputs, link = self._classifier_loss()
        return self._fit(X, y, loss=loss, n_outputs=n_outputs, link=link,
                         fit_y=encoder.transform(y).astype(np.float32),
                         sample_weight=sample_weight,
                         class_weighted=lambda codes, weight: _class_weighted(
                             self.class_weight, self.classes_[codes.astype(np.int64)],
                             self.classes_, weight),
                         eval_set=_read_eval_set(eval_set, lambda v: _encoded(encoder, v)),
                         eval_metric=eval_metric, early_stopping_rounds=early_stopping_rounds,
                         callbacks=callbacks, categorical_features=categorical_features,
                         init_model=init_model, base_margin=base_margin,
                         eval_base_margin=eval_base_margin, classes=self.classes_)

    def _classifier_loss(self):
        """(loss, n_outputs, link) for ``jaxgbt.fit`` from ``loss`` and the class count."""
        binary = self.n_classes_ == 2
        if self.loss is None:
            return ("logistic" if binary else "softmax"), None, None
        if isinstance(self.loss, (str, Objective)):
            return self.loss, None, None
        # A loss function gives margins: one per row for two classes, else one per class;
        # the default link makes them probabilities.
        link = self.link if self.link is not None else (_sigmoid if binary else _softmax)
        return self.loss, (None if binary else self.n_classes_), link

    @_PREDICT_CHECKED
    def decision_function(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """Raw margins: f32[N] (two classes: the margin of ``classes_[1]``) or f32[N, K];
        ``base_margin`` and ``n_trees`` as for ``predict_proba``."""
        return self._raw(X, base_margin, n_trees)

    @_PREDICT_CHECKED
    def predict_proba(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """f32[N, K]: class probabilities, columns in the order of ``classes_``;
        ``base_margin``: the rows' starting margins when the fit had them; ``n_trees``:
        the first trees to use (default: all, or up to ``best_iteration_``)."""
        check_is_fitted(self, "booster_")
        X = self._validated_X(X, reset=False)
        proba = _to_numpy(self.booster_.predict(X, n_trees=n_trees, base_margin=base_margin))
        if proba.ndim == 1:
            proba = np.stack([1 - proba, proba], axis=1)
        return proba

    @_PREDICT_CHECKED
    def predict_log_proba(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """f32[N, K]: the log of ``predict_proba``."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X, base_margin, n_trees))

    @_PREDICT_CHECKED
    def predict(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """Labels of shape (N,): the most probable class of each row, from ``classes_``
        (``base_margin`` and ``n_trees`` as for ``predict_proba``)."""
        proba = self.predict_proba(X, base_margin, n_trees)  # first: an unfitted model says so
        return self.classes_[np.argmax(proba, axis=1)]


class JaxGBTRanker(_JaxGBTModel):
    """Gradient-boosted trees for learning to rank, fitted by ``jaxgbt.fit``.

    ``fit`` takes ``group``, one query id per row (each query's rows contiguous), as
    ``jaxgbt.fit``; without it all rows form one query. ``loss=None`` means
    ``"lambdarank_ndcg"``; any ranking loss of ``jaxgbt.fit`` works (a built-in name or
    a function ``loss(y_q, f_q, mask_q)``). y holds relevance grades >= 0. ``predict``
    gives scores (higher ranks first); ``score`` the mean NDCG over queries.
    """

    _default_loss = "lambdarank_ndcg"

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True  # relevance grades
        return tags

    @spec.keywords_checked
    def fit(self, X, y, *, group=None, sample_weight=None, eval_set=None, eval_group=None,
            eval_metric=None, early_stopping_rounds=None, callbacks=(),
            categorical_features=None, init_model=None, base_margin=None,
            eval_base_margin=None) -> "JaxGBTRanker":
        """Fits the model; arguments as in ``JaxGBTRegressor.fit``, plus:

        Args:
          y: array-like of shape (N,), relevance grades >= 0.
          group: array-like of shape (N,), the query id of each row; rows of a query
            contiguous. None: all rows are one query.
          eval_group: one such array per entry of ``eval_set`` (or None for all).
        """
        X = self._validated_X(X, reset=True, categorical_features=categorical_features)
        y = _relevance(y)
        group = _group(group, y.shape[0])
        return self._fit(X, y, loss=self._default_loss if self.loss is None else self.loss,
                         fit_y=y, group=group, sample_weight=sample_weight,
                         eval_set=_ranking_eval_set(eval_set, eval_group),
                         eval_metric=eval_metric, early_stopping_rounds=early_stopping_rounds,
                         callbacks=callbacks, categorical_features=categorical_features,
                         init_model=init_model, base_margin=base_margin,
                         eval_base_margin=eval_base_margin)

    @_PREDICT_CHECKED
    def predict(self, X, base_margin=None, n_trees=None) -> np.ndarray:
        """f32[N]: ranking scores, higher first (``base_margin`` and ``n_trees`` as for
        the regressor)."""
        return self._raw(X, base_margin, n_trees)

    def score(self, X, y, group=None, sample_weight=None) -> float:
        """The mean NDCG over the queries of ``group`` (all rows one query when None);
        a query weighs the mean ``sample_weight`` of its rows."""
        y = _relevance(y)
        scores = self.predict(X)
        ndcg = metrics.ndcg_at(None)
        return float(ndcg(y, scores, sample_weight, group=_group(group, y.shape[0])))


# -- labels -----------------------------------------------------------------------------


def _sigmoid(margin):
    return jax.nn.sigmoid(margin)


def _softmax(margin):
    return jax.nn.softmax(margin, axis=-1)


def _identity(values):
    return values


def _finite_labels(y, dtype) -> np.ndarray:
    """y as a 1-D array (a column vector warns and is flattened), without NaN or inf."""
    if y is None:
        raise ValueError("this estimator requires y to be passed, but the target y is None.")
    y = column_or_1d(y, dtype=dtype, warn=True)
    assert_all_finite(y, input_name="y")
    return y


def _held_out(fraction, seed, X, y, sample_weight, base_margin, group, stratify: bool):
    """The rows ``fraction`` holds out as the validation set, drawn from ``seed`` (class
    by class when ``stratify``; whole queries when there is a ``group``).

    Returns:
      (X, y, sample_weight, base_margin, group) of the rows kept, the ``eval_set`` of
      the rows held out, and its ``eval_base_margin`` (None without a base margin).
    """
    if not isinstance(fraction, (float, int)) or isinstance(fraction, bool) or not (
            0 < fraction < 1):
        raise ValueError(f"eval_fraction={fraction!r} must be a number strictly between 0 "
                         "and 1 (the share of the rows held out), or None.")
    n_rows = len(y)
    rows = np.arange(n_rows)
    if group is None:
        kept, held = train_test_split(rows, test_size=fraction, random_state=seed,
                                      stratify=y if stratify else None)
    else:  # whole queries
        queries = np.unique(group)
        if len(queries) < 2:
            raise ValueError("eval_fraction holds out whole queries, and group has one; "
                             "pass eval_set, or several queries.")
        _, held_queries = train_test_split(queries, test_size=fraction, random_state=seed)
        held_rows = np.isin(group, held_queries)
        kept, held = rows[~held_rows], rows[held_rows]
    kept, held = np.sort(kept), np.sort(held)  # each query's rows stay contiguous
    weight = None if sample_weight is None else np.asarray(sample_weight)
    margin = None if base_margin is None else np.asarray(base_margin)

    def part(values, index):
        return None if values is None else _safe_indexing(values, index)

    entry = {"name": "valid_0", "X": part(X, held), "y": y[held]}
    entry.update({key: values[held] for key, values in (("sample_weight", weight),
                                                        ("group", group))
                  if values is not None})
    return (part(X, kept), y[kept], part(weight, kept), part(margin, kept),
            part(group, kept), [entry], None if margin is None else [margin[held]])


def _regression_targets(y) -> np.ndarray:
    """y as f64[N], or f64[N, K] for K > 1 targets (a column vector warns and is
    flattened, as scikit-learn's single-output estimators do), without NaN or inf."""
    if y is None:
        return _finite_labels(y, np.float64)
    y = check_array(y, ensure_2d=False, dtype=np.float64, ensure_all_finite=True,
                    input_name="y")
    if y.ndim == 2 and y.shape[1] > 1:
        return y
    return _finite_labels(y, np.float64)


def _check_some_weight(sample_weight) -> None:
    """All-zero weights are refused in scikit-learn's words (jaxgbt checks the rest)."""
    weight = None if sample_weight is None else np.asarray(sample_weight)
    if weight is not None and weight.size and not np.any(weight != 0):
        raise ValueError("sample_weight is zero for every row: no row would count in the "
                         "fit. Give at least one row a positive weight.")


def _class_weighted(class_weight, y, classes, sample_weight) -> np.ndarray | None:
    """The training rows' weights f64[N]: ``sample_weight`` (None: 1) times each row's
    class weight; ``sample_weight`` as given when ``class_weight`` is None."""
    if class_weight is None:
        return sample_weight
    if isinstance(class_weight, dict):
        known = set(classes.tolist())
        unknown = [label for label in class_weight if label not in known]
        if unknown:
            raise ValueError(f"class_weight names labels {unknown[:5]} that y does not hold; "
                             f"the classes are {classes.tolist()}.")
        values = np.asarray(list(class_weight.values()), dtype=np.float64)
        if not np.all(np.isfinite(values) & (values >= 0)):
            raise ValueError(f"class_weight holds weights {values.tolist()}; each must be a "
                             "finite number >= 0.")
    elif not (isinstance(class_weight, str) and class_weight == "balanced"):
        raise ValueError(f"class_weight={class_weight!r} is not understood; pass None, "
                         "'balanced' or a dict {label: weight}.")
    weight = compute_sample_weight(class_weight, y)
    if sample_weight is None:
        return weight
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    if sample_weight.shape != weight.shape:
        raise ValueError(f"sample_weight has shape {sample_weight.shape} but y has "
                         f"{weight.shape[0]} rows; pass one weight per row.")
    return sample_weight * weight


def _encoded(encoder: LabelEncoder, labels) -> np.ndarray:
    """Class indices f32[N] of a validation set's labels, which training must have seen."""
    labels = column_or_1d(labels)
    unknown = np.setdiff1d(labels, encoder.classes_)
    if unknown.size:
        raise ValueError(f"eval_set holds labels {unknown.tolist()[:5]} that y does not; "
                         f"the classes are {encoder.classes_.tolist()}.")
    return encoder.transform(labels).astype(np.float32)


def _relevance(y) -> np.ndarray:
    y = _finite_labels(y, np.float64)
    if (y < 0).any():
        raise ValueError(f"y holds {int((y < 0).sum())} negative relevance grades; ranking "
                         "labels must be >= 0 (0 = not relevant).")
    return y


def _group(group, n_rows: int) -> np.ndarray:
    """Query ids i64[N]; None puts every row in one query."""
    if group is None:
        return np.zeros(n_rows, np.int64)
    return column_or_1d(group)


def _ranking_eval_set(eval_set, eval_group) -> list | None:
    """Validation sets as dicts with their query ids, for ``jaxgbt.fit``."""
    eval_set = _read_eval_set(eval_set, _relevance)
    if eval_set is None:
        if eval_group is not None:
            raise ValueError("eval_group was given without eval_set.")
        return None
    if eval_group is not None and len(eval_group) != len(eval_set):
        raise ValueError(f"eval_group has {len(eval_group)} entries but eval_set has "
                         f"{len(eval_set)}; give one array of query ids per set.")
    out = []
    for i, entry in enumerate(eval_set):
        if not isinstance(entry, dict):
            entry = dict(zip(("X", "y", "sample_weight"), entry, strict=False))
        if "group" not in entry:
            group = None if eval_group is None else eval_group[i]
            entry = {**entry, "group": _group(group, len(entry["y"]))}
        out.append({"name": f"valid_{i}", **entry})
    return out
