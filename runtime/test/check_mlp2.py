#!/usr/bin/env python3
"""Trains programs/mlp2 with pipe-run for 3 steps and checks the losses, the
last step's gradients and the trained weights against the same model trained
by torch (nn.Linear, ReLU, cross entropy, Adam with L2 decay) on the same
data, to 1e-5 relative. Exit 0: equal; 1: different or pipe-run failed;
77: torch or numpy missing, or --backend cuda without a GPU (ctest counts it
as skipped).

    check_mlp2.py --pipe-run BIN --transport threads|mpi [--backend cpu|emulated|cuda]
                  [--mpiexec BIN] --work DIR
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "programs", "mlp2")
STEPS = 3

try:
    import numpy as np
    import torch
except ImportError as missing:
    print("skipped: %s" % missing)
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, PROGRAM)
import make_model  # noqa: E402  the weights of model.bin


def make_data(path):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    y = rng.integers(0, 4, size=8).astype(np.int64)
    np.savez(path, input_0=x, label_0=y)
    return x, y


def reference(x, y):
    """Per step: the loss and the gradients; then the trained weights."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    weights = make_model.weights()
    names = {"fc1.weight": model[0].weight, "fc1.bias": model[0].bias,
             "fc2.weight": model[2].weight, "fc2.bias": model[2].bias}
    with torch.no_grad():
        for name, param in names.items():
            param.copy_(torch.from_numpy(weights[name]))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01)
    losses, grads = [], {}
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        losses.append(loss.item())
        grads = {name: p.grad.detach().numpy().copy() for name, p in names.items()}
        optimizer.step()
    trained = {name: p.detach().numpy().copy() for name, p in names.items()}
    return losses, grads, trained


def compare(what, got, expected):
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-5, atol=1e-6):
        worst = np.max(np.abs(got - expected)) if got.shape == expected.shape else None
        print("FAIL: %s differs (max abs diff %s)\n  pipe-run %s\n  torch    %s"
              % (what, worst, got.ravel()[:8], expected.ravel()[:8]))
        return False
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-run", required=True)
    parser.add_argument("--transport", choices=["threads", "mpi"], required=True)
    parser.add_argument("--backend", default="cpu", choices=["cpu", "emulated", "cuda"])
    parser.add_argument("--mpiexec", default="mpirun")
    parser.add_argument("--work", required=True)
    args = parser.parse_args()

    work = os.path.join(args.work, "mlp2")
    shutil.rmtree(args.work, ignore_errors=True)
    shutil.copytree(PROGRAM, work, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    x, y = make_data(os.path.join(args.work, "data.npz"))
    command = [args.pipe_run, work, "--steps", str(STEPS), "--data",
               os.path.join(args.work, "data.npz"), "--save-weights",
               os.path.join(args.work, "weights.npz"), "--save-grads",
               os.path.join(args.work, "grads.npz"), "--backend", args.backend]
    if args.transport == "mpi":
        command = [args.mpiexec, "-q", "--allow-run-as-root", "--oversubscribe", "-np", "2"] + command
    else:
        command += ["--transport", "threads"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    print(run.stdout)
    if run.returncode != 0 and "--backend cuda: " in run.stderr:
        print("skipped: no GPU: %s" % run.stderr.split("--backend cuda: ", 1)[1].strip())
        return 77
    if run.returncode != 0:
        print("FAIL: pipe-run exited with %d\n%s" % (run.returncode, run.stderr))
        return 1

    losses, grads, trained = reference(x, y)
    printed = [float(v) for v in re.findall(r"step \d+/\d+: loss (-?[0-9.]+)", run.stdout)]
    ok = compare("the losses", np.array(printed), np.array(losses))
    saved_grads = np.load(os.path.join(args.work, "grads.npz"))
    saved_weights = np.load(os.path.join(args.work, "weights.npz"))
    for name in trained:
        ok &= compare("the last step's gradient of " + name, saved_grads[name], grads[name])
        ok &= compare("the trained " + name, saved_weights[name], trained[name])
    print("losses: pipe-run %s, torch %s" % (printed, ["%.6f" % v for v in losses]))
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
