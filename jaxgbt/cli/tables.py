"""Data files for the command line: CSV (and TSV) always, Parquet with pyarrow; CSV out.

A file becomes columns by name: numbers as f64[N] (NaN where missing), anything else as
an object array of strings (None where missing). Text columns are categorical features
to the command line; dates and other types are read as their text.

CSV is read by pyarrow when it is installed (multi-threaded, and Parquet needs it; the
``cli`` extra installs it), else by the standard library's ``csv`` module and NumPy, so
that the command line needs nothing beyond jaxgbt's own dependencies. Both readers take
the same missing markers and true/false words, and give the same columns
(``tests/test_cli.py``); Parquet text that is a missing marker is missing too. pandas
is not used: it is an optional dependency of jaxgbt.
"""

import contextlib
import csv
import gzip
import importlib.util
import sys
from pathlib import Path

import numpy as np

# Fields read as missing (pyarrow's defaults less the rarer spreadsheet error codes).
MISSING = ("", "NA", "N/A", "n/a", "NaN", "nan", "NULL", "null")
TRUE, FALSE = ("true", "True", "TRUE"), ("false", "False", "FALSE")
FORMATS = {".csv": ",", ".tsv": "\t", ".parquet": None, ".pq": None}
INSTALL_PYARROW = "pip install 'jaxgbt[cli]' (or pip install pyarrow)"


class TableError(ValueError):
    """A data file that cannot be read as a table of named columns."""


def has_pyarrow() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def file_format(path: Path) -> str:
    """The format's suffix (``.csv``, ``.tsv``, ``.parquet``, ``.pq``), after an
    optional ``.gz`` for CSV and TSV."""
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] == ".gz" and len(suffixes) == 2 and suffixes[0] in (
            ".csv", ".tsv"):
        return suffixes[0]
    if suffixes and suffixes[-1] in FORMATS:
        return suffixes[-1]
    raise TableError(f"{path}: unknown file type {''.join(path.suffixes) or '(none)'}; "
                     "give a .csv, .tsv (optionally .gz) or .parquet file.")


def read_table(path, *, use_pyarrow: bool | None = None) -> dict[str, np.ndarray]:
    """The columns of a CSV, TSV or Parquet file, in file order.

    Args:
      path: the file; its suffix gives the format.
      use_pyarrow: None: pyarrow when installed; False: the standard library (CSV only).

    Returns:
      {name: column}: f64[N] for numbers and true/false (NaN missing), object[N] of
      str (None missing) for anything else.

    Raises:
      FileNotFoundError: no such file.
      TableError: an unknown suffix, Parquet without pyarrow, a malformed file, no
        rows, or repeated column names.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file.")
    kind = file_format(path)
    use_pyarrow = has_pyarrow() if use_pyarrow is None else use_pyarrow
    if kind in (".parquet", ".pq"):
        if not has_pyarrow():
            raise TableError(f"{path}: reading Parquet needs pyarrow: {INSTALL_PYARROW}.")
        columns = _read_parquet(path)
    elif use_pyarrow:
        columns = _read_csv_arrow(path, FORMATS[kind])
    else:
        columns = _read_csv_python(path, FORMATS[kind])
    if not columns or not len(next(iter(columns.values()))):
        raise TableError(f"{path} has no rows of data.")
    return columns


def _check_names(path: Path, names) -> None:
    repeated = sorted({name for name in names if list(names).count(name) > 1})
    if repeated:
        raise TableError(f"{path} repeats the column names {repeated}; give each column its "
                         "own name.")


def _read_csv_arrow(path: Path, delimiter: str) -> dict[str, np.ndarray]:
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    options = pa_csv.ConvertOptions(null_values=list(MISSING), strings_can_be_null=True,
                                    true_values=list(TRUE), false_values=list(FALSE))
    try:
        table = pa_csv.read_csv(path, parse_options=pa_csv.ParseOptions(delimiter=delimiter),
                                convert_options=options)
    except pa.ArrowInvalid as error:
        raise TableError(f"{path} could not be read as CSV: {error}") from None
    _check_names(path, table.column_names)
    return {name: _from_arrow(table.column(name)) for name in table.column_names}


def _read_parquet(path: Path) -> dict[str, np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise TableError(f"{path} could not be read as Parquet: {error}") from None
    _check_names(path, table.column_names)
    return {name: _from_arrow(table.column(name)) for name in table.column_names}


def _from_arrow(column) -> np.ndarray:
    """A pyarrow column as f64[N] (numbers, booleans, all-missing) or object[N] text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = pc.cast(column, kind.value_type), kind.value_type
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
            or pa.types.is_null(kind) or pa.types.is_decimal(kind)):
        return pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        column = pc.cast(column, pa.string())  # dates, times: their text, as CSV holds it
    # Text that is a missing marker ("", "NA", ...) is missing, as a CSV reader reads it:
    # a table written to Parquet from a CSV keeps its empty cells as "", and a model
    # trained from the CSV must see the same rows from the Parquet file.
    return np.array([None if value in MISSING else value for value in column.to_pylist()],
                    dtype=object)


def _read_csv_python(path: Path, delimiter: str) -> dict[str, np.ndarray]:
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as text:
            rows = list(csv.reader(text, delimiter=delimiter))
    except (UnicodeDecodeError, csv.Error, OSError) as error:
        raise TableError(f"{path} could not be read as CSV: {error}") from None
    if not rows:
        raise TableError(f"{path} is empty; the first line must name the columns.")
    names, rows = rows[0], [row for row in rows[1:] if row]
    _check_names(path, names)
    for line, row in enumerate(rows, start=2):
        if len(row) != len(names):
            raise TableError(f"{path} could not be read as CSV: line {line} has {len(row)} "
                             f"fields, the header {len(names)}.")
    fields = np.array(rows, dtype=object).reshape(len(rows), len(names))
    return {name: _from_text(fields[:, j]) for j, name in enumerate(names)}


def _from_text(fields: np.ndarray) -> np.ndarray:
    """A column of CSV fields as f64[N] when every present field is a number (or every
    one a true/false word), else object[N] of str with None where missing."""
    missing = np.isin(fields, MISSING)
    present = fields[~missing]
    if np.isin(present, TRUE + FALSE).all():
        return np.where(missing, np.nan, np.isin(fields, TRUE).astype(np.float64))
    try:
        numbers = np.where(missing, "nan", fields).astype(str).astype(np.float64)
    except ValueError:
        return np.where(missing, None, fields).astype(object)
    return numbers


def write_csv(out, columns: dict[str, np.ndarray]) -> None:
    """Writes equal-length columns as CSV with a header line to the file ``out`` (stdout
    for None or ``-``): numbers as float32's shortest exact text (predictions are
    float32), a column of objects (labels) as each one's text."""
    names = list(columns)
    arrays = [np.asarray(columns[name]) for name in names]
    texts = [a.astype(str) if a.dtype == object else a.astype(np.float32).astype(str)
             for a in arrays]
    with _text_stream(out) as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(names)
        writer.writerows(zip(*texts, strict=True))


@contextlib.contextmanager
def _text_stream(out):
    if out is None or str(out) == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with open(out, "w", encoding="utf-8", newline="") as stream:
        yield stream
