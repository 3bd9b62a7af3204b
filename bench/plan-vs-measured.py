#!/usr/bin/python3
"""The plan comes true: predicted vs measured period, iteration time and
per-rank memory by category, on the CPU runtime.

  bench/plan-vs-measured.py [--models mlp,gpt2,...] [--ranks 2] [--build build]

For each model: pipe-opt plans it for the CPU target bench/cpu-core.json,
pipe-run trains the plan and writes a per-node profile (--write-profile), and
pipe-opt plans again with that profile (--profile), so that the prediction
uses this machine's measured per-op times (--rounds repeats this); pipe-run
then trains the last plan and its measured.json is compared with the plan. Prints two tables
(time, memory) with ratios measured/predicted; nothing is asserted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "test", "Fixtures", "models")
CATEGORIES = ("parameters", "gradients", "optimizer", "saved", "comm", "workspace")


def run(cmd, what):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"{what} failed: {' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def plan(args, model, out, profile=None):
    cmd = [os.path.join(args.build, "bin", "pipe-opt"), model,
           f"--pipeline-stages={args.ranks}", f"--micro-batch-size={args.micro_batch_size}",
           f"--microbatches={args.microbatches}", f"--target={args.target}",
           "--disable-dropout", "--no-progress", "-o", out]
    if args.schedule:
        cmd.append(f"--schedule={args.schedule}")
    if profile:
        cmd.append(f"--profile={profile}")
    run(cmd, "pipe-opt")
    return json.load(open(os.path.join(out, "plan.json")))


def train(args, out, steps, extra=()):
    cmd = [os.path.join(args.build, "bin", "pipe-run"), out, f"--steps={steps}",
           "--timeout=600", *extra]
    run(cmd, "pipe-run")
    return json.load(open(os.path.join(out, "measured.json")))


def ratio(measured, predicted):
    return measured / predicted if predicted else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,gpt2,bert,transformer,moe,resnet50,"
                        "inception_v3,mobilenet_v2,densenet121,vgg16")
    parser.add_argument("--model-dir", default=FIXTURES,
                        help="folder of NAME.onnx files (default: the tiny fixtures)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--target", default=os.path.join(ROOT, "bench", "cpu-core.json"))
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--profile-steps", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2,
                        help="plans made; each after the first uses the profile of the last "
                             "(2: roofline plan, then a plan from its measured profile)")
    parser.add_argument("--keep", help="keep the outputs in this folder")
    args = parser.parse_args()

    work = args.keep or tempfile.mkdtemp(prefix="plan-vs-measured-")
    times, memory = [], []
    for name in args.models.split(","):
        model = os.path.join(args.model_dir, name + ".onnx")
        os.makedirs(os.path.join(work, name), exist_ok=True)
        # Round 0 plans with the target's roofline; each later round plans with
        # the profile measured while the previous round's plan ran.
        profile = None
        for round_ in range(args.rounds):
            out = os.path.join(work, name, f"round{round_}")
            chosen = plan(args, model, out, profile)
            if round_ + 1 < args.rounds:
                profile = os.path.join(work, name, f"profile{round_}.json")
                train(args, out, args.profile_steps, [f"--write-profile={profile}"])
        measured = train(args, out, args.steps)
        period, iteration = measured["period_ms"], measured["iteration_ms"]
        times.append((name, f"{chosen['algorithm']}/{chosen['schedule']}", chosen["stages"],
                      period["predicted"], period["measured"],
                      iteration["predicted"], iteration["measured"]))
        for rank, entry in enumerate(measured["ranks"]):
            mem = entry["memory"]
            memory.append((name, rank, [(mem[c]["measured_bytes"], mem[c]["predicted_bytes"])
                                        for c in CATEGORIES + ("total",)]))
        print(f"{name}: done", file=sys.stderr, flush=True)

    print(f"CPU runtime, {args.ranks} ranks (threads), micro-batch {args.micro_batch_size} x "
          f"{args.microbatches}, {args.steps} steps; plan {args.rounds}, from the profile "
          f"measured on plan {args.rounds - 1}\n")
    print(f"{'model':<14}{'plan':<18}{'stages':>6}{'period pred':>13}{'meas':>9}{'ratio':>7}"
          f"{'iter pred':>11}{'meas':>9}{'ratio':>7}")
    for name, how, stages, pp, pm, ip, im in times:
        print(f"{name:<14}{how:<18}{stages:>6}{pp:>13.2f}{pm:>9.2f}{ratio(pm, pp):>7.2f}"
              f"{ip:>11.2f}{im:>9.2f}{ratio(im, ip):>7.2f}")
    ratios = [ratio(t[4], t[3]) for t in times]
    print(f"period ratio: median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}\n")
    print("memory: measured/predicted peak per category (predicted KiB in brackets)")
    print(f"{'model':<14}{'rank':>5}" + "".join(f"{c:>18}" for c in CATEGORIES + ("total",)))
    for name, rank, cells in memory:
        print(f"{name:<14}{rank:>5}" + "".join(
            f"{ratio(m, p):>9.2f} ({p / 1024:>6.0f})" for m, p in cells))
    if not args.keep:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
