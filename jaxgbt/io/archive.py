"""Archives: a zip of ``header.json`` and ``.npy`` arrays, written atomically and read
as untrusted input (bounded reads, no pickle, every failure a ``ModelFormatError``).

The model format (``model_format``) and checkpoints (``checkpoint``) are archives.
``write_archive`` stores the SHA-256 of every member but the header in the header field
``sha256`` (member name: 64 hex digits); readers given those checksums verify each member
against its own before parsing it. A zip's CRC-32 already catches most accidental damage
of the compressed bytes, but not a member rewritten by a zip tool (which recomputes the
CRC): the SHA-256 in the header does. It is not a signature: whoever rewrites the header
can recompute it.
"""

import hashlib
import io as _io
import json
import os
import re
import stat
import tempfile
import zipfile

import numpy as np

_HEADER_BYTES = 1 << 20
_NPY_HEADER_SLACK = 4096  # the .npy preamble is at most a few hundred bytes


# What zipfile.ZipFile raises on a damaged central directory: NotImplementedError for a
# byte that claims a newer zip version ("zip file version 6.4"), EOFError for a cut one.
ZIP_OPEN_ERRORS = (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError)
CHECKSUMS = "sha256"  # the header field holding each member's SHA-256
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class ModelFormatError(ValueError):
    """A model file that is not a valid jaxgbt model."""


def write_archive(path, header: dict, arrays: dict[str, np.ndarray],
                  members: dict[str, bytes] | None = None) -> None:
    """Writes header.json, one .npy per array and any other ``members`` (name: bytes)
    into a zip at ``path``, atomically: a temporary file in the same folder, flushed and
    fsynced, then renamed. The written header is ``header`` (not modified) plus the
    field ``sha256``: each other member's SHA-256."""
    contents = {}
    for name, array in arrays.items():
        member = _io.BytesIO()
        np.save(member, array, allow_pickle=False)
        contents[f"{name}.npy"] = member.getvalue()
    contents.update(members or {})
    header = dict(header, **{CHECKSUMS: {name: hashlib.sha256(data).hexdigest()
                                         for name, data in contents.items()}})
    buffer = _io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(header, indent=1))
        for name, data in contents.items():
            archive.writestr(name, data)
    write_atomically(path, buffer.getvalue())


def read_checksums(header: dict, path, what: str = "jaxgbt model",
                   required: bool = True) -> dict[str, str] | None:
    """The header's ``sha256`` field (member name: 64 lowercase hex digits), checked;
    None when it is absent and not ``required`` (files of versions written before it)."""
    checksums = header.get(CHECKSUMS)
    if checksums is None and not required:
        return None
    if not isinstance(checksums, dict) or not all(
            isinstance(digest, str) and _SHA256_HEX.fullmatch(digest)
            for digest in checksums.values()):
        fail(path, f"header field {CHECKSUMS!r} must map each member to its SHA-256 (64 "
                   f"hex digits); this version of the format requires it", what)
    return checksums


def verify_member(data: bytes, member: str, checksums: dict[str, str] | None, path,
                  what: str = "jaxgbt model") -> None:
    """Raises a ModelFormatError naming ``path`` and ``member`` when ``data`` does not
    hash to the member's SHA-256 in ``checksums`` (or it has none there); no check when
    ``checksums`` is None (a file without checksums)."""
    if checksums is None:
        return
    expected = checksums.get(member)
    if expected is None:
        fail(path, f"header.json has no SHA-256 for {member}", what)
    if hashlib.sha256(data).hexdigest() != expected:
        fail(path, f"{member} does not match its SHA-256 in header.json: the file was "
                   "damaged or edited after it was written", what)


def check_path(path, action: str) -> None:
    """``path`` is a file path (str, bytes or os.PathLike), else a TypeError that names
    the ``action`` ("save", "load")."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{action}: path must be a file path (a str or pathlib.Path); got "
                        f"{type(path).__name__} {path!r}.")


def write_atomically(path, data: bytes) -> None:
    """Writes ``data`` to ``path`` so that a crash leaves the old file or the new one,
    never part of one: a temporary file in the same folder, flushed and fsynced, then
    renamed over the target (a killed process may leave a ``.jaxgbt-*.tmp`` behind)."""
    check_path(path, "save")
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give a file name inside it, e.g. "
                                f"{os.path.join(path, 'model.jgbt')}.")
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".jaxgbt-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        # mkstemp creates the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def fail(path, message: str, what: str = "jaxgbt model"):
    raise ModelFormatError(f"{path} is not a valid {what}: {message}")


def read_header(archive: zipfile.ZipFile, path, format_name: str, version: int,
                what: str = "jaxgbt model", oldest: int | None = None) -> dict:
    """header.json of an archive, checked to be a JSON object of the given format, of a
    version from ``oldest`` (default: ``version``) to ``version``."""
    try:
        info = archive.getinfo("header.json")
    except KeyError:
        fail(path, "it has no header.json", what)
    if info.file_size > _HEADER_BYTES:
        fail(path, f"header.json declares {info.file_size} bytes (limit {_HEADER_BYTES})", what)
    try:
        raw = archive.read(info)
    except Exception as error:  # noqa: BLE001 - bad CRC, bad compression, truncation
        fail(path, f"header.json could not be read ({type(error).__name__}: {error})", what)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        fail(path, f"header.json is not JSON ({type(error).__name__}: {error})", what)
    if not isinstance(header, dict):
        fail(path, "header.json is not a JSON object", what)
    if header.get("format") != format_name:
        fail(path, f"format is {header.get('format')!r}, expected {format_name!r}", what)
    readable = range(version if oldest is None else oldest, version + 1)
    found = header.get("version")
    if isinstance(found, bool) or not isinstance(found, int) or found not in readable:
        versions = version if len(readable) == 1 else f"{readable[0]} to {version}"
        fail(path, f"format version {found!r} is not supported (this jaxgbt reads version "
                    f"{versions}); load it with the jaxgbt that wrote it", what)
    return header


def header_int(header: dict, key: str, low: int, high: int, path,
               what: str = "jaxgbt model") -> int:
    value = header.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        fail(path, f"{key}={value!r} must be an integer in [{low}, {high}]", what)
    return value


def read_array(archive: zipfile.ZipFile, name: str, dtype: str, shape: tuple, path,
               what: str = "jaxgbt model",
               checksums: dict[str, str] | None = None) -> np.ndarray:
    """One .npy member, verified against its SHA-256 in ``checksums`` (when given), read
    without pickle and checked against dtype and shape."""
    member = f"{name}.npy"
    try:
        info = archive.getinfo(member)
    except KeyError:
        fail(path, f"it has no {member}", what)
    expected_bytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if info.file_size > expected_bytes + _NPY_HEADER_SLACK:
        fail(path, f"{member} declares {info.file_size} bytes, more than its header allows",
              what)
    try:
        with archive.open(info) as stream:
            data = stream.read()
    except Exception as error:  # noqa: BLE001 - bad CRC, bad compression, truncation
        fail(path, f"{member} could not be read ({type(error).__name__}: {error})", what)
    verify_member(data, member, checksums, path, what)
    try:
        array = np.lib.format.read_array(_io.BytesIO(data), allow_pickle=False)
    except Exception as error:  # noqa: BLE001 - any decoding failure is a format error
        fail(path, f"{member} could not be read ({type(error).__name__}: {error})", what)
    if str(array.dtype) != dtype or tuple(array.shape) != tuple(shape):
        fail(path, f"{member} has dtype {array.dtype} and shape {array.shape}; expected "
                    f"{dtype} and {tuple(shape)}", what)
    return array


def check_regular_file(path, what: str = "jaxgbt model",
                       written_by: str = "a zip archive written by save",
                       action: str = "load") -> None:
    """``path`` names an existing regular file: a TypeError for a path that is not one
    (None, a number), FileNotFoundError for a missing file, and a ModelFormatError for
    anything else that cannot be read or is not a regular file (a directory, a pipe, a
    device such as /dev/zero: reading one would block or never end). ``written_by`` says
    what a ``what`` file is, and ``action`` the function called, for the messages."""
    check_path(path, action)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise
    except OSError as error:
        fail(path, f"it cannot be read ({error})", what)
    if not stat.S_ISREG(mode):
        fail(path, f"it is not a regular file (a directory, pipe or device); a {what} is "
                   f"{written_by}", what)


def open_archive(path, what: str = "jaxgbt model") -> zipfile.ZipFile:
    """The zip archive at ``path`` (a file path, or a binary file object with ``read`` and
    ``seek``); a missing file raises FileNotFoundError, anything unreadable or not a
    regular file (a directory, a pipe, a device such as /dev/zero, which would block or
    never end) a ModelFormatError."""
    if not (hasattr(path, "read") and hasattr(path, "seek")):
        check_regular_file(path, what, "a zip archive written by save")
    try:
        return zipfile.ZipFile(path)
    except ZIP_OPEN_ERRORS as error:
        if isinstance(error, FileNotFoundError):
            raise
        fail(path, f"it is not a readable zip archive ({error})", what)
