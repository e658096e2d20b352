#!/bin/bash
cd /app
python3 - <<'PY'
import collections, json
words = open("words.txt").read().split()
report = dict(collections.Counter(words))
report["_total"] = len(words)
json.dump(report, open("report.json", "w"))
PY
