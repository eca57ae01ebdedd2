"""What every experiment script does around its measurement: read its config, read the
real datasets and split them, make its output folder, time calls (in a fresh process
where peaks or compiles must be its own), print tables and write results.json.

A script reads ``configs/<name>.toml`` with ``load_config(name, doc=__doc__)``; on the
command line ``--config PATH`` picks another file, ``--quick`` applies the file's
``[quick]`` table (where it has one) and ``--set key=value`` replaces any one value, so
that a small run needs no edited copy of the file (the reading and the overrides are
``jaxgbt.config_files``, shared with the ``jaxgbt`` command line)::

    python experiments/bench_train.py --set rows=[2000] --set n_trees=5 --set anchors=[]
"""

import argparse
import json
import math
import multiprocessing
import os
import platform
import re
import time
from collections.abc import Callable, Mapping, Sequence
from numbers import Number
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from jaxgbt.config_files import ConfigError, apply_overrides, read_config
from jaxgbt.engine.compile import processor_fields

ROOT = Path(__file__).resolve().parents[1]  # config and output paths are relative to it
SHARED_DATA = ROOT.parent / "shared" / "data"  # real datasets, next to the repository

# (header, the row's key or a function of the row, format spec of the value)
Column = tuple[str, str | Callable[[dict], Any], str]


def load_config(default_name: str, argv: Sequence[str] | None = None, *, doc: str = "",
                overrides: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
    """Reads an experiment's TOML config with the command line's changes applied.

    The changes apply in this order: the ``[quick]`` table (``--quick``), then the
    script's own options (``overrides``), then each ``--set`` in turn.

    Args:
      default_name: the config read without ``--config``: ``configs/<default_name>.toml``.
      argv: the command-line arguments; None reads ``sys.argv[1:]``.
      doc: the script's docstring; its first line is the description ``--help`` shows.
      overrides: shortcuts for values changed often: config key -> ``argparse``
        keyword arguments of the option ``--key`` (underscores as dashes); a given
        option replaces the key's value.

    Returns:
      The config as a dict, without its ``[quick]`` table.
    """
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / f"{default_name}.toml",
                        help="the TOML config (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="apply the config's [quick] table, where it has one (small sizes, a "
                             "smoke run)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="replace one config value, written in TOML (a value that is not "
                             "TOML is taken as a string); dots reach into tables: "
                             "--set rows=[1000] --set boost.n_trees=5; may be repeated")
    for key, kwargs in (overrides or {}).items():
        parser.add_argument(f"--{key.replace('_', '-')}", dest=key, default=argparse.SUPPRESS,
                            **kwargs)
    args = parser.parse_args(argv)
    try:
        cfg = read_config(args.config)
    except ConfigError as error:
        parser.error(str(error))
    quick = cfg.pop("quick", None)
    if args.quick:
        if quick is None:
            parser.error(f"--quick: {args.config} has no [quick] table")
        cfg.update(quick)
    for key in overrides or {}:
        if key in args:
            cfg[key] = getattr(args, key)
    try:  # a key the config lacks is an error: a misspelt key would change nothing
        return apply_overrides(cfg, args.set, source=str(args.config))
    except ConfigError as error:
        parser.error(str(error))


def read_dataset(spec: Mapping[str, Any]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None
                                                  ] | None:
    """A real dataset as a config table describes it, or None when a file is missing.

    ``spec["format"]`` says how it is read: "csv" (the default; the files under
    ``../shared/data`` are read with pandas and stacked: ``sep``, ``na_values``, and
    ``columns`` or ``header = false`` for a file without a header line, whose columns
    are then named c0, c1, ...), "sklearn" (``loader``, a ``sklearn.datasets`` function
    reading data shipped with scikit-learn, no download), "statsmodels" (``loader``, a
    module of ``statsmodels.datasets``, data shipped with statsmodels, which must be
    installed) or "svmlight" (``files`` in
    LibSVM format with ``n_features``, and ``query_files`` of query sizes, one per line).
    ``target`` names the label column (for "survival", the [time, event] pair), ``drop``
    the columns left out, ``categorical`` the numeric columns read as categories (string
    columns always are).

    Returns:
      (X, y, group): X a DataFrame of N rows, float32 columns and pandas ``category``
      columns of strings (missing as NaN); y the label (binary: f32[N] 1 where it equals
      ``positive``, or the 0/1 label as it is; multiclass: i32[N] codes of its sorted
      levels; rank, regression and poisson: f64[N], the log where ``log_target``;
      survival: f64[N, 2] time and event); group i32[N] query ids for "svmlight", else None.
    """
    kind = spec.get("format", "csv")
    files = [SHARED_DATA / name for name in spec.get("files", [])
             + spec.get("query_files", [])]
    if not all(path.exists() for path in files):
        return None
    group = None
    if kind == "sklearn":
        import sklearn.datasets
        frame = getattr(sklearn.datasets, spec["loader"])(as_frame=True).frame
    elif kind == "statsmodels":
        try:
            import statsmodels.datasets
        except ImportError as error:
            raise ImportError(f"dataset format 'statsmodels' (loader {spec['loader']!r}) "
                              "reads data shipped with statsmodels: pip install "
                              "statsmodels") from error
        frame = getattr(statsmodels.datasets, spec["loader"]).load_pandas().data
    elif kind == "svmlight":
        frame, group = _read_svmlight(spec)
    else:
        frame = pd.concat([_read_csv(SHARED_DATA / name, spec) for name in spec["files"]],
                          ignore_index=True)
    target = spec["target"]
    label = frame[target].to_numpy() if isinstance(target, list) else frame[target]
    frame = frame.drop(columns=[*np.atleast_1d(target), *spec.get("drop", [])])
    for name in frame.columns:
        if name in spec.get("categorical", []) or not pd.api.types.is_numeric_dtype(frame[name]):
            values = frame[name].astype(object).where(frame[name].notna(), None)
            frame[name] = pd.Categorical([None if v is None else str(v) for v in values])
        else:
            frame[name] = frame[name].astype(np.float32)
    # Letters, digits and underscores only: LightGBM rewrites (and warns about) others.
    frame.columns = [re.sub(r"\W", "_", str(name)) for name in frame.columns]
    return frame, _label(spec, label), group


def _read_csv(path: Path, spec: Mapping[str, Any]) -> pd.DataFrame:
    options = dict(sep=spec.get("sep", ","), na_values=spec.get("na_values"),
                   skipinitialspace=True)
    if "columns" in spec:
        return pd.read_csv(path, header=None, names=spec["columns"], **options)
    if not spec.get("header", True):
        frame = pd.read_csv(path, header=None, **options)
        return frame.set_axis([f"c{j}" for j in range(frame.shape[1])], axis=1)
    return pd.read_csv(path, **options)


def _read_svmlight(spec: Mapping[str, Any]) -> tuple[pd.DataFrame, np.ndarray]:
    from sklearn.datasets import load_svmlight_file
    frames, groups, n_queries = [], [], 0
    for name, query_name in zip(spec["files"], spec["query_files"], strict=True):
        X, y = load_svmlight_file(str(SHARED_DATA / name), n_features=spec["n_features"])
        sizes = np.loadtxt(SHARED_DATA / query_name, dtype=np.int64, ndmin=1)
        frame = pd.DataFrame(X.toarray(), columns=[f"f{j}" for j in range(X.shape[1])])
        frames.append(frame.assign(label=y))
        groups.append(n_queries + np.repeat(np.arange(sizes.size), sizes))
        n_queries += sizes.size
    return pd.concat(frames, ignore_index=True), np.concatenate(groups).astype(np.int32)


def _label(spec: Mapping[str, Any], label) -> np.ndarray:
    task = spec["task"]
    if task == "survival":
        return np.asarray(label, np.float64)
    if task == "binary":
        if "positive" in spec:
            return (label.astype(str) == spec["positive"]).to_numpy(np.float32)
        return label.to_numpy(np.float32)
    if task == "multiclass":
        return np.unique(label.astype(str), return_inverse=True)[1].astype(np.int32)
    y = label.to_numpy(np.float64)
    return np.log(y) if spec.get("log_target") else y


def random_split(n_rows: int, seed: int, test_fraction: float, group=None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, test rows), each sorted, of one random split drawn from ``seed``;
    with ``group`` (i32[N] query ids) whole queries are drawn, so that each query's rows
    stay together and in order."""
    if group is None:
        order = np.random.default_rng(seed).permutation(n_rows)
        test, train = np.split(order, [round(test_fraction * n_rows)])
        return np.sort(train), np.sort(test)
    queries = np.unique(group)
    order = np.random.default_rng(seed).permutation(queries)
    test_queries = order[:round(test_fraction * queries.size)]
    in_test = np.isin(group, test_queries)
    return np.flatnonzero(~in_test), np.flatnonzero(in_test)


def output_dir(cfg: dict) -> Path:
    """The config's ``output_dir`` (relative to the repository root), created if missing."""
    path = ROOT / cfg["output_dir"]
    path.mkdir(parents=True, exist_ok=True)
    return path


def processor() -> str:
    """The processor timings ran on, for a table's header and its results.json: the
    model name, the vendor's family and model numbers, the widest vector instructions
    and the CPUs this process may run on. Machines of one kind by name can differ in
    all but the name: an "AMD EPYC" of family 23 has no AVX-512 and ran jaxgbt's narrow
    fits several times slower than a later one with it (docs/benchmarks.md, "One name,
    two processors")."""
    fields = processor_fields()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not fields:
        return f"{platform.processor() or platform.machine()}, {cpus} CPUs"
    flags = fields.get("flags", [])
    vectors = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    name = " ".join(fields.get("model name", ["?"]))
    family, model = fields.get("cpu family", ["?"])[0], fields.get("model", ["?"])[0]
    return f"{name} (family {family}, model {model}), {vectors}, {cpus} CPUs"


def timed(fn: Callable, *args, **kwargs) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and its wall-clock seconds."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def in_fresh_process(target: Callable, *args):
    """``target(*args)`` run in a new (spawned) Python process, so that its peak memory and
    compiled programs are its own; returns what it returns (a picklable value)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_put_result, args=(results, target, args))
    process.start()
    result = results.get()
    process.join()
    return result


def _put_result(results, target: Callable, args: tuple) -> None:
    results.put(target(*args))


def format_table(rows: Sequence[dict], columns: Sequence[Column], *,
                 header: bool = True) -> str:
    """A markdown table with padded cells, readable as text too.

    Each column is ``(header, key, spec)``: a row's cell is ``format(row[key], spec)``,
    or ``format(key(row), spec)`` where key is a function; a string is shown as it is,
    None and NaN as an empty cell. A column that holds a number is aligned right.
    ``header=False`` gives the rows alone, for a table printed one row at a time under
    ``format_table([], columns)``.
    """
    values = [[key(row) if callable(key) else row.get(key) for _, key, _ in columns]
              for row in rows]
    cells = [[_cell(value, spec) for value, (_, _, spec) in zip(line, columns, strict=True)]
             for line in values]
    # At least 3 wide: a markdown delimiter row wants 3 dashes a cell.
    widths = [max([3, len(title), *(len(line[j]) for line in cells)])
              for j, (title, _, _) in enumerate(columns)]
    right = [any(isinstance(line[j], Number) and not isinstance(line[j], bool)
                 for line in values) for j in range(len(columns))]
    lines = []
    if header:
        lines.append(_line([title for title, _, _ in columns], widths, [False] * len(columns)))
        lines.append(_line(["-" * width for width in widths], widths, [False] * len(columns)))
    lines += [_line(texts, widths, right) for texts in cells]
    return "\n".join(lines)


def print_table(rows: Sequence[dict], columns: Sequence[Column], *, header: bool = True) -> None:
    """Prints ``format_table(rows, columns, header=header)``, flushed so that a long run
    shows each table (or row) as soon as it is measured."""
    print(format_table(rows, columns, header=header), flush=True)


def _cell(value, spec: str) -> str:
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)):
        return ""
    return value if isinstance(value, str) else format(value, spec)


def _line(texts: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    padded = [text.rjust(width) if r else text.ljust(width)
              for text, width, r in zip(texts, widths, right, strict=True)]
    return "| " + " | ".join(padded) + " |"


def write_json(path: Path, obj) -> Path:
    """Writes ``obj`` as indented JSON; NumPy scalars and arrays become numbers and lists."""
    path.write_text(json.dumps(obj, indent=1, default=_plain))
    return path


def _plain(value):
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable: {value!r}")
