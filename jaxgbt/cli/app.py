"""The ``jaxgbt`` command: train, predict and cross-validate from data files.

    jaxgbt train data.parquet --target price --loss squared_error --n-trees 500 --out model.jgbt
    jaxgbt predict model.jgbt new.csv --out pred.csv
    jaxgbt cv data.csv --target y --loss logistic --folds 5
    jaxgbt launch --processes 4 -- python train.py
    jaxgbt --version

Each command calls the public functions ``fit``, ``load``, ``Booster.predict`` and ``cv``.
Settings come from, later ones winning: a TOML file (``--config``, read by
``jaxgbt.config_files`` as the scripts in ``experiments/`` read theirs), the options, then
each ``--set key=value``. The file and ``--set`` take any ``fit`` keyword and the data
settings (``target``, ``group``, ``weight``, ``categorical``, ``drop``,
``eval_fraction``). Bad input (a missing file or column, an unknown setting, a value
``fit`` rejects) is one line on stderr and exit status 2, not a traceback.
"""

import functools
import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import numpy as np
import typer

from jaxgbt import spec
from jaxgbt.cli.launch import launch as launch_processes
from jaxgbt.cli.tables import TableError, read_table, write_csv
from jaxgbt.config_files import ConfigError, apply_overrides, read_config
from jaxgbt.fitting import fit
from jaxgbt.model import load
from jaxgbt.model_selection import cv as cross_validate
from jaxgbt.objectives import resolve
from jaxgbt.version import __version__

USAGE_ERROR = 2  # click's and argparse's status for bad usage
DEFAULT_EARLY_STOPPING_ROUNDS = spec.DEFAULT_EARLY_STOPPING_ROUNDS
# Settings that are not fit keywords: where the data are in the file.
DATA_SETTINGS = ("target", "group", "weight", "categorical", "drop", "eval_fraction")
# fit keywords the command line fills from the data (or that take Python objects), and
# distributed: every process would read the whole file, each row counted once per process.
FROM_DATA = {"X", "y", "sample_weight", "group", "eval_set", "categorical_features",
             "feature_names", "callbacks", "init_model", "link", "folds", "params",
             "base_margin", "eval_base_margin", "distributed"}

app = typer.Typer(name="jaxgbt", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Gradient boosting in JAX from the command line: train a model on a "
                       "CSV or Parquet file, predict with it, cross-validate.")


class UsageProblem(ValueError):
    """Bad input found by the command line itself (a column, a setting)."""


def _fail(message: str, status: int = USAGE_ERROR):
    typer.echo(f"jaxgbt: error: {message}", err=True)
    raise typer.Exit(status)


def _reported(command):
    """Runs a command with bad input reported in one line and exit status 2; training
    that diverges or runs out of memory in one line and status 1."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (UsageProblem, ConfigError, TableError, FileNotFoundError) as error:
            _fail(str(error))
        except (ValueError, TypeError) as error:  # fit's and load's checks name the argument
            _fail(str(error))
        except BrokenPipeError:  # stdout closed early (| head): stop quietly, as cat does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(1) from None
        except OSError as error:
            _fail(f"{error.filename}: {error.strerror}" if error.filename else str(error))
        except (FloatingPointError, MemoryError) as error:
            _fail(str(error), status=1)

    return run


def _version(value: bool) -> None:
    if value:
        typer.echo(f"jaxgbt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")]
          = False) -> None:
    """Gradient boosting in JAX from the command line."""


# Options shared by train and cv: None means "not given" (fit's default, or the config's).
Target = Annotated[str | None, typer.Option("--target", "-t", help="The label column.")]
Loss = Annotated[str | None, typer.Option(
    "--loss", "-l", help="A built-in objective: squared_error, logistic, softmax, poisson, "
                         "quantile@0.9, ... (docs/objectives.md).")]
NTrees = Annotated[int | None, typer.Option("--n-trees", help="Boosting rounds (default 200).")]
Depth = Annotated[int | None, typer.Option("--depth", help="Levels per tree (default 6).")]
LearningRate = Annotated[float | None, typer.Option("--learning-rate",
                                                    help="Shrinkage (default 0.1).")]
GrowPolicy = Annotated[str | None, typer.Option(
    "--grow-policy", help="oblivious (default), depthwise or lossguide (leaf by leaf; "
                          "--set max_leaves=N, default 31).")]
Seed = Annotated[int | None, typer.Option("--seed", help="Seeds every random choice (default 0).")]
Categorical = Annotated[list[str] | None, typer.Option(
    "--categorical", "-c", help="A categorical column (repeat, or a,b,c). Text columns are "
                                "always categorical.")]
Group = Annotated[str | None, typer.Option("--group", help="The query id column (ranking).")]
Weight = Annotated[str | None, typer.Option("--weight", help="The sample weight column.")]
Drop = Annotated[list[str] | None, typer.Option(
    "--drop", help="A column that is not a feature, such as an id (repeat, or a,b,c).")]
Config = Annotated[Path | None, typer.Option(
    "--config", help="A TOML file of settings: fit keywords and the data settings.")]
Assignments = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY=VALUE", help="Any fit keyword, the value in TOML: --set l2=3 "
                                       "--set eval_metric='[\"auc\"]' (repeat).")]


@app.command()
@_reported
def train(
        data: Annotated[Path, typer.Argument(help="CSV, TSV or Parquet file with a header.")],
        target: Target = None, loss: Loss = None, n_trees: NTrees = None, depth: Depth = None,
        learning_rate: LearningRate = None, grow_policy: GrowPolicy = None, seed: Seed = None,
        eval_fraction: Annotated[float | None, typer.Option(
            "--eval-fraction", help="Hold out this fraction of rows (whole queries with "
                                    "--group) to score every round and stop early.")] = None,
        early_stopping_rounds: Annotated[int | None, typer.Option(
            "--early-stopping-rounds", help="With --eval-fraction: stop after this many "
            f"rounds without improvement (default {DEFAULT_EARLY_STOPPING_ROUNDS}).")] = None,
        categorical: Categorical = None, group: Group = None, weight: Weight = None,
        drop: Drop = None, config: Config = None, assignments: Assignments = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="The model file.")] = Path(
            "model.jgbt"),
        quiet: Annotated[bool, typer.Option("--quiet", "-q",
                                            help="No progress output.")] = False) -> None:
    """Train a model on DATA and save it (feature names included)."""
    options = dict(target=target, loss=loss, n_trees=n_trees, depth=depth,
                   learning_rate=learning_rate, grow_policy=grow_policy, seed=seed,
                   eval_fraction=eval_fraction, early_stopping_rounds=early_stopping_rounds,
                   categorical=categorical, group=group, weight=weight, drop=drop)
    settings = collect_settings(config, assignments, options, allowed_settings(fit))
    rows, data_settings = read_training_data(data, settings)
    loss_name = chosen_loss(settings, rows)
    fit_kwargs = dict(settings, verbose=0 if quiet else settings.get("verbose", 1))
    train_rows, eval_set = holdout(rows, data_settings.get("eval_fraction"),
                                   fit_kwargs.get("seed", 0))
    if eval_set is not None:
        fit_kwargs.setdefault("early_stopping_rounds", DEFAULT_EARLY_STOPPING_ROUNDS)
    model = fit(loss_name, train_rows.X, train_rows.y, sample_weight=train_rows.weight,
                group=train_rows.group, categorical_features=rows.categorical or None,
                feature_names=rows.feature_names, eval_set=eval_set,
                **with_column_indices(fit_kwargs, rows.feature_names))
    if rows.classes is not None:
        model = model.with_classes(rows.classes)
    model.save(out)
    typer.echo(f"jaxgbt: saved {out}: {model.n_trees} trees of depth {model.depth}, "
               f"{model.n_features} features{_classes_text(model)}{_best_text(model)}",
               err=True)


@app.command()
@_reported
def predict(
        model_path: Annotated[Path, typer.Argument(metavar="MODEL",
                                                   help="A model file (jaxgbt train).")],
        data: Annotated[Path, typer.Argument(help="CSV, TSV or Parquet file with a header; "
                                                  "columns other than the model's are "
                                                  "ignored.")],
        out: Annotated[str, typer.Option("--out", "-o", help="The CSV to write; - for "
                                                             "stdout.")] = "-",
        raw: Annotated[bool, typer.Option("--raw", help="Margins instead of the objective's "
                                                        "predictions.")] = False,
        keep: Annotated[list[str] | None, typer.Option(
            "--keep", help="A column of DATA to write before the predictions, such as an "
                           "id (repeat, or a,b,c).")] = None) -> None:
    """Write a CSV of MODEL's predictions for the rows of DATA.

    One column (prediction), or one per class (class_0, ...: softmax probabilities) or
    output. A model trained on text labels writes the likeliest one (label) and each
    class's probability (class_<label>). Columns named by --keep come first, as read.
    """
    if not model_path.is_file():
        raise FileNotFoundError(f"{model_path}: no such model file.")
    model = load(model_path)
    table = read_table(data)
    X = prediction_features(table, data, model)
    values = np.asarray(model.predict_raw(X) if raw else model.predict(X), np.float64)
    predictions = prediction_columns(values, model, raw)
    kept = {}
    for name in _names(keep, "keep"):
        if name not in table:
            raise UsageProblem(f"--keep {name}: {data} has no such column; its columns are "
                               f"{list(table)}.")
        if name in predictions:
            raise UsageProblem(f"--keep {name}: the predictions have a column of that name.")
        kept[name] = as_text(table[name])
    write_csv(out, {**kept, **predictions})


@app.command(name="cv")
@_reported
def cv_command(
        data: Annotated[Path, typer.Argument(help="CSV, TSV or Parquet file with a header.")],
        target: Target = None, loss: Loss = None,
        folds: Annotated[int | None, typer.Option("--folds", "-k",
                                                  help="Folds (default 5).")] = None,
        n_trees: NTrees = None, depth: Depth = None, learning_rate: LearningRate = None,
        grow_policy: GrowPolicy = None, seed: Seed = None, categorical: Categorical = None,
        group: Group = None, weight: Weight = None, drop: Drop = None, config: Config = None,
        assignments: Assignments = None) -> None:
    """Cross-validate on DATA and print the held-out scores by number of trees.

    Every fold is trained in one vmapped fit (jaxgbt.cv); the table gives the mean and
    standard deviation over folds.
    """
    options = dict(target=target, loss=loss, n_folds=folds, n_trees=n_trees, depth=depth,
                   learning_rate=learning_rate, grow_policy=grow_policy, seed=seed,
                   categorical=categorical, group=group, weight=weight, drop=drop)
    allowed = (allowed_settings(fit) | allowed_settings(cross_validate)) - {
        "eval_fraction", "early_stopping_rounds", "verbose"}
    settings = collect_settings(config, assignments, options, allowed)
    rows, _ = read_training_data(data, settings)
    loss_name = chosen_loss(settings, rows)
    result = cross_validate(loss_name, category_codes(rows.X), rows.y, sample_weight=rows.weight,
                            group=rows.group, categorical_features=rows.categorical or None,
                            feature_names=rows.feature_names,
                            **with_column_indices(settings, rows.feature_names))
    typer.echo(cv_table(result, settings.get("n_folds", 5), loss_name))


@app.command()
def launch(
        command: Annotated[list[str], typer.Argument(
            help="The command every process runs, after --: -- python train.py")],
        processes: Annotated[int, typer.Option("--processes", "-n", min=1,
                                               help="How many processes.")] = 2,
        port: Annotated[int | None, typer.Option(
            "--port", help="The coordinator's port on 127.0.0.1 (default: a free one).")
                        ] = None) -> None:
    """Run COMMAND as N processes of one distributed run on this machine.

    Each process gets JAXGBT_COORDINATOR_ADDRESS, JAXGBT_NUM_PROCESSES and
    JAXGBT_PROCESS_ID, read by jaxgbt.distributed.initialize(); a script then trains
    with fit(..., distributed=True) on its own rows. When a process fails, the others
    are stopped and its exit status returned.
    """
    try:
        status = launch_processes(command, processes, port=port)
    except (ValueError, OSError) as error:  # no command; a program that cannot start
        _fail(str(error))
    raise typer.Exit(status)


def main(argv: list[str] | None = None) -> None:
    """The console script ``jaxgbt`` (and ``python -m jaxgbt``)."""
    app(args=argv, prog_name="jaxgbt")


# Settings ----------------------------------------------------------------------------------


def allowed_settings(function) -> set[str]:
    """The keywords of ``fit`` (or ``cv``) a config may set, and the data settings."""
    names = set(inspect.signature(function).parameters) - FROM_DATA - {"kwargs", "fit_kwargs"}
    return names | set(DATA_SETTINGS)


def collect_settings(config: Path | None, assignments: list[str] | None,
                     options: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    """The config file's settings, then the options given, then each ``--set``.

    Raises:
      ConfigError: an unreadable config or a malformed ``--set``.
      UsageProblem: a setting that is neither a fit keyword nor a data setting, or no
        target or loss.
    """
    settings = {} if config is None else read_config(config)
    settings.update({key: value for key, value in options.items()
                     if value is not None and value != []})
    settings = apply_overrides(settings, assignments or [], known_keys_only=False,
                               source="--set")
    unknown = sorted(set(settings) - allowed)
    if unknown:
        hints = [f"{key}: {hint}" for key in unknown
                 if (hint := spec.keyword_hint(key, allowed))]
        where = f" in {config}" if config is not None else ""
        raise UsageProblem(f"unknown setting(s) {unknown}{where}"
                           + (f" ({'; '.join(hints)})" if hints else "")
                           + "; settings are fit keywords and " + ", ".join(DATA_SETTINGS)
                           + ".")
    if "target" not in settings:
        raise UsageProblem("no target: give --target COLUMN (or target = ... in --config).")
    return settings


def chosen_loss(settings: dict, rows: "Rows") -> str:
    """The loss to fit, taken out of ``settings``: the one given, or for a target of
    text labels the classifier's default (logistic for 2 classes, softmax for more).

    Raises:
      UsageProblem: no loss for a numeric target; for text labels, a loss that is not
        a classification loss, or a one-output one with more than 2 classes.
    """
    loss = settings.pop("loss", None)
    if rows.classes is None:
        if loss is None:
            raise UsageProblem("no loss: give --loss NAME (or loss = ... in --config).")
        return loss
    classes = list(rows.classes)
    if loss is None:
        return "logistic" if len(classes) == 2 else "softmax"
    objective = resolve(loss)
    if not objective.classification:
        raise UsageProblem(f"the target column holds the text labels {classes[:5]}, but "
                           f"loss {loss!r} is not a classification loss; give --loss "
                           "logistic or softmax, or leave --loss out.")
    if objective.n_outputs is None and len(classes) > 2:
        raise UsageProblem(f"the target column holds {len(classes)} classes {classes[:5]}, "
                           f"but loss {loss!r} takes 2; give --loss softmax, or leave "
                           "--loss out.")
    return loss


def _names(value, setting: str) -> list[str]:
    """A list of column names from a config value or repeated options (a,b allowed)."""
    if value is None:
        return []
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UsageProblem(f"{setting} must be column names; got {value!r}.")
    return [name.strip() for v in values for name in v.split(",") if name.strip()]


def with_column_indices(fit_kwargs: dict, feature_names: tuple[str, ...]) -> dict:
    """fit keywords with feature names in constraints turned into column indices:
    ``monotone_constraints = {x0 = 1}``, ``interaction_constraints = [["a", "b"]]``."""
    def index(name):
        if isinstance(name, str) and name in feature_names:
            return feature_names.index(name)
        if isinstance(name, str) and name.isdigit():
            return int(name)
        if isinstance(name, str):
            raise UsageProblem(f"constraint names the column {name!r}, which is not a "
                               f"feature; the features are {list(feature_names)}.")
        return name

    kwargs = dict(fit_kwargs)
    if isinstance(kwargs.get("monotone_constraints"), dict):
        kwargs["monotone_constraints"] = {index(k): v for k, v in
                                          kwargs["monotone_constraints"].items()}
    if isinstance(kwargs.get("interaction_constraints"), list):
        kwargs["interaction_constraints"] = [[index(name) for name in names] for names in
                                             kwargs["interaction_constraints"]]
    return kwargs


# Data --------------------------------------------------------------------------------------


class Rows(NamedTuple):
    """Training rows read from a file.

    Attributes:
      X: f64[N, F], or object[N, F] when a column holds text (numbers as floats, text
        as str, None missing).
      y: f64[N].
      weight: f64[N] or None.
      group: i64[N] query ids or None.
      feature_names: the F feature columns' names.
      categorical: the indices of the categorical features.
      classes: a target column of text labels' classes, sorted (y then holds their
        indices), or None.
    """

    X: np.ndarray
    y: np.ndarray
    weight: np.ndarray | None
    group: np.ndarray | None
    feature_names: tuple[str, ...]
    categorical: list[int]
    classes: tuple[str, ...] | None = None


def read_training_data(path: Path, settings: dict) -> tuple[Rows, dict]:
    """The rows of ``path`` as the data settings say; those settings leave ``settings``
    (what remains is fit keywords) and are returned."""
    data_settings = {key: settings.pop(key) for key in DATA_SETTINGS if key in settings}
    table = read_table(path)
    target, group, weight = (data_settings.get(key) for key in ("target", "group", "weight"))
    special = {"target": target, "group": group, "weight": weight}
    for setting, name in special.items():
        if name is not None and name not in table:
            raise UsageProblem(f"{path} has no column {name!r} (the {setting}); its columns "
                               f"are {list(table)}.")
    dropped = _names(data_settings.get("drop"), "drop")
    for name in dropped:
        if name not in table:
            raise UsageProblem(f"--drop {name}: {path} has no such column; its columns are "
                               f"{list(table)}.")
    features = tuple(name for name in table
                     if name not in set(special.values()) | set(dropped))
    if not features:
        raise UsageProblem(f"{path} has no feature columns besides the target.")
    declared = _names(data_settings.get("categorical"), "categorical")
    for name in declared:
        if name not in features:
            raise UsageProblem(f"--categorical {name}: not a feature column of {path}; the "
                               f"features are {list(features)}.")
    categorical = [j for j, name in enumerate(features)
                   if name in declared or table[name].dtype == object]
    y, classes = class_indices(table[target], target)
    rows = Rows(X=feature_matrix(table, features, bool(categorical)), y=y,
                weight=None if weight is None else _numbers(table[weight], weight),
                group=None if group is None else _query_ids(table[group]),
                feature_names=features, categorical=categorical, classes=classes)
    return rows, data_settings


def class_indices(column: np.ndarray, name: str) -> tuple[np.ndarray, tuple | None]:
    """(y, classes): a column of numbers as it is, with None; a column of text labels
    as f64 class indices 0..K-1 of its sorted labels, with those labels."""
    if column.dtype != object:
        return column, None
    empty = int(np.equal(column, None).sum())
    if empty:
        raise UsageProblem(f"the target column {name!r} has {empty} empty cells; drop those "
                           "rows or fill in their labels.")
    classes, indices = np.unique(column.astype(str), return_inverse=True)
    if len(classes) < 2:
        raise UsageProblem(f"the target column {name!r} holds one label, {classes[0]!r}; "
                           "a classifier needs at least 2 classes.")
    return indices.astype(np.float64), tuple(classes.tolist())


def feature_matrix(table: dict[str, np.ndarray], names, as_objects: bool) -> np.ndarray:
    """The named columns side by side: f64[N, F], or object[N, F] (``as_objects``, for
    text columns). Float64, not float32: numbers used as category labels must read the
    same at training and prediction."""
    if not as_objects:
        return np.column_stack([table[name] for name in names])
    return np.column_stack([table[name].astype(object) for name in names])


def category_codes(X: np.ndarray) -> np.ndarray:
    """f64[N, F]: text columns of an object X as codes 0..C-1 of their sorted labels
    (NaN missing), the other columns as numbers. ``cv`` takes numeric X only (its folds
    are one vmapped fit); codes numbered so give the same splits as the labels."""
    if X.dtype != object:
        return X
    out = np.empty(X.shape, np.float64)
    for j in range(X.shape[1]):
        column = X[:, j]
        present = np.array([v is not None for v in column])
        if not any(isinstance(v, str) for v in column):
            out[:, j] = np.where(present, column, np.nan).astype(np.float64)
            continue
        _, codes = np.unique(column[present].astype(str), return_inverse=True)
        out[:, j] = np.nan
        out[present, j] = codes
    return out


def _numbers(column: np.ndarray, name: str) -> np.ndarray:
    if column.dtype == object:
        raise UsageProblem(f"column {name!r} must hold numbers; it holds text.")
    return column


def _query_ids(column: np.ndarray) -> np.ndarray:
    """i64[N] query ids; text ids numbered in order of first appearance (a query's rows
    must be contiguous, which numbering keeps)."""
    if column.dtype != object:
        return column
    if any(v is None for v in column):
        raise UsageProblem("the group column has missing query ids.")
    _, first, inverse = np.unique(column.astype(str), return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.int64)


def holdout(rows: Rows, fraction: float | None, seed: int) -> tuple[Rows, list | None]:
    """(training rows, eval_set) with ``fraction`` of the rows (of the queries, with a
    group) held out at random (from ``seed``); (rows, None) without a fraction."""
    if fraction is None:
        return rows, None
    if not isinstance(fraction, float | int) or not 0 < fraction < 1:
        raise UsageProblem(f"eval_fraction={fraction!r} must lie strictly between 0 and 1.")
    rng = np.random.default_rng(seed)
    units = np.arange(len(rows.y)) if rows.group is None else np.unique(rows.group)
    n_held = int(round(fraction * len(units)))
    if not 0 < n_held < len(units):
        raise UsageProblem(f"eval_fraction={fraction} holds out {n_held} of {len(units)} "
                           f"{'rows' if rows.group is None else 'queries'}; both parts need "
                           "at least one.")
    held_units = rng.choice(units, size=n_held, replace=False)
    held = np.isin(np.arange(len(rows.y)) if rows.group is None else rows.group, held_units)

    def part(mask):
        return rows._replace(**{field: None if value is None else value[mask]
                                for field, value in rows._asdict().items()
                                if field in ("X", "y", "weight", "group")})

    valid = part(held)
    entry = dict(X=valid.X, y=valid.y, name="valid")
    entry.update({key: value for key, value in (("sample_weight", valid.weight),
                                                ("group", valid.group)) if value is not None})
    return part(~held), [entry]


def prediction_features(table: dict[str, np.ndarray], path: Path, model) -> np.ndarray:
    """The model's feature columns of a file, by name (in the model's order); a model
    without names takes every column in file order."""
    names = model.feature_names or tuple(table)
    missing = [name for name in names if name not in table]
    if missing:
        raise UsageProblem(f"{path} lacks the model's feature columns {missing}; the model "
                           f"needs {list(names)}.")
    if len(names) != model.n_features:
        raise UsageProblem(f"{path} has {len(names)} columns but the model (saved without "
                           f"feature names) needs {model.n_features}.")
    return feature_matrix(table, names, any(table[name].dtype == object for name in names))


def prediction_columns(values: np.ndarray, model, raw: bool) -> dict[str, np.ndarray]:
    """Predictions f64[N] or f64[N, K] as named CSV columns: ``prediction``, or
    ``class_k`` (class probabilities of a classifier) or ``output_k``; for a model with
    class labels (``Booster.classes``), ``label`` (the likeliest class's) and
    ``class_<label>`` (each class's probability)."""
    if model.classes is not None and not raw:
        proba = values if values.ndim == 2 else np.column_stack([1 - values, values])
        labels = np.array([str(label) for label in model.classes], dtype=object)
        return {"label": labels[np.argmax(proba, axis=1)],
                **{f"class_{label}": proba[:, k] for k, label in enumerate(labels)}}
    if values.ndim == 1:
        return {"raw" if raw else "prediction": values}
    stem = "class" if model.objective.classification and not raw else "output"
    return {f"{stem}_{k}": values[:, k] for k in range(values.shape[1])}


def as_text(column: np.ndarray) -> np.ndarray:
    """A column read from a file (``read_table``) as object[N] of text: text as it is,
    whole numbers without a decimal point, other numbers in full (their shortest exact
    text), missing values empty."""
    if column.dtype == object:
        return np.where(np.equal(column, None), "", column).astype(object)
    # NumPy writes a float64 as its shortest exact text, as repr does.
    text = column.astype(str).astype(object)
    whole = np.isfinite(column) & (column == np.round(column)) & (np.abs(column) < 2.0**53)
    text[whole] = column[whole].astype(np.int64).astype(str)
    text[np.isnan(column)] = ""
    return text


# Reports -----------------------------------------------------------------------------------


def _classes_text(model) -> str:
    if model.classes is None:
        return ""
    shown = ", ".join(map(repr, model.classes[:5])) + (", ..." if len(model.classes) > 5 else "")
    return f", {len(model.classes)} classes ({shown})"


def _best_text(model) -> str:
    if model.best_round is None or not model.history:
        return ""
    best = int(model.best_round)
    key = next(iter(model.history))
    return f"; best round {best} ({key}={float(model.history[key][best]):.5g})"


def cv_table(result, n_folds: int, loss: str, rows: int = 10) -> str:
    """A markdown table of the cross-validated scores at about ``rows`` tree counts and
    at the best one, then the best count."""
    keys = list(result.mean)
    n_trees = len(result.mean[keys[0]])
    best = int(result.best_round)
    shown = sorted({*np.linspace(0, n_trees - 1, min(rows, n_trees)).round().astype(int), best})
    header = ["trees"] + [f"{key} {stat}" for key in keys for stat in ("mean", "std")]
    lines = [[str(t + 1)] + [f"{float(stat[key][t]):.5f}" for key in keys
                             for stat in (result.mean, result.std)] for t in shown]
    widths = [max(len(header[j]), *(len(line[j]) for line in lines)) for j in range(len(header))]

    def row(cells):
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([f"{n_folds}-fold cross-validation of {loss} ({keys[0]} picks the best)",
                      row(header), row(["-" * w for w in widths]), *map(row, lines),
                      f"best: {best + 1} trees, {keys[0]} {float(result.best_score):.5f} "
                      f"(train with --n-trees {best + 1})"])
