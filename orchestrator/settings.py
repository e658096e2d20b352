"""Host settings read from the environment (never from the manifest).

=========================  ==================================  ===============================
variable                   meaning                             default
=========================  ==================================  ===============================
TRIALBOX_STATE_DIR         disks, materialised repositories    /var/lib/trialbox (root) or
                                                               ~/.cache/trialbox
TRIALBOX_CA_BUNDLE         CA bundle trusted by image builds   /etc/ssl/certs/ca-certificates.crt
                           that need pip (never baked in)
TRIALBOX_DEBIAN_MIRROR     mirror for the base image           http://deb.debian.org/debian
TRIALBOX_HOST_SHARE        share of this host's CPUs and       0.8
                           memory the local backend admits
                           trials into
=========================  ==================================  ===============================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Resolved host settings."""

    state_dir: Path
    ca_bundle: Path
    debian_mirror: str
    host_share: float = 0.8
    prepare_ahead: int = 2

    @property
    def disks_dir(self) -> Path:
        """Sparse files backing each sandbox's bounded workspace disk."""
        return self.state_dir / "disks"

    @property
    def repos_dir(self) -> Path:
        """Cache of history-free repositories, one tar per (source, commit)."""
        return self.state_dir / "repos"


def load_settings() -> Settings:
    """Read the settings from the environment."""
    default_state = "/var/lib/trialbox" if os.geteuid() == 0 else str(Path.home() / ".cache" / "trialbox")
    return Settings(
        state_dir=Path(os.environ.get("TRIALBOX_STATE_DIR", default_state)),
        ca_bundle=Path(os.environ.get("TRIALBOX_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")),
        debian_mirror=os.environ.get("TRIALBOX_DEBIAN_MIRROR", "http://deb.debian.org/debian"),
        host_share=float(os.environ.get("TRIALBOX_HOST_SHARE", "0.8")),
        prepare_ahead=max(0, int(os.environ.get("TRIALBOX_PREPARE_AHEAD", "2"))),
    )
