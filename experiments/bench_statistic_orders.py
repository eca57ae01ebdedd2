"""The cost of target statistics under several orders: fit seconds by orders and rows.

    python experiments/bench_statistic_orders.py [--quick] [--set key=value]

Each round of a fit with P orders of the target statistics (``statistic_orders``) grows
its tree on one order, then moves every order's margins by it: P traversals of the N
training rows more per round. On adult's bundled training rows (``jaxgbt.datasets``), its
columns of more than two categories as target statistics (``one_hot_max_size=2``), this
times jaxgbt's first fit (compile included) and a second fit in the same process for each
row count and each P of ``orders`` (``0``: the default, a new order per tree within
``categorical.STATISTIC_ORDER_CELLS``), against LightGBM and CatBoost with their native
categorical columns at the same budget and threads, and prints one table.
``target_statistic`` picks the statistics (``"mean"``, the default, or ``"borders"``).
"""

import numpy as np
from _anchors import anchor_model, categorical_columns, installed, thread_limit
from _runner import load_config, output_dir, print_table, timed, write_json

import jaxgbt
from jaxgbt.data import categorical
from jaxgbt.datasets import load_adult


def main(cfg: dict | None = None) -> list[dict]:
    """Runs the config (``load_config``'s, from the command line, when None); prints the
    table and returns its rows."""
    cfg = cfg if cfg is not None else load_config("bench_statistic_orders", doc=__doc__)
    train, _ = load_adult()
    y_all = (train.pop("income") == ">50K").to_numpy(np.float32)
    strings = train.select_dtypes(exclude="number").columns
    train[strings] = train[strings].astype("category")
    names = categorical_columns(train)
    budget = dict(n_trees=cfg["n_trees"], depth=cfg["depth"], learning_rate=cfg["learning_rate"])
    rows = []
    for n_rows in cfg["rows"]:
        X, y = train[:n_rows], y_all[:n_rows]
        anchors = {}
        with thread_limit(cfg["threads"]):
            for library in cfg["anchors"]:
                if installed(library):
                    model = anchor_model(library, "binary", cfg, names)
                    anchors[library] = timed(model.fit, X, y)[1]
        fastest = min(anchors.values()) if anchors else None
        for orders in cfg["orders"]:
            settings = dict(budget, one_hot_max_size=2, categorical_features=names,
                            statistic_orders=orders or None,
                            target_statistic=cfg["target_statistic"])
            jaxgbt.clear_caches()
            _, first = timed(jaxgbt.fit, "logistic", X, y, **settings)
            _, warm = timed(jaxgbt.fit, "logistic", X, y, **settings)
            used = orders or categorical.default_statistic_orders(n_rows, cfg["n_trees"])
            rows.append(dict(rows=n_rows, orders=f"{used}" + (" (default)" if not orders else ""),
                             first=first, warm=warm, per_tree=1000 * warm / cfg["n_trees"],
                             ratio=warm / fastest if fastest else None, **anchors))
    columns = [("rows", "rows", ","), ("orders P", "orders", ""),
               ("jaxgbt first fit s", "first", ".2f"), ("jaxgbt warm fit s", "warm", ".2f"),
               ("ms/tree", "per_tree", ".1f"),
               *((f"{library} fit s", library, ".2f") for library in cfg["anchors"]),
               ("warm / fastest anchor", "ratio", ".2f")]
    print_table(rows, columns)
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, results=rows))
    return rows


if __name__ == "__main__":
    main()
