"""Prints a markdown table of medians from a results file whose lines read
"CONFIG METRIC VALUE UNIT", one row per configuration of ORDER and one column per metric of
METRICS, each cell "median UNIT (ratio to BASE's median)"; a rate (MB/s) is a ratio the other
way round, so that above 1.00x is always slower. A VALUE of nan (a failed run) is left out of
the median; a cell with no other value reads "failed".
Usage: python3 table.py RESULTS "ORDER..." "METRICS..." BASE"""
import math
import statistics
import sys

results, order, metrics, base = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
rows, units = {}, {}
for line in open(results):
    config, metric, value, unit = line.split()
    rows.setdefault((config, metric), [])
    if not math.isnan(float(value)):
        rows[(config, metric)].append(float(value))
    units[metric] = unit
print(f"| config (ratio to {base}) | " + " | ".join(metrics) + " |")
print("|---|" + "---|" * len(metrics))
for config in order:
    cells = []
    for m in metrics:
        if not rows.get((config, m)) or not rows.get((base, m)):
            cells.append("failed")
            continue
        v = statistics.median(rows[(config, m)])
        b = statistics.median(rows[(base, m)])
        ratio = b / v if units[m] == "MB/s" else v / b
        cells.append(f"{v:.2f} {units[m]} ({ratio:.2f}x)")
    print(f"| {config} | " + " | ".join(cells) + " |")
