"""Run configs: a TOML file of settings and ``key=value`` overrides written in TOML.

One reader for the command line (``jaxgbt train --config run.toml --set l2=3``) and the
scripts in ``experiments/`` (``--config``, ``--set``), so that a value is written the
same way in both. Host-side Python only; nothing here imports JAX.
"""

import copy
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config file that cannot be read, or an override that cannot be applied."""


def read_config(path) -> dict:
    """The TOML file at ``path`` as a dict.

    Raises:
      ConfigError: the file is missing, unreadable or not valid TOML (the message names
        the file and, for a syntax error, the line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} could not be read: {error}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def parse_value(text: str) -> Any:
    """A value written in TOML (``5``, ``0.1``, ``true``, ``[1, 2]``, ``"a"``,
    ``{a = 1}``); text that is not a TOML value is taken as a string, so that
    ``loss=logistic`` needs no quotes."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def override(config: Mapping, assignment: str, *, known_keys_only: bool = True,
             source: str = "the config") -> dict:
    """A copy of ``config`` with one ``key=value`` applied (``config`` is left as it is).

    Args:
      config: the settings, possibly with nested tables.
      assignment: ``KEY=VALUE``, the value in TOML (``parse_value``); dots in KEY reach
        into tables: ``boost.n_trees=5``.
      known_keys_only: a key the config lacks is an error (so that a misspelt key cannot
        leave the intended value unchanged unnoticed); False adds it, and the tables on
        its way.
      source: what the config was read from, for messages (a file name).

    Raises:
      ConfigError: no ``=``, an empty key, a path through a value that is not a table,
        or (``known_keys_only``) a key the config lacks.
    """
    key, equals, text = assignment.partition("=")
    key = key.strip()
    if not equals or not key:
        raise ConfigError(f"--set {assignment}: write KEY=VALUE, for example --set n_trees=10.")
    *tables, name = key.split(".")
    result = copy.deepcopy(dict(config))
    table = result
    for part in tables:
        if part not in table and not known_keys_only:
            table[part] = {}
        if not isinstance(table.get(part), dict):
            raise ConfigError(f"--set {assignment}: {source} has no table {part!r}.")
        table = table[part]
    if known_keys_only and name not in table:
        raise ConfigError(f"--set {assignment}: {source} has no key {key!r}; it has "
                          + ", ".join(sorted(table)) + ".")
    table[name] = parse_value(text)
    return result


def apply_overrides(config: Mapping, assignments, *, known_keys_only: bool = True,
                    source: str = "the config") -> dict:
    """A copy of ``config`` with each ``key=value`` of ``assignments`` applied in turn
    (see ``override``)."""
    result = copy.deepcopy(dict(config))
    for assignment in assignments:
        result = override(result, assignment, known_keys_only=known_keys_only, source=source)
    return result
