"""Static configuration: the settings that decide shapes or code, kept apart from
the traced hyperparameters (learning rate, l2, ...) so that a new value of those
neither recompiles nor prevents ``vmap``."""

import dataclasses
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.objectives import Loss

# Rounds per compiled chunk. The boosting loop runs this many rounds per device call;
# rounds past n_trees in the last chunk are skipped by a lax.cond, so changing
# n_trees does not recompile.
ROUNDS_PER_CHUNK = 16


def bucketed(count: int, minimum: int, steps_per_doubling: int) -> int:
    """``count`` rounded up to a bucket: ``minimum`` at least, then a step of
    1 / ``steps_per_doubling`` of the next power of two's half (with 4: 1,024, 1,280,
    1,536, 1,792, 2,048, ...). Counts that decide a shape (a fit's rows, a sparse
    group's entries) are so rounded that nearby counts share one compiled program."""
    if count <= minimum:
        return minimum
    power = 1 << (count - 1).bit_length()  # the next power of two, at least count
    step = max(1, power // (2 * steps_per_doubling))
    return -(-count // step) * step

ROW_AXIS = "rows"

# The modes of a training program, checked once from fit's arguments (``jaxgbt.spec``).
GrowPolicy = Literal["oblivious", "depthwise", "lossguide"]
Boosting = Literal["plain", "ordered"]
RowSampling = Literal["bernoulli", "poisson", "goss", "bayesian", "mvs"]
ScoreFunction = Literal["l2", "cosine"]
# How noisy scores pick a split (``split.candidate_ranks``): "candidate", the largest
# noisy score of all candidates; "feature", CatBoost's, each feature's best candidate by
# its noisy score, then the features by a fresh draw each.
NoiseDraws = Literal["feature", "candidate"]
SplitCurvature = Literal["hessian", "weight"]
# XGBoost's names: one tree a round whose leaves hold every output, or a tree per output.
MultiStrategy = Literal["multi_output_tree", "one_output_per_tree"]


@dataclasses.dataclass(frozen=True)
class SparseGroup:
    """Features whose rows mostly sit in their bin of 0, summed from their entries
    (``histogram.build_sparse_histogram``; chosen by ``data.binning.sparse_group``).

    Attributes:
      features: their indices among every feature.
      zero_bins: each one's bin of 0 (the bin the value 0 falls in).
      n_bins: B_s, the bins their histograms hold (the missing bin last).
      n_entries: E, the entries (``histogram.SparseEntries``) the training rows may
        have: their values other than 0 (NaN included), counted before binning and
        rounded up to a bucket (``data.binning.bucket_entries``).
      n_candidates: the bins a split of theirs may end at, the first of the B_s - 1
        (``data.binning.search_candidates``), or None for all of them.
      bundles: mutually exclusive features summed as one column each
        (``data.binning.exclusive_bundles``: each bundle the positions in ``features``
        of its features), in place of the entries (then ``n_entries`` is 1); or None.
    """

    features: tuple[int, ...]
    zero_bins: tuple[int, ...]
    n_bins: int
    n_entries: int
    n_candidates: int | None = None
    bundles: tuple[tuple[int, ...], ...] | None = None

    def bundle_slots(self) -> tuple[np.ndarray, int]:
        """(i32[F_s]: where each feature's bins start in its bundles' histogram read as
        one axis of G x W bins, W): a bundle's k-th feature holds its bins B_s at
        1 + k * B_s (0 is the rows in which every feature of the bundle is 0)."""
        width = 1 + max(map(len, self.bundles)) * self.n_bins
        slots = np.zeros(len(self.features), np.int32)
        for b, positions in enumerate(self.bundles):
            for k, position in enumerate(positions):
                slots[position] = b * width + 1 + k * self.n_bins
        return slots, width


@dataclasses.dataclass(frozen=True)
class BoostConfig:
    """Hashable, static settings of one training program.

    Attributes:
      loss: the per-row loss ``loss(y_i, f_i)``; compared by identity, so passing the
        same function object again reuses the compiled program.
      depth: D, levels per tree.
      n_bins: B, bins per feature including the missing bin.
      n_outputs: K, raw outputs per row.
      vector_output: whether the loss takes f_i of shape (K,) rather than ().
      learning_rate_schedule: ``schedule(round) -> learning rate`` (for example an
        optax schedule), or None to use the traced ``learning_rate`` parameter.
      rounds_per_chunk: rounds per device call.
      axis_name: the mesh axis rows are split over, or None on one device.
      curvature: "exact", "full", "fisher" or "constant" (see ``objectives.derivatives``).
      fisher: the objective's expected Hessian, for ``curvature="fisher"``.
      grouped: the loss is over groups of rows (``loss(y_q, f_q, mask_q)``).
      leaf_quantile: when set, leaves are refreshed to this quantile of the residuals.
      row_sampling: "none", "bernoulli", "poisson", "goss", "bayesian" or "mvs" (see
        ``sampling``).
      sample_capacity: M, the row slots a sampled round grows its tree on
        (``sampling.sample_capacity``), or None to grow every tree on all rows.
      column_sampling: whether features are drawn per tree/level.
      grow_policy: "oblivious" (one split per level), "depthwise" (one per node) or
        "lossguide" (one per node, the leaf that gains most split first).
      max_leaves: the leaves a "lossguide" tree grows at most (None for the others).
      ordered: ordered boosting (``jaxgbt.core.ordered``): gradients at margins that only
        used the rows before each row in a random order; the rounds carry both margins.
      bin_groups: the features' groups of one histogram width, for features whose cut
        points fill few bins: ((B_g, feature indices, candidates), ...) covering every
        feature once, each group's splits ending at its first ``candidates`` bins
        (None: all B_g - 1), or None for every feature at ``n_bins`` with every
        candidate (``data.binning.bin_groups``); with ``sparse_group``, those not in it.
      sparse_group: features whose histograms are summed from their entries
        (``SparseGroup``), or None.
      score_noise: candidates are ranked by noisy scores (CatBoost's ``random_strength``,
        the traced ``BoostParams.random_strength``; ``split.ScoreNoise``).
      score_function: what candidates are ranked by: "l2", the gain (XGBoost's), or
        "cosine", CatBoost's default score (``split.cosine_scores``).
      noise_draws: with ``score_noise``, how the noisy scores pick a split
        (``NoiseDraws``, ``split.candidate_ranks``).
      split_curvature: what the split search sums as each row's curvature: "hessian",
        its weighted Hessian (XGBoost's and LightGBM's Newton search), or "weight", its
        weight alone (CatBoost's first-order search: the structure fits the gradients
        by least squares); either way the leaves take the Newton step.
      missing_values: whether a training row may sit in a missing bin (X holds a NaN).
        False: oblivious levels' larger searches, and any search of a group with fewer
        candidates, score missing-left alone, with no loop over directions
        (``split._searched``): without missing rows both directions have the same
        gains, and ties go to missing-left.
      leaf_newton_steps: Newton steps per leaf value (CatBoost's
        ``leaf_estimation_iterations``): after the first, each takes the derivatives
        again at the margins the leaf values so far lead to (``leaves.newton_from``).
      statistic_columns: the C columns holding ordered target statistics whose values
        differ by order of the rows, when ``statistic_orders`` is above 1.
      statistic_orders: P, the orders the trees take turns on, each with its own
        margins (``core.statistic_orders``); 1 for one order, carried as plain margins.
      one_output_per_tree: the outputs take turns: round r's tree is grown and its
        leaves set from output r mod K's g and h alone, the others' leaf values 0
        (XGBoost's ``multi_strategy="one_output_per_tree"``, grown one output at a time
        at the margins every tree before it gives); False: every tree holds a value for
        every output.
    """

    loss: Loss
    depth: int
    n_bins: int
    n_outputs: int = 1
    vector_output: bool = False
    learning_rate_schedule: Callable | None = None
    rounds_per_chunk: int = ROUNDS_PER_CHUNK
    axis_name: str | None = None
    curvature: str = "exact"
    fisher: Callable | None = None
    grouped: bool = False
    leaf_quantile: float | None = None
    row_sampling: RowSampling | Literal["none"] = "none"
    sample_capacity: int | None = None
    column_sampling: bool = False
    grow_policy: GrowPolicy = "oblivious"
    max_leaves: int | None = None
    ordered: bool = False
    bin_groups: tuple[tuple[int, tuple[int, ...], int | None], ...] | None = None
    sparse_group: SparseGroup | None = None
    score_noise: bool = False
    score_function: ScoreFunction = "l2"
    noise_draws: NoiseDraws = "candidate"
    split_curvature: SplitCurvature = "hessian"
    missing_values: bool = True
    leaf_newton_steps: int = 1
    statistic_columns: tuple[int, ...] = ()
    statistic_orders: int = 1
    one_output_per_tree: bool = False


def round_learning_rate(config: BoostConfig, learning_rate: jax.Array,
                        round_index: jax.Array) -> jax.Array:
    """f32[]: the round's learning rate: the schedule's, else the traced parameter."""
    if config.learning_rate_schedule is None:
        return learning_rate
    return jnp.asarray(config.learning_rate_schedule(round_index), jnp.float32)
