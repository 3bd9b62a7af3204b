#!/usr/bin/python3
"""Import benchmark: pipe-opt's import time and peak RSS on real-size ONNX
exports, beside the time protobuf alone takes to parse the same file, and the
same models with their weights moved to external data.

  scripts/bench-import.py MODEL_DIR [--build build] [--repeat 5]

MODEL_DIR holds real-size exports (python/scripts/export_models.py --size real
--out MODEL_DIR). Prints a table of medians; nothing is asserted.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def run_measured(cmd):
    """Wall seconds and the child's peak RSS in MiB of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    # ru_maxrss of children is the largest so far, so measure in a fresh
    # process each time: /usr/bin/time would do the same; keep it simple.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024.0, proc.stdout


def rss_of(cmd):
    """Peak RSS (MiB) measured by GNU time's %M in a separate process."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    return int(proc.stderr.strip().splitlines()[-1]) / 1024.0


def median_time(cmd, repeat):
    return statistics.median(run_measured(cmd)[0] for _ in range(repeat))


def protobuf_parse_time(parse_tool, path, repeat):
    values = []
    for _ in range(repeat):
        out = subprocess.run([parse_tool, path], capture_output=True, text=True, check=True).stdout
        values.append(float(out.split()[1]))
    return statistics.median(values)


def to_external(path, out_dir):
    import onnx
    model = onnx.load(path)
    target = os.path.join(out_dir, os.path.basename(path))
    onnx.save(model, target, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(path) + ".data", size_threshold=1024)
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    pipe_opt = os.path.join(args.build, "bin", "pipe-opt")
    parse_tool = os.path.join(args.build, "bin", "onnx-protobuf-parse")
    models = sorted(f for f in os.listdir(args.model_dir) if f.endswith(".onnx"))
    print(f"{'model':<16}{'file MB':>9}{'protobuf s':>12}{'import s':>10}{'ratio':>7}"
          f"{'RSS MB':>8}{'ext import s':>14}{'ext RSS MB':>12}")
    with tempfile.TemporaryDirectory() as scratch:
        for name in models:
            path = os.path.join(args.model_dir, name)
            size = os.path.getsize(path) / 2**20
            cmd = [pipe_opt, path, "--micro-batch-size=8", "-o", os.devnull]
            proto = protobuf_parse_time(parse_tool, path, args.repeat)
            imp = median_time(cmd, args.repeat)
            rss = rss_of(cmd)
            ext = to_external(path, scratch)
            ext_cmd = [pipe_opt, ext, "--micro-batch-size=8", "-o", os.devnull]
            ext_imp = median_time(ext_cmd, args.repeat)
            ext_rss = rss_of(ext_cmd)
            print(f"{name[:-5]:<16}{size:>9.1f}{proto:>12.3f}{imp:>10.3f}{imp / proto:>7.2f}"
                  f"{rss:>8.0f}{ext_imp:>14.3f}{ext_rss:>12.0f}")
            os.remove(ext)
            os.remove(ext + ".data")
    print(f"medians of {args.repeat} runs; import = whole pipe-opt process (read, "
          "import, shape inference, print to /dev/null) at --micro-batch-size=8")


if __name__ == "__main__":
    main()
