"""The package version, in one place that any module may import (``pyproject.toml`` says the same)."""

__version__ = "0.1.0"
