#!/bin/bash
# Two rewards and no `reward` key: correctness (the count) and style (the closing word).
mkdir -p /logs/verifier
correct=0; style=0
[ "$(sed -n 1p /app/report.txt 2>/dev/null)" = 3 ] && correct=1
[ "$(sed -n 2p /app/report.txt 2>/dev/null)" = done ] && style=1
printf '{"correctness": %s, "style": %s}\n' "$correct" "$style" > /logs/verifier/reward.json
