"""Dtypes used across jaxgbt, and why.

Dimension names used in every docstring:
  N  n_samples        rows of X
  F  n_features       columns of X
  B  n_bins           histogram bins per feature, the missing-value bin included
  D  depth            levels of an oblivious tree
  L  n_leaves         2**D
  T  n_trees          boosting rounds kept in a model
  K  n_outputs        raw outputs per row (1 for scalar losses)
  Q  n_queries        groups of rows of a ranking loss
  M  group size       rows of the largest group (groups are padded to it, with a mask)
"""

import numpy as np

# Binned features: B <= 256, so one byte per (feature, row). The binned matrix is the
# largest array of a fit and the one every level reads, so its width sets the speed.
BIN_DTYPE = np.uint8

# Gradients, Hessians, histograms, margins and leaf values. A float32 histogram summed
# over 1e6 rows (16 bins) measured a worst per-bin relative error of 1.3e-5 against
# float64; that changes a split only on near-ties. tests/test_tree.py checks whole trees
# against a float64 reference, and against float64 jaxgbt under jax.enable_x64.
FLOAT_DTYPE = np.float32

MAX_BINS = 256
MIN_BINS = 3  # two value bins and the missing bin
# Trees a fit may grow and a model file may hold: rounds are int32 on the device, and a
# bound keeps a hostile model file's allocation small.
MAX_TREES = 1_000_000
MAX_DEPTH = 12  # 4096 leaves; a (F, 2**(D-1), B) histogram per level must fit in memory
