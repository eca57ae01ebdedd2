"""Fuzzing ``jaxgbt.load``: any file gives a working Booster or a ModelFormatError.

One small model is fitted and saved once per module. Hypothesis then changes that file
(a) as raw bytes: bits flipped, bytes overwritten, inserted or deleted, the file truncated;
(b) structurally, rewriting the zip with correct CRCs: header.json fields replaced by
arbitrary JSON values or removed, header bytes that are not JSON or not UTF-8, .npy members
replaced (other dtypes and shapes, pickled object arrays, headers that declare huge shapes
over a few bytes of data), members removed, duplicated, added or compressed differently,
and consistent models of other sizes holding any values.

The property: within LOAD_SECONDS, ``load`` either returns a Booster whose ``predict_raw``
on 3 rows is finite, or raises ``ModelFormatError``. Runs are derandomized and keep no
example database, so CI sees the same examples each time and nothing is written to the repo.
"""

import atexit
import hashlib
import io
import json
import os
import re
import shutil
import signal
import tempfile
import time
import warnings
import zipfile
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import pytest
from conftest import N_FEATURES, N_ROWS, SMALL
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.extra import numpy as hnp

import jaxgbt
from jaxgbt.io import ModelFormatError
from jaxgbt.objectives import BUILTIN

# Even without a database, hypothesis caches constants in ./.hypothesis while pytest collects
# (before any fixture runs): point it at a temporary folder, removed at exit.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="jaxgbt-hypothesis-")
    atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)

LOAD_SECONDS = 2.0  # a load slower than this fails the example
HARD_SECONDS = 20.0  # SIGALRM backstop: a hang fails the test instead of stalling CI

FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

T, D, K = SMALL["n_trees"], SMALL["depth"], 1
EXPECTED = {"feature": ((T, D), np.int32), "threshold": ((T, D), np.float32),
            "default_left": ((T, D), np.bool_), "split_gain": ((T, D), np.float32),
            "leaf_value": ((T, 2**D, K), np.float32), "base_score": ((K,), np.float32),
            "cover": ((T, 2**D), np.float32)}
MEMBERS = ["header.json"] + [f"{name}.npy" for name in EXPECTED]
HEADER_KEYS = ["format", "version", "objective", "custom_link", "n_features", "n_trees",
               "depth", "n_outputs", "vector_output", "jaxgbt_version", "arrays", "sha256"]


class Base(NamedTuple):
    data: bytes  # the saved file
    members: list[tuple[str, bytes]]  # its members, in order
    header: dict
    target: object  # the path each example writes and loads

    def __repr__(self):  # keeps hypothesis's failure reports short
        return "base"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=N_ROWS) > 0).astype(np.float32)
    model = jaxgbt.fit("logistic", X, y, **SMALL)
    folder = tmp_path_factory.mktemp("fuzz")
    model.save(folder / "base.jgbt")
    with zipfile.ZipFile(folder / "base.jgbt") as archive:
        members = [(info.filename, archive.read(info)) for info in archive.infolist()]
    assert [name for name, _ in members] == MEMBERS
    return Base((folder / "base.jgbt").read_bytes(), members,
                json.loads(dict(members)["header.json"]), folder / "fuzzed.jgbt")


# ---------------------------------------------------------------------------------------
# The property


class _Hang(BaseException):
    """Raised by the alarm. A BaseException, so that no `except Exception` in load can
    turn a hang into a ModelFormatError."""


@contextmanager
def _time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise _Hang(f"load ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _rows(n_features: int) -> np.ndarray:
    X = np.random.default_rng(1).normal(size=(3, n_features)).astype(np.float32)
    X[0, 0] = np.nan  # one missing value, so default_left is used
    return X


def _check_load(path) -> None:
    """Asserts the property on one file."""
    start = time.perf_counter()
    model, reason = None, None
    with warnings.catch_warnings(record=True) as caught, _time_limit(HARD_SECONDS):
        warnings.simplefilter("always")
        try:
            model = jaxgbt.load(path)
        except ModelFormatError as error:
            reason = str(error)
    elapsed = time.perf_counter() - start
    assert elapsed < LOAD_SECONDS, f"load took {elapsed:.2f} s"
    # The only warning load may give is the documented one about a custom link.
    unexpected = [w for w in caught
                  if not (w.category is UserWarning and "custom link" in str(w.message))]
    assert not unexpected, [f"{w.category.__name__}: {w.message}" for w in unexpected]
    if model is None:
        assert "is not a valid jaxgbt model" in reason
        # The check that failed, without numbers, for --hypothesis-show-statistics.
        event("rejected: " + re.split(r"[-\d'(\[{<]", reason.split(" model: ", 1)[1])[0][:40])
        return
    event("loaded")
    raw = np.asarray(model.predict_raw(_rows(model.n_features)))
    assert raw.shape == ((3, model.n_outputs) if model.vector_output else (3,))
    assert np.isfinite(raw).all(), f"{model!r} loaded but predict_raw gives {raw}"


def _write_zip(path, members, methods=None) -> None:
    """Writes (name, bytes) members as a zip; names may repeat."""
    methods = methods or {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in members:
                archive.writestr(name, data,
                                 compress_type=methods.get(name, zipfile.ZIP_DEFLATED))


def _npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # Non-ASCII field names of a drawn structured dtype need .npy format 3.0.
        warnings.filterwarnings("ignore", "Stored array in format", UserWarning)
        np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def _with_checksums(members: dict[str, bytes]) -> dict[str, bytes]:
    """The members with header.json's sha256 field recomputed for the others, so that the
    checks after the checksum's are reached (a crafted file can always do this)."""
    header = json.loads(members["header.json"])
    header["sha256"] = {name: hashlib.sha256(data).hexdigest()
                        for name, data in members.items() if name != "header.json"}
    return members | {"header.json": json.dumps(header).encode()}


def test_harness_rewrites_a_loadable_copy(base):
    """Guards the fuzzing below: an unchanged rewrite must load, or every example is moot."""
    path = base.target
    _write_zip(path, base.members)
    X = _rows(N_FEATURES)
    original = base.target.with_name("base.jgbt")
    np.testing.assert_array_equal(jaxgbt.load(path).predict_raw(X),
                                  jaxgbt.load(original).predict_raw(X))


def test_load_never_unpickles(base, tmp_path):
    """An object member whose pickle would run code is rejected without running it."""
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (marker.mkdir, ())

    evil = np.empty(EXPECTED["base_score"][0], dtype=object)
    evil[0] = Payload()
    members = _with_checksums(dict(base.members)
                              | {"base_score.npy": _npy(evil, allow_pickle=True)})
    _write_zip(base.target, members.items())
    with pytest.raises(ModelFormatError, match="base_score.npy could not be read"):
        jaxgbt.load(base.target)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------
# (a) Raw byte edits of the whole file

# Offsets are taken modulo the current length; negative ones count from the end, where the
# zip's central directory lies (the saved file is about 2.4 kB).
_OFFSET = st.integers(-1000, 2400)
BYTE_EDIT = st.one_of(
    st.tuples(st.just("flip"), _OFFSET, st.integers(0, 7)),
    st.tuples(st.just("overwrite"), _OFFSET, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("insert"), _OFFSET, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), _OFFSET, st.integers(1, 64)),
    st.tuples(st.just("truncate"), _OFFSET, st.none()),
)
BYTE_EDITS = st.lists(BYTE_EDIT, min_size=1, max_size=4)


def _apply_byte_edits(data: bytes, edits) -> bytes:
    data = bytearray(data)
    for kind, offset, argument in edits:
        at = offset % len(data) if data else 0
        if kind == "flip":
            if data:
                data[at] ^= 1 << argument
        elif kind == "overwrite":
            data[at:at + len(argument)] = argument
        elif kind == "insert":
            data[at:at] = argument
        elif kind == "delete":
            del data[at:at + argument]
        else:
            del data[at:]
    return bytes(data)


@pytest.mark.parametrize("compression", ["deflated", "stored"])
@settings(FUZZ, max_examples=90)
@given(edits=BYTE_EDITS)
@example(edits=[("truncate", 0, None)])
@example(edits=[("flip", 40, 0)])  # the member name in header.json's local header
@example(edits=[("overwrite", 8, b"\x63\x00")])  # header.json's compression method: 99
@example(edits=[("flip", 6, 0)])  # header.json's "encrypted" flag
def test_load_survives_byte_edits(base, compression, edits):
    data = base.data
    if compression == "stored":  # edits then land on the JSON and .npy bytes themselves
        buffer = io.BytesIO()
        _write_zip(buffer, base.members, {name: zipfile.ZIP_STORED for name in MEMBERS})
        data = buffer.getvalue()
    base.target.write_bytes(_apply_byte_edits(data, edits))
    _check_load(base.target)


# ---------------------------------------------------------------------------------------
# (b) Structured edits: the zip is rewritten with correct CRCs


class _Delete:
    def __repr__(self):
        return "DELETE"


DELETE = _Delete()
_NEAR_VALID = st.sampled_from(
    [-1, 0, 1, 2, 3, 4, 8, 12, 13, 16, 2**31, 10**5 + 1, 10**6, 10**6 + 1, 10**7, 10**7 + 1,
     2**63, -(2**63), 3.0, 1e308, True, False, None, "", "3", "logistic", "squared_error",
     "custom:f", "quantile@0.9", "quantile@nan", "tweedie@1e400", "aft_logistic@1.5",
     "aft_bogus@1", "huber@1@2", "focal@", "jaxgbt.model", [], {}])
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(),
                        st.integers(-(2**80), 2**80), st.floats(), st.text(max_size=16),
                        _NEAR_VALID)
JSON_VALUE = st.recursive(
    JSON_SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=8)
HEADER_CHANGE = st.one_of(
    st.tuples(st.just("edit"),
              st.dictionaries(st.sampled_from(HEADER_KEYS) | st.text(max_size=8),
                              st.just(DELETE) | JSON_VALUE, min_size=1, max_size=4)),
    st.tuples(st.just("replace"), JSON_VALUE),
)


@settings(FUZZ, max_examples=100)
@given(change=HEADER_CHANGE)
@example(change=("edit", {"n_trees": 10**9}))
@example(change=("edit", {"depth": True}))
@example(change=("edit", {"objective": "squared_error", "vector_output": True}))
@example(change=("edit", {"custom_link": "no"}))
@example(change=("edit", {"n_features": 10**7}))
@example(change=("replace", []))
def test_load_survives_header_values(base, change):
    kind, value = change
    if kind == "edit":
        header = dict(base.header)
        for key, new in value.items():
            if new is DELETE:
                header.pop(key, None)
            else:
                header[key] = new
    else:
        header = value
    members = dict(base.members) | {"header.json": json.dumps(header).encode()}
    _write_zip(base.target, members.items())
    _check_load(base.target)


HEADER_BYTES = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=64)),
    st.tuples(st.just("edit saved header"), BYTE_EDITS),  # mostly broken JSON or UTF-8
    st.tuples(st.just("utf-16"), JSON_VALUE),
    st.tuples(st.just("latin-1 objective"), st.text(min_size=1, max_size=8)),
    st.tuples(st.just("nested lists"), st.integers(1, 200_000)),
    st.tuples(st.just("nested objects"), st.integers(1, 100_000)),
    st.tuples(st.just("long integer"), st.integers(4000, 500_000)),
    st.tuples(st.just("padded past 1 MiB"), st.integers(0, 16)),
)


def _header_bytes(saved: bytes, kind: str, argument) -> bytes:
    if kind == "bytes":
        return argument
    if kind == "edit saved header":
        return _apply_byte_edits(saved, argument)
    if kind == "utf-16":
        return json.dumps(argument).encode("utf-16")
    if kind == "latin-1 objective":
        header = json.loads(saved) | {"objective": "é" + argument}
        return json.dumps(header, ensure_ascii=False).encode("latin-1", errors="replace")
    if kind == "nested lists":
        return b"[" * argument + b"]" * argument
    if kind == "nested objects":
        return b'{"a":' * argument + b"1" + b"}" * argument
    if kind == "long integer":
        return b"1" * argument
    return saved + b" " * ((1 << 20) - len(saved) + argument)


@settings(FUZZ, max_examples=40)
@given(change=HEADER_BYTES)
@example(change=("nested lists", 100_000))
@example(change=("nested objects", 2_000))
@example(change=("bytes", b"\xff\xfe{}"))
def test_load_survives_header_bytes(base, change):
    header = _header_bytes(dict(base.members)["header.json"], *change)
    members = dict(base.members) | {"header.json": header}
    _write_zip(base.target, members.items())
    _check_load(base.target)


DTYPES = st.one_of(
    st.sampled_from([np.dtype(name) for name in ["float32", ">f4", "int32", ">i4", "bool",
                                                 "float64", "int64", "uint32", "float16"]]),
    hnp.scalar_dtypes(), hnp.array_dtypes(max_size=2), hnp.byte_string_dtypes(max_len=4),
    hnp.unicode_string_dtypes(max_len=4))
HUGE_DIMENSION = st.one_of(
    st.sampled_from([0, 1, 3, 8, -1, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1]),
    st.integers(-(2**63), 2**63 - 1))
HUGE_SHAPE = st.lists(HUGE_DIMENSION, max_size=4).map(tuple)
OBJECT_VALUES = st.lists(st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=4)),
                         min_size=1, max_size=6)


def _npy_header_only(descr: str, shape: tuple, fortran_order: bool, data: bytes) -> bytes:
    """A .npy preamble declaring any shape, followed by a few bytes of data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": fortran_order, "shape": shape})
    return buffer.getvalue() + data


def _object_array(values, shape) -> np.ndarray:
    array = np.empty(shape, dtype=object)
    array.flat[:] = (values * array.size)[:array.size]
    return array


def _npy_payload(name: str):
    """Replacement bytes for member ``name``.npy."""
    shape, dtype = EXPECTED[name]
    shapes = st.just(shape) | hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6)
    finite = st.floats(width=32, allow_nan=False, allow_infinity=False)
    return st.one_of(
        # another dtype, another shape, or both
        st.tuples(DTYPES, shapes).flatmap(lambda ds: hnp.arrays(*ds)).map(_npy),
        st.tuples(st.just(dtype), shapes).flatmap(lambda ds: hnp.arrays(*ds)).map(_npy),
        # the right dtype and shape with any values: NaN, inf, extremes, bad indices
        hnp.arrays(dtype, shape).map(_npy),
        hnp.arrays(dtype, shape, elements=finite if dtype == np.float32 else None).map(_npy),
        # object arrays, pickled
        st.tuples(OBJECT_VALUES, shapes).map(lambda vs: _npy(_object_array(*vs), True)),
        # a preamble declaring a huge (or negative) shape over a few bytes
        st.builds(_npy_header_only,
                  st.sampled_from(["<f4", ">f4", "<i4", "|b1", "<f8", "|O", "|V0", "<U1"]),
                  HUGE_SHAPE, st.booleans(), st.binary(max_size=64)),
        # a valid array, then its bytes edited or truncated
        st.tuples(hnp.arrays(dtype, shape), BYTE_EDITS).map(
            lambda ae: _apply_byte_edits(_npy(ae[0]), ae[1])),
        st.binary(max_size=256),
    )


NPY_CHANGE = st.sampled_from(sorted(EXPECTED)).flatmap(
    lambda name: st.tuples(st.just(f"{name}.npy"), _npy_payload(name)))


@settings(FUZZ, max_examples=100)
@given(changes=st.lists(NPY_CHANGE, min_size=1, max_size=3), recompute=st.booleans())
@example(changes=[("leaf_value.npy", _npy_header_only("<f4", (2**31,), False, b"\0" * 16))],
         recompute=True)
@example(changes=[("feature.npy", _npy_header_only("<i4", (2**40, 2**40), False, b""))],
         recompute=True)
@example(changes=[("leaf_value.npy", _npy(np.full((T, 2**D, K), 3e38, np.float32)))],
         recompute=True)
def test_load_survives_npy_replacements(base, changes, recompute):
    """``recompute``: the header's checksums are updated to the new members (else the
    checksum check refuses every changed member before it is parsed)."""
    members = dict(base.members) | dict(changes)
    if recompute:
        members = _with_checksums(members)
    _write_zip(base.target, members.items())
    _check_load(base.target)


_METHODS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]
EXTRA_NAME = st.one_of(
    st.sampled_from(["../header.json", "/header.json", "header.json/", "HEADER.JSON",
                     "feature.NPY", "feature.npy.bak", "dir/", "a\\b.npy", "ß.npy",
                     "header.json\x00.npy"]),
    st.text(min_size=1, max_size=12))
MEMBER_CHANGE = st.fixed_dictionaries({
    "drop": st.sets(st.sampled_from(MEMBERS), max_size=3),
    # (member, what the copy holds, whether the copy comes first)
    "duplicate": st.lists(st.tuples(st.sampled_from(MEMBERS),
                                    st.sampled_from(["same", "empty", "other member"]),
                                    st.booleans()), max_size=3),
    "extra": st.lists(st.tuples(EXTRA_NAME, st.binary(max_size=64)), max_size=3),
    "methods": st.dictionaries(st.sampled_from(MEMBERS), st.sampled_from(_METHODS)),
    "order": st.sampled_from(["as saved", "reversed", "header last"]),
})


@settings(FUZZ, max_examples=60)
@given(change=MEMBER_CHANGE)
@example(change={"drop": set(), "duplicate": [("header.json", "empty", False)], "extra": [],
                 "methods": {}, "order": "as saved"})
@example(change={"drop": set(), "duplicate": [], "extra": [],
                 "methods": dict.fromkeys(MEMBERS, zipfile.ZIP_LZMA), "order": "reversed"})
def test_load_survives_member_changes(base, change):
    members = [(name, data) for name, data in base.members if name not in change["drop"]]
    saved = dict(base.members)
    for name, content, first in change["duplicate"]:
        data = {"same": saved[name], "empty": b"",
                "other member": saved[MEMBERS[MEMBERS.index(name) - 1]]}[content]
        members.insert(0 if first else len(members), (name, data))
    members += change["extra"]
    if change["order"] == "reversed":
        members.reverse()
    elif change["order"] == "header last":
        members.sort(key=lambda member: member[0] == "header.json")
    _write_zip(base.target, members, change["methods"])
    _check_load(base.target)


# Names of parametrised objectives ('quantile@0.9'), with any parameter text.
PARAMETRISED_NAME = st.builds(
    "{}@{}".format,
    st.sampled_from(["quantile", "tweedie", "huber", "pseudo_huber", "focal", "aft",
                     "aft_normal", "aft_logistic", "aft_other", "other"]),
    st.one_of(st.floats().map(str), st.text(max_size=6)))
# Shapes (T, D, K, F) of consistent models; few, so that predict compiles a few times only.
MODEL_SHAPES = [(T, D, K, N_FEATURES), (0, 1, 1, 1), (1, 1, 1, 1), (3, 12, 1, 2), (2, 2, 3, 5)]


@st.composite
def consistent_models(draw):
    """A header and arrays that agree on T, D, K and F, holding any values."""
    n_trees, depth, n_outputs, n_features = draw(st.sampled_from(MODEL_SHAPES))
    floats = st.floats(width=32, allow_nan=False, allow_infinity=False)
    floats = draw(st.sampled_from([floats, st.floats(width=32)]))
    features = draw(st.sampled_from([st.integers(0, n_features - 1), st.integers(-1, n_features),
                                     st.integers(-(2**31), 2**31 - 1)]))
    per_level = (n_trees, depth)
    arrays = {
        "feature": draw(hnp.arrays(np.int32, per_level, elements=features)),
        "threshold": draw(hnp.arrays(np.float32, per_level, elements=floats)),
        "default_left": draw(hnp.arrays(np.bool_, per_level)),
        "split_gain": draw(hnp.arrays(np.float32, per_level, elements=floats)),
        "leaf_value": draw(hnp.arrays(np.float32, (n_trees, 2**depth, n_outputs),
                                      elements=floats)),
        "base_score": draw(hnp.arrays(np.float32, (n_outputs,), elements=floats)),
    }
    header = {
        "format": "jaxgbt.model", "version": 1,
        "objective": draw(st.sampled_from(sorted(BUILTIN)) | st.text(max_size=8)
                          | PARAMETRISED_NAME),
        "custom_link": draw(st.booleans()), "n_features": n_features, "n_trees": n_trees,
        "depth": depth, "n_outputs": n_outputs,
        "vector_output": n_outputs > 1 or draw(st.booleans()), "jaxgbt_version": "0",
        "arrays": {name: {"dtype": str(a.dtype), "shape": list(a.shape)}
                   for name, a in arrays.items()},
    }
    return header, arrays


@settings(FUZZ, max_examples=80)
@given(model=consistent_models())
@example(model=({"format": "jaxgbt.model", "version": 1, "objective": "logistic",
                 "custom_link": False, "n_features": 1, "n_trees": 0, "depth": 1,
                 "n_outputs": 1, "vector_output": False, "jaxgbt_version": "0", "arrays": {}},
                {"feature": np.zeros((0, 1), np.int32), "threshold": np.zeros((0, 1), np.float32),
                 "default_left": np.zeros((0, 1), np.bool_),
                 "split_gain": np.zeros((0, 1), np.float32),
                 "leaf_value": np.zeros((0, 2, 1), np.float32),
                 "base_score": np.zeros(1, np.float32)}))
def test_load_survives_consistent_models_of_any_values(base, model):
    header, arrays = model
    members = [("header.json", json.dumps(header).encode())]
    members += [(f"{name}.npy", _npy(array)) for name, array in arrays.items()]
    _write_zip(base.target, members)
    _check_load(base.target)
