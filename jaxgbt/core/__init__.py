"""The training math on device: histograms, split search, tree growth, leaf values,
constraints and sampling, each a pure function of fixed shapes (``jit``/``vmap``-able)."""
