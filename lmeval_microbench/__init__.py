"""lmeval-microbench: estimate full-benchmark lm-eval scores from small item subsets."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lmeval-microbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = ["__version__"]
