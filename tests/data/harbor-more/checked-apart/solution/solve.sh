#!/bin/bash
cd /app && awk '{s += $1} END {print s}' numbers.txt > sum.txt
