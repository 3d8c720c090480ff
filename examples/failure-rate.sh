#!/bin/sh
# usage: failure-rate.sh BINARY [RUNS]   (default 300 runs)
# Runs BINARY RUNS times natively and prints how many runs failed (exit != 0).
set -u
bin=$1; runs=${2:-300}; failed=0; i=0
while [ "$i" -lt "$runs" ]; do
    "$bin" >/dev/null 2>&1 || failed=$((failed + 1))
    i=$((i + 1))
done
echo "$(basename "$bin"): $failed/$runs runs failed ($((100 * failed / runs))%)"
