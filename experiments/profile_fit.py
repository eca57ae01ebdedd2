"""Where a warm fit's time goes: XLA's kernels from a `jax.profiler` trace, summed by name.

    python experiments/profile_fit.py [--config configs/profile_fit.toml]
        [--set rows=200000 --set features=28 --set task='"binary"']

Fits one bench_wide.py cell (its data kinds and tasks) twice to compile and warm up,
then a third time under ``jax.profiler.trace``, and prints, per tree: the fits' times,
the busy time of each kind of thread, and the kernels by total time with their calls,
both by full name and by name less its numeric suffix (``wrapped_scatter.12`` counts as
``wrapped_scatter``). Kernels run inside others (a ``while`` holds its body's), so
totals overlap; compare a kernel between machines or revisions, not the column's sum.
Writes the summary to results.json and keeps the trace (for Perfetto or TensorBoard)
under ``output_dir``.
"""

import collections
import gzip
import json
import re

import jax
from _runner import load_config, output_dir, processor, timed, write_json

import jaxgbt


def fit(cfg, X, y):
    loss = "logistic" if cfg["task"] == "binary" else "softmax"
    devices = jax.devices()[:1] if cfg["devices"] == "one" else None
    model = jaxgbt.fit(loss, X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       n_bins=cfg["n_bins"], devices=devices, **cfg["jaxgbt_settings"])
    jax.block_until_ready(model.leaf_value)


def kernel_times(trace: dict) -> tuple[collections.Counter, collections.Counter,
                                       collections.Counter]:
    """Microseconds by thread kind, and by kernel name with its call counts, of a trace's
    complete events (the Python threads' own events left out of the kernels)."""
    events = trace["traceEvents"]
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                    if e.get("ph") == "M" and e.get("name") == "thread_name"}
    by_thread, by_kernel, calls = (collections.Counter() for _ in range(3))
    for event in events:
        if event.get("ph") != "X":
            continue
        thread = thread_names.get((event["pid"], event["tid"]), "?")
        by_thread[re.sub(r"-?\d+", "#", thread)] += event["dur"]
        if "python" in thread.lower() or event["name"].startswith("$"):
            continue
        by_kernel[event["name"]] += event["dur"]
        calls[event["name"]] += 1
    return by_thread, by_kernel, calls


def by_prefix(totals: collections.Counter, calls: collections.Counter):
    """The same totals and calls with each name's numeric suffix dropped."""
    prefix_totals, prefix_calls = collections.Counter(), collections.Counter()
    for name, total in totals.items():
        prefix = re.sub(r"\.\d+$", "", name)
        prefix_totals[prefix] += total
        prefix_calls[prefix] += calls[name]
    return prefix_totals, prefix_calls


def main(cfg: dict) -> dict:
    from bench_wide import make_data  # not at import: it turns the compilation cache off

    X, y = make_data(cfg["rows"], cfg["features"], cfg["task"], cfg["kind"], cfg["seed"])
    fits = [timed(fit, cfg, X, y)[1] for _ in range(2)]
    folder = output_dir(cfg) / "trace"
    with jax.profiler.trace(str(folder)):
        fits.append(timed(fit, cfg, X, y)[1])
    trace_file = max(folder.rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    with gzip.open(trace_file) as file:
        by_thread, totals, calls = kernel_times(json.load(file))
    ms_per_tree = 1000.0 * cfg["n_trees"]  # a trace's microseconds over this: ms per tree
    print(f"{cfg['rows']:,} x {cfg['features']} {cfg['kind']} {cfg['task']}, "
          f"{cfg['n_trees']} trees of depth {cfg['depth']}, {jax.device_count()} "
          f"{jax.default_backend()} device(s), devices={cfg['devices']}, {processor()}")
    print("fits s (two to compile and warm up, then the profiled one):",
          [round(s, 3) for s in fits])
    print("\nthread kind: busy ms per tree")
    for name, total in by_thread.most_common(cfg["top"]):
        print(f"{total / ms_per_tree:10.3f}  {name}")
    tables = {"by name": (totals, calls), "by name less its suffix": by_prefix(totals, calls)}
    summary = {"processor": processor(), "fits_s": fits, "kernels": {}}
    for title, (table, table_calls) in tables.items():
        print(f"\nkernels {title}: ms per tree, calls per tree")
        rows = []
        for name, total in table.most_common(cfg["top"]):
            ms, n = total / ms_per_tree, table_calls[name] / cfg["n_trees"]
            print(f"{ms:10.3f} {n:8.1f}  {name[:100]}")
            rows.append(dict(name=name, ms_per_tree=ms, calls_per_tree=n))
        summary["kernels"][title] = rows
    summary["threads_ms_per_tree"] = {name: total / ms_per_tree
                                      for name, total in by_thread.items()}
    write_json(output_dir(cfg) / "results.json", summary)
    return summary


if __name__ == "__main__":
    main(load_config("profile_fit", doc=__doc__))
