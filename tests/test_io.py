import hashlib
import io
import json
import os
import pickle
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL

import jaxgbt
from jaxgbt.io import ModelFormatError


@pytest.fixture(scope="module")
def model_and_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(size=256) > 0).astype(np.float32)
    return jaxgbt.fit("logistic", X, y, **SMALL), X


def _rewrite(path, target, edit_header=None, edit_arrays=None, update_checksums=True):
    """Copies a saved model to target, changing its header or arrays (and, unless
    ``update_checksums`` is false, the edited arrays' SHA-256 in the header, so that the
    checks after the checksum's are reached)."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(members["header.json"])
    if edit_header:
        edit_header(header)
    if edit_arrays:
        for name, array in edit_arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            members[f"{name}.npy"] = buffer.getvalue()
            if update_checksums:
                header["sha256"][f"{name}.npy"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    members["header.json"] = json.dumps(header).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_round_trip_gives_identical_predictions(model_and_data, tmp_path):
    model, X = model_and_data
    path = tmp_path / "model.jgbt"
    model.save(path)
    loaded = jaxgbt.load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.predict_raw(X), model.predict_raw(X))
    assert loaded.objective is jaxgbt.objectives.logistic
    assert [p.name for p in tmp_path.iterdir()] == ["model.jgbt"]  # no temporary left


def test_custom_loss_model_round_trip_and_link(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(256, 4)).astype(np.float32)
    y = X[:, 0] > 0

    def my_loss(y, f):
        return jnp.logaddexp(0.0, f) - y * f

    model = jaxgbt.fit(my_loss, X, y, link=jax.nn.sigmoid, **SMALL)
    model.save(tmp_path / "m.jgbt")
    with pytest.warns(UserWarning, match="custom link"):
        raw_only = jaxgbt.load(tmp_path / "m.jgbt")
    np.testing.assert_array_equal(raw_only.predict(X), model.predict_raw(X))
    with_link = jaxgbt.load(tmp_path / "m.jgbt", link=jax.nn.sigmoid)
    np.testing.assert_array_equal(with_link.predict(X), model.predict(X))


def test_save_replaces_an_existing_file_atomically(model_and_data, tmp_path):
    model, X = model_and_data
    path = tmp_path / "model.jgbt"
    path.write_bytes(b"old")
    model.save(path)
    np.testing.assert_array_equal(jaxgbt.load(path).predict(X), model.predict(X))


BAD_FILES = {
    "not a zip": lambda src, dst: dst.write_bytes(b"hello"),
    "truncated": lambda src, dst: dst.write_bytes(src.read_bytes()[:200]),
    "wrong version": lambda src, dst: _rewrite(src, dst, lambda h: h.update(version=99)),
    "wrong format": lambda src, dst: _rewrite(src, dst, lambda h: h.update(format="other")),
    "huge tree count": lambda src, dst: _rewrite(src, dst, lambda h: h.update(n_trees=10**9)),
    "depth out of range": lambda src, dst: _rewrite(src, dst, lambda h: h.update(depth=40)),
    "shape mismatch": lambda src, dst: _rewrite(src, dst, lambda h: h.update(n_trees=3)),
    "feature out of range": lambda src, dst: _rewrite(
        src, dst, edit_arrays={"feature": np.full((8, 3), 99, np.int32)}),
    "nan threshold": lambda src, dst: _rewrite(
        src, dst, edit_arrays={"threshold": np.full((8, 3), np.nan, np.float32)}),
    "wrong dtype": lambda src, dst: _rewrite(
        src, dst, edit_arrays={"leaf_value": np.zeros((8, 8, 1), np.float64)}),
    "object array": lambda src, dst: _rewrite(
        src, dst, edit_arrays={"base_score": np.array([object()], dtype=object)}),
    "checksum not a digest": lambda src, dst: _rewrite(
        src, dst, lambda h: h["sha256"].update({"feature.npy": "0" * 63})),
    "checksums missing": lambda src, dst: _rewrite(src, dst, lambda h: h.pop("sha256")),
    "one class label": lambda src, dst: _rewrite(src, dst, lambda h: h.update(classes=["a"])),
    "repeated class labels": lambda src, dst: _rewrite(
        src, dst, lambda h: h.update(classes=["a", "a"])),
    "a class label not a scalar": lambda src, dst: _rewrite(
        src, dst, lambda h: h.update(classes=["a", {"b": 1}])),
    "class labels not a list": lambda src, dst: _rewrite(
        src, dst, lambda h: h.update(classes="ab")),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_load_rejects_bad_files(model_and_data, tmp_path, case):
    model, _ = model_and_data
    good = tmp_path / "good.jgbt"
    model.save(good)
    bad = tmp_path / "bad.jgbt"
    BAD_FILES[case](good, bad)
    with pytest.raises(ModelFormatError, match="not a valid jaxgbt model"):
        jaxgbt.load(bad)


def test_class_labels_round_trip_and_are_checked(model_and_data, tmp_path):
    model, X = model_and_data
    labelled = model.with_classes(np.array(["no", "yes"]))
    assert labelled.classes == ("no", "yes") and type(labelled.classes[0]) is str
    labelled.save(tmp_path / "m.jgbt")
    loaded = jaxgbt.load(tmp_path / "m.jgbt")
    assert loaded.classes == ("no", "yes")
    assert loaded.dump()["classes"] == ["no", "yes"]
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert jaxgbt.load(_saved(model, tmp_path / "plain.jgbt")).classes is None
    for bad, match in (([0, 1, 2], "3 labels but the model has 1 output, which is 2 classes"),
                       ([1.0, np.nan], "a label must be a string, a finite number"),
                       (["a", "a"], "repeated labels")):
        with pytest.raises(ValueError, match=match):
            model.with_classes(bad)


def _saved(model, path):
    model.save(path)
    return path


def test_load_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        jaxgbt.load(tmp_path / "absent.jgbt")


def test_save_refuses_a_stack_of_models(model_and_data, tmp_path):
    model, _ = model_and_data
    stacked = jax.tree.map(lambda a: jnp.stack([a, a]), model)
    with pytest.raises(ValueError, match="stack of models"):
        stacked.save(tmp_path / "s.jgbt")
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("loss", ["logistic", "quantile@0.9"])
def test_pickle_round_trip(loss):
    # Built-in objectives hold jitted links and closures; the Booster pickles them by name.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    model = jaxgbt.fit(loss, X, y, n_trees=4, depth=2, n_bins=16, eval_set=[(X, y)])
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded.objective is model.objective
    assert loaded.history.keys() == model.history.keys()
    np.testing.assert_array_equal(np.asarray(loaded.predict(X)), np.asarray(model.predict(X)))



def test_an_array_edited_without_its_checksum_is_refused(model_and_data, tmp_path):
    model, _ = model_and_data
    model.save(tmp_path / "good.jgbt")
    leaves = np.asarray(model.leaf_value).copy()
    leaves[0, 0, 0] += 1.0  # a valid model, but not the one saved
    _rewrite(tmp_path / "good.jgbt", tmp_path / "edited.jgbt",
             edit_arrays={"leaf_value": leaves}, update_checksums=False)
    with pytest.raises(ModelFormatError, match=r"edited\.jgbt .*leaf_value\.npy does not "
                                               r"match its SHA-256"):
        jaxgbt.load(tmp_path / "edited.jgbt")
    # The same edit with the checksum recomputed loads: a checksum is not a signature.
    _rewrite(tmp_path / "good.jgbt", tmp_path / "resigned.jgbt",
             edit_arrays={"leaf_value": leaves})
    np.testing.assert_array_equal(jaxgbt.load(tmp_path / "resigned.jgbt").leaf_value, leaves)


def test_version_2_files_without_checksums_still_load(model_and_data, tmp_path):
    model, X = model_and_data
    model.save(tmp_path / "new.jgbt")
    # A version 2 file is a version 3 file without the header's sha256 field.
    _rewrite(tmp_path / "new.jgbt", tmp_path / "old.jgbt",
             lambda header: (header.pop("sha256"), header.update(version=2)))
    old = jaxgbt.load(tmp_path / "old.jgbt")
    np.testing.assert_array_equal(old.predict_raw(X), model.predict_raw(X))
