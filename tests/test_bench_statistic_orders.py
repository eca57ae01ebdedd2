"""experiments/bench_statistic_orders.py's code path on adult's first rows: a row per
(rows, orders), the default's orders as ``default_statistic_orders`` picks them. Not a
timing check: a few shallow trees on 300 rows."""

from conftest import experiment_modules

from jaxgbt.data import categorical


def test_a_row_per_row_count_and_orders(tmp_path):
    with experiment_modules("bench_statistic_orders") as (bench_statistic_orders,):
        cfg = bench_statistic_orders.load_config("bench_statistic_orders", argv=[
            "--quick", "--set", "rows=[300]", "--set", "n_trees=6", "--set", "depth=2",
            "--set", "orders=[1, 4, 0]"])
        cfg["output_dir"] = str(tmp_path)
        rows = bench_statistic_orders.main(cfg)
    assert [row["orders"] for row in rows] == [
        "1", "4", f"{categorical.default_statistic_orders(300, 6)} (default)"]
    assert all(row["warm"] > 0 and row["first"] > 0 for row in rows)
    assert (tmp_path / "results.json").exists()
