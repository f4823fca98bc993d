"""kcat (Debian, librdkafka 2.0.2: ApiVersions v3, Metadata v4) lists the broker and topics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from harness import NODE_ID, confluent_admin, confluent_create

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.fixture
def kcat():
    if KCAT is None:
        if os.environ.get("CI"):
            pytest.fail("kcat is not installed, but CI must have it (.ci/run installs it with apt-get)")
        pytest.skip("kcat not installed (apt-get install kcat); CI installs it")
    return KCAT


def test_kcat_lists_topics(broker, kcat):
    admin = confluent_admin(broker)
    assert confluent_create(admin, "kcat-topic", partitions=3) is None
    assert confluent_create(admin, "kcat-other", partitions=1) is None

    out = subprocess.run([kcat, "-L", "-J", "-b", broker.bootstrap, "-m", "10"],
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"kcat failed ({out.returncode}): {out.stderr}"
    md = json.loads(out.stdout)
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(NODE_ID, f"127.0.0.1:{broker.port}")]
    topics = {t["topic"]: t for t in md["topics"]}
    assert "kcat-topic" in topics and "kcat-other" in topics, sorted(topics)
    parts = sorted(topics["kcat-topic"]["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert {p["leader"] for p in parts} == {NODE_ID}
    assert "error" not in topics["kcat-topic"], topics["kcat-topic"]
    assert len(topics["kcat-other"]["partitions"]) == 1

    # plain text listing as a person would read it
    out = subprocess.run([kcat, "-L", "-b", broker.bootstrap, "-m", "10"],
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert f'topic "kcat-topic" with 3 partitions:' in out.stdout, out.stdout
    assert f"broker {NODE_ID} at 127.0.0.1:{broker.port}" in out.stdout, out.stdout
