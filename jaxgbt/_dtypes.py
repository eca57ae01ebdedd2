"""Dtypes used across jaxgbt, and why.

Dimension names used in every docstring:
  N  n_samples        rows of X
  F  n_features       columns of X
  B  n_bins           histogram bins per feature, the missing-value bin included
  D  depth            levels of an oblivious tree
  L  n_leaves         2**D
  T  n_trees          boosting rounds kept in a model
  K  n_outputs        raw outputs per row (1 for scalar losses)
"""

import numpy as np

# Binned features: B <= 256, so one byte per (feature, row). The binned matrix is the
# largest array of a fit and the one every level reads, so its width sets the speed.
BIN_DTYPE = np.uint8

# Gradients, Hessians, histograms, margins and leaf values. float32 histograms summed
# over 1e6 rows keep a relative error near 1e-6 (checked against a float64 reference in
# tests/test_tree.py); that is below what changes a split except on exact ties.
FLOAT_DTYPE = np.float32

# Node and leaf ids, feature indices, bin indices.
INDEX_DTYPE = np.int32

MAX_BINS = 256
MIN_BINS = 3  # two value bins and the missing bin
MAX_DEPTH = 12  # 4096 leaves; a (F, 2**(D-1), B) histogram per level must fit in memory
