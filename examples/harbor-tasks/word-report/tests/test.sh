#!/bin/bash
# Scores the report: one metric per check, and the overall reward.
python3 /tests/score.py /app/report.json /logs/verifier/reward.json
