"""Sandboxes: the contract, the Docker implementation, bounded disks and cleanup."""

from .base import ExecResult, Sandbox, SandboxInfo, SandboxSpec

__all__ = ["ExecResult", "Sandbox", "SandboxInfo", "SandboxSpec"]
