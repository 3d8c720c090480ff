#!/bin/sh
# A live session's memory and CPU over time (BENCHMARKS.md, "Live
# sessions"): `aid-agent attach --unit` on the busy_service fixture
# (about 500 requests a second of 40 traced calls, and a background
# thread's tick every millisecond) for DURATION seconds. Every 10 s one
# line: seconds, agent VmRSS (KiB), agent RssAnon (KiB), agent CPU ticks,
# service CPU ticks (CLK_TCK per second, printed at the end).
# Usage: bench/live_session.sh AGENT DURATION_S OUTDIR
set -eu
agent=$1; dur=$2; out=$3
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
gcc -g -O1 -pthread -o "$work/busy_service" "$here/aid-agent/tests/fixtures/busy_service.c"
"$work/busy_service" >/dev/null 2>&1 & svc=$!
sleep 0.5
"$agent" attach --pid $svc -t step -t tick --unit handle_request \
    --fail-if 'handle_request ret < 0' -d "${dur}s" -o "$out" >/dev/null 2>"$out.stderr" & ag=$!
t=0
while kill -0 $ag 2>/dev/null; do
    rss=$(awk '/VmRSS/{r=$2} /RssAnon/{a=$2} END{print r, a}' /proc/$ag/status 2>/dev/null || true)
    cpu=$(awk '{print $14+$15}' /proc/$ag/stat 2>/dev/null || true)
    scpu=$(awk '{print $14+$15}' /proc/$svc/stat 2>/dev/null || true)
    echo "$t $rss $cpu $scpu"
    sleep 10; t=$((t+10))
done
wait $ag; echo "agent exit $?"
kill $svc; wait $svc 2>/dev/null || true
echo "CLK_TCK $(getconf CLK_TCK); units $(wc -l < "$out/runs.jsonl")"
rm -rf "$work"
