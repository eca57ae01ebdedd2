"""Plots of a fitted model with matplotlib (an optional dependency: ``pip install
'jaxgbt[plot]'``): feature importance, SHAP summaries and dependence, one tree, the
learning curve.

Every function draws into ``ax`` (a new figure when None) and returns the Axes; columns
are labelled with the model's ``feature_names`` (a DataFrame's columns), else
``x0, x1, ...``.
"""

import numpy as np

from jaxgbt.core.layout import Oblivious
from jaxgbt.data import frames
from jaxgbt.data import validation as check
from jaxgbt.model import Booster

MSG_NO_MATPLOTLIB = ("jaxgbt.plot.{what} needs matplotlib: pip install 'jaxgbt[plot]' (or "
                     "matplotlib).")


def _axes(ax, what: str, size=(6.0, 4.0)):
    """``ax``, or the Axes of a new figure; a clear error when matplotlib is missing."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(MSG_NO_MATPLOTLIB.format(what=what)) from None
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _names(feature_names, X, n_columns: int, model: Booster | None = None) -> list[str]:
    """The names to label F columns: given ones, a DataFrame's, the model's, or x0..."""
    if feature_names is not None:
        names = [str(n) for n in feature_names]
    elif hasattr(X, "columns"):
        names = [str(c) for c in X.columns]
    elif model is not None:
        names = list(model.column_names)
    else:
        names = [f"x{j}" for j in range(n_columns)]
    if len(names) != n_columns:
        raise ValueError(f"feature_names has {len(names)} names for {n_columns} columns.")
    return names


def _values(phi, what: str) -> np.ndarray:
    """SHAP values f[N, F] from ``phi``; vector outputs must pick one output first."""
    phi = np.asarray(phi, np.float64)
    if phi.ndim == 3:
        raise ValueError(f"jaxgbt.plot.{what} draws one output; these SHAP values have "
                         f"{phi.shape[2]} (shape {phi.shape}): pass phi[..., k].")
    if phi.ndim != 2:
        raise ValueError(f"phi must be SHAP values of shape (N, F); got shape {phi.shape}.")
    if not np.isfinite(phi).all():
        raise ValueError(f"phi holds {int((~np.isfinite(phi)).sum())} NaN or infinite values; "
                         "SHAP values of a jaxgbt model are finite: pass model.shap_values(X).")
    return phi


def _numeric(X, n_columns: int) -> np.ndarray:
    """X as f64[N, F]; non-numeric columns (categorical labels) as their category codes."""
    if frames.is_frame(X):  # pandas, polars, pyarrow
        table = frames.read(X)
        columns = []
        for j in range(table.shape[1]):
            if table.numeric[j]:
                columns.append(np.asarray(table.values[:, j], np.float64))
            else:  # labels: their codes in sorted order, NaN missing
                labels = table.labels[j]
                present = np.array([not frames.is_missing(v) for v in labels])
                known = sorted({str(v) for v in labels[present]})
                codes = {label: code for code, label in enumerate(known)}
                columns.append(np.array([codes[str(v)] if ok else np.nan
                                         for v, ok in zip(labels, present, strict=True)]))
        X = np.stack(columns, axis=1)
    X = np.asarray(X, np.float64)
    if X.ndim != 2 or X.shape[1] != n_columns:
        raise ValueError(f"X must have shape (N, {n_columns}) to match the SHAP values; got "
                         f"{X.shape}.")
    return X


def importance(model: Booster, kind: str = "gain", max_features: int = 20, ax=None):
    """Horizontal bars of ``model.feature_importance(kind)``, largest on top."""
    check.check_int(max_features, "max_features", 1)
    values = np.asarray(model.feature_importance(kind), np.float64)
    ax = _axes(ax, "importance")
    names = list(model.column_names)
    order = np.argsort(values)[::-1][:max_features][::-1]
    ax.barh([names[j] for j in order], values[order], color="#1f77b4")
    ax.set_xlabel({"gain": "total gain", "split": "number of splits",
                   "cover": "total cover (Hessian)"}.get(kind, kind))
    ax.set_title(f"feature importance ({kind})")
    return ax


def shap_summary(phi, X, feature_names=None, max_features: int = 20, ax=None):
    """One row of dots per column (the columns with the largest mean |SHAP| on top): each
    dot a row's SHAP value, coloured by the column's value in that row (low blue, high
    red; grey where missing)."""
    check.check_int(max_features, "max_features", 1)
    phi = _values(phi, "shap_summary")
    values = _numeric(X, phi.shape[1])
    names = _names(feature_names, X, phi.shape[1])
    order = np.argsort(np.abs(phi).mean(axis=0))[::-1][:max_features][::-1]
    ax = _axes(ax, "shap_summary", size=(7.0, 0.35 * len(order) + 1.5))
    jitter = np.random.default_rng(0)
    for position, j in enumerate(order):
        column = values[:, j]
        low, high = np.nanpercentile(column, [5, 95]) if np.isfinite(column).any() else (0, 1)
        colour = np.clip((column - low) / (high - low if high > low else 1.0), 0, 1)
        y = position + jitter.uniform(-0.3, 0.3, size=len(column)) * _density(phi[:, j])
        missing = np.isnan(column)
        ax.scatter(phi[missing, j], y[missing], s=6, color="#bbbbbb", alpha=0.6, linewidths=0)
        points = ax.scatter(phi[~missing, j], y[~missing], s=6, c=colour[~missing],
                            cmap="coolwarm", vmin=0, vmax=1, alpha=0.8, linewidths=0)
    ax.axvline(0.0, color="#888888", linewidth=0.8)
    ax.set_yticks(range(len(order)), [names[j] for j in order])
    ax.set_xlabel("SHAP value (effect on the margin)")
    bar = ax.figure.colorbar(points, ax=ax, ticks=[0, 1], aspect=30)
    bar.ax.set_yticklabels(["low", "high"])
    bar.set_label("feature value")
    return ax


def _density(values: np.ndarray) -> np.ndarray:
    """f64[N] in (0, 1]: how crowded each value's neighbourhood is, so that dense regions
    spread wider (a beeswarm's outline)."""
    if values.size < 2 or np.ptp(values) == 0:
        return np.ones_like(values)
    counts, edges = np.histogram(values, bins=40)
    which = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(counts) - 1)
    return 0.15 + 0.85 * counts[which] / counts.max()


def dependence(phi, X, feature, feature_names=None, color_by=None, ax=None):
    """A column's value against its SHAP value, one dot per row, optionally coloured by
    another column's value.

    Args:
      phi: SHAP values f[N, F]; X: the rows they explain (array or DataFrame).
      feature: the column, by name or index; color_by: another column, or None.
    """
    phi = _values(phi, "dependence")
    values = _numeric(X, phi.shape[1])
    names = _names(feature_names, X, phi.shape[1])

    def index(column):
        if isinstance(column, str):
            if column not in names:
                raise ValueError(f"feature {column!r} is not one of the columns {names}.")
            return names.index(column)
        if not 0 <= int(column) < len(names):
            raise ValueError(f"feature {column} is outside [0, {len(names)}).")
        return int(column)

    j = index(feature)
    ax = _axes(ax, "dependence")
    if color_by is None:
        ax.scatter(values[:, j], phi[:, j], s=6, alpha=0.6, color="#1f77b4", linewidths=0)
    else:
        c = index(color_by)
        points = ax.scatter(values[:, j], phi[:, j], s=6, alpha=0.7, c=values[:, c],
                            cmap="coolwarm", linewidths=0)
        ax.figure.colorbar(points, ax=ax).set_label(names[c])
    ax.axhline(0.0, color="#888888", linewidth=0.8)
    ax.set_xlabel(names[j])
    ax.set_ylabel(f"SHAP value of {names[j]}")
    return ax


def tree(model: Booster, index: int = 0, ax=None):
    """Tree ``index``: an oblivious tree as its table of levels (each level's test, where
    missing values go) above a bar per leaf; a depthwise tree as its nodes and leaves.
    Leaf values are the first output's, learning rate applied."""
    check.check_int(index, "index", 0)
    if not 0 <= index < model.n_trees:
        raise ValueError(f"index={index} is outside [0, {model.n_trees}), the model's trees.")
    if model.feature.ndim > 2:
        raise TypeError("jaxgbt.plot.tree draws one model: index a member first (model[i]).")
    split_names = _split_names(model)
    feature = np.asarray(model.feature[index])
    threshold = np.asarray(model.threshold[index])
    default_left = np.asarray(model.default_left[index])
    gain = np.asarray(model.split_gain[index])
    leaves = np.asarray(model.leaf_value[index, :, 0], np.float64)

    def test(m):
        if gain[m] <= 0:
            return "(no split: all rows left)"
        missing = "left" if default_left[m] else "right"
        return f"{split_names[feature[m]]} <= {threshold[m]:.4g}  (missing: {missing})"

    if not isinstance(model.layout, Oblivious):
        return _depthwise_tree(model.depth, test, leaves, index, ax)
    depth, n_leaves = model.depth, leaves.shape[0]
    ax = _axes(ax, "tree", size=(max(6.0, 0.22 * n_leaves + 2), 2.2 + 0.35 * depth))
    ax.bar(np.arange(n_leaves), leaves, color=np.where(leaves >= 0, "#d62728", "#1f77b4"))
    ax.axhline(0.0, color="#888888", linewidth=0.8)
    ax.set_xlabel("leaf (binary: the answers at each level, first level first; 1 = right)")
    ax.set_ylabel("leaf value")
    if n_leaves <= 64:
        ax.set_xticks(np.arange(n_leaves), [format(leaf, f"0{depth}b") for leaf in
                                            range(n_leaves)], rotation=90, fontsize=7)
    levels = "\n".join(f"level {d}: {test(d)}" for d in range(depth))
    ax.set_title(f"tree {index} (oblivious)\n{levels}", loc="left", fontsize=9,
                 family="monospace")
    return ax


def _split_names(model: Booster) -> list[str]:
    """A name for each column the trees split on: the column's name, and for a
    categorical column's encoded columns its name with the encoded column's number."""
    names = list(model.column_names)
    if model.encoder is None:
        return names
    out = []
    for raw in range(model.n_features):
        encoded = list(model.encoder.encoded_columns(raw))
        out += [names[raw]] if len(encoded) == 1 else [f"{names[raw]}[{k}]"
                                                     for k in range(len(encoded))]
    return out


def _depthwise_tree(depth: int, test, leaves: np.ndarray, index: int, ax):
    """A depthwise tree as boxes: node j of level d at x = (j + 0.5) / 2**d."""
    ax = _axes(ax, "tree", size=(min(3.0 * 2 ** (depth - 1), 24.0), 1.4 * depth + 1.5))
    box = dict(boxstyle="round", facecolor="#f0f0f0", edgecolor="#888888")
    for d in range(depth + 1):
        for j in range(2**d):
            x, y = (j + 0.5) / 2**d, 1.0 - d / depth
            if d < depth:
                for child in (2 * j, 2 * j + 1):
                    ax.plot([x, (child + 0.5) / 2 ** (d + 1)], [y, 1.0 - (d + 1) / depth],
                            color="#aaaaaa", linewidth=0.8, zorder=0)
                label = test(2**d - 1 + j).replace("  (", "\n(")
            else:
                label = f"{leaves[j]:.3g}"
            ax.text(x, y, label, ha="center", va="center", fontsize=7, bbox=box)
    ax.set_axis_off()
    ax.set_title(f"tree {index} (depthwise; left: test true or missing-left)", fontsize=9)
    return ax


def learning_curve(model: Booster, ax=None):
    """The validation scores after each round (``model.history``), one line per set and
    metric; a dashed line at ``best_round`` when early stopping chose one."""
    if not model.history:
        raise ValueError("the model has no history: fit with eval_set=[(X_val, y_val)] to "
                         "record validation scores after each round.")
    ax = _axes(ax, "learning_curve")
    for key, values in model.history.items():
        values = np.asarray(values, np.float64)
        if values.ndim != 1:
            raise ValueError("jaxgbt.plot.learning_curve draws one model: index a member "
                             "of a stacked model first (model[i]).")
        ax.plot(np.arange(1, values.shape[0] + 1), values, label=key)
    if model.best_round is not None:
        ax.axvline(int(model.best_round) + 1, color="#888888", linestyle="--",
                   label=f"best round ({int(model.best_round) + 1} trees)")
    ax.set_xlabel("trees")
    ax.set_ylabel("validation score")
    ax.legend()
    return ax
