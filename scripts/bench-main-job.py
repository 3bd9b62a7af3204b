#!/usr/bin/python3
"""The main job on real-size exports: wall time and peak RSS of
`pipe-opt MODEL --pipeline-stages=S`, and the plan it chose.

  scripts/bench-main-job.py MODEL_DIR [--build build] [--stages 2,4,8] [--repeat 3]

MODEL_DIR holds exports from python/scripts/export_models.py --size real.
Prints a table of medians; nothing is asserted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--build", default="build")
    parser.add_argument("--stages", default="2,4,8")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--micro-batch-size", default="8")
    args = parser.parse_args()
    pipe_opt = os.path.join(args.build, "bin", "pipe-opt")
    models = sorted(f for f in os.listdir(args.model_dir) if f.endswith(".onnx"))
    print(f"{'model':<14}{'GPUs':>5}{'time s':>8}{'RSS MB':>8}  {'algorithm':<12}{'schedule':<12}"
          f"{'stages':>7}{'iteration ms':>13}{'period ms':>10}{'bubble':>8}{'gap':>7}{'max mem':>9}")
    with tempfile.TemporaryDirectory() as out:
        for name in models:
            for stages in args.stages.split(","):
                cmd = ["/usr/bin/time", "-f", "%M", pipe_opt,
                       os.path.join(args.model_dir, name),
                       f"--micro-batch-size={args.micro_batch_size}",
                       f"--pipeline-stages={stages}", "-o", out, "--no-progress"]
                times, rss = [], 0
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True)
                    times.append(time.perf_counter() - start)
                    if proc.returncode != 0:
                        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
                    rss = max(rss, int(proc.stderr.strip().splitlines()[-1]) / 1024)
                plan = json.load(open(os.path.join(out, "plan.json")))
                mem = max(m["memory_bytes"] / m["memory_limit_bytes"]
                          for m in plan["stage_metrics"])
                gap = plan["period_ms"] / plan["lower_bound_ms"] - 1
                print(f"{name[:-5]:<14}{stages:>5}{statistics.median(times):>8.2f}{rss:>8.0f}  "
                      f"{plan['algorithm']:<12}{plan['schedule']:<12}{plan['stages']:>7}"
                      f"{plan['iteration_ms']:>13.2f}{plan['period_ms']:>10.2f}"
                      f"{plan.get('bubble_fraction', plan.get('bubble', 0)) * 100:>7.1f}%"
                      f"{gap * 100:>6.1f}%{mem * 100:>8.1f}%")


if __name__ == "__main__":
    main()
