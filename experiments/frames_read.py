"""DataFrame reading: predict's seconds on a NumPy array against the same data as a
pandas, polars or pyarrow DataFrame.

    python experiments/frames_read.py [--config configs/frames_read.toml] [--quick]

The model is one stump, so that prediction costs next to nothing and the difference
from NumPy is the host reading of the frame (``jaxgbt.data.frames``: each column to
float32, names matched). Float64 data, the way a DataFrame usually holds it; the NumPy
array is float64 too. Best of ``repeats`` warm calls. Prints a markdown table
(docs/benchmarks.md) and writes results.json. Public jaxgbt API only.
"""

import importlib.util

import jax
import numpy as np
from _runner import load_config, output_dir, print_table, timed, write_json

import jaxgbt

COLUMNS = [("X", "library", ""), ("rows", "rows", ",d"), ("features", "features", "d"),
           ("predict s", "seconds", ".3f"), ("over NumPy s", "extra", ".3f")]


def as_library(library: str, X: np.ndarray, names: list[str]):
    if library == "numpy":
        return X
    if library == "pandas":
        import pandas as pd
        return pd.DataFrame(X, columns=names)
    if library == "polars":
        import polars as pl
        return pl.DataFrame(X, schema=names)
    import pyarrow as pa
    return pa.table(dict(zip(names, X.T, strict=True)))


def main(cfg: dict) -> list[dict]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(cfg["rows"], cfg["features"]))
    names = [f"f{j}" for j in range(cfg["features"])]
    y = (X[:, 0] > 0).astype(np.float32)
    model = jaxgbt.fit("logistic", X[:2000], y[:2000], n_trees=1, depth=1,
                       feature_names=names)
    results = []
    for library in cfg["libraries"]:
        if library != "numpy" and importlib.util.find_spec(library) is None:
            continue
        frame = as_library(library, X, names)
        jax.block_until_ready(model.predict(frame))  # compiled for this shape
        seconds = min(timed(lambda f=frame: jax.block_until_ready(model.predict(f)))[1]
                      for _ in range(cfg["repeats"]))
        results.append(dict(library=library, rows=cfg["rows"], features=cfg["features"],
                            seconds=seconds))
    numpy_s = next((r["seconds"] for r in results if r["library"] == "numpy"), np.nan)
    for row in results:
        row["extra"] = row["seconds"] - numpy_s
    print_table(results, COLUMNS)
    return results


if __name__ == "__main__":
    config = load_config("frames_read", doc=__doc__)
    write_json(output_dir(config) / "results.json", main(config))
