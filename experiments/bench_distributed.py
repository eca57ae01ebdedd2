"""Training with several processes: seconds per tree, the histogram all-reduce, bytes moved,
and the all-reduce of a level's histogram against a reduce-scatter by feature.

    python experiments/bench_distributed.py [--config configs/bench_distributed.toml]
        [--quick] [--set key=value]

For each count P of `processes`, starts P local processes through ``jaxgbt launch`` (one
CPU device each); each holds 1/P of `rows` HIGGS-like rows and fits a logistic model of
`n_trees` oblivious trees with ``fit(distributed=True)``. Level d of a tree sums a
histogram f32[F, n_d, B, 2K] across processes, n_d the nodes its search holds
(``core.tree.search_sizes``: 2**d rounded up to a quarter of 2**(D-1); 8, 8, 8, 8, 16,
32 at D = 6). Each process reports:

  s/tree        the best of `repeats` warm fits divided by n_trees (the cut points'
                exchange, binning and the starting margin included), after a first fit
                that compiles;
  psum ms       the all-reduce of the deepest level's histogram f32[F, 2**(D-1), B, 2]
                alone: a jitted ``shard_map`` ``psum``, the median of `psum_calls`; and
                summed over the D levels' sizes, per tree;
  MB/tree       the bytes each process sends per tree, from the shapes: the D levels'
                histograms plus the leaf sums f32[2**D, 2], times 2 (P - 1) / P, what a
                ring all-reduce sends per process.

Then, with P > 1, the two ways to sum a level's histogram f32[F, n, B, 2] for each F of
`collective_features` and each size n of a depth-`collective_depth` tree's levels at
`collective_bins` bins (the median of `collective_calls` jitted ``shard_map`` calls):

  all-reduce    ``psum`` of the whole histogram; every process then searches all F
                features;
  reduce-scatter  ``psum_scatter`` over features (F padded to a multiple of P), each
                process holding the sums of F/P features, then an ``all_gather`` of each
                process's best candidate per node (gain f32 and index i32, packed into
                one f32[n, 2]) and the best of them. The local search between the two
                is left out of this time (taken as free);
                The reduce-scatter is also timed alone;
  search ms     ``core.split.best_level_candidate`` on one process's histogram alone,
                over all F features and over F/P (no missing values: one direction);
                timed apart, on the same shared cores as the collectives.

Bytes per process from ring formulas (not measured on the wire): all-reduce
2 (P - 1) / P of the histogram; reduce-scatter (P - 1) / P of the padded histogram plus
(P - 1) x n x 8 for the gather. Per tree: the levels' sizes of ``search_sizes``.

Then a paper estimate for `estimate_hosts` hosts: the per-row compute of one process
spread over the hosts, plus per tree the D levels' exchanges as ring all-reduces, or as
ring reduce-scatters and gathers, at the `bandwidth_gbit_s` and `latency_us` given in
the config (no measurement of a real network); and the same exchanges alone for the
collective comparison's shapes (F of `collective_features`, `collective_bins` bins).
Results go to `output_dir`/results.json.
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _runner import load_config, output_dir, print_table, write_json
from _synthetic import higgs_like

from jaxgbt.core.tree import search_sizes

F32_BYTES = 4
CANDIDATE_BYTES = 8  # a node's best candidate: gain f32 and index i32
AXIS = "rows"
WORKER_FLAG = "--worker"


def histogram_shape(n_features: int, n_nodes: int, n_bins: int) -> tuple[int, ...]:
    """The f32 array one level of n_nodes nodes sums across devices (one output)."""
    return (n_features, n_nodes, n_bins, 2)


def histogram_bytes(n_features: int, n_nodes: int, n_bins: int) -> int:
    return F32_BYTES * int(np.prod(histogram_shape(n_features, n_nodes, n_bins)))


def padded_features(n_features: int, n_processes: int) -> int:
    """F rounded up to a multiple of P, so that each process gets F/P features."""
    return -(-n_features // n_processes) * n_processes


def allreduce_bytes(n_features: int, n_nodes: int, n_bins: int, n_processes: int) -> float:
    """Bytes each process sends in a ring all-reduce of a level's histogram."""
    share = 2 * (n_processes - 1) / n_processes
    return share * histogram_bytes(n_features, n_nodes, n_bins)


def reduce_scatter_bytes(n_features: int, n_nodes: int, n_bins: int,
                         n_processes: int) -> float:
    """Bytes each process sends in a ring reduce-scatter of a level's histogram over
    features, plus the ring all-gather of every process's best candidate per node."""
    padded = histogram_bytes(padded_features(n_features, n_processes), n_nodes, n_bins)
    gather = (n_processes - 1) * n_nodes * CANDIDATE_BYTES
    return (n_processes - 1) / n_processes * padded + gather


def bytes_per_tree(cfg: dict, n_features: int, n_processes: int) -> float:
    """Bytes each process sends per tree in a ring all-reduce of every level's histogram
    and of the leaf sums (the per-round scalars left out)."""
    levels = sum(allreduce_bytes(n_features, n_nodes, cfg["n_bins"], n_processes)
                 for n_nodes in search_sizes(cfg["depth"]))
    return levels + leaf_sums_bytes(cfg, n_processes)


def leaf_sums_bytes(cfg: dict, n_processes: int) -> float:
    """Bytes each process sends in the ring all-reduce of a tree's leaf sums f32[2**D, 2]."""
    return F32_BYTES * 2 ** cfg["depth"] * 2 * 2 * (n_processes - 1) / n_processes


def _median_seconds(fn, arg, calls: int) -> float:
    """Median seconds of ``fn(arg)`` over `calls` warm calls (after one that compiles)."""
    import jax

    jax.block_until_ready(fn(arg))
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg))
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def _global_histogram(local_shape: tuple[int, ...]):
    """A histogram of `local_shape` on each device, as one array sharded over the mesh's
    first axis (the mesh, the array)."""
    import jax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), (AXIS,))
    local = np.ones((len(jax.local_devices()) * local_shape[0], *local_shape[1:]), np.float32)
    global_shape = (jax.device_count() * local_shape[0], *local_shape[1:])
    return mesh, jax.make_array_from_process_local_data(NamedSharding(mesh, P(AXIS)), local,
                                                        global_shape)


def _sharded(body, mesh, out_spec=()):
    """``body`` jitted over the mesh, each device's block in, `out_spec` out (replicated
    by default)."""
    import jax
    from jax.sharding import PartitionSpec as P

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(AXIS), out_specs=P(*out_spec),
                                 check_vma=False))


def _psum(hist):
    import jax

    return jax.lax.psum(hist, AXIS)


def _scatter(hist):
    import jax

    return jax.lax.psum_scatter(hist, AXIS, scatter_dimension=0, tiled=True)


def _scatter_then_gather(hist):
    """Reduce-scatter of f32[F_pad, n, B, 2] over features, each process's best per node
    (modelled as free: any per-node (gain, index) of its slice), gathered; the best."""
    import jax
    import jax.numpy as jnp

    mine = _scatter(hist)  # [F/P, n, B, 2]
    scores = mine[:, :, 0, 0]
    gain, index = jnp.max(scores, axis=0), jnp.argmax(scores, axis=0).astype(jnp.int32)
    # One gather of f32[n, 2], not two: the index's bits travel as an f32 beside the gain.
    packed = jnp.stack([gain, jax.lax.bitcast_convert_type(index, jnp.float32)], axis=-1)
    every = jax.lax.all_gather(packed, AXIS)  # [P, n, 2]
    winner = jnp.argmax(every[..., 0], axis=0)
    return jnp.take_along_axis(every, winner[None, :, None], axis=0)[0]


def _time_psum(cfg: dict, n_features: int, n_nodes: int) -> float:
    """Median seconds of one all-reduce of a level's histogram over every process."""
    mesh, hist = _global_histogram(histogram_shape(n_features, n_nodes, cfg["n_bins"]))
    return _median_seconds(_sharded(_psum, mesh), hist, cfg["psum_calls"])


def _time_search(n_features: int, n_nodes: int, n_bins: int, calls: int) -> float:
    """Median seconds of ``best_level_candidate`` on one device over f32[F, n, B, 2]
    with an empty missing bin (data without missing values)."""
    import jax
    import jax.numpy as jnp

    from jaxgbt.core.split import SplitParams, best_level_candidate

    hist = np.random.default_rng(0).uniform(0.1, 1.0, histogram_shape(n_features, n_nodes,
                                                                      n_bins))
    hist[:, :, -1] = 0.0
    hist = jax.device_put(hist.astype(np.float32), jax.local_devices()[0])
    params = SplitParams(*(jnp.float32(v) for v in (1.0, 0.0, 0.0, 1e-3)))
    features, counted = jnp.arange(n_features, dtype=jnp.int32), jnp.ones(n_features, bool)
    search = jax.jit(lambda h: best_level_candidate(h, features, counted, params, None))
    return _median_seconds(search, hist, calls)


def _time_collectives(cfg: dict) -> list[dict]:
    """Per F and level size n: the all-reduce, the reduce-scatter and gather, and the
    search over F and F/P features, median seconds each."""
    import jax

    n_processes, n_bins, calls = jax.process_count(), cfg["collective_bins"], \
        cfg["collective_calls"]
    rows = []
    for n_features in cfg["collective_features"]:
        share = padded_features(n_features, n_processes) // n_processes
        for n_nodes in sorted(set(search_sizes(cfg["collective_depth"]))):
            mesh, whole = _global_histogram(histogram_shape(n_features, n_nodes, n_bins))
            _, padded = _global_histogram(histogram_shape(
                padded_features(n_features, n_processes), n_nodes, n_bins))
            rows.append(dict(
                features=n_features, nodes=n_nodes,
                allreduce_s=_median_seconds(_sharded(_psum, mesh), whole, calls),
                scatter_s=_median_seconds(_sharded(_scatter, mesh, (AXIS,)), padded, calls),
                scatter_gather_s=_median_seconds(_sharded(_scatter_then_gather, mesh), padded,
                                                 calls),
                search_all_s=_time_search(n_features, n_nodes, n_bins, calls),
                search_share_s=_time_search(share, n_nodes, n_bins, calls)))
    return rows


def worker(cfg_path: Path, result_path: Path) -> None:
    """One process of a launched run: fits on its share of the rows, times them, and with
    more than one process times the two ways to sum a level's histogram."""
    import jax

    import jaxgbt

    jaxgbt.distributed.initialize()
    cfg = json.loads(cfg_path.read_text())
    X, y = higgs_like(cfg["rows"], cfg["seed"])
    mine = np.array_split(np.arange(len(y)), jax.process_count())[jax.process_index()]
    kwargs = dict(n_trees=cfg["n_trees"], depth=cfg["depth"], n_bins=cfg["n_bins"],
                  learning_rate=cfg["learning_rate"], distributed=True)

    def fit():
        start = time.perf_counter()
        model = jaxgbt.fit("logistic", X[mine], y[mine], **kwargs)
        jax.block_until_ready(model.leaf_value)
        return time.perf_counter() - start

    first = fit()
    best = min(fit() for _ in range(cfg["repeats"]))
    psum = {n_nodes: _time_psum(cfg, X.shape[1], n_nodes)
            for n_nodes in sorted(set(search_sizes(cfg["depth"])))}
    collectives = _time_collectives(cfg) if jax.process_count() > 1 else []
    if jax.process_index() == 0:
        result_path.write_text(json.dumps(dict(
            processes=jax.process_count(), rows_per_process=len(mine),
            s_per_tree=best / cfg["n_trees"], compile_s=first - best,
            psum_s=psum[2 ** (cfg["depth"] - 1)],
            psum_tree_s=sum(psum[n_nodes] for n_nodes in search_sizes(cfg["depth"])),
            collectives=collectives)))


def run(cfg: dict, n_processes: int, out: Path) -> dict:
    """Launches one run of `n_processes` workers; their result (process 0's)."""
    cfg_path, result_path = out / "worker_config.json", out / f"worker_{n_processes}.json"
    cfg_path.write_text(json.dumps(cfg))
    result_path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "jaxgbt", "launch", "--processes", str(n_processes), "--",
               sys.executable, __file__, WORKER_FLAG, str(cfg_path), str(result_path)]
    subprocess.run(command, check=True, timeout=cfg["run_timeout_s"])
    return json.loads(result_path.read_text())


def collective_levels(cfg: dict, n_processes: int, timed: list[dict]) -> list[dict]:
    """The measured levels of one process count with their bytes and milliseconds."""
    rows = []
    for level in timed:
        shape = (level["features"], level["nodes"], cfg["collective_bins"])
        rows.append(dict(
            processes=n_processes, features=level["features"], nodes=level["nodes"],
            hist_mb=histogram_bytes(*shape) / 1e6,
            allreduce_ms=1e3 * level["allreduce_s"],
            scatter_ms=1e3 * level["scatter_s"],
            scatter_gather_ms=1e3 * level["scatter_gather_s"],
            search_all_ms=1e3 * level["search_all_s"],
            search_share_ms=1e3 * level["search_share_s"],
            allreduce_mb=allreduce_bytes(*shape, n_processes) / 1e6,
            scatter_gather_mb=reduce_scatter_bytes(*shape, n_processes) / 1e6))
    return rows


def collective_trees(cfg: dict, levels: list[dict]) -> list[dict]:
    """Per process count and F, the levels of one depth-`collective_depth` tree summed
    (each level at its ``search_sizes`` node count), with and without the search."""
    sizes = search_sizes(cfg["collective_depth"])
    trees = []
    for key in dict.fromkeys((row["processes"], row["features"]) for row in levels):
        by_nodes = {row["nodes"]: row for row in levels
                    if (row["processes"], row["features"]) == key}
        total = {column: sum(by_nodes[n_nodes][column] for n_nodes in sizes)
                 for column in ("allreduce_ms", "scatter_gather_ms", "search_all_ms",
                                "search_share_ms", "allreduce_mb", "scatter_gather_mb")}
        trees.append(dict(
            processes=key[0], features=key[1], levels="+".join(map(str, sizes)),
            allreduce_ms=total["allreduce_ms"], scatter_gather_ms=total["scatter_gather_ms"],
            allreduce_search_ms=total["allreduce_ms"] + total["search_all_ms"],
            scatter_gather_search_ms=total["scatter_gather_ms"] + total["search_share_ms"],
            allreduce_mb=total["allreduce_mb"], scatter_gather_mb=total["scatter_gather_mb"]))
    return trees


def _ring_seconds(steps: int, n_bytes: float, gbit_s: float, latency_us: float) -> float:
    return steps * latency_us * 1e-6 + n_bytes / (gbit_s * 1e9 / 8)


def tree_comm_seconds(n_features: int, n_bins: int, depth: int, hosts: int, gbit_s: float,
                      latency_us: float, scatter: bool) -> float:
    """Seconds per tree of the levels' exchanges on `hosts` hosts: ring all-reduces, or
    (`scatter`) ring reduce-scatters and ring gathers of the best candidates; 2 (H - 1)
    steps of `latency_us` a level either way."""
    level_bytes = reduce_scatter_bytes if scatter else allreduce_bytes
    return sum(_ring_seconds(2 * (hosts - 1), level_bytes(n_features, n, n_bins, hosts),
                             gbit_s, latency_us) for n in search_sizes(depth))


def estimate(cfg: dict, one_process: dict, n_features: int) -> list[dict]:
    """Seconds per tree on `estimate_hosts` hosts from the one-process compute per row,
    and per level a ring all-reduce, or a ring reduce-scatter and a ring gather of the
    best candidates, at each assumed bandwidth."""
    compute_per_row = one_process["s_per_tree"] / cfg["rows"]
    shape = (n_features, cfg["n_bins"], cfg["depth"])
    rows = []
    for hosts in cfg["estimate_hosts"]:
        compute = compute_per_row * cfg["estimate_rows"] / hosts
        scattered = sum(reduce_scatter_bytes(n_features, n, cfg["n_bins"], hosts)
                        for n in search_sizes(cfg["depth"]))
        row = dict(hosts=hosts, rows_per_host=cfg["estimate_rows"] // hosts,
                   compute_s=compute, mb_per_tree=bytes_per_tree(cfg, n_features, hosts) / 1e6,
                   rs_mb_per_tree=(scattered + leaf_sums_bytes(cfg, hosts)) / 1e6)
        for gbit in cfg["bandwidth_gbit_s"]:
            allreduce = tree_comm_seconds(*shape, hosts, gbit, cfg["latency_us"], False)
            row[f"comm_s@{gbit:g}"] = allreduce
            row[f"rs_comm_s@{gbit:g}"] = tree_comm_seconds(*shape, hosts, gbit,
                                                           cfg["latency_us"], True)
            row[f"s_per_tree@{gbit:g}"] = compute + allreduce
        rows.append(row)
    return rows


def wide_estimate(cfg: dict) -> list[dict]:
    """The levels' exchanges alone (no compute) per tree of depth `collective_depth` at
    `collective_bins` bins, for each F of `collective_features` on `estimate_hosts`
    hosts: MB each host sends and seconds, all-reduce against reduce-scatter."""
    rows = []
    for n_features in cfg["collective_features"]:
        shape = (n_features, cfg["collective_bins"], cfg["collective_depth"])
        sizes = search_sizes(cfg["collective_depth"])
        for hosts in cfg["estimate_hosts"]:
            row = dict(features=n_features, hosts=hosts,
                       mb_per_tree=sum(allreduce_bytes(n_features, n, shape[1], hosts)
                                       for n in sizes) / 1e6,
                       rs_mb_per_tree=sum(reduce_scatter_bytes(n_features, n, shape[1], hosts)
                                          for n in sizes) / 1e6)
            for gbit in cfg["bandwidth_gbit_s"]:
                row[f"comm_s@{gbit:g}"] = tree_comm_seconds(*shape, hosts, gbit,
                                                            cfg["latency_us"], False)
                row[f"rs_comm_s@{gbit:g}"] = tree_comm_seconds(*shape, hosts, gbit,
                                                               cfg["latency_us"], True)
            rows.append(row)
    return rows


def print_wide_estimate(cfg: dict, rows: list[dict]) -> None:
    gbits = cfg["bandwidth_gbit_s"]
    print(f"\nThe levels' exchanges per tree of depth {cfg['collective_depth']} at "
          f"{cfg['collective_bins']} bins (no compute; ring collectives, "
          f"{cfg['latency_us']:g} us a step):")
    comm = [(f"{name} s @{g:g} Gbit/s", f"{key}@{g:g}", ".4f") for g in gbits
            for name, key in (("all-reduce", "comm_s"), ("RS", "rs_comm_s"))]
    print_table(rows, [("F", "features", "d"), ("hosts", "hosts", "d"),
                       ("all-reduce MB/tree", "mb_per_tree", ".2f"),
                       ("RS MB/tree", "rs_mb_per_tree", ".2f"), *comm])


def main() -> None:
    cfg = load_config("bench_distributed", doc=__doc__)
    out = output_dir(cfg)
    n_features = higgs_like(8, 0)[0].shape[1]
    measured, levels = [], []
    for n_processes in cfg["processes"]:
        result = run(cfg, n_processes, out)
        levels += collective_levels(cfg, n_processes, result.pop("collectives"))
        result["mb_per_tree"] = bytes_per_tree(cfg, n_features, n_processes) / 1e6
        result["psum_ms"] = 1e3 * result["psum_s"]
        result["comm_share"] = result["psum_tree_s"] / result["s_per_tree"]
        measured.append(result)
    sizes = search_sizes(cfg["depth"])
    print(f"\n{cfg['rows']} rows, {n_features} features, depth {cfg['depth']}, "
          f"{cfg['n_bins']} bins, {cfg['n_trees']} trees; histogram "
          f"f32{list(histogram_shape(n_features, 2 ** (cfg['depth'] - 1), cfg['n_bins']))} "
          f"at the deepest level, levels of {'+'.join(map(str, sizes))} nodes")
    print_table(measured, [("processes", "processes", "d"),
                           ("rows/process", "rows_per_process", "d"),
                           ("s/tree", "s_per_tree", ".4f"), ("compile s", "compile_s", ".1f"),
                           ("psum ms/deepest level", "psum_ms", ".2f"),
                           ("psums / tree", "comm_share", ".1%"),
                           ("MB sent/tree", "mb_per_tree", ".2f")])
    trees = collective_trees(cfg, levels)
    if levels:
        print(f"\nA level's histogram f32[F, n, {cfg['collective_bins']}, 2]: all-reduce "
              "(psum) or reduce-scatter by feature (alone, and + gather of the best per node, "
              f"local search not timed), median of {cfg['collective_calls']} calls; search = "
              "best_level_candidate over F or F/P features; MB sent per process (ring):")
        print_table(levels, [("P", "processes", "d"), ("F", "features", "d"),
                             ("nodes", "nodes", "d"), ("hist MB", "hist_mb", ".2f"),
                             ("all-reduce ms", "allreduce_ms", ".2f"),
                             ("reduce-scatter ms", "scatter_ms", ".2f"),
                             ("reduce-scatter+gather ms", "scatter_gather_ms", ".2f"),
                             ("search F ms", "search_all_ms", ".2f"),
                             ("search F/P ms", "search_share_ms", ".2f"),
                             ("all-reduce MB", "allreduce_mb", ".2f"),
                             ("reduce-scatter MB", "scatter_gather_mb", ".2f")])
        print(f"\nPer tree of depth {cfg['collective_depth']} (levels summed):")
        print_table(trees, [("P", "processes", "d"), ("F", "features", "d"),
                            ("levels (nodes)", "levels", "s"),
                            ("all-reduce ms", "allreduce_ms", ".1f"),
                            ("reduce-scatter+gather ms", "scatter_gather_ms", ".1f"),
                            ("all-reduce + search F ms", "allreduce_search_ms", ".1f"),
                            ("reduce-scatter + search F/P ms", "scatter_gather_search_ms",
                             ".1f"),
                            ("all-reduce MB", "allreduce_mb", ".2f"),
                            ("reduce-scatter MB", "scatter_gather_mb", ".2f")])
    estimated = []
    if measured and measured[0]["processes"] == 1:
        estimated = estimate(cfg, measured[0], n_features)
        print(f"\nEstimate for {cfg['estimate_rows']:,} rows (compute from 1 process; "
              f"ring collectives, {cfg['latency_us']:g} us a step):")
        gbits = cfg["bandwidth_gbit_s"]
        comm = [(f"comm s @{g:g} Gbit/s", f"comm_s@{g:g}", ".4f") for g in gbits]
        rs_comm = [(f"RS comm s @{g:g} Gbit/s", f"rs_comm_s@{g:g}", ".4f") for g in gbits]
        bandwidth = [(f"s/tree @{g:g} Gbit/s", f"s_per_tree@{g:g}", ".3f") for g in gbits]
        print_table(estimated, [("hosts", "hosts", "d"), ("rows/host", "rows_per_host", ","),
                                ("compute s", "compute_s", ".3f"),
                                ("MB sent/tree", "mb_per_tree", ".2f"),
                                ("RS MB sent/tree", "rs_mb_per_tree", ".2f"), *comm,
                                *rs_comm, *bandwidth])
    wide = wide_estimate(cfg)
    print_wide_estimate(cfg, wide)
    write_json(out / "results.json", dict(config=cfg, measured=measured,
                                          collective_levels=levels, collective_trees=trees,
                                          estimated=estimated, wide_estimated=wide))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == WORKER_FLAG:
        worker(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
