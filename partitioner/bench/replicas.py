#!/usr/bin/python3
"""Data-parallel replicas: prints a table, asserts nothing.

  replicas.py [--pipe-plan PATH] [--profiles DIR] [--gpus 8,16,32] [--microbatches 32]

For every profile at 16 GB (GNMT-16: 8 GB), 1F1B with flush, the default links
(25 GB/s inside nodes of 8 GPUs, 12.5 GB/s between nodes) and m micro-batches per
iteration, the iteration time of
  - one pipeline on all G GPUs (`pipe-plan --stages G --objective iteration`),
  - the best split of the G GPUs into r replicas of an S-stage pipeline
    (`pipe-plan --gpus G --stages auto`): each replica runs m / r micro-batches,
    each stage's replicas all-reduce its gradients after its last backward,
  - PipeDream's planner with per-stage replication (its dynamic program over the
    layer chain, memory-blind as by default, one bandwidth: 25 GB/s up to 8 GPUs,
    12.5 GB/s beyond), credited with m x its slowest stage's compute time over its
    replicas and each stage's all-reduce after it (pipe-plan's all-reduce model
    on the links above, the stage's replicas packed into as few nodes as can hold
    them): no fill, no drain, a lower bound of its plan's synchronous iteration. Its plan is checked against the memory afterwards, with the shared
    evaluator's rule (4 x parameters + min(S - s, m / r) x activations per GPU).
"""
import os
import sys
import time

import numpy as np

from recompute import bench_parser, run_plan, shared_profiles

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def evaluator(profiles):
    """The shared, independent evaluator (its parser and memory rule)."""
    sys.path.insert(0, os.path.join(os.path.dirname(profiles.rstrip("/")), "..", "tools"))
    import profile_eval  # noqa: E402
    return profile_eval


def load_chain(profiles, path):
    """(compute ms, activation bytes, parameter bytes) per layer in topological order."""
    nodes, _, topo = evaluator(profiles).load(path)
    return (np.array([nodes[n][0] for n in topo]), np.array([nodes[n][1] for n in topo]),
            np.array([nodes[n][2] for n in topo]))


def pipedream_replicated(t, a, p, machines, bandwidth):
    """PipeDream's planner (single level): A[j][m] is the best period of layers
    0..j-1 on m machines, the last stage replicated m' ways; a stage of layers
    i..j-1 on m' machines takes max(compute, weight sync) / m', weight sync
    4 (m'-1) params / (bandwidth m'); a cut costs 2 activation / bandwidth.
    Returns [(compute ms, activation bytes, parameter bytes, replicas)] per stage
    in pipeline order."""
    n = len(t)
    ct, ca, cp = (np.concatenate([[0.0], np.cumsum(v)]) for v in (t, a, p))

    def stage_time(i, j, r):  # i may be an array
        sync = 4 * (r - 1) * (cp[j] - cp[i]) / (bandwidth * r) * 1e3
        return np.maximum(ct[j] - ct[i], sync) / r

    A = np.full((n + 1, machines + 1), np.inf)
    choice = {}
    for j in range(1, n + 1):
        for m in range(1, machines + 1):
            best, arg = stage_time(0, j, m), (0, m)
            if j > 1:
                i = np.arange(1, j)
                cut = 2 * a[i - 1] / bandwidth * 1e3
                for r in range(1, m):
                    value = np.maximum(np.maximum(A[i, m - r], cut), stage_time(i, j, r))
                    k = int(np.argmin(value))
                    if value[k] < best:
                        best, arg = value[k], (int(i[k]), r)
            A[j, m], choice[(j, m)] = best, arg
    # The best number of machines used (PipeDream may leave some idle).
    m = int(np.argmin(A[n, 1:])) + 1
    stages, j = [], n
    while j > 0:
        i, r = choice[(j, m)]
        stages.append((float(ct[j] - ct[i]), float(ca[j] - ca[i]), float(cp[j] - cp[i]), r))
        j, m = i, m - r
    return list(reversed(stages))


def all_reduce_ms(replicas, nbytes, per_node=8, intra=25e9, inter=12.5e9,
                  intra_latency=0.005, inter_latency=0.010):
    """pipe-plan's all-reduce (allReduceMs in Planner.h) over `replicas` GPUs packed
    into nodes of `per_node`: a ring in one node, else the faster of a flat ring
    and reduce-scatter in nodes + ring across nodes + all-gather in nodes."""
    def ring(size, b, bandwidth, latency, half=False):
        if size <= 1 or b <= 0:
            return 0.0
        return (1 if half else 2) * (size - 1) * (latency + b / size / bandwidth * 1e3)
    q = min(replicas, per_node)
    n = -(-replicas // q)
    if n == 1:
        return ring(q, nbytes, intra, intra_latency)
    if q == 1:
        return ring(n, nbytes, inter, inter_latency)
    step = max(intra_latency + nbytes / (q * n) / intra * 1e3,
               inter_latency + nbytes / (q * n) / inter * 1e3)
    flat = 2 * (q * n - 1) * step
    return min(flat, 2 * ring(q, nbytes, intra, intra_latency, True) +
               ring(n, nbytes / q, inter, inter_latency))


def main():
    parser = bench_parser(__doc__)
    parser.add_argument("--gpus", default="8,16,32")
    parser.add_argument("--microbatches", type=int, default=32)
    args = parser.parse_args()
    m = args.microbatches
    print(f"iteration of m = {m} micro-batches in ms (16 GB, GNMT-16 8 GB; default links)")
    print("its split: PipeDream's replicas per stage; (over): a stage needs more than the memory")
    print(f"{'profile':<26}{'G':>3}{'one pipeline':>14}{'replicas':>10}{'r x S':>8}"
          f"{'layout':>16}{'gain':>7}{'plan s':>8}{'PipeDream LB':>14}{'its split':>22}"
          f"{'ours/LB':>9}")
    for label, path, memory in shared_profiles(args.profiles):
        t, a, p = load_chain(args.profiles, path)
        for gpus in (int(g) for g in args.gpus.split(",")):
            common = [path, "--microbatches", str(m), "--memory", memory]
            single, _ = run_plan(args.pipe_plan, common + ["--stages", str(gpus),
                                                            "--objective", "iteration"])
            start = time.time()
            split, _ = run_plan(args.pipe_plan, common + ["--gpus", str(gpus),
                                                           "--stages", "auto"])
            wall = time.time() - start
            dp = split.get("data_parallel", {})
            ours = dp.get("iteration_ms")
            one = single.get("iteration_ms")
            bandwidth = 25e9 if gpus <= 8 else 12.5e9
            stages = pipedream_replicated(t, a, p, gpus, bandwidth)
            bound = max(m * c / r + all_reduce_ms(r, w) for c, _, w, r in stages)
            limit = float(memory[:-2]) * 1e9
            factor = evaluator(args.profiles).PARAM_FACTOR
            fits = all(factor * w + min(len(stages) - k, -(-m // r)) * act <= limit
                       for k, (_, act, w, r) in enumerate(stages))
            shape = "x".join(str(r) for *_, r in stages)
            if len(shape) > 14:
                shape = f"{len(stages)} stages"
            shape += "" if fits else " (over)"
            print(f"{label:<26}{gpus:>3}"
                  f"{(f'{one:.1f}' if one else 'no plan'):>14}"
                  f"{(f'{ours:.1f}' if ours else 'no plan'):>10}"
                  f"{(str(dp['replicas']) + 'x' + str(dp['stages'])) if ours else '-':>8}"
                  f"{dp.get('layout', '-') if ours else '-':>16}"
                  f"{(f'{one / ours:.2f}' if one and ours else '-'):>7}{wall:>8.2f}"
                  f"{bound:>14.1f}{shape:>22}"
                  f"{(f'{ours / bound:.2f}' if ours else '-'):>9}", flush=True)


if __name__ == "__main__":
    main()
