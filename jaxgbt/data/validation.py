"""Host-side checks of what users pass in, run before anything is traced.

Every check names the argument, what it saw, what is allowed and what to do. Inputs
are converted to new arrays or read-only views; nothing the caller passed is modified.
"""

import difflib
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Collection, Iterable, Mapping

import jax
import numpy as np

from jaxgbt.core.dtypes import FLOAT_DTYPE, MAX_BINS, MAX_DEPTH, MAX_TREES, MIN_BINS
from jaxgbt.core.tracing import is_traced as is_traced
from jaxgbt.data import frames, sparse


def unmasked(value):
    """A NumPy masked array as a plain array with NaN (missing) in its masked cells;
    anything else as it is."""
    if not isinstance(value, np.ma.MaskedArray):
        return value
    if not np.ma.getmask(value).any():
        return np.ma.getdata(value)
    if np.issubdtype(value.dtype, np.number) or value.dtype == bool:
        return value.astype(np.float64).filled(np.nan)
    return value


def _as_numeric_array(value, name: str) -> np.ndarray:
    value = unmasked(value)
    try:
        array = frames.as_array(value)
    except Exception as error:  # noqa: BLE001 - re-raised with the argument's name
        raise TypeError(f"{name} could not be read as an array: {error}") from error
    if array.dtype == object:
        return _object_numbers(array, name)
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise TypeError(f"{name} must hold numbers; got dtype {array.dtype}. Encode strings "
                        "and categories as numbers first.")
    if np.issubdtype(array.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers; got dtype {array.dtype}.")
    return array


def _object_numbers(array: np.ndarray, name: str) -> np.ndarray:
    """An object array of real numbers and None as f64, None as NaN (missing), as
    scikit-learn and a DataFrame's object column are read; refused when any element is
    something else (a string, a list), naming the first."""
    # The types first, a C loop (1M x 28 values: 0.6 s, where isinstance on each took
    # 12 s), then the first value of a type that is not a number.
    others = tuple(kind for kind in set(map(type, array.flat))
                   if kind is not type(None) and not issubclass(kind, (numbers.Real, np.bool_)))
    if others:
        other = next(value for value in array.flat if type(value) in others)
        raise TypeError(f"{name} must hold numbers; it has dtype object and holds "
                        f"{type(other).__name__} values such as {other!r}. Encode strings and "
                        "categories as numbers first (None counts as missing).")
    return array.astype(np.float64)


# Rows checked at a time for infinite values, so the check's temporaries stay small.
_CHECK_BLOCK_ROWS = 65_536


def check_X(X, name: str = "X") -> np.ndarray:
    """X as a read-only f32[N, F] array; NaN allowed (missing), inf rejected.

    A float32 array is not copied: the result is a read-only view of it (a 1M x 28
    matrix is 112 MB, which a copy would add to the fit's peak memory). Anything else
    is converted to a new float32 array, also read-only. Either way nothing the caller
    passed is modified. A scipy.sparse X gives a read-only CSC copy of float32 values
    instead (``sparse.check_sparse_X``).
    """
    if sparse.is_sparse(X):
        return sparse.check_sparse_X(X, name)
    array = _as_numeric_array(X, name)
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {array.shape}. "
                         "Reshape a single feature with X.reshape(-1, 1).")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {array.shape}); it needs at least one row and "
                         "one feature.")
    if array.shape[0] < 2:
        raise ValueError(f"{name} has {array.shape[0]} row; boosting needs at least 2 rows to "
                         "split. Predict a constant instead, or add rows.")
    if array.dtype == FLOAT_DTYPE:
        array = array.view()  # the caller's flags stay as they were
    else:
        array = array.astype(FLOAT_DTYPE)
    array.flags.writeable = False
    if any(np.isinf(array[start:start + _CHECK_BLOCK_ROWS]).any()
           for start in range(0, array.shape[0], _CHECK_BLOCK_ROWS)):
        rows, cols = np.nonzero(np.isinf(array))
        raise ValueError(f"{name} contains {rows.size} infinite values (first at row {rows[0]}, "
                         f"column {cols[0]}). Replace them with NaN to mark them missing, or with "
                         "finite values.")
    return array


_MSG_STRING_LABELS = """\
{name} must hold numbers; it holds strings such as {examples}. Encode classes as the \
integers 0..K-1 first: classes, y = np.unique(y, return_inverse=True) (prediction column k \
is then classes[k]; model.with_classes(classes) keeps them with the model), or use \
jaxgbt.JaxGBTClassifier, which does it for you."""

_MSG_CLASS_LABELS = """\
{name} holds the labels {found}; loss {loss!r} needs {needs}. Encode them first: \
classes, y = np.unique(y, return_inverse=True) (prediction column k is then classes[k]; \
model.with_classes(classes) keeps them with the model), or use jaxgbt.JaxGBTClassifier, \
which does it for you."""


def check_y(y, n_rows: int, objective, *, n_outputs: int | None = None, kind: str = "row",
            n_classes: int | None = None, name: str = "y"):
    """y as new float32 arrays with n_rows rows, finite (or +inf where the objective
    allows it) and in the objective's domain. A dict of arrays stays a dict.

    Args:
      y: labels: an array, a Series, a DataFrame, or a dict of those.
      n_rows: N, the rows of X.
      objective: the loss; its facts decide the checks.
      n_outputs: fit's ``n_outputs`` argument (K of a vector-output custom loss), or None.
      kind: the loss's kind ("row", "group", "dataset").
      n_classes: for a validation set of a multi-class loss, the K classes the model is
        trained on; None for the training labels, which must hold every class.
      name: the argument's name in messages.

    Returns:
      f32[N] or f32[N, ...]: an (N, 1) column is f32[N] when the loss takes one scalar
      label per row (``takes_scalar_labels``).
    """
    if isinstance(y, dict):
        if not y:
            raise ValueError(f"{name} is an empty dict; give it one array of labels per name.")
        return {key: _check_label_array(value, n_rows, f"{name}[{key!r}]", objective)
                for key, value in y.items()}
    array = _check_label_array(y, n_rows, name, objective)
    if array.shape[1:] == (1,) and takes_scalar_labels(objective, n_outputs, kind):
        array = array[:, 0]
    if objective.classification and objective.n_outputs is not None and array.ndim == 1:
        _check_classes(array, objective, name, n_classes)
    if objective.y_domain is not None:
        description, accepts = objective.y_domain
        if not accepts(array):
            finite = array[np.isfinite(array)]
            seen = f"[{finite.min()}, {finite.max()}]" if finite.size else "no finite values"
            raise ValueError(f"{name} has labels outside the domain of loss {objective.name!r}: "
                             f"it needs {description}; got shape {array.shape}, values in "
                             f"{seen}.")
    return array


def takes_scalar_labels(objective, n_outputs: int | None, kind: str) -> bool:
    """Whether the loss reads one scalar label per row, so that labels of shape (N, 1)
    (a column vector, a one-column DataFrame) mean labels of shape (N,).

    Built-in losses know: every one but those whose labels are vectors (multi-output
    regression: K outputs from K label columns). A custom per-row loss without
    ``n_outputs`` does unless it maps a label of shape (1,) to a scalar itself.
    """
    if not objective.custom:
        return objective.n_outputs is None or objective.classification
    if n_outputs is not None or kind != "row":
        return False
    try:
        out = jax.eval_shape(objective.loss, jax.ShapeDtypeStruct((1,), FLOAT_DTYPE),
                             jax.ShapeDtypeStruct((), FLOAT_DTYPE))
    except Exception:  # noqa: BLE001 - the loss fails on (1,) labels; scalars may work
        return True
    return getattr(out, "shape", None) != ()


def _check_classes(array: np.ndarray, objective, name: str, n_classes: int | None) -> None:
    """Class labels must be the integers 0..K-1: all of them in training (a missing one
    would be a class without rows), within the model's K in a validation set."""
    found = np.unique(array)
    if n_classes is None:
        ok = np.array_equal(found, np.arange(found.size))
        needs = ("the class indices 0, 1, ..., K - 1, each present at least once (labels "
                 "1..K, or with gaps, would add classes without rows)")
    else:
        ok = bool(np.isin(found, np.arange(n_classes)).all())
        needs = f"class indices among the model's 0, 1, ..., {n_classes - 1}"
    if not ok:
        shown = ", ".join(f"{v:g}" for v in found[:10]) + (", ..." if found.size > 10 else "")
        found_text = f"[{shown}] ({found.size} distinct)"
        raise ValueError(_MSG_CLASS_LABELS.format(name=name, found=found_text,
                                                  loss=objective.name, needs=needs))


def _check_label_array(y, n_rows: int, name: str, objective) -> np.ndarray:
    try:
        raw = frames.as_array(y)
    except Exception:  # noqa: BLE001 - _as_numeric_array names the problem
        raw = None
    if raw is not None and raw.dtype.kind in "OSU":
        strings = [str(v) for v in raw.ravel()[:1000] if isinstance(v, (str, bytes))]
        if strings:
            examples = list(dict.fromkeys(strings))[:3]
            raise TypeError(_MSG_STRING_LABELS.format(name=name, examples=examples))
    array = _as_numeric_array(y if raw is None else raw, name)
    if array.ndim == 0 or array.shape[0] != n_rows:
        raise ValueError(f"{name} has {array.shape[0] if array.ndim else 0} rows but X has "
                         f"{n_rows}; pass one label per row of X.")
    array = np.array(array, dtype=FLOAT_DTYPE)
    bad = np.isnan(array) | (np.isinf(array) if not objective.y_allows_inf else np.isneginf(array))
    if bad.any():
        raise ValueError(f"{name} contains {int(bad.sum())} NaN or infinite labels; drop those "
                         "rows or fill the labels.")
    return array


def check_group(group, n_rows: int) -> np.ndarray:
    """Query ids i64[N]; each query's rows must be contiguous (as in LightGBM)."""
    if group is None:
        raise ValueError("group is required for this loss: one query id per row.")
    array = _as_numeric_array(group, "group")
    if array.shape != (n_rows,):
        raise ValueError(f"group must have shape ({n_rows},), one query id per row of X; got "
                         f"{array.shape}.")
    if not np.issubdtype(array.dtype, np.integer):
        if not (array == np.round(array)).all():
            raise ValueError("group must hold integer query ids.")
        # Floats past 2**53 no longer tell neighbouring integers apart (and past 2**63 do
        # not fit int64): different queries would silently merge.
        if (np.abs(array) > 2.0**53).any():
            raise ValueError("group holds float ids above 2**53, where floats cannot tell "
                             "neighbouring ids apart; pass integer ids (e.g. "
                             "np.unique(group, return_inverse=True)[1] of the original ids).")
    ids = array.astype(np.int64)
    runs = 1 + int(np.count_nonzero(ids[1:] != ids[:-1]))
    if runs != np.unique(ids).size:
        raise ValueError(f"group ids are not contiguous: {runs} runs of equal ids but "
                         f"{np.unique(ids).size} distinct queries. Sort the rows by query id "
                         "(np.argsort(group, kind='stable')) so each query's rows are together.")
    return ids


def check_sample_weight(sample_weight, n_rows: int) -> np.ndarray:
    """Weights as a new f32[N] array: finite, non-negative, not all zero."""
    if sample_weight is None:
        return np.ones(n_rows, FLOAT_DTYPE)
    array = _as_numeric_array(sample_weight, "sample_weight")
    if array.shape != (n_rows,):
        raise ValueError(f"sample_weight must have shape ({n_rows},), one weight per row of X; "
                         f"got {array.shape}.")
    if not np.isfinite(array).all():
        raise ValueError("sample_weight contains NaN or infinite values; weights must be finite.")
    with np.errstate(over="ignore"):
        array = np.array(array, dtype=FLOAT_DTYPE)
    if not np.isfinite(array).all():
        raise ValueError("sample_weight has values above float32's largest (3.4e38), which "
                         "training works in; divide the weights by a common factor (only "
                         "their ratios matter, with l2 and min_child_weight scaled alike).")
    if array.sum(dtype=np.float64) > np.finfo(np.float32).max:
        raise ValueError("sample_weight sums past float32's largest value (3.4e38), which "
                         "histogram sums would overflow; divide the weights by a common factor.")
    if (array < 0).any():
        raise ValueError(f"sample_weight has {int((array < 0).sum())} negative values; weights "
                         "must be >= 0.")
    if array.sum() <= 0:
        raise ValueError("sample_weight sums to 0; at least one row needs a positive weight.")
    return array


def check_int(value, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {value!r}.")
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name}={value} is out of range; it must be {allowed}.")
    return int(value)


def check_choice(value, name: str, choices) -> str:
    """One of a few allowed strings."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} is not allowed; use one of {allowed}.")
    return value


def _scalar_number(value, name: str) -> np.ndarray:
    """``value`` as a 0-d array, refused with a TypeError unless it is one number."""
    array = np.asarray(value)
    if array.ndim != 0 or not np.issubdtype(array.dtype, np.number):
        raise TypeError(f"{name} must be a number; got {value!r}.")
    return array


def check_nonnegative(value, name: str):
    """A float hyperparameter >= 0 (left alone when traced under vmap)."""
    if is_traced(value):
        return value
    array = _scalar_number(value, name)
    if not np.isfinite(array) or array < 0:
        raise ValueError(f"{name}={value} is not allowed; it must be a finite number >= 0.")
    return value


def check_min_split_gain(value, name: str = "min_split_gain"):
    """A gain a split must exceed: a number, negative and -inf allowed (left alone when
    traced)."""
    if is_traced(value):
        return value
    array = _scalar_number(value, name)
    if np.isnan(array) or array == np.inf:
        raise ValueError(f"{name}={value} is not allowed; it must be a finite number or "
                         "-inf (every level of an oblivious tree splits).")
    return value


def check_rate(value, name: str):
    """A fraction in (0, 1] (left alone when traced)."""
    if is_traced(value):
        return value
    check_nonnegative(value, name)
    if not 0.0 < float(value) <= 1.0:
        raise ValueError(f"{name}={value} must lie in (0, 1].")
    return value


def check_learning_rate(value, name: str = "learning_rate"):
    """A number > 0 or a schedule (left alone when traced)."""
    if callable(value) or is_traced(value):
        return value
    array = np.asarray(value)
    if array.ndim != 0 or not np.issubdtype(array.dtype, np.number):
        raise TypeError(f"{name} must be a number or a schedule; got {value!r}.")
    if not (np.isfinite(array) and float(value) > 0):
        raise ValueError(f"{name}={value} must be a finite number > 0 (or a schedule: a "
                         "function of the round, such as an optax schedule).")
    return value


def check_params(n_trees, depth, n_bins) -> None:
    check_int(n_trees, "n_trees", 1, MAX_TREES)
    check_int(depth, "depth", 1, MAX_DEPTH)
    check_int(n_bins, "n_bins", MIN_BINS, MAX_BINS)


def check_predict_X(X, n_features: int):
    """Shape and dtype of X at predict time (values may be NaN). Returns X, a host
    array-like (a list of rows, an object array of numbers) read as a NumPy array of
    numbers; a jax array or scipy.sparse matrix as it is."""
    if isinstance(X, jax.Array):
        if not (jax.numpy.issubdtype(X.dtype, jax.numpy.floating)
                or jax.numpy.issubdtype(X.dtype, jax.numpy.integer) or X.dtype == bool):
            raise TypeError(f"X must hold real numbers; got a jax array of dtype {X.dtype}.")
        shape = X.shape
    elif sparse.is_sparse(X):
        shape = X.shape
    else:
        X = _as_numeric_array(X, "X")
        shape = X.shape
    if len(shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {shape}.")
    if shape[1] != n_features:
        raise ValueError(f"X has {shape[1]} features but the model was trained on {n_features}; "
                         "pass the same columns, in the same order, as in training.")
    return X


def check_feature_names(feature_names, columns: tuple | None,
                        n_features: int) -> tuple[str, ...] | None:
    """The names of X's F columns, as a tuple of distinct strings, or None.

    Args:
      feature_names: what the user passed: None or a sequence of F distinct strings.
      columns: X's column labels (``frames.column_names``), or None when X is an array.
      n_features: F, the width of X.

    Returns:
      ``feature_names`` when given, else the DataFrame's labels when they are all
      strings, else None (an array, or a DataFrame with integer column labels).
    """
    named = columns is not None and all(isinstance(c, str) for c in columns)
    if feature_names is None:
        if not named:
            return None
        names = tuple(str(c) for c in columns)
        repeated = frames.repeated_labels(names)
        if repeated:
            raise ValueError(f"X has the repeated column names {repeated}; predict matches "
                             "columns by name, so rename them to be distinct.")
        return names
    if isinstance(feature_names, (str, bytes)) or not hasattr(feature_names, "__iter__"):
        raise TypeError(f"feature_names must be a sequence of F={n_features} strings; got "
                        f"{feature_names!r}.")
    names = tuple(feature_names)
    if not all(isinstance(c, str) for c in names):
        raise TypeError(f"feature_names must hold strings; got {list(names)!r}.")
    names = tuple(str(c) for c in names)
    if len(names) != n_features:
        raise ValueError(f"feature_names has {len(names)} names but X has {n_features} "
                         "columns; give one name per column.")
    repeated = frames.repeated_labels(names)
    if repeated:
        raise ValueError(f"feature_names repeats {repeated}; give each column its own name.")
    if named and names != tuple(columns):
        raise ValueError(f"feature_names={list(names)} differs from X's columns "
                         f"{list(columns)}; leave feature_names out (the DataFrame's "
                         "column names are used) or pass matching names.")
    return names


def check_base_margin(margin, n_rows: int, n_outputs: int, vector_output: bool,
                      name: str = "base_margin"):
    """A per-row starting margin as a new f32[N, K] array (K = 1 for scalar models).

    Scalar models take shape (N,) (an (N, 1) column too), vector-output models (N, K).
    A traced margin (under ``jax.vmap``) has its shape checked and is returned as it is,
    reshaped to (N, K); its values are only known inside the program.
    """
    expected = f"({n_rows}, {n_outputs})" if vector_output else f"({n_rows},)"
    if is_traced(margin):
        shape = margin.shape
    else:
        array = _as_numeric_array(margin, name)
        if array.dtype == bool:
            raise TypeError(f"{name} must hold real numbers (margins on the scale of "
                            "predict_raw); got booleans.")
        shape = array.shape
    if not (shape == (n_rows, n_outputs) or (not vector_output and shape == (n_rows,))):
        raise ValueError(f"{name} must have shape {expected}, one raw margin per row"
                         f"{' and output' if vector_output else ''} (the scale of "
                         f"predict_raw); got {shape}.")
    if is_traced(margin):
        return margin.reshape(n_rows, n_outputs).astype(FLOAT_DTYPE)
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).sum())
        raise ValueError(f"{name} has {bad} NaN or infinite values; margins must be finite "
                         "(a log offset needs exposures > 0).")
    with np.errstate(over="ignore"):
        array = np.array(array, dtype=FLOAT_DTYPE).reshape(n_rows, n_outputs)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} has values beyond float32's range (3.4e38), which "
                         "training works in.")
    return array


def keyword_hint(name: str, accepted: Collection[str], renamed: Mapping[str, str] = {},
                 instead: Mapping[str, str] = {}) -> str:
    """What to say of a keyword ``name`` that is not among ``accepted``: what to do
    ``instead`` (another method, say); or jaxgbt's name for another library's setting,
    ``renamed[name]`` (a keyword, then what else to know after a comma), where
    ``accepted`` has it; else the nearest accepted name; else ""."""
    if name in instead:
        return instead[name]
    ours = renamed.get(name)
    if ours is not None and ours.split(",")[0].split(" ")[0] in accepted:
        return f"jaxgbt calls it {ours}"
    nearest = difflib.get_close_matches(name, sorted(accepted), n=1)
    return f"did you mean {nearest[0]}?" if nearest else ""


def check_keywords(given: Iterable[str], accepted: Collection[str], where: str, *,
                   renamed: Mapping[str, str] = {}, instead: Mapping[str, str] = {},
                   error: type[Exception] = TypeError) -> None:
    """Raises ``error`` naming each of ``given`` that ``accepted`` lacks, with
    ``keyword_hint``'s answer; ``where`` names what was called, e.g. "fit" (its help
    lists what it takes)."""
    unknown = [name for name in given if name not in accepted]
    if not unknown:
        return
    hints = [f"{name!r} ({hint})" if (hint := keyword_hint(name, accepted, renamed, instead))
             else repr(name) for name in unknown]
    what = "an unexpected keyword argument" if len(unknown) == 1 else "unexpected keywords"
    raise error(f"{where}() got {what} {', '.join(hints)}; help({where}) lists what it "
                "takes.")


def keywords_checked(renamed: Mapping[str, str] = {}, instead: Mapping[str, str] = {}
                     ) -> Callable[[Callable], Callable]:
    """A decorator: the function, raising ``check_keywords``' TypeError for a keyword it
    does not take before it runs (Python's own error would not say what to pass
    instead). An ``__init__`` is named by its object's class, a method by its class and
    its name."""

    def decorator(function: Callable) -> Callable:
        accepted = frozenset(inspect.signature(function).parameters)
        method = "." in function.__qualname__

        @functools.wraps(function)
        def checked(*args, **kwargs):
            if not accepted.issuperset(kwargs):
                owner = type(args[0]).__name__ if method and args else ""
                where = (owner if function.__name__ == "__init__" else
                         f"{owner}.{function.__name__}" if owner else function.__name__)
                check_keywords(kwargs, accepted, where, renamed=renamed, instead=instead)
            return function(*args, **kwargs)

        return checked

    return decorator


def check_classes(classes, n_outputs: int) -> tuple:
    """``classes`` as a tuple of Python scalars (NumPy's converted), checked as the
    labels of a model of ``n_outputs`` outputs (``Booster.with_classes``, and a model
    file's ``classes``)."""
    labels = tuple(np.asarray(classes, dtype=object).tolist()) if not isinstance(
        classes, (str, bytes)) else None
    if labels is None or any(isinstance(label, (list, tuple)) for label in labels):
        raise ValueError(f"classes must be a sequence of labels, one per class; got "
                         f"{classes!r}.")
    labels = tuple(label.item() if isinstance(label, np.generic) else label
                   for label in labels)
    expected = 2 if n_outputs == 1 else n_outputs
    if len(labels) != expected:
        raise ValueError(f"classes holds {len(labels)} labels but the model has "
                         f"{n_outputs} output{'s' if n_outputs > 1 else ''}, which "
                         f"{'is' if n_outputs == 1 else 'are'} {expected} classes.")
    for label in labels:
        number = isinstance(label, (int, float)) and not isinstance(label, bool)
        if not (isinstance(label, (str, bool)) or (number and math.isfinite(label))):
            raise ValueError(f"classes holds {label!r}; a label must be a string, a "
                             "finite number or a boolean.")
    if len(set(labels)) != len(labels):
        raise ValueError(f"classes holds repeated labels: {list(labels)}.")
    return labels
