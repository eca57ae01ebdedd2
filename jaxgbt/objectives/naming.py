"""Names with a parameter, ``"base@value"``: one reader for the objectives
(``"quantile@0.9"``, ``"aft_logistic@2"``) and the metrics (``"ndcg@10"``,
``"pinball@0.9"``), so that both accept the same spellings and refuse bad ones with the
same messages. It imports nothing from jaxgbt, so any layer can use it.
"""

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple


class Family(NamedTuple):
    """What the base of a parametrised name stands for.

    Attributes:
      make: ``make(value)`` -> the named object; raises ValueError for a value it refuses
        (out of range).
      read: ``read(text)`` -> the value, such as ``int`` or ``float``; raises ValueError
        for text that is not one.
      form: how such a name is written, for messages: ``"quantile@alpha (0 < alpha < 1)"``.
      default: the value that the bare base (no ``"@"``) stands for, or None when the bare
        base is not a name of this family.
    """

    make: Callable[[Any], Any]
    read: Callable[[str], Any]
    form: str
    default: Any = None


def parse(name: str, families: Mapping[str, Family], label: str) -> Any | None:
    """The object that ``name`` (``"base@value"``, or a bare ``"base"``) stands for.

    Args:
      name: the name to read.
      families: base -> Family.
      label: how messages introduce the name: ``"loss="`` gives ``"loss='quantile@2':
        ..."``, ``"metric "`` gives ``"metric 'ndcg@x': ..."``.

    Returns:
      ``family.make(value)``, or None when the base is not in ``families`` (or is bare
      with no default): the caller then says which names it knows.

    Raises:
      ValueError: the value cannot be read, or ``make`` refused it. The message starts with
        ``label`` and the whole name, then says why.
    """
    base, at, text = name.partition("@")
    family = families.get(base)
    if family is None or (not at and family.default is None):
        return None
    if at:
        try:
            value = family.read(text)
        except ValueError:
            raise ValueError(f"{label}{name!r}: cannot read {text!r}; write it as "
                             f"{family.form}.") from None
    else:
        value = family.default
    try:
        return family.make(value)
    except ValueError as error:
        raise ValueError(f"{label}{name!r}: {error}") from error
