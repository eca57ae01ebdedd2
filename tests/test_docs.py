"""The documentation runs: every ```python block of README.md and docs/*.md is executed.

A file's blocks run in order in one namespace (a later block may use an earlier one's
names), in a temporary folder (blocks that write files write there). A hidden setup
may precede a block as an HTML comment on the lines right before its fence; it runs
first in the same namespace and is not shown on the rendered page:

    <!-- setup: X, y = make_data() -->
    ```python
    model = jaxgbt.fit("logistic", X, y)
    ```

or over several lines, ``<!-- setup:`` then code then ``-->``. Pages are found when the
tests are collected, so a new page is tested without a change here. Every file runs
whole in the slow suite (each compiles several fits: about 30 s for the README on 2
cores); the README's first block, the one a reader tries first, also runs in the fast
suite (and is left out when the whole README runs: ``conftest.py``).
"""

import re
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE_OPEN = re.compile(r"^(\s*)```python\s*$")
FENCE_CLOSE = re.compile(r"^\s*```\s*$")
SETUP_OPEN = "<!-- setup:"
COMMENT_CLOSE = "-->"


class Block(NamedTuple):
    """A python block: the line of its opening fence (1-based), its hidden setup code
    (empty when none) and its code."""

    line: int
    setup: str
    code: str


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a markdown text, in order, each with its setup comment."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE_OPEN.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if FENCE_CLOSE.match(lines[j])), None)
        if end is None:
            raise ValueError(f"line {i + 1}: a ```python block is never closed")
        indent = len(opening[1])  # a block inside a list item is indented
        code = "\n".join(line[indent:] for line in lines[i + 1:end])
        blocks.append(Block(i + 1, _setup_before(lines, i), textwrap.dedent(code)))
        i = end + 1
    return blocks


def _setup_before(lines: list[str], fence: int) -> str:
    """The code of a ``<!-- setup: ... -->`` comment ending on the line before
    ``lines[fence]``, or ""."""
    if fence == 0 or not lines[fence - 1].rstrip().endswith(COMMENT_CLOSE):
        return ""
    start = fence - 1
    while start >= 0 and "<!--" not in lines[start]:
        start -= 1
    comment = "\n".join(lines[start:fence]).strip()
    if start < 0 or not comment.startswith(SETUP_OPEN):
        return ""
    body = comment[len(SETUP_OPEN):-len(COMMENT_CLOSE)]
    first, _, rest = body.partition("\n")
    return textwrap.dedent(first.strip() + "\n" + textwrap.dedent(rest)).strip() + "\n"


def documented_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# Leading blocks of a file that also run in the fast suite.
FAST_BLOCKS = {"README.md": 1}


def _cases():
    for path in documented_files():
        name = path.relative_to(ROOT).as_posix()
        if name in FAST_BLOCKS:
            yield pytest.param(path, FAST_BLOCKS[name], id=f"{name}:first-{FAST_BLOCKS[name]}")
        yield pytest.param(path, None, id=name, marks=[pytest.mark.slow])


@pytest.mark.parametrize(("path", "n_blocks"), list(_cases()))
def test_python_blocks_run(path, n_blocks, tmp_path, monkeypatch):
    blocks = python_blocks(path.read_text(encoding="utf-8"))[:n_blocks]
    if not blocks:
        return
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    name = path.relative_to(ROOT).as_posix()
    for block in blocks:
        for part, code in (("setup of the block", block.setup), ("block", block.code)):
            if not code:
                continue
            try:
                exec(compile(code, f"{name}:{block.line}", "exec"), namespace)  # noqa: S102
            except Exception as error:
                raise AssertionError(f"{name}: the {part} at line {block.line} raised "
                                     f"{type(error).__name__}: {error}") from error


def test_blocks_and_setups_are_found():
    text = textwrap.dedent("""\
        # Title
        <!-- a comment, not a setup -->
        ```python
        a = 1
        ```
        <!-- setup: b = 2 -->
        ```python
        c = a + b
        ```
        <!-- setup:
        import math
        d = math.pi
        -->
        ```python
        e = d
        ```
        - in a list:

          ```python
          f = e
          ```
        ```bash
        not python
        ```
        """)
    assert python_blocks(text) == [
        Block(3, "", "a = 1"),
        Block(7, "b = 2\n", "c = a + b"),
        Block(14, "import math\nd = math.pi\n", "e = d"),
        Block(19, "", "f = e"),
    ]
    with pytest.raises(ValueError, match="line 1: a ```python block is never closed"):
        python_blocks("```python\nx = 1\n")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if "-m pytest" in line)
    assert command.endswith("-m pytest -ra")  # every skip listed with its reason
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
