"""Fixtures: one DynamoDB Local for the whole run, and a table of expired and live items.

DynamoDB Local is started with the repository's ``scripts/dynamodb-local`` (native TTL never runs
there, so expired items stay present), or taken from ``PRECISE_TTL_DYNAMODB_ENDPOINT`` when set.
Credentials and region are dummies passed to each session, so no AWS configuration is needed.
"""

import os
import pathlib
import subprocess
import uuid
from decimal import Decimal
from urllib.parse import urlparse

import boto3
import pytest

from precise_ttl_read.rule import FIVE_YEARS, wall_clock
from tables import create_table

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "dynamodb-local"

# Seeded once, relative to the start of the run; expired items only grow older as the run goes
# on and the live ones stay live for far longer than it lasts.
T0 = wall_clock()
YEAR = 365 * 24 * 3600
HIDDEN = {
    "exp-1s": {"N": str(T0 - 1)},
    "exp-1h": {"N": str(T0 - 3600)},
    "exp-4y": {"N": str(T0 - 4 * YEAR)},
    "exp-dec": {"N": str((T0 - Decimal("0.25")).quantize(Decimal("0.001")))},
}
VISIBLE = {
    "future": {"N": str(T0 + 3600)},
    "string": {"S": str(T0 - 10)},
    "millis": {"N": str(T0 * 1000)},
    "old": {"N": str(T0 - FIVE_YEARS - 24 * 3600)},
    "none": None,
}
PK = "p"


def item(sk, ttl, group, ttl_attribute="ttl", pk=PK):
    typed = {"pk": {"S": pk}, "sk": {"S": sk}, "data": {"S": f"d-{sk}"}, "grp": {"S": group}}
    if ttl is not None:
        typed[ttl_attribute] = ttl
    return typed


def seed_items():
    """The read table's items: hidden and visible ones, in two groups for the caller's filter."""
    both = list(HIDDEN.items()) + list(VISIBLE.items())
    return [item(sk, ttl, "a" if i % 2 == 0 else "b") for i, (sk, ttl) in enumerate(both)]


@pytest.fixture(scope="session")
def endpoint():
    given = os.environ.get("PRECISE_TTL_DYNAMODB_ENDPOINT")
    if given:
        yield given
        return
    started = (
        subprocess.run([str(SCRIPT), "start"], check=True, stdout=subprocess.PIPE, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    try:
        yield started
    finally:
        subprocess.run([str(SCRIPT), "stop", str(urlparse(started).port)], check=False)


@pytest.fixture(scope="session")
def session_factory(endpoint):
    def make():
        return boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        )

    return make


@pytest.fixture
def new_client(session_factory, endpoint):
    """A fresh low-level client per call: each has its own event hooks."""
    return lambda: session_factory().client("dynamodb", endpoint_url=endpoint)


@pytest.fixture
def new_resource(session_factory, endpoint):
    return lambda: session_factory().resource("dynamodb", endpoint_url=endpoint)


@pytest.fixture(scope="session")
def read_table(session_factory, endpoint):
    """The table of the nine reference items, read by most tests and never written to."""
    client = session_factory().client("dynamodb", endpoint_url=endpoint)
    name = "reads"
    create_table(client, name, indexes=[("by-grp", "ALL"), ("by-grp-keys", "KEYS_ONLY")])
    for typed in seed_items():
        client.put_item(TableName=name, Item=typed)
    return name


@pytest.fixture(scope="session")
def write_table(session_factory, endpoint):
    """A table for tests that write; each such test uses its own partition key."""
    client = session_factory().client("dynamodb", endpoint_url=endpoint)
    name = "writes"
    create_table(client, name)
    return name


@pytest.fixture
def fresh_pk():
    return f"t-{uuid.uuid4().hex[:12]}"
