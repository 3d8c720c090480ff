#!/usr/bin/env python3
"""Holds at reader's load (statement_hold.c) in a debug session of it: did
the load run before or after the hold, and where is its statement's row?

Usage: statement_hold.py SESSION_DIR [SOURCE_NAME]

A hold at the load's statement point is a pause of at least 500 us of
reader's thread whose statement row sits at the pause's start (the row
keeps the probe's time) or at its end (the row was moved to the release).
The value main printed for that call of reader is the clock the writer
stored when the load ran: in the hold's second half, the load ran after
it. Holds during which the writer was paused too are counted apart (it
stored nothing new then).
"""

import collections
import csv
import json
import os
import sys


def main():
    session = sys.argv[1]
    source = sys.argv[2] if len(sys.argv) > 2 else "statement_hold.c"
    point = f"reader at {source}:28"
    counts = collections.Counter()
    with open(os.path.join(session, "runs.jsonl")) as runs:
        for line in runs:
            run = json.loads(line)
            if not run.get("pauses"):
                continue
            events_path = os.path.join(session, run["events"]["path"])
            with open(events_path) as f:
                events = list(csv.DictReader(f))
            with open(os.path.join(session, run["threads"]["path"])) as f:
                tids = {t["role"]: t["tid"] for t in csv.DictReader(f)}
            with open(events_path.replace("events.csv", "stdout.txt")) as f:
                printed = [l.split() for l in f if len(l.split()) == 4]
            start = run["start_monotonic_ns"]
            for pause in run["pauses"]:
                if pause["dur_ns"] < 500_000:
                    continue
                lo, hi = pause["at_ns"], pause["at_ns"] + pause["dur_ns"]
                tid = tids[str(pause["role"])]
                rows = [
                    int(e["t_ns"])
                    for e in events
                    if e["tid"] == tid and e["function"] == point
                ]
                at_start = any(abs(t - lo) <= 1_000 for t in rows)
                at_end = any(abs(t - hi) <= 1_000 for t in rows)
                if not (at_start or at_end):
                    continue
                # At the start, the next event of the thread must come after
                # the hold (otherwise the pause was at a later point).
                if at_start:
                    later = [
                        int(e["t_ns"])
                        for e in events
                        if e["tid"] == tid and lo + 1_000 < int(e["t_ns"])
                    ]
                    if not later or min(later) < hi - 1_000:
                        continue
                writer_held = any(
                    q["role"] != pause["role"]
                    and q["at_ns"] < hi
                    and q["at_ns"] + q["dur_ns"] > lo
                    for q in run["pauses"]
                )
                for _, before, value, after in printed:
                    if int(before) <= start + lo <= int(after):
                        ran = "after" if int(value) >= start + (lo + hi) // 2 else "before"
                        counts[
                            (
                                "row at the release" if at_end else "row at the probe",
                                f"load ran {ran} the hold",
                                "writer held too" if writer_held else "writer free",
                            )
                        ] += 1
    for key, n in sorted(counts.items()):
        print(f"{n:6d}  {', '.join(key)}")


if __name__ == "__main__":
    main()
