"""Export a model's prediction as serialized StableHLO (``jax.export``), for serving without jaxgbt.

``export(model, path)`` writes two files:

  path        the bytes of ``jax.export.Exported.serialize()``: the whole prediction, with
              the model's arrays as constants, for a float32 input of shape (N, F) with N
              symbolic (any batch size) unless ``batch_size`` fixes it;
  path.json   a small description (what the function returns, its input, the objective,
              the SHA-256 of ``path``), for people and tools and for ``load_exported``'s
              checks.

A process with only jax (and flatbuffers) installed loads it back, without jaxgbt::

    exported = jax.export.deserialize(bytearray(open(path, "rb").read()))
    margins = exported.call(X.astype(np.float32))

jax's compatibility promise for serialized functions (jax.readthedocs.io, "Exporting and
serializing staged-out computations") covers loading in newer jax versions for at least
six months after export.

An exported file is code: a program that XLA compiles and runs. Trust it as you would
trust a Python file. ``load_exported(path)`` checks what can be checked without running
it, and raises a ``ModelFormatError`` naming the file for a damaged or foreign one:
a regular file of bounded size, not empty, its SHA-256 equal to the one in ``path.json``
(when the description has it), a program ``jax.export.deserialize`` reads, and the
signature of a jaxgbt prediction (one float32 input (N, F), one float32 output with
leading dimension N, one device, no side effects) matching ``path.json`` when present.
It does not look inside the program: a crafted file with the right signature can compute
anything, never return, or (bytes damaged without ``path.json`` to catch it) crash the
XLA compiler when called.
"""

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp

from jaxgbt.io.archive import check_regular_file, fail, write_atomically

FORMAT = "jaxgbt.exported"
VERSION = 1
METHODS = ("predict_raw", "predict")
# Lowered for every platform jax serves on: an export made on a CPU machine runs on a GPU.
DEFAULT_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
# A 200-tree depth-6 model exports to 68 KB; a million trees of depth 8 to about 1 GB.
MAX_BYTES = 1 << 30
_DESCRIPTION_BYTES = 1 << 20
_WHAT = "exported jaxgbt model"
_WRITTEN_BY = "a program written by jaxgbt.export"


def export(model, path, *, batch_size: int | None = None,
           method: str = "predict_raw",
           platforms: Sequence[str] | None = DEFAULT_PLATFORMS) -> Path:
    """Writes ``model.predict_raw`` (or ``predict``) as a serialized ``jax.export`` function.

    Args:
      model: a fitted Booster (its trees up to ``best_round`` when early stopping chose one,
        as ``predict_raw`` uses them).
      path: the file to write; ``path + ".json"`` gets the description.
      batch_size: None for a symbolic batch dimension (one export serves any number of
        rows), or a fixed N.
      method: "predict_raw" (margins) or "predict" (the objective's inverse link applied,
        probabilities for "logistic").
      platforms: platforms to lower for (jax.export's names), or None for the current
        backend only.

    Returns:
      The path written.
    """
    if method not in METHODS:
        raise ValueError(f"export: method={method!r}; use one of {METHODS}.")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"export: batch_size={batch_size!r}; use a positive int, or None "
                         "for any batch size.")
    path = Path(path)
    rows = jax.export.symbolic_shape("n")[0] if batch_size is None else batch_size
    spec = jax.ShapeDtypeStruct((rows, model.n_features), jnp.float32)
    fn = jax.jit(getattr(model, method))
    platforms = None if platforms is None else tuple(platforms)
    exported = jax.export.export(fn, platforms=platforms)(spec)
    description = {
        "format": FORMAT, "version": VERSION, "method": method,
        "n_features": model.n_features,
        "input": {"shape": ["n" if batch_size is None else batch_size, model.n_features],
                  "dtype": "float32"},
        "output": {"shape": [str(d) for d in exported.out_avals[0].shape],
                   "dtype": str(exported.out_avals[0].dtype)},
        "objective": model.objective.name, "n_trees": model.n_trees, "depth": model.depth,
        "grow_policy": model.grow_policy, "n_outputs": model.n_outputs,
        "vector_output": model.vector_output,
        "platforms": list(exported.platforms), "jax_version": jax.__version__,
        "calling_convention_version": exported.calling_convention_version,
    }
    serialized = bytes(exported.serialize())
    description["sha256"] = hashlib.sha256(serialized).hexdigest()
    _write_atomically(path, serialized)
    _write_atomically(Path(f"{path}.json"), json.dumps(description, indent=1).encode())
    return path


def load_exported(path, *, max_bytes: int = MAX_BYTES) -> jax.export.Exported:
    """The exported function in ``path``, checked; call it as ``load_exported(path).call(X)``.

    Args:
      path: a file written by ``export`` (str or os.PathLike); ``path + ".json"`` is read
        and checked when it exists.
      max_bytes: the largest file read (1 GiB by default); a larger one is refused before
        it is read.

    Returns:
      The ``jax.export.Exported``, taking float32 X of shape (N, F) and returning float32
      of shape (N,) or (N, K).

    Raises:
      TypeError: ``path`` is not a file path.
      FileNotFoundError: no file at ``path``.
      ModelFormatError: anything else wrong with the file or its description (see the
        module docstring); the message names the file.
    """
    check_regular_file(path, _WHAT, _WRITTEN_BY, action="load_exported")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"load_exported: max_bytes={max_bytes!r}; use a positive int.")
    serialized = _read_bounded(path, max_bytes, "max_bytes")
    if not serialized:
        fail(path, "the file is empty", _WHAT)
    description_path = f"{os.fsdecode(path)}.json"
    description = _read_description(description_path)
    if description is not None and "sha256" in description:
        if hashlib.sha256(serialized).hexdigest() != description["sha256"]:
            fail(path, f"its SHA-256 differs from the one in {description_path}: the file "
                       "is damaged, or the two files come from different exports", _WHAT)
    try:
        exported = jax.export.deserialize(bytearray(serialized))
    except Exception as error:  # noqa: BLE001 - any decoding failure is a format error
        fail(path, "jax.export.deserialize cannot read it "
                   f"({type(error).__name__}: {_first_line(error)}); it is damaged or not "
                   f"{_WRITTEN_BY}", _WHAT)
    _check_signature(exported, path)
    if description is not None:
        _check_description(description, exported, description_path)
    return exported


def _read_bounded(path, max_bytes: int, setting: str) -> bytes:
    """At most ``max_bytes`` of a regular file, or a ModelFormatError naming ``setting``."""
    try:
        with open(path, "rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as error:
        fail(path, f"it cannot be read ({error})", _WHAT)
    if len(data) > max_bytes:
        fail(path, f"it is larger than {max_bytes} bytes; pass a larger {setting}= to "
                   "load_exported if the file is trusted", _WHAT)
    return data


def _read_description(description_path: str) -> dict | None:
    """``path.json`` as a JSON object, or None when there is none."""
    if not os.path.exists(description_path):
        return None
    check_regular_file(description_path, "export description", "JSON written by "
                       "jaxgbt.export", action="load_exported")
    raw = _read_bounded(description_path, _DESCRIPTION_BYTES, "description size")
    try:
        description = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        fail(description_path, f"it is not JSON ({type(error).__name__}: {error})",
             "export description")
    if not isinstance(description, dict):
        fail(description_path, "it is not a JSON object", "export description")
    return description


def _check_signature(exported, path) -> None:
    """The signature of a jaxgbt prediction: one float32 (N, F) input with F a number, one
    float32 output of shape (N,) or (N, K), one device, no side effects."""
    def refuse(message):
        fail(path, f"{message}; an {_WHAT} takes one float32 array (N, F) and returns "
                   "float32 (N,) or (N, K)", _WHAT)

    if len(exported.in_avals) != 1 or exported.in_tree.num_leaves != 1:
        refuse(f"its function takes {len(exported.in_avals)} arrays")
    if len(exported.out_avals) != 1 or exported.out_tree.num_leaves != 1:
        refuse(f"its function returns {len(exported.out_avals)} arrays")
    x, out = exported.in_avals[0], exported.out_avals[0]
    if str(x.dtype) != "float32" or len(x.shape) != 2 or not isinstance(x.shape[1], int):
        refuse(f"its input is {x.dtype} of shape {_shape(x.shape)}")
    if (str(out.dtype) != "float32" or len(out.shape) not in (1, 2)
            or str(out.shape[0]) != str(x.shape[0])):
        refuse(f"its output is {out.dtype} of shape {_shape(out.shape)} for an input of "
               f"shape {_shape(x.shape)}")
    if exported.nr_devices != 1:
        refuse(f"it runs on {exported.nr_devices} devices, not one")
    if exported.ordered_effects or exported.unordered_effects:
        refuse("it has side effects")


def _check_description(description: dict, exported, description_path: str) -> None:
    """``path.json`` says this is a jaxgbt export of the program's signature."""
    def refuse(message):
        fail(description_path, message, "export description")

    if description.get("format") != FORMAT:
        refuse(f"format is {description.get('format')!r}, expected {FORMAT!r}")
    if description.get("version") != VERSION:
        refuse(f"version {description.get('version')!r} is not supported (this jaxgbt "
               f"reads version {VERSION})")
    if description.get("method") not in METHODS:
        refuse(f"method is {description.get('method')!r}, expected one of {METHODS}")
    x, out = exported.in_avals[0], exported.out_avals[0]
    n_features = x.shape[1]
    declared_input = description.get("input")
    declared = declared_input.get("shape") if isinstance(declared_input, dict) else None
    if (not isinstance(declared, list) or len(declared) != 2
            or str(declared[0]) != str(x.shape[0]) or declared[1] != n_features):
        refuse(f"input shape {declared!r} does not match the program's input "
               f"{_shape(x.shape)}")
    if "n_features" in description and description["n_features"] != n_features:
        refuse(f"n_features={description['n_features']!r} but the program takes "
               f"{n_features} features")
    output = description.get("output")
    if not isinstance(output, dict) or output.get("shape") != [str(d) for d in out.shape]:
        refuse(f"output {output!r} does not match the program's output "
               f"{_shape(out.shape)}")


def _shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no message"


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)
