#!/bin/bash
# Side by side: `aid-agent record -t lookup` and `-t plain` on
# bench/pointee_loop.c (200,000 calls), alternating two binaries round by
# round; prints "round binary function ns-per-call".
# Usage: bench/pointee_pair.sh BEFORE-BINARY AFTER-BINARY [ROUNDS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -g -O2 -o "$work/pointee_loop" "$here/pointee_loop.c"
for r in $(seq 1 "${3:-5}"); do
  for bin in "$1" "$2"; do
    for w in 0 1; do
      f=$([ "$w" = 0 ] && echo lookup || echo plain)
      rm -rf "$work/s"
      timeout 120 "$bin" record -n 1 -t "$f" -o "$work/s" -- "$work/pointee_loop" 200000 "$w" > /dev/null 2>&1
      echo "$r $bin $f $(head -c 100 "$work/s/runs/000001/stdout.txt")"
    done
  done
done
