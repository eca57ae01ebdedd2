"""The histogram's floors: how far one level's histogram is from what bounds it.

    python experiments/bench_histogram.py [--config configs/bench_histogram.toml]
        [--rows 1000000 10000000 ...] [--set key=value]

A tree of depth D costs about D histograms (one per level), so a level's histogram sets
the speed of training. On the synthetic HIGGS-like data (experiments/_synthetic.py),
binned as ``fit`` bins it, on whatever device JAX runs on by default, this prints two
markdown tables and writes results.json to the config's output_dir:

1. One level's histogram (``jaxgbt.core.histogram.build_histogram``: all features, 2**(D-1)
   nodes, g and h as f32[N, 2]) for each row count, against two floors:
   - the bandwidth floor: the bytes a level must read (the binned matrix, g/h and the
     node ids) over the device's copy bandwidth (``x + 1`` over a large f32 array:
     bytes read and written over seconds);
   - the scatter floor: N * F updates at the cost of one bare ``segment_sum`` of
     f32[N, 2] updates over one feature's segments, features one after another.
   The last columns are seconds per tree of a warm ``jaxgbt.fit`` at that size and
   the share of it that D level histograms account for.
2. The cost of one scatter update against the update's layout, for the largest row
   count: the layout jaxgbt uses (f32 g and h side by side), one f32 column, integer
   (quantized) g and h, g and h packed as two 16-bit halves of one int32 (what a
   quantized histogram would scatter), and f32[N, 2K] for K models whose rows fall in
   the same segments (a root level shared by K models of a sweep), per model.

Timings are the best of `repeats` calls of a compiled function after one warm-up call.
"""

import os
import time

import numpy as np
from _runner import load_config, output_dir, print_table, write_json
from _synthetic import higgs_like

LEVEL_COLUMNS = [
    ("rows", "rows", ","), ("features", "features", "d"), ("level s", "level_s", ".4f"),
    ("ns per (row, feature)", "ns_per_update", ".2f"),
    ("bandwidth floor s", "bandwidth_floor_s", ".4f"),
    ("level / bandwidth floor", lambda r: r["level_s"] / r["bandwidth_floor_s"], ".1f"),
    ("scatter floor s", "scatter_floor_s", ".4f"),
    ("level / scatter floor", lambda r: r["level_s"] / r["scatter_floor_s"], ".2f"),
    ("s/tree (fit)", "tree_s", ".4f"), ("D levels / tree", "histogram_share", ".2f")]
LAYOUT_COLUMNS = [("updates", "layout", ""), ("ns per update", "ns_per_update", ".2f"),
                  ("ns per update and model", "ns_per_model_update", ".2f")]


def best_seconds(function, *args, repeats: int) -> float:
    """Best of `repeats` timed calls of a compiled function (after one warm-up call)."""
    import jax

    jax.block_until_ready(function(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        best = min(best, time.perf_counter() - start)
    return best


def copy_bandwidth(n_floats: int, repeats: int) -> float:
    """Bytes per second of ``x + 1`` over an f32 array of n_floats (read plus write)."""
    import jax
    import jax.numpy as jnp

    x = jnp.zeros(n_floats, jnp.float32)
    seconds = best_seconds(jax.jit(lambda a: a + 1), x, repeats=repeats)
    return 2 * 4 * n_floats / seconds


def binned_level(n_rows: int, depth: int, n_bins: int, seed: int):
    """The binned matrix u8[F, N], plausible g/h f32[N, 2] and the deepest level's node
    ids i32[N] (each row's side of D - 1 splits at the middle bin of features 0..D-2),
    all on the default device."""
    import jax
    import jax.numpy as jnp

    from jaxgbt.data.binning import apply_bins, compute_thresholds

    X, y = higgs_like(n_rows, seed)
    bins = apply_bins(X, compute_thresholds(X, n_bins))
    node = np.zeros(n_rows, np.int32)
    for feature in range(depth - 1):
        node = 2 * node + (bins[feature] > n_bins // 2).astype(np.int32)
    p = 1 / (1 + np.exp(-np.random.default_rng(seed).normal(size=n_rows)))
    gh = np.stack([p - y, p * (1 - p)], axis=1).astype(np.float32)
    return jax.device_put(bins), jax.device_put(node), jnp.asarray(gh)


def level_row(n_rows: int, cfg: dict, bandwidth: float) -> dict:
    """Table 1's measurements at one row count."""
    import jax

    import jaxgbt
    from jaxgbt.core.histogram import build_histogram

    depth, n_bins, repeats = cfg["depth"], cfg["n_bins"], cfg["repeats"]
    n_nodes = 2 ** (depth - 1)
    bins, node, gh = binned_level(n_rows, depth, n_bins, cfg["seed"])
    n_features = bins.shape[0]
    level = jax.jit(lambda b, n, g: build_histogram(b, n, g, n_nodes, n_bins))
    level_s = best_seconds(level, bins, node, gh, repeats=repeats)

    # One feature's scatter alone, with the level's segment ids computed beforehand.
    ids = jax.device_put(node * n_bins + bins[0].astype(np.int32))
    one_feature = jax.jit(lambda i, g: jax.ops.segment_sum(g, i, num_segments=n_nodes * n_bins))
    scatter_s = best_seconds(one_feature, ids, gh, repeats=repeats)

    read_bytes = bins.size + gh.size * 4 + node.size * 4
    X, y = higgs_like(n_rows, cfg["seed"])
    fit_args = dict(n_trees=cfg["n_trees"], depth=depth, n_bins=n_bins, learning_rate=0.1,
                    l2=1.0)
    jax.block_until_ready(jaxgbt.fit("logistic", X, y, **fit_args).leaf_value)  # compiles
    fits = []
    for _ in range(cfg["fit_repeats"]):
        start = time.perf_counter()
        jax.block_until_ready(jaxgbt.fit("logistic", X, y, **fit_args).leaf_value)
        fits.append(time.perf_counter() - start)
    tree_s = min(fits) / cfg["n_trees"]
    return dict(rows=n_rows, features=n_features, nodes=n_nodes, level_s=level_s,
                ns_per_update=level_s / (n_rows * n_features) * 1e9,
                bandwidth_floor_s=read_bytes / bandwidth,
                scatter_floor_s=scatter_s * n_features, tree_s=tree_s,
                histogram_share=depth * level_s / tree_s)


def layout_rows(n_rows: int, cfg: dict) -> list[dict]:
    """Table 2: ns per scatter update of each update layout, on one feature's segments."""
    import jax
    import jax.numpy as jnp

    depth, n_bins = cfg["depth"], cfg["n_bins"]
    n_segments = 2 ** (depth - 1) * n_bins
    bins, node, gh = binned_level(n_rows, depth, n_bins, cfg["seed"])
    ids = jax.device_put(node * n_bins + bins[0].astype(np.int32))
    root_ids = jax.device_put(bins[0].astype(np.int32))
    g = np.asarray(gh)
    scale = 2**12  # quantized g, h: small integers, as a quantized histogram would hold
    quantized = np.round(g * [scale, scale]).astype(np.int32)
    layouts = [
        ("f32[N, 2]: g and h (jaxgbt)", ids, jnp.asarray(g), 1),
        ("f32[N]: g alone", ids, jnp.asarray(g[:, 0]), 1),
        ("i32[N, 2]: quantized g and h", ids, jnp.asarray(quantized), 1),
        ("i32[N]: quantized g and h packed 16 + 16 bits", ids,
         jnp.asarray((quantized[:, 0] << 16) + (quantized[:, 1] & 0xFFFF)), 1),
    ]
    for members in cfg["members"]:
        layouts.append((f"f32[N, {2 * members}]: {members} models' g and h, shared root",
                        root_ids, jnp.asarray(np.tile(g, members)), members))
    scatter = jax.jit(lambda i, u: jax.ops.segment_sum(u, i, num_segments=n_segments))
    rows = []
    for name, segment_ids, updates, members in layouts:
        seconds = best_seconds(scatter, segment_ids, updates, repeats=cfg["repeats"])
        ns = seconds / n_rows * 1e9
        rows.append(dict(layout=name, rows=n_rows, ns_per_update=ns,
                         ns_per_model_update=ns / members))
    return rows


def main(cfg: dict) -> dict:
    import jax

    row_counts = cfg["rows"]
    device = jax.devices()[0]
    bandwidth = copy_bandwidth(cfg["bandwidth_floats"], cfg["repeats"])
    print(f"device: {device.device_kind} ({jax.default_backend()}, {os.cpu_count()} cores "
          f"on the host), jax {jax.__version__}; copy bandwidth {bandwidth / 1e9:.1f} GB/s")
    print()
    print(f"One level's histogram: {cfg['n_bins']} bins, depth {cfg['depth']}, the "
          f"deepest level's {2 ** (cfg['depth'] - 1)} nodes; warm fits of {cfg['n_trees']} trees")
    print_table([], LEVEL_COLUMNS)  # a row follows as each row count is measured
    levels = []
    for n_rows in row_counts:
        levels.append(level_row(n_rows, cfg, bandwidth))
        print_table(levels[-1:], LEVEL_COLUMNS, header=False)
    print()
    print(f"One scatter update against its layout: {max(row_counts):,} rows, one feature, "
          f"{2 ** (cfg['depth'] - 1) * cfg['n_bins']} segments (the shared root: "
          f"{cfg['n_bins']})")
    layouts = layout_rows(max(row_counts), cfg)
    print_table(layouts, LAYOUT_COLUMNS)
    results = dict(device=str(device.device_kind), backend=jax.default_backend(),
                   jax=jax.__version__, copy_bandwidth_bytes_per_s=bandwidth, config=cfg,
                   levels=levels, layouts=layouts)
    write_json(output_dir(cfg) / "results.json", results)
    return results


if __name__ == "__main__":
    main(load_config("bench_histogram", doc=__doc__, overrides={
        "rows": dict(type=int, nargs="+", help="replace the config's rows")}))
