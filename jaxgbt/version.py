"""The package version (also read by pyproject.toml and written into model files)."""

__version__ = "0.1.0"
