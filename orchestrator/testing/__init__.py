"""Test machinery that ships in the package as real implementations (a multi-node Ray cluster on one machine)."""
