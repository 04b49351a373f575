"""Parses a Prometheus text exposition (format 0.0.4) from stdin with the reference Python client
(Debian's python3-prometheus-client) and prints the families as JSON; exits non-zero when the
text does not parse or breaks a rule the format sets (a sample without # TYPE, a family split in
two, a histogram whose buckets are not cumulative or do not end in +Inf = _count).

Run with /usr/bin/python3 (the Debian interpreter that has the module)."""

import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def number(value):
    """JSON has no infinity or NaN: those become strings."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return value


def check_histogram(family):
    series = {}
    for sample in family.samples:
        labels = {k: v for k, v in sample.labels.items() if k != "le"}
        key = json.dumps(labels, sort_keys=True)
        entry = series.setdefault(key, {"buckets": [], "count": None})
        if sample.name.endswith("_bucket"):
            entry["buckets"].append((float(sample.labels["le"]), sample.value))
        elif sample.name.endswith("_count"):
            entry["count"] = sample.value
    for key, entry in series.items():
        buckets = entry["buckets"]
        if not buckets or not math.isinf(buckets[-1][0]):
            raise ValueError(f"{family.name}{key}: the last bucket is not le=+Inf")
        for (le_a, n_a), (le_b, n_b) in zip(buckets, buckets[1:]):
            if le_b <= le_a or n_b < n_a:
                raise ValueError(f"{family.name}{key}: buckets not increasing/cumulative")
        if entry["count"] != buckets[-1][1]:
            raise ValueError(f"{family.name}{key}: _count differs from the +Inf bucket")


def main():
    text = sys.stdin.read()
    families = {}
    for family in text_string_to_metric_families(text):
        if family.name in families:
            raise ValueError(f"family {family.name} appears twice")
        if family.type in ("unknown", "untyped"):
            raise ValueError(f"family {family.name} has no # TYPE")
        if not family.documentation:
            raise ValueError(f"family {family.name} has no # HELP")
        if family.type == "histogram":
            check_histogram(family)
        if family.type == "counter":
            for sample in family.samples:
                if sample.value < 0:
                    raise ValueError(f"counter {sample.name} is negative")
        families[family.name] = {
            "type": family.type,
            "help": family.documentation,
            "samples": [
                {"name": s.name, "labels": s.labels, "value": number(s.value)}
                for s in family.samples
            ],
        }
    json.dump(families, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # any parse failure is the answer "this is not valid"
        print(f"prom_parse: {error}", file=sys.stderr)
        sys.exit(1)
