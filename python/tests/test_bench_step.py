"""python/scripts/bench_step.py: PyTorch eager's training step, the baseline of
scripts/gpu-check.sh's step-time table, runs on the tiny models on the CPU and
reports what it timed."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from tool_paths import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "python", "scripts", "bench_step.py")


@pytest.mark.parametrize("family,batch,microbatches", [("gpt2", 2, 3), ("resnet50", 2, 2)])
def test_it_times_the_steps_of_the_micro_batches(tmp_path, family, batch, microbatches):
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO_ROOT, "python"))
    result = subprocess.run(
        [sys.executable, SCRIPT, "--model", family, "--size", "tiny", "--device", "cpu",
         "--micro-batch-size", str(batch), "--microbatches", str(microbatches), "--steps", "3",
         "--warmup", "1", "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["model"] == family and report["device"] == "cpu"
    assert report["micro_batch_size"] == batch and report["microbatches"] == microbatches
    assert len(report["steps_ms"]) == 3 and all(t > 0 for t in report["steps_ms"])
    assert report["step_ms"] == statistics.median(report["steps_ms"])
    assert report["peak_bytes"] is None  # measured on a GPU only
    assert (f"torch eager: {family} tiny, {microbatches} x {batch} samples, cpu: step "
            f"{report['step_ms']:.1f} ms (median of 3)") in result.stdout
