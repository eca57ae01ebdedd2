"""jaxgbt.config_files: TOML run configs and key=value overrides (shared by the command
line and experiments/)."""

import pytest

from jaxgbt.config_files import ConfigError, apply_overrides, override, parse_value, read_config


def test_read_config_reads_toml(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('n_trees = 5\nloss = "logistic"\n[boost]\ndepth = 2\n')
    assert read_config(path) == {"n_trees": 5, "loss": "logistic", "boost": {"depth": 2}}


def test_read_config_names_a_missing_or_broken_file(tmp_path):
    with pytest.raises(ConfigError, match="missing.toml not found"):
        read_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("n_trees = \n")
    with pytest.raises(ConfigError, match="broken.toml is not valid TOML"):
        read_config(broken)


@pytest.mark.parametrize(("text", "value"), [
    ("5", 5), ("0.1", 0.1), ("true", True), ("[1, 2]", [1, 2]), ('"a b"', "a b"),
    ("{a = 1}", {"a": 1}), ("logistic", "logistic"), ("quantile@0.9", "quantile@0.9"),
])
def test_parse_value_reads_toml_and_falls_back_to_a_string(text, value):
    assert parse_value(text) == value


def test_override_copies_and_reaches_into_tables():
    config = {"n_trees": 200, "boost": {"depth": 6}}
    changed = apply_overrides(config, ["n_trees=5", "boost.depth=2"])
    assert changed == {"n_trees": 5, "boost": {"depth": 2}}
    assert config == {"n_trees": 200, "boost": {"depth": 6}}  # the input is left as it is


def test_override_rejects_unknown_keys_unless_told_otherwise():
    with pytest.raises(ConfigError, match="run.toml has no key 'n_tree'; it has n_trees"):
        override({"n_trees": 1}, "n_tree=5", source="run.toml")
    with pytest.raises(ConfigError, match="has no table 'boost'"):
        override({"n_trees": 1}, "boost.depth=5")
    assert override({}, "fit.l2=3", known_keys_only=False) == {"fit": {"l2": 3}}


@pytest.mark.parametrize("assignment", ["n_trees", "=5", " =5"])
def test_override_needs_key_equals_value(assignment):
    with pytest.raises(ConfigError, match="write KEY=VALUE"):
        override({"n_trees": 1}, assignment)
