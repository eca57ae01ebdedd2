"""Tests for jaxgbt.dump: a NumPy reader of the JSON alone reproduces predict_raw."""

import json

import numpy as np
import pytest
from conftest import small_adult_model

import jaxgbt
from jaxgbt import datasets

FIT = dict(n_trees=6, depth=3, n_bins=32)
N_TRAIN, N_TEST = 400, 300


def encoded_columns(record: dict, X: np.ndarray) -> np.ndarray:
    """f64[N, F_enc]: the columns the trees split on, from X's codes (labelled categorical
    columns as positions in their labels, NaN missing, -1 unseen), read off the dump."""
    tables = {entry["feature"]: entry for entry in record["categorical"]}
    out = np.empty((X.shape[0], len(record["split_columns"])))
    for column in record["split_columns"]:
        x = X[:, column["feature"]].astype(np.float64)
        kind, table = column["kind"], tables.get(column["feature"])
        if kind == "numeric":
            out[:, column["index"]] = x
        elif kind == "one_hot":
            labels = table["labels"]
            code = (labels.index(column["category"]) if labels is not None
                    else column["category"])
            out[:, column["index"]] = x == code
        elif kind == "one_hot_missing":
            out[:, column["index"]] = np.isnan(x)
        else:  # target statistic of output m
            m = column["output"]
            value = np.full(x.shape, table["unseen_statistic"][m])
            for code, stats in zip(table["values"], table["statistics"], strict=True):
                value[x == code] = stats[m]
            value[np.isnan(x)] = table["missing_statistic"][m]
            out[:, column["index"]] = value
    return out.astype(np.float32)


def leaf_of(node: dict, row: np.ndarray) -> list[float]:
    while "leaf" not in node:
        x = row[node["split"]]
        threshold = np.inf if node["threshold"] is None else np.float32(node["threshold"])
        goes = node["missing"] if np.isnan(x) else node["yes"] if x <= threshold else node["no"]
        node = next(child for child in node["children"] if child["nodeid"] == goes)
    return node["leaf"]


def margins(record: dict, X: np.ndarray) -> np.ndarray:
    """f64[N] (or [N, K]): base score plus the leaves reached, trees up to best_round."""
    encoded = encoded_columns(record, X)
    last = record["n_trees"] if record["best_round"] is None else record["best_round"] + 1
    total = np.tile(np.asarray(record["base_score"]), (X.shape[0], 1))
    for tree in record["trees"][:last]:
        total += [leaf_of(tree, row) for row in encoded]
    return total if record["vector_output"] else total[:, 0]


def through_json(record: dict) -> dict:
    return json.loads(json.dumps(record, allow_nan=False))


@pytest.mark.parametrize("grow_policy", ["oblivious", "depthwise", "lossguide"])
def test_reader_matches_predict_raw_with_missing_values(grow_policy):
    X, y, X_test, _ = datasets.load_lightgbm_binary()
    X, X_test = X[:N_TRAIN].copy(), X_test[:N_TEST].copy()
    X[::7, 3] = np.nan
    X_test[::5, 3] = np.nan
    model = jaxgbt.fit("logistic", X, y[:N_TRAIN], grow_policy=grow_policy, **FIT,
                       **dict(max_leaves=5) if grow_policy == "lossguide" else {})
    record = through_json(model.dump())
    assert record["link"] == "sigmoid" and record["grow_policy"] == grow_policy
    np.testing.assert_allclose(margins(record, X_test), model.predict_raw(X_test),
                               rtol=1e-6, atol=2e-6)


def test_adult_categorical_and_file(tmp_path):
    model, test = small_adult_model()
    model.dump(tmp_path / "adult.json")
    record = json.loads((tmp_path / "adult.json").read_text())
    assert record == through_json(jaxgbt.dump(model))
    assert {c["encoding"] for c in record["categorical"]} == {"one_hot", "target_statistic"}
    assert record["feature_names"] == list(test.columns)
    codes = model.read_rows(test)
    np.testing.assert_allclose(margins(record, codes), model.predict_raw(test),
                               rtol=1e-6, atol=2e-6)
    roots = record["trees"]
    assert all(root["feature_name"] == record["feature_names"][root["feature"]]
               for root in roots)
    one_hot = [root for root in roots if root.get("split_kind") == "one_hot"]
    assert all(isinstance(root["category"], str) for root in one_hot)  # adult's labels


def test_vector_output_cover_and_best_round():
    import dataclasses

    import jax.numpy as jnp

    X, y, X_test, _ = datasets.load_lightgbm_multiclass()
    model = jaxgbt.fit("softmax", X[:N_TRAIN], y[:N_TRAIN], **FIT)
    model = dataclasses.replace(model, best_round=jnp.asarray(3))
    record = through_json(model.dump())
    assert record["n_outputs"] == 5 and len(record["trees"][0]["children"][0]["children"][0]
                                            ["children"][0]["leaf"]) == 5
    np.testing.assert_allclose(margins(record, X_test[:50]), model.predict_raw(X_test[:50]),
                               rtol=1e-6, atol=2e-6)
    root = record["trees"][0]
    leaves = np.asarray(model.cover)[0]
    assert root["cover"] == pytest.approx(float(leaves.sum()), rel=1e-6)


def test_stacked_models_are_refused():
    import jax
    import jax.numpy as jnp

    X, y, _, _ = datasets.load_lightgbm_binary()
    model = jaxgbt.fit("logistic", X[:N_TRAIN], y[:N_TRAIN], **FIT)
    stacked = jax.tree.map(lambda a: jnp.stack([a, a]), model)
    with pytest.raises(ValueError, match=r"model\[i\]\.dump\(\)"):
        stacked.dump()
