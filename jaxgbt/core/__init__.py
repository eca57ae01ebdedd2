"""The training math on device: histograms, split search, tree growth, leaf values,
constraints, sampling and the boosting round (``round.boost_round``), each a pure function
of fixed shapes (``jit``/``vmap``-able)."""
