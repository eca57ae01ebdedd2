"""Functions that, under ``jax.vmap`` on CPU, run one model after another.

``jaxgbt.fit_many``, ``jaxgbt.cv`` and forests train many models as one vmapped program.
On accelerators the batched operations run the models side by side. On CPU, XLA's
batched scatter and the batched split search are slower than the same work done for one
model after another, whose histograms and gains stay in cache (measured in
docs/benchmarks.md): there the functions wrapped here map over the models with
``jax.lax.map`` instead.
"""

from collections.abc import Callable

import jax


def one_model_at_a_time(fn: Callable) -> Callable:
    """``fn`` (a function of pytrees of arrays) whose batching rule, on CPU, maps over the
    vmapped axis with ``jax.lax.map``; elsewhere it is ``jax.vmap(fn)``.

    Every output is batched. Nested vmaps map once per level. Arguments that are not
    batched (the binned data) are shared by every model, not copied.
    """

    @jax.custom_batching.custom_vmap
    def wrapped(*args):
        return fn(*args)

    @wrapped.def_vmap
    def rule(axis_size, in_batched, *args):
        if jax.default_backend() != "cpu":
            axes = jax.tree.map(lambda batched: 0 if batched else None, list(in_batched))
            out = jax.vmap(fn, in_axes=tuple(axes))(*args)
            return out, jax.tree.map(lambda _: True, out)
        leaves, treedef = jax.tree.flatten(args)
        batched = jax.tree.leaves(list(in_batched))

        def one(batched_leaves):
            given = iter(batched_leaves)
            member = [next(given) if b else leaf for leaf, b in zip(leaves, batched, strict=True)]
            return wrapped(*jax.tree.unflatten(treedef, member))

        out = jax.lax.map(one, [leaf for leaf, b in zip(leaves, batched, strict=True) if b])
        return out, jax.tree.map(lambda _: True, out)

    return wrapped
