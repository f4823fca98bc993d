"""The `ringleader serve` command line contract."""

from __future__ import annotations

import signal
import subprocess

from harness import binary_path, broker_env, free_port


def test_unknown_set_key_exits_2_and_names_the_key(tmp_path):
    argv = [str(binary_path()), "serve", "--listen", f"127.0.0.1:{free_port()}",
            "--data-dir", str(tmp_path / "data"), "--set", "no.such.key=1"]
    proc = subprocess.run(argv, capture_output=True, timeout=20, stdin=subprocess.DEVNULL, env=broker_env())
    out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert proc.returncode == 2, f"exit code {proc.returncode}, output:\n{out}"
    assert "no.such.key" in out, out


def test_malformed_set_argument_is_rejected(tmp_path):
    argv = [str(binary_path()), "serve", "--listen", f"127.0.0.1:{free_port()}",
            "--data-dir", str(tmp_path / "data"), "--set", "missing-equals-sign"]
    proc = subprocess.run(argv, capture_output=True, timeout=20, stdin=subprocess.DEVNULL, env=broker_env())
    # a usage error: the broker must refuse to start (exit non-zero, without hanging)
    assert proc.returncode != 0, (proc.returncode, proc.stderr)


def test_sigterm_exits_0(broker):
    assert broker.stop(signal.SIGTERM) == 0
    assert not broker.alive()
