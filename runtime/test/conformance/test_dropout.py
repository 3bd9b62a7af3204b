"""Conformance of pipe_k_dropout: y = x * mask / (1 - ratio) with the mask
of the counter-based generator, element i kept when
uniform01(randomBits(streamKey(seed, step, microbatch, key), i)) >= ratio.
The generator (SplitMix64 over a combined counter) is re-derived here in
numpy for a standalone rank (seed 0, step 0)."""

from __future__ import annotations

import unittest

import numpy as np

from piperun import BOOL, KernelTest, add_cases

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MASK64 = (1 << 64) - 1


def finalise(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def random_bits(key, counter):
    with np.errstate(over="ignore"):
        return finalise(np.uint64(key) + (np.asarray(counter, np.uint64) + np.uint64(1)) * GOLDEN)


def stream_key(seed, step, microbatch, key):
    k = random_bits(seed, 0)
    for value in (step, microbatch, key):
        k = random_bits(k, np.uint64(value & MASK64))
    return int(k)


def reference_mask(n, ratio, microbatch, key, seed=0, step=0):
    bits = random_bits(stream_key(seed, step, microbatch, key), np.arange(n, dtype=np.uint64))
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0) >= ratio


class DropoutTest(KernelTest):
    def dropout(self, x, ratio, microbatch, key, with_mask=True):
        y = self.rank.empty(x.shape)
        mask = self.rank.empty(x.shape, BOOL) if with_mask else None
        self.rank.call("pipe_k_dropout", self.rank.tensor(x), y, mask, ratio, microbatch, key)
        return self.rank.array(y), (self.rank.array(mask) if with_mask else None)

    def run_dropout(self, shape, ratio, microbatch=0, key=0):
        x = np.random.default_rng(0).normal(0, 1, shape).astype(np.float32)
        y, mask = self.dropout(x, ratio, microbatch, key)
        expected_mask = reference_mask(x.size, ratio, microbatch, key).reshape(shape)
        if ratio == 0.0:
            expected_mask[...] = True
        self.check_exact("dropout", mask, expected_mask, what="mask")
        scale = np.float32(1.0 / (1.0 - ratio)) if ratio < 1.0 else np.float32(0.0)
        self.check_exact("dropout", y, np.where(mask, x * scale, np.float32(0.0)).astype(np.float32))
        # The mask is optional; y does not depend on asking for it.
        y_alone, _ = self.dropout(x, ratio, microbatch, key, with_mask=False)
        self.check_exact("dropout", y_alone, y)
        if x.size >= 4096 and 0.0 < ratio < 1.0:
            dropped = 1.0 - mask.mean()
            sigma = np.sqrt(ratio * (1 - ratio) / x.size)
            self.assertLess(abs(dropped - ratio), 6 * sigma, "dropped fraction %.4f" % dropped)

    def test_dropout__streams_differ(self):
        x = np.ones((64, 64), np.float32)
        _, base = self.dropout(x, 0.5, 0, 7)
        _, again = self.dropout(x, 0.5, 0, 7)
        self.check_exact("dropout", again, base, what="same key, same mask")
        for microbatch, key in ((1, 7), (0, 8)):
            _, other = self.dropout(x, 0.5, microbatch, key)
            agreement = (other == base).mean()
            self.assertLess(abs(agreement - 0.5), 0.05, "masks of other streams look correlated")


add_cases(DropoutTest, "dropout", [
    ("ratio_zero_identity", dict(shape=(13, 7), ratio=0.0)),
    ("half", dict(shape=(64, 64), ratio=0.5)),
    ("tenth", dict(shape=(128, 96), ratio=0.1, microbatch=3, key=41)),
    ("most", dict(shape=(4096,), ratio=0.9, microbatch=1, key=2)),
    ("all", dict(shape=(5, 3), ratio=1.0)),
    ("odd_shape", dict(shape=(3, 1, 7), ratio=0.3, key=-5)),
    ("large", dict(shape=(256, 512), ratio=0.2, microbatch=7, key=1234)),
], DropoutTest.run_dropout)


if __name__ == "__main__":
    unittest.main()
