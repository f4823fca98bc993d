"""Fixtures for the Ringleader real-client tests.

`broker`          a running `ringleader serve` on a free 127.0.0.1 port with a fresh data dir
                  (.bootstrap, .port, .data_dir, .restart(), .stop(), .alive(), .log_tail()).
`start_broker`    factory: start_broker("auto.create.topics.enable=false", ...) starts another
                  broker with extra `--set key=value` arguments; listeners=["SASL_SSL", ...] adds
                  listeners of those names on free ports (broker.listener("SASL_SSL") -> host:port).
`kafka_ref`       the reference broker, Apache Kafka 4.4.0 (scripts/kafka-ref.sh): one per pytest session
                  (per xdist worker), started on first use with group.initial.rebalance.delay.ms=0 in a
                  directory under the session's basetemp and stopped at session end (a watchdog stops it
                  if the test process dies first). Skipped when no `java` is installed.

Every broker is killed at teardown; its log is attached to the report of a failing test.
"""

from __future__ import annotations

import os
import shutil

import pytest

from harness import Broker, binary_path

_BROKERS_KEY = pytest.StashKey[list]()


def pytest_report_header(config):
    b = binary_path()
    return [f"ringleader binary: {b} ({'present' if b.exists() else 'MISSING'})",
            f"kcat: {shutil.which('kcat') or 'not installed'}"]


@pytest.fixture
def start_broker(request, tmp_path):
    brokers: list[Broker] = []
    request.node.stash[_BROKERS_KEY] = brokers

    def _start(*sets: str, extra_args: list[str] | None = None, listeners: list[str] | None = None) -> Broker:
        n = len(brokers)
        b = Broker(data_dir=tmp_path / f"data{n}", log_path=tmp_path / f"ringleader{n}.log",
                   sets=list(sets), extra_args=extra_args, listeners=listeners)
        brokers.append(b)
        b.start()
        return b

    yield _start

    for b in brokers:
        b.kill()


@pytest.fixture
def broker(start_broker) -> Broker:
    return start_broker()


@pytest.fixture(scope="session")
def kafka_ref(tmp_path_factory):
    from kafka_ref import RefKafka, java_available

    if not java_available():
        msg = "java not found: the reference broker (scripts/kafka-ref.sh) needs a JDK 17+"
        if os.environ.get("CI"):
            pytest.fail(msg)  # CI must run these, not skip them
        pytest.skip(msg)
    ref = RefKafka(tmp_path_factory.mktemp("kafka-ref"), sets=["group.initial.rebalance.delay.ms=0"])
    ref.start()
    try:
        yield ref
    finally:
        ref.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for b in item.stash.get(_BROKERS_KEY, []):
            state = "alive" if b.alive() else f"exited rc={b.proc.returncode if b.proc else None}"
            rep.sections.append((f"ringleader log {b.bootstrap} ({state}, {b.log_path})", b.log_tail()))

