#!/usr/bin/env python3
"""The newest committed benchmark results are a full run with every figure.

    python3 bench/check-results.py [RESULTS_DIR]

Reads the newest bench/results/YYYY-MM-DD.md (the name only a full
`bash bench/run.sh` writes: quick and partial runs add -quick / -partial) and
fails, naming the line, when:
  - it was not produced by a full run (its "Produced by" line names another
    command, --quick or --only);
  - any row of a table says "not run" or "not measured", or a target's status
    is "—" (report.py writes those for a row the run was meant to fill and
    did not);
  - its chart is missing.
A README that links to benchmark numbers thus always has numbers behind it.
Standard library only.
"""
import os
import re
import sys

NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")


def newest(results_dir):
    days = sorted(m.group(1) for m in map(NAME.match, os.listdir(results_dir)) if m)
    return os.path.join(results_dir, days[-1] + ".md") if days else None


def problems(path):
    found = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    produced = [l for l in lines if l.startswith("Produced by ")]
    if not produced:
        found.append("no 'Produced by' line: not written by bench/report.py")
    elif not produced[0].startswith("Produced by `bash bench/run.sh` "):
        found.append("line %d: not a full run: %s" % (lines.index(produced[0]) + 1, produced[0][:90]))
    for i, line in enumerate(lines, 1):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if any(c.startswith("not run") or c == "not measured" for c in cells):
            found.append("line %d: a row without figures: %s" % (i, line[:120]))
        elif cells and cells[-1] == "—":
            found.append("line %d: a target without a measurement: %s" % (i, line[:120]))
    png = path[:-3] + ".png"
    if not os.path.exists(png):
        found.append("its chart %s is missing" % os.path.basename(png))
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    results_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results")
    path = newest(results_dir)
    if path is None:
        print("bench results: no YYYY-MM-DD.md in %s (run bash bench/run.sh)" % results_dir)
        return 1
    found = problems(path)
    for p in found:
        print("bench results %s: %s" % (os.path.relpath(path), p))
    if found:
        print("bench results: %d problem(s); commit the files of a full `bash bench/run.sh`" % len(found))
        return 1
    print("bench results: %s is a full run with every figure" % os.path.relpath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
