"""Training with several processes: seconds per tree, the histogram all-reduce, bytes moved.

    python experiments/bench_distributed.py [--config configs/bench_distributed.toml]
        [--quick] [--set key=value]

For each count P of `processes`, starts P local processes through ``jaxgbt launch`` (one
CPU device each); each holds 1/P of `rows` HIGGS-like rows and fits a logistic model of
`n_trees` oblivious trees with ``fit(distributed=True)``. Each process reports:

  s/tree        the best of `repeats` warm fits divided by n_trees (the cut points'
                exchange, binning and the starting margin included), after a first fit
                that compiles;
  psum ms       the all-reduce of one level's histogram alone: a jitted ``shard_map``
                ``psum`` of f32[F, 2**(D-1), B, 2] (the array each level of a tree sums
                across devices, ``core.tree.grow_tree``), the median of `psum_calls`;
  MB/tree       the bytes each process sends per tree, from the shapes: D levels of that
                histogram plus the leaf sums f32[2**D, 2], times 2 (P - 1) / P, what a
                ring all-reduce sends per process.

Then a paper estimate for `estimate_hosts` hosts: the per-row compute of one process
spread over the hosts, plus D ring all-reduces per tree at the `bandwidth_gbit_s` and
`latency_us` given in the config (no measurement of a real network).
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

F32_BYTES = 4
WORKER_FLAG = "--worker"


def histogram_shape(cfg: dict, n_features: int) -> tuple[int, ...]:
    """The f32 array one level of an oblivious tree sums across devices (one output)."""
    return (n_features, 2 ** (cfg["depth"] - 1), cfg["n_bins"], 2)


def bytes_per_tree(cfg: dict, n_features: int, n_processes: int) -> float:
    """Bytes each process sends per tree in a ring all-reduce of every level's histogram
    and of the leaf sums (the per-round scalars left out)."""
    level = F32_BYTES * int(np.prod(histogram_shape(cfg, n_features)))
    leaves = F32_BYTES * 2 ** cfg["depth"] * 2
    return (cfg["depth"] * level + leaves) * 2 * (n_processes - 1) / n_processes


def _time_psum(cfg: dict, n_features: int) -> float:
    """Median seconds of one all-reduce of a level's histogram over every process."""
    import jax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("rows",))
    local_shape = histogram_shape(cfg, n_features)
    local = np.ones((len(jax.local_devices()) * local_shape[0], *local_shape[1:]), np.float32)
    global_shape = (jax.device_count() * local_shape[0], *local_shape[1:])
    hist = jax.make_array_from_process_local_data(NamedSharding(mesh, P("rows")), local,
                                                  global_shape)
    summed = jax.jit(jax.shard_map(lambda h: jax.lax.psum(h, "rows"), mesh=mesh,
                                   in_specs=P("rows"), out_specs=P(), check_vma=False))
    jax.block_until_ready(summed(hist))  # compiles
    seconds = []
    for _ in range(cfg["psum_calls"]):
        start = time.perf_counter()
        jax.block_until_ready(summed(hist))
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def worker(cfg_path: Path, result_path: Path) -> None:
    """One process of a launched run: fits on its share of the rows, times them."""
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
    psum = _time_psum(cfg, X.shape[1])
    if jax.process_index() == 0:
        result_path.write_text(json.dumps(dict(
            processes=jax.process_count(), rows_per_process=len(mine),
            s_per_tree=best / cfg["n_trees"], compile_s=first - best, psum_s=psum)))


def run(cfg: dict, n_processes: int, out: Path) -> dict:
    """Launches one run of `n_processes` workers; their result (process 0's)."""
    cfg_path, result_path = out / "worker_config.json", out / f"worker_{n_processes}.json"
    cfg_path.write_text(json.dumps(cfg))
    result_path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "jaxgbt", "launch", "--processes", str(n_processes), "--",
               sys.executable, __file__, WORKER_FLAG, str(cfg_path), str(result_path)]
    subprocess.run(command, check=True, timeout=cfg["run_timeout_s"])
    return json.loads(result_path.read_text())


def estimate(cfg: dict, one_process: dict, n_features: int) -> list[dict]:
    """Seconds per tree on `estimate_hosts` hosts from the one-process compute per row
    and a ring all-reduce per level at each assumed bandwidth."""
    compute_per_row = one_process["s_per_tree"] / cfg["rows"]
    level_bytes = F32_BYTES * int(np.prod(histogram_shape(cfg, n_features)))
    rows = []
    for hosts in cfg["estimate_hosts"]:
        compute = compute_per_row * cfg["estimate_rows"] / hosts
        row = dict(hosts=hosts, rows_per_host=cfg["estimate_rows"] // hosts,
                   compute_s=compute, mb_per_tree=bytes_per_tree(cfg, n_features, hosts) / 1e6)
        for gbit in cfg["bandwidth_gbit_s"]:
            per_level = (2 * (hosts - 1) * cfg["latency_us"] * 1e-6
                         + 2 * (hosts - 1) / hosts * level_bytes / (gbit * 1e9 / 8))
            row[f"comm_s@{gbit:g}"] = cfg["depth"] * per_level
            row[f"s_per_tree@{gbit:g}"] = compute + cfg["depth"] * per_level
        rows.append(row)
    return rows


def main() -> None:
    cfg = load_config("bench_distributed", doc=__doc__)
    out = output_dir(cfg)
    n_features = higgs_like(8, 0)[0].shape[1]
    measured = []
    for n_processes in cfg["processes"]:
        result = run(cfg, n_processes, out)
        result["mb_per_tree"] = bytes_per_tree(cfg, n_features, n_processes) / 1e6
        result["psum_ms"] = 1e3 * result["psum_s"]
        result["comm_share"] = cfg["depth"] * result["psum_s"] / result["s_per_tree"]
        measured.append(result)
    print(f"\n{cfg['rows']} rows, {n_features} features, depth {cfg['depth']}, "
          f"{cfg['n_bins']} bins, {cfg['n_trees']} trees; histogram "
          f"f32{list(histogram_shape(cfg, n_features))} per level")
    print_table(measured, [("processes", "processes", "d"),
                           ("rows/process", "rows_per_process", "d"),
                           ("s/tree", "s_per_tree", ".4f"), ("compile s", "compile_s", ".1f"),
                           ("psum ms/level", "psum_ms", ".2f"),
                           ("D x psum / tree", "comm_share", ".1%"),
                           ("MB sent/tree", "mb_per_tree", ".2f")])
    estimated = []
    if measured and measured[0]["processes"] == 1:
        estimated = estimate(cfg, measured[0], n_features)
        print(f"\nEstimate for {cfg['estimate_rows']:,} rows (compute from 1 process; "
              f"ring all-reduce, {cfg['latency_us']:g} us a step):")
        bandwidth = [(f"s/tree @{g:g} Gbit/s", f"s_per_tree@{g:g}", ".3f")
                     for g in cfg["bandwidth_gbit_s"]]
        comm = [(f"comm s @{g:g} Gbit/s", f"comm_s@{g:g}", ".4f") for g in cfg["bandwidth_gbit_s"]]
        print_table(estimated, [("hosts", "hosts", "d"), ("rows/host", "rows_per_host", ","),
                                ("compute s", "compute_s", ".3f"),
                                ("MB sent/tree", "mb_per_tree", ".2f"), *comm, *bandwidth])
    write_json(out / "results.json", dict(config=cfg, measured=measured, estimated=estimated))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == WORKER_FLAG:
        worker(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
