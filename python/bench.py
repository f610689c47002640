#!/usr/bin/env python3
"""Overhead of precise_ttl_read's hooks, measured against one DynamoDB Local.

A table with 100 live items under one partition key; two clients, one plain and one with
hide_expired. Warm-up rounds first (DynamoDB Local is slow for its first few thousand
operations), then N rounds of: Query of the 100 items (one page) and GetItem of one item, each
with and without the hooks, interleaved (the order alternates from round to round, so neither
side always goes first). Reports p50 and p99 in milliseconds for each of the four and the
differences, and writes them as JSON with the revision, host and runtime they came from.

    python bench.py --out overhead.json [--rounds 1000] [--warmup 300] [--endpoint URL]

Without --endpoint it starts a DynamoDB Local with the repository's scripts/dynamodb-local and
stops it at the end. Needs this package installed (pip install ./python).
"""

import argparse
import json
import os
import pathlib
import platform
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse

import boto3
import botocore

import precise_ttl_read
from precise_ttl_read import hide_expired

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests"))
from tables import create_table  # noqa: E402  (the tests' helper, found through the line above)

SCRIPT = HERE.parent / "scripts" / "dynamodb-local"
TABLE = "precise-ttl-read-bench"
PK = "bench"
ITEMS = 100


def git(*args):
    try:
        return subprocess.run(
            ["git", *args],
            cwd=HERE,
            check=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def cpu_model():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def percentile(sorted_ms, fraction):
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, round(fraction * len(sorted_ms) + 0.5 - 1e-9))
    return sorted_ms[min(rank, len(sorted_ms)) - 1]


def make_client(endpoint):
    session = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    )
    return session.client("dynamodb", endpoint_url=endpoint)


def set_up(client):
    create_table(client, TABLE)
    # None expired: every item has a TTL a day ahead, so the client-side check judges a Number.
    ttl = str(int(time.time()) + 24 * 3600)
    for i in range(ITEMS):
        client.put_item(
            TableName=TABLE,
            Item={
                "pk": {"S": PK},
                "sk": {"S": f"{i:03}"},
                "ttl": {"N": ttl},
                "data": {"S": "x" * 64},
            },
        )


def operations(plain, hidden):
    def query(client):
        def call():
            page = client.query(
                TableName=TABLE,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": PK}},
            )
            assert len(page["Items"]) == ITEMS and "LastEvaluatedKey" not in page

        return call

    def get(client):
        def call():
            assert "Item" in client.get_item(
                TableName=TABLE, Key={"pk": {"S": PK}, "sk": {"S": "042"}}
            )

        return call

    return {
        "query_without": query(plain),
        "query_with": query(hidden),
        "get_item_without": get(plain),
        "get_item_with": get(hidden),
    }


def run(ops, rounds, record):
    names = list(ops)
    timings = {name: [] for name in names}
    for r in range(rounds):
        # Alternate which side of each pair goes first.
        order = names if r % 2 == 0 else [names[1], names[0], names[3], names[2]]
        for name in order:
            start = time.perf_counter_ns()
            ops[name]()
            elapsed = time.perf_counter_ns() - start
            if record:
                timings[name].append(elapsed / 1e6)
    return timings


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="where to write the JSON results")
    parser.add_argument(
        "--rounds", "-n", type=int, default=1000, help="measured rounds (default 1000)"
    )
    parser.add_argument("--warmup", type=int, default=300, help="warm-up rounds (default 300)")
    parser.add_argument("--endpoint", help="a running DynamoDB Local (default: start one)")
    args = parser.parse_args()
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")

    started = None
    endpoint = args.endpoint
    if endpoint is None:
        endpoint = (
            subprocess.run([str(SCRIPT), "start"], check=True, stdout=subprocess.PIPE, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        started = urlparse(endpoint).port
    try:
        plain = make_client(endpoint)
        hidden = hide_expired(make_client(endpoint))
        set_up(plain)
        ops = operations(plain, hidden)
        run(ops, args.warmup, record=False)
        timings = run(ops, args.rounds, record=True)
    finally:
        if started is not None:
            subprocess.run([str(SCRIPT), "stop", str(started)], check=False)

    figures = {}
    for name, samples in timings.items():
        samples.sort()
        figures[name] = {
            "p50_ms": round(percentile(samples, 0.50), 4),
            "p99_ms": round(percentile(samples, 0.99), 4),
        }
    for operation in ("query", "get_item"):
        with_, without = figures[f"{operation}_with"], figures[f"{operation}_without"]
        figures[f"{operation}_overhead"] = {
            "p50_ms": round(with_["p50_ms"] - without["p50_ms"], 4),
            "p99_ms": round(with_["p99_ms"] - without["p99_ms"], 4),
        }

    revision = git("rev-parse", "HEAD")
    status = git("status", "--porcelain")
    result = {
        "benchmark": "precise-ttl-read (Python) overhead",
        "revision": revision.strip() if revision else None,
        "clean": status == "" if status is not None else None,
        "command": sys.argv,
        "host": {
            "hostname": socket.gethostname(),
            # What `nproc` prints: the CPUs this process may run on.
            "nproc": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
            "os": platform.platform(),
            "cpu": cpu_model(),
        },
        "runtime": {
            "python": platform.python_version(),
            "python_executable": sys.executable,
            "implementation": platform.python_implementation(),
            "boto3": boto3.__version__,
            "botocore": botocore.__version__,
            "precise_ttl_read": precise_ttl_read.__version__,
        },
        "setup": {
            "endpoint": "DynamoDB Local"
            + (" (started by the bench)" if started else f" at {endpoint}"),
            "items": ITEMS,
            "warmup_rounds": args.warmup,
            "rounds": args.rounds,
        },
        "figures": figures,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
