#!/bin/bash
# Runs the checker the verifier image installs (the task's environment has none).
mkdir -p /logs/verifier
if [ ! -x /opt/checker/check ]; then echo "no checker: not the verifier image" >&2; exit 3; fi
if /opt/checker/check; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
