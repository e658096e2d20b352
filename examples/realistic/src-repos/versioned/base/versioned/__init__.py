"""Parse, compare and bump semantic version strings."""

from importlib.metadata import version as _distribution_version

from .core import Version, bump, parse
from .spec import satisfies

# The single source of the version is the distribution's metadata
# (pyproject.toml); an uninstalled checkout has none.
__version__ = _distribution_version("versioned")

__all__ = ["Version", "__version__", "bump", "parse", "satisfies"]
