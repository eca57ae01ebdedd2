"""Gradients, soft trees and export of a boosted model, on LightGBM's binary example.

Run: .venv/bin/python experiments/soft_trees_export.py [--config configs/soft_trees_export.toml]
     [--set key=value]
1. jax.grad of the test log loss w.r.t. the leaf values against central finite differences;
2. soft_predict_raw at falling temperatures against predict_raw (max gap, test AUC);
3. jaxgbt.export, then a fresh interpreter that imports only jax and numpy reloads the file and
   predicts the test rows; the predictions are compared bit for bit.
Writes results.json. Public jaxgbt API only.
"""

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _runner import load_config, output_dir, timed, write_json

import jaxgbt
from jaxgbt.datasets import load_lightgbm_binary

log = logging.getLogger("soft_trees_export")

FRESH_PROCESS = textwrap.dedent("""
    import sys, time
    import jax
    import numpy as np
    X = np.load(sys.argv[1])
    with open(sys.argv[2], "rb") as file:
        exported = jax.export.deserialize(bytearray(file.read()))
    exported.call(X)                       # compiles
    start = time.perf_counter()
    raw = np.asarray(exported.call(X))
    print(time.perf_counter() - start)
    np.save(sys.argv[3], raw)
    assert not any(m.startswith("jaxgbt") for m in sys.modules)
""")


def gradient_check(model, X, y, eps: float, n_directions: int, seed: int) -> list[dict]:
    fn = jaxgbt.as_function(model)

    @jax.jit
    def loss(leaf_value):
        return jaxgbt.metrics.logloss(y, jax.nn.sigmoid(fn({"leaf_value": leaf_value}, X)))

    grad = jax.grad(loss)(model.leaf_value)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_directions):
        direction = jnp.asarray(rng.normal(size=model.leaf_value.shape), jnp.float32)
        numeric = float((loss(model.leaf_value + eps * direction)
                         - loss(model.leaf_value - eps * direction)) / (2 * eps))
        analytic = float(jnp.vdot(grad, direction))
        rows.append(dict(analytic=analytic, numeric=numeric,
                         relative_error=abs(analytic - numeric) / abs(numeric)))
        log.info("d loss along a random direction: autodiff %.6f, finite differences %.6f",
                 analytic, numeric)
    return rows


def soft_limit(model, X, y, scale: np.ndarray, temperatures: list[float],
               tied: np.ndarray) -> list[dict]:
    """Soft against hard per temperature; ``tied`` marks rows with an x on a threshold."""
    hard = np.asarray(model.predict_raw(X))
    soft_fn = jax.jit(lambda t: jaxgbt.soft_predict_raw(model, X, t))
    rows = []
    for fraction in temperatures:
        soft = np.asarray(soft_fn(jnp.asarray(fraction * scale, jnp.float32)))
        gap = np.abs(soft - hard)
        rows.append(dict(temperature=fraction, max_gap=float(gap.max()),
                         max_gap_untied_rows=float(gap[~tied].max()),
                         relative_gap_untied_rows=float(gap[~tied].max() / np.abs(hard).max()),
                         mean_gap=float(gap.mean()), auc=float(jaxgbt.metrics.auc(y, soft))))
        log.info("temperature %.0e x std: max |soft - hard| %.3g (%.3g on the %d rows with no x "
                 "on a threshold), mean %.3g, test AUC %.4f", fraction, rows[-1]["max_gap"],
                 rows[-1]["max_gap_untied_rows"], (~tied).sum(), rows[-1]["mean_gap"],
                 rows[-1]["auc"])
    rows.append(dict(temperature=0.0, max_gap=0.0, max_gap_untied_rows=0.0,
                     relative_gap_untied_rows=0.0, mean_gap=0.0,
                     auc=float(jaxgbt.metrics.auc(y, hard))))
    log.info("hard model: test AUC %.4f", rows[-1]["auc"])
    return rows


def export_check(model, X, out: Path) -> dict:
    path, seconds = timed(jaxgbt.export, model, out / "model.stablehlo")
    np.save(out / "X_test.npy", X)
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(out / "X_test.npy"),
                             str(path), str(out / "exported_raw.npy")],
                            cwd=out, check=True, capture_output=True, text=True)
    exported = np.load(out / "exported_raw.npy")
    raw = np.asarray(model.predict_raw(X))
    row = dict(bytes=path.stat().st_size, export_s=seconds,
               fresh_process_predict_s=float(result.stdout.split()[-1]),
               identical=bool(np.array_equal(exported, raw)),
               max_difference=float(np.abs(exported - raw).max()))
    log.info("exported %s (%d bytes, %.2f s); fresh process without jaxgbt: predictions "
             "identical: %s (max difference %g)", path.name, row["bytes"], seconds,
             row["identical"], row["max_difference"])
    return row


def main(cfg: dict) -> dict:
    out = output_dir(cfg)
    X_train, y_train, X_test, y_test = load_lightgbm_binary()
    model = jaxgbt.fit("logistic", X_train, y_train, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       learning_rate=cfg["learning_rate"], l2=cfg["l2"], seed=cfg["seed"])
    # (row, tree, level) where x equals the threshold: soft gives 1/2 there, hard goes left.
    on_threshold = X_test[:, np.asarray(model.feature)] == np.asarray(model.threshold)[None]
    tied = on_threshold.any(axis=(1, 2))
    log.info("test (row, tree, level) triples with x exactly on the threshold: %d, in %d rows",
             on_threshold.sum(), tied.sum())
    results = dict(
        config=cfg, values_on_a_threshold=int(on_threshold.sum()), rows_tied=int(tied.sum()),
        gradient=gradient_check(model, X_test, y_test, cfg["fd_eps"], cfg["fd_directions"],
                                cfg["seed"]),
        soft=soft_limit(model, X_test, y_test, X_train.std(axis=0), cfg["temperatures"],
                        tied),
        export=export_check(model, X_test, out))
    write_json(out / "results.json", results)
    return results


if __name__ == "__main__":
    logging.basicConfig(format="%(message)s")
    log.setLevel(logging.INFO)
    main(load_config("soft_trees_export", doc=__doc__))
