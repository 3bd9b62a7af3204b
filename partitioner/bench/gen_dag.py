#!/usr/bin/python3
"""Random DAG profile generator in PipeDream graph.txt format (stdout).

  gen_dag.py NODES [--seed N] [--width W]

A sequence of blocks: each block forks into up to W parallel branches of random length
that join again (Inception/ResNet-like), plus occasional long skip connections.
"""
import argparse
import random


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("nodes", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--width", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    lines, edges = [], []
    count = 0

    def node(kind):
        nonlocal count
        count += 1
        forward = rng.uniform(0.05, 2.0)
        lines.append(
            f"node{count} -- {kind} -- forward_compute_time={forward:.4f}, "
            f"backward_compute_time={forward * rng.uniform(1.5, 2.5):.4f}, "
            f"activation_size={rng.uniform(0.2e6, 3e6):.1f}, parameter_size={rng.uniform(0, 2e6):.1f}")
        return count

    last = node("Input")
    lines[-1] = f"node1 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=1000000.0, parameter_size=0.0"
    history = [last]
    while count < args.nodes - 1:
        branches = rng.randint(1, args.width)
        ends = []
        for _ in range(branches):
            previous = last
            for _ in range(rng.randint(1, 4)):
                if count >= args.nodes - 1:
                    break
                current = node("Op")
                edges.append((previous, current))
                previous = current
            ends.append(previous)
        join = node("Join")
        for end in set(ends):
            edges.append((end, join))
        if len(history) > 3 and rng.random() < 0.2:
            edges.append((rng.choice(history[-4:-1]), join))
        last = join
        history.append(join)
    print("\n".join(lines))
    for a, b in edges:
        print(f"\tnode{a} -- node{b}")


if __name__ == "__main__":
    main()
