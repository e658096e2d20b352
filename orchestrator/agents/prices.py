"""Model prices from the versioned table ``prices.yaml`` (USD per million tokens).

Input, output, cache reads and cache writes are priced apart. The table's
``version`` goes into the lock; a model missing from it is an error before any
trial starts (a cost that silently reads 0 would flatter a design).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from ..errors import ConfigError

TABLE = Path(__file__).with_name("prices.yaml")


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        return (input_tokens * self.input + output_tokens * self.output
                + cache_read * self.cache_read + cache_write * self.cache_write) / 1_000_000


@dataclass(frozen=True)
class PriceTable:
    version: str
    models: dict[str, Price]

    def price(self, model: str) -> Price:
        try:
            return self.models[model]
        except KeyError:
            raise ConfigError(f"model {model!r} is not in the price table {TABLE} (version {self.version}): "
                              f"add its prices there") from None


@lru_cache(maxsize=4)
def load_prices(path: Path = TABLE) -> PriceTable:
    data = yaml.safe_load(path.read_text())
    models = {name: Price(**{k: float(v) for k, v in p.items()}) for name, p in data["models"].items()}
    return PriceTable(str(data["version"]), models)
