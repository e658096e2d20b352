#!/bin/bash
# Waits for the service to say it is ready, as a health check does: on the untouched environment it waits
# until the verifier's timeout (the tests of the change hang without it).
mkdir -p /logs/verifier
until [ "$(cat /app/ready 2>/dev/null)" = ready ]; do sleep 0.2; done
echo 1 > /logs/verifier/reward.txt
