"""Small reports from lists of records, rendered with tabulate."""

from .config import ConfigError, table_style
from .render import columns_of, render
from .report import print_report, summarize

__all__ = ["ConfigError", "columns_of", "print_report", "render", "summarize", "table_style"]
