"""Export a model's prediction as serialized StableHLO (``jax.export``), for serving without jaxgbt.

``export(model, path)`` writes two files:

  path        the bytes of ``jax.export.Exported.serialize()``: the whole prediction, with
              the model's arrays as constants, for a float32 input of shape (N, F) with N
              symbolic (any batch size) unless ``batch_size`` fixes it;
  path.json   a small description (what the function returns, its input, the objective),
              for people and tools; loading does not read it.

A process with only jax (and flatbuffers) installed loads it back, without jaxgbt::

    exported = jax.export.deserialize(bytearray(open(path, "rb").read()))
    margins = exported.call(X.astype(np.float32))

``load_exported(path)`` does exactly that. jax's compatibility promise for serialized
functions (jax.readthedocs.io, "Exporting and serializing staged-out computations") covers
loading in newer jax versions for at least six months after export.
"""

import json
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp

from jaxgbt.io.archive import write_atomically

FORMAT = "jaxgbt.exported"
VERSION = 1
METHODS = ("predict_raw", "predict")
# Lowered for every platform jax serves on: an export made on a CPU machine runs on a GPU.
DEFAULT_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


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
    _write_atomically(path, bytes(exported.serialize()))
    _write_atomically(Path(f"{path}.json"), json.dumps(description, indent=1).encode())
    return path


def load_exported(path) -> jax.export.Exported:
    """The exported function in ``path``; call it as ``load_exported(path).call(X)``.

    Uses only ``jax.export.deserialize``: nothing of jaxgbt runs, so a serving process may
    copy these two lines instead of importing jaxgbt.
    """
    return jax.export.deserialize(bytearray(Path(path).read_bytes()))


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)
