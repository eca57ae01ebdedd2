"""The jaxgbt command line: train -> predict -> cv in subprocesses on a small CSV and
Parquet file, bad input as one line and exit status 2, and the file readers.

Each subprocess pays for importing JAX and compiling, so there are three; the rest
runs in this process (typer's CliRunner for the error cases, which fail before any
fit).
"""

import csv
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from conftest import python_path
from typer.testing import CliRunner

import jaxgbt
from jaxgbt.cli import app, tables
from jaxgbt.cli.app import UsageProblem, collect_settings, with_column_indices

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--n-trees", "5", "--depth", "2"]


def _write_csv(path: Path, header, rows) -> Path:
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """data.csv and the same rows as data.parquet: two numbers (one with gaps), a text
    column, an id, a weight, a regression label and a 3-class label."""
    folder = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(5)
    n = 120
    x = rng.normal(size=(n, 2)).round(3)
    city = rng.choice(["oslo", "rome", "lima", ""], size=n)
    price = (x[:, 0] + (city == "rome") + 0.1 * rng.normal(size=n)).round(3)
    rows = [[x[i, 0], "" if i % 7 == 0 else x[i, 1], city[i], f"r{i}", 1 + i % 2, price[i],
             int(price[i] > 0) + int(price[i] > 1)] for i in range(n)]
    header = ["x0", "x1", "city", "id", "w", "price", "label"]
    path = _write_csv(folder / "data.csv", header, rows)
    pa_csv = pytest.importorskip("pyarrow.csv")
    import pyarrow.parquet as pq

    pq.write_table(pa_csv.read_csv(path), folder / "data.parquet")
    return folder


def _jaxgbt(*args, cwd: Path, script: bool = False) -> subprocess.CompletedProcess:
    """Runs the command line in a new process: the installed console script when asked
    and present, else ``python -m jaxgbt``; this checkout's package either way."""
    installed = Path(sys.executable).with_name("jaxgbt")
    command = ([str(installed)] if script and installed.exists()
               else [sys.executable, "-m", "jaxgbt"])
    env = dict(os.environ, PYTHONPATH=python_path())
    return subprocess.run(command + [str(a) for a in args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def trained(files):
    """``jaxgbt train`` on the CSV with a config file, --set, a weight, a dropped id
    and a held-out fraction."""
    (files / "run.toml").write_text('loss = "squared_error"\nl2 = 5.0\ndepth = 3\n')
    run = _jaxgbt("train", "data.csv", "--target", "price", "--config", "run.toml",
                  "--drop", "id,label", "--weight", "w", "--eval-fraction", "0.25",
                  "--set", "l2=2", *TINY, "--out", "model.jgbt", cwd=files, script=True)
    assert run.returncode == 0, run.stderr
    return run


def test_train_saves_a_model_with_feature_names(files, trained):
    model = jaxgbt.load(files / "model.jgbt")
    assert model.feature_names == ("x0", "x1", "city")
    assert (model.n_trees, model.depth) == (5, 2)  # --depth wins over the config's 3
    assert "valid:rmse" in model.history  # the held-out quarter, scored every round
    # not a terminal: plain progress lines, then what was saved
    assert "jaxgbt: 5/5 trees, valid:rmse=" in trained.stderr
    assert "jaxgbt: saved model.jgbt: 5 trees of depth 2, 3 features" in trained.stderr


def test_predict_reads_parquet_by_column_name(files, trained):
    run = _jaxgbt("predict", "model.jgbt", "data.parquet", "--out", "pred.csv", cwd=files)
    assert run.returncode == 0, run.stderr
    written = np.loadtxt(files / "pred.csv", delimiter=",", skiprows=1)
    assert (files / "pred.csv").read_text().startswith("prediction\n")
    table = tables.read_table(files / "data.csv")
    X = np.column_stack([table[name].astype(object) for name in ("x0", "x1", "city")])
    expected = np.asarray(jaxgbt.load(files / "model.jgbt").predict(X))
    np.testing.assert_array_equal(written.astype(np.float32), expected)


def test_cv_prints_the_table(files):
    run = _jaxgbt("cv", "data.parquet", "--target", "label", "--loss", "softmax", "--folds",
                  "3", "--drop", "id,price", "--set", "one_hot_max_size=4", *TINY, cwd=files)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "3-fold cross-validation of softmax (valid:multi_logloss picks the best)"
    assert lines[1].split("|")[1:4] == [" trees ", " valid:multi_logloss mean ",
                                        " valid:multi_logloss std "]
    assert [int(line.split("|")[1]) for line in lines[3:-1]] == [1, 2, 3, 4, 5]
    assert lines[-1].startswith("best: ")


def test_softmax_writes_one_probability_column_per_class(files):
    runner = CliRunner()
    result = runner.invoke(app, ["train", str(files / "data.csv"), "-t", "label", "-l",
                                 "softmax", "--drop", "id,price", *TINY, "-q", "-o",
                                 str(files / "softmax.jgbt")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["predict", str(files / "softmax.jgbt"),
                                 str(files / "data.csv")])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header == "class_0,class_1,class_2"
    probabilities = np.array([row.split(",") for row in rows], np.float64)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    # --keep copies columns of the file before the predictions: text as it is, numbers
    # by value (whole ones without a decimal point), missing ones empty.
    result = runner.invoke(app, ["predict", str(files / "softmax.jgbt"),
                                 str(files / "data.csv"), "--keep", "id,x1", "--keep", "w"])
    assert result.exit_code == 0, result.output
    written = list(csv.reader(result.stdout.splitlines()))
    with open(files / "data.csv", newline="") as stream:
        source = list(csv.reader(stream))
    assert written[0] == ["id", "x1", "w", "class_0", "class_1", "class_2"]
    assert [row[0] for row in written[1:]] == [row[3] for row in source[1:]]

    def numbers(texts):
        return [float(text) if text else None for text in texts]

    for got, column in ((1, 1), (2, 4)):
        assert (numbers(row[got] for row in written[1:])
                == numbers(row[column] for row in source[1:]))
    assert {row[2] for row in written[1:]} == {"1", "2"}
    assert [",".join(row[3:]) for row in written[1:]] == rows and len(rows) == 120
    result = runner.invoke(app, ["predict", str(files / "softmax.jgbt"),
                                 str(files / "data.csv"), "--keep", "nope"])
    assert result.exit_code == 2 and "--keep nope: " in result.output


def test_text_labels_train_a_classifier_whose_predictions_name_them(files):
    # Two of the city labels (rome adds 1 to the price): the loss is logistic unless
    # given, the file keeps the labels, and predict writes the likeliest label and each
    # class's probability.
    table = tables.read_table(files / "data.csv")
    keep = np.isin(table["city"], ["oslo", "rome"])
    _write_csv(files / "two.csv", ["x0", "price", "city"],
               zip(table["x0"][keep], table["price"][keep], table["city"][keep], strict=True))
    runner = CliRunner()
    result = runner.invoke(app, ["train", str(files / "two.csv"), "-t", "city", *TINY,
                                 "-o", str(files / "city.jgbt")])
    assert result.exit_code == 0, result.output
    assert "2 classes ('oslo', 'rome')" in result.output
    model = jaxgbt.load(files / "city.jgbt")
    assert model.objective.name == "logistic" and model.classes == ("oslo", "rome")
    result = runner.invoke(app, ["predict", str(files / "city.jgbt"), str(files / "two.csv")])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header == "label,class_oslo,class_rome"
    labels = np.array([row.split(",")[0] for row in rows])
    proba = np.array([row.split(",")[1:] for row in rows], np.float64)
    expected = np.asarray(model.predict(np.column_stack([table["x0"][keep],
                                                         table["price"][keep]])))
    np.testing.assert_array_equal(proba[:, 1].astype(np.float32), expected)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(labels, np.where(expected > 0.5, "rome", "oslo"))
    assert (labels == table["city"][keep]).mean() > 0.75


@pytest.mark.parametrize(("args", "message"), [
    (["train", "data.csv", "-t", "nope", "-l", "logistic"],
     "data.csv has no column 'nope' (the target); its columns are ['x0', 'x1', 'city'"),
    (["train", "missing.csv", "-t", "price", "-l", "squared_error"], "missing.csv: no such file"),
    (["train", "data.csv", "-t", "price", "-l", "squared_error", "--set", "n_tree=3"],
     "unknown setting(s) ['n_tree'] (n_tree: did you mean n_trees?)"),
    (["train", "data.csv", "-t", "price", "-l", "squared_error", "--set", "max_depth=3"],
     "unknown setting(s) ['max_depth'] (max_depth: jaxgbt calls it depth)"),
    (["train", "data.csv", "-t", "price"], "no loss: give --loss NAME"),
    (["train", "data.csv", "-t", "city", "-l", "logistic"],
     "the target column 'city' has 32 empty cells"),
    (["train", "data.csv", "-t", "id", "-l", "squared_error"],
     "the target column holds the text labels ['r0', 'r1', 'r10', 'r100', 'r101'], but loss "
     "'squared_error' is not a classification loss"),
    (["train", "data.csv", "-t", "id", "-l", "logistic"],
     "the target column holds 120 classes ['r0', 'r1', 'r10', 'r100', 'r101'], but loss "
     "'logistic' takes 2; give --loss softmax"),
    (["train", "data.csv", "-t", "price", "-l", "squared_error", "--config", "none.toml"],
     "config file none.toml not found"),
    (["predict", "nothing.jgbt", "data.csv"], "nothing.jgbt: no such model file"),
    (["train", "data.txt", "-t", "price", "-l", "squared_error"], "unknown file type .txt"),
    (["train", "data.csv", "--bogus", "3"], "No such option: --bogus"),
])
def test_bad_input_is_one_message_and_exit_status_2(files, args, message, monkeypatch):
    monkeypatch.chdir(files)
    (files / "data.txt").write_text("x\n1\n")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())
    assert isinstance(result.exception, SystemExit)  # an exit, not an exception raised
    assert "Traceback" not in result.output


def test_version_and_the_console_script_entry():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"jaxgbt {jaxgbt.__version__}\n"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["jaxgbt"].partition(":")
    assert callable(getattr(__import__(module, fromlist=[name]), name))


# Settings and files, in this process -------------------------------------------------------


def test_settings_are_config_then_options_then_set(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('target = "y"\nloss = "logistic"\nn_trees = 50\ndepth = 4\nl2 = 1.0\n')
    settings = collect_settings(config, ["l2=3", "eval_metric=['auc']"],
                                dict(n_trees=9, depth=None), {"target", "loss", "n_trees",
                                                              "depth", "l2", "eval_metric"})
    assert settings == dict(target="y", loss="logistic", n_trees=9, depth=4, l2=3,
                            eval_metric=["auc"])


def test_constraints_may_name_columns():
    names = ("size", "age", "city")
    kwargs = with_column_indices({"monotone_constraints": {"size": 1, "2": -1},
                                   "interaction_constraints": [["size", "age"], [2]]}, names)
    assert kwargs == {"monotone_constraints": {0: 1, 2: -1},
                      "interaction_constraints": [[0, 1], [2]]}
    with pytest.raises(UsageProblem, match="names the column 'height', which is not a feature"):
        with_column_indices({"monotone_constraints": {"height": 1}}, names)


TRICKY_CSV = """num,gaps,word,flag,day,code
1,1.5,a,true,2024-01-01,7
2,,NA,False,2024-01-02,8
3,NaN,c,TRUE,,9
4,-2e3,,false,2024-01-04,
"""


def test_parquet_text_reads_missing_markers_as_the_csv_does(files):
    # data.parquet was written from data.csv, whose empty cities stay "" in it.
    from_csv, from_parquet = (tables.read_table(files / name)["city"]
                              for name in ("data.csv", "data.parquet"))
    assert any(value is None for value in from_csv)
    assert list(from_parquet) == list(from_csv)


def test_the_two_csv_readers_agree(tmp_path):
    path = tmp_path / "tricky.csv"
    path.write_text(TRICKY_CSV)
    python = tables.read_table(path, use_pyarrow=False)
    assert list(python) == ["num", "gaps", "word", "flag", "day", "code"]
    np.testing.assert_array_equal(python["gaps"], [1.5, np.nan, np.nan, -2000.0])
    np.testing.assert_array_equal(python["flag"], [1.0, 0.0, 1.0, 0.0])
    assert python["word"].tolist() == ["a", None, "c", None]
    assert python["day"].tolist() == ["2024-01-01", "2024-01-02", None, "2024-01-04"]
    if not tables.has_pyarrow():
        return
    arrow = tables.read_table(path, use_pyarrow=True)
    assert list(arrow) == list(python)
    for name in python:
        assert arrow[name].dtype == python[name].dtype, name
        if arrow[name].dtype == object:
            assert arrow[name].tolist() == python[name].tolist(), name
        else:
            np.testing.assert_array_equal(arrow[name], python[name], err_msg=name)


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setattr(tables, "has_pyarrow", lambda: False)
    with pytest.raises(tables.TableError, match=r"pip install 'jaxgbt\[cli\]'"):
        tables.read_table(path)


@pytest.mark.parametrize(("text", "message"), [
    ("a,a\n1,2\n", "repeats the column names ['a']"),
    ("a,b\n", "has no rows of data"),
    ("a,b\n1,2,3\n", "could not be read as CSV"),
])
def test_malformed_csv_is_a_table_error(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    for use_pyarrow in [False] + [True] * tables.has_pyarrow():
        with pytest.raises(tables.TableError, match=re.escape(message)):
            tables.read_table(path, use_pyarrow=use_pyarrow)


def test_write_csv_keeps_float32_exactly(tmp_path):
    values = np.array([0.1, 1 / 3, np.nan, 1e-9, 12345678.0], np.float32)
    tables.write_csv(tmp_path / "out.csv", {"prediction": values})
    text = (tmp_path / "out.csv").read_text()
    assert text.splitlines() == ["prediction", "0.1", "0.33333334", "nan", "1e-09", "1.2345678e+07"]
    back = np.genfromtxt(tmp_path / "out.csv", skip_header=1, dtype=np.float64)
    np.testing.assert_array_equal(back.astype(np.float32), values)
