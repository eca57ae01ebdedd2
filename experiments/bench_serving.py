"""Serving a fitted model: latency per call and rows per second, for each way to serve it.

    python experiments/bench_serving.py [--config configs/bench_serving.toml] [--quick]
        [--set key=value]

A logistic model of n_trees trees of depth `depth` (each of `grow_policies`) is fitted on
`train_rows` HIGGS-like rows (28 features, 2% NaN), then serves batches of `rows` rows
(float32 NumPy arrays on the host, probabilities back on the host) in four ways:

  predict       ``np.asarray(model.predict(X))``: jaxgbt in the serving process;
  jax.export    ``jaxgbt.export(model, path, method="predict")`` loaded back with
                ``jaxgbt.load_exported(path)``, called as ``exported.call(X)``: jax only;
  onnxruntime   ``jaxgbt.to_onnx(model)`` run by an ``onnxruntime.InferenceSession``
                with `threads` intra-op threads: no JAX at all;
  JSON dump     ``model.dump()`` read by a vectorised NumPy walk of its nodes (the kind of
                reader another tool would write; included for scale).

Each time is the median of `calls` warm calls (fewer when a batch size would take more
than `calls_budget_s`), after one call that compiles; the first call's extra seconds are
the "first call s" column. Results go to `output_dir`/results.json.
"""

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _runner import load_config, output_dir, print_table, timed, write_json
from _synthetic import higgs_like

import jaxgbt


def _dump_reader(record: dict):
    """A NumPy predictor of a JSON dump without categorical columns: the nested nodes
    flattened into heap-ordered arrays, walked level by level for all rows at once."""
    depth, n_internal = record["depth"], 2 ** record["depth"] - 1
    split = np.zeros((len(record["trees"]), n_internal), np.int64)
    threshold = np.zeros(split.shape, np.float32)
    missing_left = np.zeros(split.shape, bool)
    leaves = np.zeros((len(record["trees"]), 2**depth), np.float32)
    for t, tree in enumerate(record["trees"]):
        stack = [tree]
        while stack:
            node = stack.pop()
            if "leaf" in node:
                leaves[t, node["leaf_index"]] = node["leaf"][0]
                continue
            i = node["nodeid"]
            split[t, i] = node["split"]
            threshold[t, i] = np.inf if node["threshold"] is None else node["threshold"]
            missing_left[t, i] = node["default_left"]
            stack.extend(node["children"])
    base = np.float32(record["base_score"][0])
    trees = np.arange(split.shape[0])[:, None]

    def predict(X):
        X_t = np.ascontiguousarray(X.T)
        node = np.zeros((split.shape[0], X.shape[0]), np.int64)  # [T, N]
        for _ in range(depth):
            feature = split[trees, node]
            x = X_t[feature, np.arange(X.shape[0])[None, :]]
            left = np.where(np.isnan(x), missing_left[trees, node], x <= threshold[trees, node])
            node = 2 * node + 1 + ~left
        margin = base + leaves[trees, node - n_internal].sum(axis=0)
        return 1 / (1 + np.exp(-margin))

    return predict


def servers(model, threads: int, folder: Path) -> dict:
    """name -> f(X f32[N, F]) -> probabilities f32[N] on the host."""
    import onnxruntime

    path = jaxgbt.export(model, folder / "model.stablehlo", method="predict")
    exported = jaxgbt.load_exported(path)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(jaxgbt.to_onnx(model).SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return {
        "predict": lambda X: np.asarray(model.predict(X)),
        "jax.export": lambda X: np.asarray(exported.call(X)),
        "onnxruntime": lambda X: session.run(["prediction"], {"X": X})[0],
        "JSON dump": _dump_reader(model.dump()),
    }


def measure(serve, X, calls: int, budget_s: float) -> dict:
    _, first = timed(serve, X)
    times, spent = [], 0.0
    while len(times) < calls and spent < budget_s:
        _, seconds = timed(serve, X)
        times.append(seconds)
        spent += seconds
    median = statistics.median(times)
    return dict(ms_per_call=1e3 * median, us_per_row=1e6 * median / X.shape[0],
                rows_per_s=X.shape[0] / median, first_call_s=max(first - median, 0.0),
                calls=len(times))


def main(cfg: dict) -> None:
    n_max = max(cfg["rows"])
    X, y = higgs_like(cfg["train_rows"] + n_max, cfg["seed"])
    X_train, y_train, X_serve = X[:cfg["train_rows"]], y[:cfg["train_rows"]], X[cfg["train_rows"]:]
    columns = [("policy", "policy", ""), ("served by", "server", ""), ("rows", "rows", ","),
               ("ms per call", "ms_per_call", ".3f"), ("us per row", "us_per_row", ".2f"),
               ("rows per s", "rows_per_s", ",.0f"), ("first call s", "first_call_s", ".2f"),
               ("max diff", "max_diff", ".1e")]
    results = []
    print(f"{cfg['n_trees']} trees of depth {cfg['depth']}, 28 features; onnxruntime "
          f"{cfg['threads']} threads; median of up to {cfg['calls']} warm calls", flush=True)
    print_table([], columns)
    for policy in cfg["grow_policies"]:
        model = jaxgbt.fit("logistic", X_train, y_train, n_trees=cfg["n_trees"],
                           depth=cfg["depth"], learning_rate=cfg["learning_rate"],
                           grow_policy=policy)
        with tempfile.TemporaryDirectory() as folder:
            by_name = servers(model, cfg["threads"], Path(folder))
            for n_rows in cfg["rows"]:
                rows = np.ascontiguousarray(X_serve[:n_rows])
                expected = None
                for name, serve in by_name.items():  # "predict" first: the reference
                    row = dict(policy=policy, server=name, rows=n_rows,
                               **measure(serve, rows, cfg["calls"], cfg["calls_budget_s"]))
                    expected = serve(rows) if expected is None else expected
                    row["max_diff"] = float(np.max(np.abs(serve(rows) - expected)))
                    results.append(row)
                    print_table([row], columns, header=False)
    write_json(output_dir(cfg) / "results.json",
               dict(config=cfg, results=results, time=time.strftime("%Y-%m-%d %H:%M")))


if __name__ == "__main__":
    main(load_config("bench_serving", doc=__doc__))
