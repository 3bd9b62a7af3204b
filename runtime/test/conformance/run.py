"""Runs the kernel conformance suite (every test_*.py beside this file) and
prints, per kernel, the test cases run and the worst relative error
max|ours - ref| / max(|ref|, tiny) over its checks.

    python3 runtime/test/conformance/run.py [--markdown] [-q] [--backend cpu|emulated|cuda]

Exits non-zero when a test fails, 77 (skipped, with the reason) when the
backend cannot be used here. PIPE_RUNTIME_LIB selects the library; --backend
(or PIPE_RUNTIME_BACKEND) the rank's backend: on a device the tensors live in
device memory.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import piperun  # noqa: E402


def kernel_of(test_id):
    """test_<kernel>__<case> -> kernel."""
    method = test_id.rsplit(".", 1)[-1]
    return method[len("test_"):].split("__", 1)[0]


def iterate(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from iterate(item)
        else:
            yield item


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("-q", "--quiet", action="store_true", help="one dot per test")
    parser.add_argument("--backend", choices=["cpu", "emulated", "cuda"],
                        help="the rank's backend (default $PIPE_RUNTIME_BACKEND, else cpu)")
    args = parser.parse_args()
    if args.backend:
        os.environ["PIPE_RUNTIME_BACKEND"] = args.backend

    path = piperun.find_library()
    if not path:
        print("libpiperun.so not found (set PIPE_RUNTIME_LIB or build the runtime)",
              file=sys.stderr)
        return 2
    print("library: %s, backend %s" % (os.path.relpath(path, piperun.REPO_ROOT), piperun.backend()))
    try:
        piperun.Rank(piperun.library()).destroy()
    except piperun.BackendUnavailable as error:
        print("skipped: %s" % error)
        return 77
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    cases = collections.Counter(kernel_of(t.id()) for t in iterate(suite))
    start = time.time()
    result = unittest.TextTestRunner(verbosity=1 if args.quiet else 2, stream=sys.stdout).run(suite)
    elapsed = time.time() - start

    rows = []
    for kernel in sorted(cases):
        checks, worst = piperun.RESULTS.get(kernel, (0, 0.0))
        rows.append((kernel, cases[kernel], checks, "%.2e" % worst if checks else "-"))
    if args.markdown:
        print("\n| kernel | cases | checks | worst relative error |")
        print("|---|---:|---:|---:|")
        for row in rows:
            print("| `%s` | %d | %d | %s |" % row)
    else:
        print("\n%-36s %6s %7s %12s" % ("kernel", "cases", "checks", "worst error"))
        for row in rows:
            print("%-36s %6d %7d %12s" % row)
    print("\n%d cases, %d failed, %d errors in %.1f s" % (
        result.testsRun, len(result.failures), len(result.errors), elapsed))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
