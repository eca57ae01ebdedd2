"""The package's layers, read from its source: every import points down or sideways
within its own package, there are no import cycles, and functions stay short."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jaxgbt"

# Bottom to top (docs/architecture.md). A module may import from its own package (a
# folder, or itself for a top-level module) and from lower layers, never from a higher
# layer or from another package of its own layer.
LAYERS = (
    ("jaxgbt.version", "jaxgbt.datasets", "jaxgbt.config_files", "jaxgbt.objectives",
     "jaxgbt.distributed"),
    ("jaxgbt.core",),
    ("jaxgbt.data", "jaxgbt.evaluation"),
    ("jaxgbt.engine",),
    ("jaxgbt.io", "jaxgbt.explain"),
    ("jaxgbt.model",),
    ("jaxgbt.spec", "jaxgbt.inspection", "jaxgbt.plot"),
    ("jaxgbt.fitting",),
    ("jaxgbt.sweeps", "jaxgbt.differentiable"),
    ("jaxgbt.model_selection", "jaxgbt.forest", "jaxgbt.sklearn"),
    ("jaxgbt",),
    ("jaxgbt.cli",),
    ("jaxgbt.__main__",),
)
# Longer functions say why in their docstring, with this phrase.
LONG_FUNCTION_LINES = 80
LONG_FUNCTION_REASON = "Long because"


def _modules() -> dict[str, ast.Module]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        modules[name] = ast.parse(path.read_text(), filename=str(path))
    return modules


MODULES = _modules()


def _unit(module: str) -> str:
    """The layer entry a module belongs to (its package, or the module itself)."""
    matches = [u for layer in LAYERS for u in layer
               if module == u or module.startswith(u + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it there and to "
                             "docs/architecture.md")
    return max(matches, key=len)


def _layer(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def _imports(name: str, tree: ast.Module) -> set[str]:
    """The jaxgbt modules ``name`` imports anywhere in its source (functions included)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "jaxgbt" or node.module.startswith("jaxgbt.")):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in MODULES else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{name}: relative import; the package imports absolutely")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("jaxgbt"))
    return {module for module in found if module != name}


def test_every_module_has_a_layer():
    for name in MODULES:
        _unit(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    unit = _unit(name)
    for imported in _imports(name, MODULES[name]):
        if imported == "jaxgbt" and name != "jaxgbt":
            raise AssertionError(f"{name} imports the package's top: import the module instead")
        target = _unit(imported)
        if target == unit:
            continue
        assert _layer(target) < _layer(unit), (
            f"{name} (layer {_layer(unit)}, {unit}) imports {imported} (layer "
            f"{_layer(target)}, {target}): a module imports only from lower layers")


def test_no_import_cycles():
    graph = {name: _imports(name, tree) & set(MODULES) for name, tree in MODULES.items()}
    done, path = set(), []

    def visit(node):
        if node in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(node):] + [node]))
        if node in done:
            return
        path.append(node)
        for child in sorted(graph[node]):
            if child != "jaxgbt":
                visit(child)
        path.pop()
        done.add(node)

    for name in sorted(graph):
        visit(name)


def _function_lines(function: ast.FunctionDef) -> int:
    """Lines of code in a function, its docstring left out."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return 0 if not body else body[-1].end_lineno - body[0].lineno + 1


def test_functions_are_short_or_say_why():
    long = []
    for name, tree in MODULES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = _function_lines(node)
                reason = LONG_FUNCTION_REASON in (ast.get_docstring(node) or "")
                if lines > LONG_FUNCTION_LINES and not reason:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, ("functions over "
                      f"{LONG_FUNCTION_LINES} lines without '{LONG_FUNCTION_REASON}' in "
                      f"their docstring: {long}")


def test_the_layer_rules_catch_an_upward_import():
    tree = ast.parse("from jaxgbt.fitting import fit\n")
    assert _imports("jaxgbt.core.tree", tree) == {"jaxgbt.fitting"}
    assert _layer(_unit("jaxgbt.fitting")) > _layer(_unit("jaxgbt.core.tree"))


# Matrix products that XLA may run in reduced precision on accelerators: on NVIDIA GPUs
# a float32 product at the default precision multiplies in TF32 (10-bit mantissas), which
# moved base scores and SHAP values by 1e-4 relative there. Every such product in the
# package asks for full float32 precision (``precision=jax.lax.Precision.HIGHEST``);
# NumPy's host-side products are written ``np.matmul`` so that ``@`` never needs a look.
PRODUCTS = {"einsum", "matmul", "dot", "tensordot", "inner", "vdot", "dot_general"}


def _unprecise_products(tree: ast.Module) -> list[int]:
    """Lines of ``a @ b`` and of jnp/lax products called without ``precision=``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in PRODUCTS
              and isinstance(node.func.value, ast.Name) and node.func.value.id in {"jnp", "lax"}
              and not any(k.arg == "precision" for k in node.keywords)):
            lines.append(node.lineno)
    return lines


def test_products_ask_for_full_precision():
    found = {name: lines for name, tree in MODULES.items()
             if (lines := _unprecise_products(tree))}
    assert not found, f"products without precision=jax.lax.Precision.HIGHEST: {found}"


def test_the_precision_rule_catches_a_default_product():
    source = "c = weight @ g\nd = jnp.einsum('ij,j', a, b)\n"
    assert _unprecise_products(ast.parse(source)) == [1, 2]
    assert not _unprecise_products(ast.parse(
        "d = jnp.einsum('ij,j', a, b, precision=jax.lax.Precision.HIGHEST)\n"))
