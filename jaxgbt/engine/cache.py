"""JAX's persistent compilation cache, on by default in a user cache directory, and the
training chunks' executables beside it.

A fit's compiled programs (the chunk of rounds, prediction) are stored on disk, so a new
process that fits or predicts a shape seen before loads them instead of compiling again
(docs/benchmarks.md has the time saved). The cache is JAX's own; jaxgbt only points it at
a directory when the user has not configured one.

JAX's cache is keyed by the lowered program, so a process still traces the training
chunk and lowers it to MLIR before it can look it up: about half of a later process's
first-fit overhead at 2,000 x 28. So the chunk's executable is also kept under
``chunks/`` in jaxgbt's directory (``stored_chunk``, ``compiled_and_stored``), keyed by
what decides the program without tracing it: the static configuration, the arguments'
types, the source of jaxgbt and its module constants as they are, the versions of jax
and jaxlib, every JAX setting, ``XLA_FLAGS``, the backend and the processor. A
configuration holding a function that is not one of jaxgbt's own (a loss or a
learning-rate schedule of the user's, whose code the key cannot see) is not kept there:
it goes through JAX's cache alone.

Opting out: set the environment variable ``JAXGBT_COMPILATION_CACHE=0`` before importing
jaxgbt. A directory set by the user (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update("jax_compilation_cache_dir", ...)`` before the import) is left as it
is, and so is ``jax_enable_compilation_cache=False``. ``JAXGBT_CACHE_DIR`` moves jaxgbt's
directory (default ``$XDG_CACHE_HOME/jaxgbt/xla``, else ``~/.cache/jaxgbt/xla``). The
directory is not pruned (JAX's size cap needs the optional ``filelock`` package); it can be
deleted at any time.
"""

import dataclasses
import functools
import hashlib
import importlib
import json
import os
import platform
import sys
import tempfile
import types
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

# Programs that took less than this to compile are not stored. Reading one back takes
# 1-3 ms, where the start's programs (the first margin, the first gradients' check) and
# predict's link compile in 0.02-0.07 s each: stored too (the threshold was 0.1 s), they
# took a later process's compile time from 0.28-0.33 s to 0.16-0.18 s at 2,000 x 28
# (docs/benchmarks.md, "Compile"). Below it are the eager operations of any JAX code in
# the process, which would fill the directory with files.
MIN_COMPILE_SECONDS = 0.02
OPT_OUT_VALUES = ("0", "false", "no", "off")
# How XLA:CPU's text of a program names the LAPACK kernels it calls ("lapack_sgetrf_ffi").
LAPACK_TARGET = '"lapack_'


# The directory of ``enable_persistent_cache``, where ``chunks/`` is kept; None: no chunk
# executables on disk (the cache is off, or a directory the user chose is in use).
_directory: Path | None = None
# Programs JAX's persistent cache has served in this process (its ``cache_hits`` events).
_served_by_jax = 0


def default_cache_dir() -> Path:
    """Where jaxgbt keeps compiled programs unless ``JAXGBT_CACHE_DIR`` says otherwise."""
    if os.environ.get("JAXGBT_CACHE_DIR"):
        return Path(os.environ["JAXGBT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jaxgbt" / "xla"


def enable_persistent_cache() -> Path | None:
    """Points JAX's persistent compilation cache at ``default_cache_dir()`` unless the user
    opted out or configured the cache; returns the directory in use by jaxgbt, or None.

    A directory that cannot be created or written leaves the cache off: JAX would warn on
    every compile that fails to store its program.
    """
    if os.environ.get("JAXGBT_COMPILATION_CACHE", "1").strip().lower() in OPT_OUT_VALUES:
        return None
    configured = jax.config.jax_compilation_cache_dir is not None
    if configured or not jax.config.jax_enable_compilation_cache:
        return None
    directory = default_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(directory, os.W_OK):
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    global _directory
    _directory = directory
    jax.monitoring.register_event_listener(_count_served)
    return directory


def _count_served(event: str, **_) -> None:
    global _served_by_jax
    if event == "/jax/compilation_cache/cache_hits":
        _served_by_jax += 1


class _Unkeyable(Exception):
    """A value whose meaning a key on disk cannot capture (a function of the user's)."""


def _canonical(value, depth: int = 0) -> str:
    """A text that is the same in every process for equal values, for the key of a
    stored chunk; raises ``_Unkeyable`` for what it cannot vouch for."""
    if depth > 16:  # a structure that holds itself
        raise _Unkeyable("nested too deep")
    inner = functools.partial(_canonical, depth=depth + 1)
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.ascontiguousarray(value)
        digest = hashlib.sha256(array.tobytes()).hexdigest()
        return f"array:{array.dtype.str}:{array.shape}:{digest}"
    if isinstance(value, np.dtype):
        return f"dtype:{value.str}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ",".join(f"{f.name}={inner(getattr(value, f.name))}"
                          for f in dataclasses.fields(value))
        return f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        fields = ",".join(f"{name}={inner(getattr(value, name))}" for name in value._fields)
        return f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[{','.join(inner(v) for v in value)}]"
    if isinstance(value, dict):
        return f"dict[{','.join(inner(k) + ':' + inner(v) for k, v in sorted(value.items()))}]"
    if isinstance(value, types.FunctionType) and value.__module__.split(".")[0] == "jaxgbt":
        # Its code and the module-level names it reads are in the key's digest of
        # jaxgbt's source; a function one of jaxgbt's factories made (``huber@delta``'s
        # loss) also carries the values it closed over and its defaults.
        cells = tuple(cell.cell_contents for cell in value.__closure__ or ())
        return (f"function:{value.__module__}.{value.__qualname__}:"
                f"{value.__code__.co_firstlineno}:{inner(cells)}:{inner(value.__defaults__)}:"
                f"{inner(value.__kwdefaults__)}")
    raise _Unkeyable(type(value).__name__)


@functools.cache
def _environment() -> str:
    """What a compiled chunk depends on besides its configuration and arguments: jaxgbt's
    source, the versions of jax and jaxlib, ``XLA_FLAGS``, the backend and the
    processor (XLA:CPU compiles for the host's instruction set)."""
    import jaxlib

    source = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        source.update(str(path.relative_to(package)).encode())
        source.update(path.read_bytes())
    device = jax.devices()[0]
    processor = platform.processor() + platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:  # the first processor's model and flags
            processor += "".join(line for line in cpuinfo.read().split("\n\n")[0].splitlines()
                                 if line.startswith(("model name", "flags", "Features")))
    except OSError:
        pass
    return "|".join((source.hexdigest(), jax.__version__, jaxlib.__version__,
                     device.platform, device.client.platform_version, device.device_kind,
                     os.environ.get("XLA_FLAGS", ""), processor))


def _module_constants() -> str:
    """jaxgbt's module-level constants as they are now: the source holds their first
    values, but a test or a user may set one (``core.tree.SMALL_SEARCH_CELLS``), and the
    chunk compiled then differs."""
    parts = []
    for name, module in sorted(sys.modules.items()):
        if name.split(".")[0] != "jaxgbt" or module is None:
            continue
        for attribute, value in sorted(vars(module).items()):
            if attribute.lstrip("_").isupper() and isinstance(value, (int, float, str, tuple)):
                try:
                    parts.append(f"{name}.{attribute}={_canonical(value)}")
                except _Unkeyable:
                    continue
    return "|".join(parts)


def _chunk_path(key: tuple) -> Path | None:
    """The file of a stored chunk for ``key`` (``compile.chunk_program``'s key), or None
    when chunks are not kept or the key holds something it cannot vouch for."""
    if _directory is None:
        return None
    try:
        text = _canonical(key[0]) + "|" + "|".join(str(part) for part in key[1:])
    except _Unkeyable:
        return None
    if " at 0x" in text:  # an object's address: no later process would find it
        return None
    settings = repr(sorted(jax.config.values.items()))
    digest = hashlib.sha256("|".join((text, settings, _module_constants(),
                                      _environment())).encode()).hexdigest()
    return _directory / "chunks" / f"{digest}.bin"


def _structure_json(treedef) -> str:
    """A pytree structure as JSON: tuples, lists, dicts, None, leaves (0) and jaxgbt's
    NamedTuples by name, the only nodes the chunk's arguments and results hold; raises
    ``_Unkeyable`` for any other node."""

    def encode(node):
        if node is None or node == 0 and type(node) is int:
            return node
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            kind = type(node)
            if not kind.__module__.startswith("jaxgbt."):
                raise _Unkeyable(kind.__name__)
            return {"namedtuple": f"{kind.__module__}:{kind.__qualname__}",
                    "fields": [encode(child) for child in node]}
        if type(node) in (tuple, list):
            return {type(node).__name__: [encode(child) for child in node]}
        if type(node) is dict:
            return {"dict": [[key, encode(child)] for key, child in node.items()]}
        raise _Unkeyable(type(node).__name__)

    return json.dumps(encode(jax.tree.unflatten(treedef, [0] * treedef.num_leaves)))


def _structure(text: str):
    """The pytree structure ``_structure_json`` wrote; a NamedTuple must be jaxgbt's."""

    def decode(node):
        if node is None or node == 0:
            return node
        if "namedtuple" in node:
            module, name = node["namedtuple"].split(":")
            kind = getattr(importlib.import_module(module), name, None) \
                if module.startswith("jaxgbt.") else None
            if not (isinstance(kind, type) and issubclass(kind, tuple)
                    and hasattr(kind, "_fields")):
                raise ValueError(f"a stored chunk names {node['namedtuple']!r}")
            return kind(*(decode(child) for child in node["fields"]))
        if "tuple" in node:
            return tuple(decode(child) for child in node["tuple"])
        if "list" in node:
            return [decode(child) for child in node["list"]]
        return {key: decode(child) for key, child in node["dict"]}

    return jax.tree.structure(decode(json.loads(text)))


def stored_chunk(key: tuple):
    """The chunk executable stored for ``key`` by an earlier process, loaded onto the
    default device, or None (not stored, not kept, or unreadable: it is then compiled)."""
    path = _chunk_path(key)
    if path is None or not path.is_file():
        return None
    try:
        from jax.experimental import serialize_executable

        data = zlib.decompress(path.read_bytes())
        length = int.from_bytes(data[:8], "little")
        in_text, out_text, *facts = json.loads(data[8:8 + length])
        in_tree, out_tree = _structure(in_text), _structure(out_text)
        serialized = data[8 + length:]
        if facts and facts[0].get("lapack"):
            _initialize_lapack()
        # On the one device it was compiled for: by default JAX loads an executable onto
        # every device of the backend, and with two (GPUs, or XLA_FLAGS'
        # --xla_force_host_platform_device_count) it then asked for an argument sharded
        # over both and refused the fit's ("Expected args ... to have 2 shards").
        device = _default_device()
        return serialize_executable.deserialize_and_load(
            serialized, in_tree, out_tree, backend=device.client, execution_devices=[device])
    except Exception:  # a file cut short or from another build: compile instead
        path.unlink(missing_ok=True)
        return None


def _default_device():
    """The device a program compiled without a mesh runs on: JAX's default device (a
    device, or the first of a platform named), else the first device."""
    device = jax.config.jax_default_device
    if device is None:
        return jax.devices()[0]
    return jax.devices(device)[0] if isinstance(device, str) else device


@functools.cache
def _initialize_lapack() -> None:
    """Sets up the LAPACK kernels of XLA:CPU (a linear solve, as ``hessian="full"``
    calls), which JAX does when it lowers the first program that calls one: a stored
    chunk is loaded without lowering, and its first call of such a kernel jumped to a
    null address (a segmentation fault). Lowering a 2 x 2 Cholesky factorization, never
    compiled or run, does it in any process."""
    jax.jit(jax.numpy.linalg.cholesky).lower(jax.ShapeDtypeStruct((2, 2), np.float32))


def compiled_and_stored(key: tuple, compile_chunk: Callable[[], Any]):
    """``compile_chunk()``, the compiled chunk for ``key``, stored for later processes
    when it was compiled here.

    Not when JAX's persistent cache served it (during the call: another thread's hit
    also counts, which only skips a store): an executable read from that cache and
    serialized again lacked its kernels (XLA:CPU, jax 0.10: "Function ... not found"
    when it ran in the next process). So ``compile_chunk`` only compiles: the chunk is
    traced before, since tracing runs eager operations, and a hit for one of those (on
    a loaded machine they take over ``MIN_COMPILE_SECONDS`` to compile, and are kept)
    skipped the chunk's store.
    """
    served = _served_by_jax
    program = compile_chunk()
    if _served_by_jax == served:
        _store_chunk(key, program)
    return program


def _store_chunk(key: tuple, program) -> None:
    """Writes the compiled chunk ``program`` for ``key``, where chunks are kept, in one
    atomic rename (a process reading at the same time sees the whole file or none).
    Storing is best effort: a fit never fails for it."""
    path = _chunk_path(key)
    if path is None:
        return
    temporary = None
    try:
        from jax.experimental import serialize_executable

        serialized, in_tree, out_tree = serialize_executable.serialize(program)
        # The two structures as JSON ahead of the executable's bytes, read back by
        # ``_structure``, which builds nothing but containers and jaxgbt's NamedTuples,
        # then whether the program calls LAPACK (``_initialize_lapack``).
        facts = {"lapack": LAPACK_TARGET in program.as_text()}
        header = json.dumps([_structure_json(in_tree), _structure_json(out_tree),
                             facts]).encode()
        data = zlib.compress(len(header).to_bytes(8, "little") + header + serialized, 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as file:
            temporary = Path(file.name)
            file.write(data)
        os.replace(temporary, path)
    except Exception:  # a read-only or full disk, a program jax cannot serialize
        if temporary is not None:
            temporary.unlink(missing_ok=True)
