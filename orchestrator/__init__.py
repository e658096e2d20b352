"""trialbox: evaluate coding agents without fooling yourself.

Nothing happens at import time: no logging set-up, no engine connection.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trialbox")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
