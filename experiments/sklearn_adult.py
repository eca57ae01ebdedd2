"""The scikit-learn estimators' class_weight and eval_fraction on real data.

    python experiments/sklearn_adult.py [--config configs/sklearn_adult.toml] [--quick]
        [--set key=value]

Adult (bundled with jaxgbt: its training file, 32,561 rows, and its test file, 16,281),
income ">50K" the positive class (24% of the rows), text columns as pandas categories.
JaxGBTClassifier and scikit-learn's HistGradientBoostingClassifier, each at its
defaults, with ``class_weight="balanced"``, and with at most ``stopping_trees`` trees
stopped early on a held-out share of the training rows (jaxgbt's ``eval_fraction``,
scikit-learn's ``validation_fraction`` with ``early_stopping=True``; jaxgbt's patience is
its default 50 rounds, scikit-learn's its default 10). Scores on the test file, then the
early-stopped models' log loss under ``cross_val_score`` on the training file. Prints
markdown tables and writes results.json.
"""

from _runner import load_config, output_dir, print_table, timed, write_json
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import log_loss, precision_score, recall_score, roc_auc_score
from sklearn.model_selection import cross_val_score

from jaxgbt import JaxGBTClassifier
from jaxgbt.datasets import load_adult

POSITIVE = ">50K"
COLUMNS = [("library", "library", ""), ("setting", "setting", ""), ("trees", "trees", ""),
           ("AUC", "auc", ".4f"), ("log loss", "log_loss", ".4f"),
           (f"recall {POSITIVE}", "recall", ".3f"), (f"precision {POSITIVE}", "precision", ".3f"),
           ("fit s", "seconds", ".1f")]
CV_COLUMNS = [("library", "library", ""), ("folds' log loss", "folds", ""),
              ("mean", "mean", ".4f"), ("seconds", "seconds", ".0f")]


def data():
    """(X, y, X_test, y_test): DataFrames with category columns, string labels."""
    train, test = load_adult()
    y, y_test = train.pop("income").to_numpy(), test.pop("income").to_numpy()
    text = list(train.select_dtypes(exclude="number"))
    for frame in (train, test):
        frame[text] = frame[text].astype("category")
    return train, y, test, y_test


def models(cfg):
    """(library, setting, estimator) for each model compared."""
    jaxgbt_stopping = dict(n_trees=cfg["stopping_trees"], eval_fraction=cfg["eval_fraction"],
                           seed=cfg["seed"])
    sklearn_common = dict(categorical_features="from_dtype", random_state=cfg["seed"])
    sklearn_stopping = dict(max_iter=cfg["stopping_trees"], early_stopping=True,
                            validation_fraction=cfg["eval_fraction"], **sklearn_common)
    for setting, jaxgbt_kw, sklearn_kw in (
            ("defaults", {}, dict(max_iter=cfg["n_trees"], early_stopping=False)),
            ("class_weight='balanced'", dict(class_weight="balanced"),
             dict(max_iter=cfg["n_trees"], early_stopping=False, class_weight="balanced")),
            (f"early stopping on {cfg['eval_fraction']:.0%} held out", jaxgbt_stopping,
             sklearn_stopping)):
        yield "jaxgbt", setting, JaxGBTClassifier(
            **{"n_trees": cfg["n_trees"], "seed": cfg["seed"], **jaxgbt_kw})
        yield "scikit-learn HGB", setting, HistGradientBoostingClassifier(
            **{**sklearn_common, **sklearn_kw})


def trees(model) -> int:
    if isinstance(model, JaxGBTClassifier):
        best = model.best_iteration_
        return model.booster_.n_trees if best is None else best + 1
    return int(model.n_iter_)


def main(cfg: dict) -> dict:
    X, y, X_test, y_test = data()
    rows = []
    for library, setting, model in models(cfg):
        _, seconds = timed(model.fit, X, y)
        proba = model.predict_proba(X_test)[:, list(model.classes_).index(POSITIVE)]
        label = model.predict(X_test)
        rows.append(dict(library=library, setting=setting, trees=trees(model),
                         auc=roc_auc_score(y_test == POSITIVE, proba),
                         log_loss=log_loss(y_test == POSITIVE, proba),
                         recall=recall_score(y_test, label, pos_label=POSITIVE),
                         precision=precision_score(y_test, label, pos_label=POSITIVE),
                         seconds=seconds))
    print_table(rows, COLUMNS)
    cv_rows = []
    for library, setting, model in models(cfg):
        if not setting.startswith("early stopping"):
            continue
        scores, seconds = timed(cross_val_score, model, X, y, cv=cfg["cv_folds"],
                                scoring="neg_log_loss")
        cv_rows.append(dict(library=library, folds=" ".join(f"{-s:.4f}" for s in scores),
                            mean=float(-scores.mean()), seconds=seconds))
    print()
    print_table(cv_rows, CV_COLUMNS)
    results = dict(test=rows, cross_validation=cv_rows)
    write_json(output_dir(cfg) / "results.json", results)
    return results


if __name__ == "__main__":
    main(load_config("sklearn_adult", doc=__doc__))
