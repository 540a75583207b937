"""The element-wise rule, its statistics and the degenerate-reference measure."""

import math
import unittest

import numpy as np

from ksearch_harness import dtypes
from ksearch_harness.compare import FastCheck, Tally, compare, largest_finite_magnitude


def check(out, ref, atol=0.25, rtol=0.25, dtype=np.float64):
    return compare(np.array(out, dtype=dtype), np.array(ref, dtype=np.float64), atol, rtol)


class ElementRule(unittest.TestCase):
    def test_tolerance_edge_is_inclusive(self):
        # atol + rtol*|ref| = 0.25 + 0.25*1 = 0.5, exact in binary floating point.
        self.assertEqual(check([1.5], [1.0]).mismatched, 0)
        self.assertEqual(check([0.5], [1.0]).mismatched, 0)
        self.assertEqual(check([np.nextafter(1.5, 2.0)], [1.0]).mismatched, 1)
        self.assertEqual(check([0.5 - 2**-52], [1.0]).mismatched, 1)

    def test_rtol_scales_with_the_reference_not_the_output(self):
        # |out - ref| = 9 <= 0 + 0.5*|ref| = 0.5 * 10 ... but not 0.5 * |out| = 0.5.
        self.assertEqual(check([1.0], [10.0], atol=0.0, rtol=0.9).mismatched, 0)
        self.assertEqual(check([10.0], [1.0], atol=0.0, rtol=0.9).mismatched, 1)

    def test_nan_must_be_nan_in_both(self):
        c = check([np.nan, np.nan, 1.0], [np.nan, 1.0, np.nan])
        self.assertEqual(c.mismatched, 2)
        self.assertEqual(c.first, (1,))
        self.assertTrue(math.isnan(c.got))
        self.assertEqual(c.expected, 1.0)
        self.assertEqual(c.unwritten, 1)  # NaN where the reference has a number

    def test_inf_must_match_with_its_sign(self):
        self.assertEqual(check([np.inf, -np.inf], [np.inf, -np.inf]).mismatched, 0)
        self.assertEqual(check([-np.inf], [np.inf]).mismatched, 1)
        self.assertEqual(check([np.inf], [1e308]).mismatched, 1)
        self.assertEqual(check([1e308], [np.inf]).mismatched, 1)

    def test_error_statistics_use_finite_pairs_only(self):
        c = check([1.1, 2.0, np.nan, 5.0], [1.0, 0.0, np.nan, np.inf], atol=10, rtol=0)
        self.assertAlmostEqual(c.max_abs, 2.0)
        self.assertAlmostEqual(c.max_rel, 0.1)  # the ref == 0 pair is left out
        self.assertAlmostEqual(c.sq_diff, 0.01 + 4.0)
        self.assertAlmostEqual(c.sq_ref, 1.0)
        self.assertEqual(c.mismatched, 1)  # 5.0 against inf

    def test_first_mismatch_index_is_multidimensional(self):
        out = np.zeros((3, 4), np.float32)
        ref = np.zeros((3, 4))
        out[2, 1] = 7
        c = compare(out, ref, 1e-4, 1e-4)
        self.assertEqual((c.mismatched, c.first, c.got, c.expected), (1, (2, 1), 7.0, 0.0))

    def test_poisoned_outputs_never_match(self):
        f = np.empty(4, np.float32)
        dtypes.poison(f)
        self.assertEqual(compare(f, np.zeros(4), 1e9, 1e9).mismatched, 4)
        i = np.empty(4, np.int32)
        dtypes.poison(i)
        c = compare(i, np.zeros(4, np.int32), 0, 0)
        self.assertEqual((c.mismatched, c.unwritten, c.got), (4, 4, 2**31 - 1))
        b = np.empty(4, np.bool_)
        dtypes.poison(b)
        for ref in (np.zeros(4, bool), np.ones(4, bool)):
            c = compare(b, ref, 0, 0)
            self.assertEqual((c.mismatched, c.unwritten, c.got), (4, 4, 0xAA))
        b[:] = [True, False, True, False]
        self.assertEqual(compare(b, np.array([1, 0, 1, 0]), 0, 0).mismatched, 0)


class WorkloadTally(unittest.TestCase):
    def tally(self):
        t = Tally(["y"])
        t.add(0, "y", check([1.0] * 10, [1.0] * 10))
        t.add(1, "y", check([1.0] * 9 + [9.0], [1.0] * 10))
        t.trials = 2
        return t

    def test_matched_ratio_counts_all_trials_elements(self):
        t = self.tally()
        self.assertEqual((t.elements, t.mismatched), (20, 1))
        self.assertEqual(t.matched_ratio, 0.95)
        self.assertTrue(t.failed(1.0))
        self.assertTrue(t.failed(0.96))
        self.assertFalse(t.failed(0.95))
        self.assertFalse(t.failed(0.9))

    def test_record_and_reason(self):
        t = self.tally()
        r = t.record()
        self.assertEqual((r["trials"], r["mismatched"], r["elements"]), (2, 1, 20))
        self.assertEqual(r["max_abs_error"], 8.0)
        self.assertAlmostEqual(r["rel_norm"], 8.0 / math.sqrt(20))
        reason = t.reason({"y": (0.25, 0.25, np.dtype(np.float64))}, 0.99)
        self.assertEqual(reason, "only 0.95 of elements match, below the required matched_ratio "
                                 "0.99; output 'y': 1 of 20 elements over 2 trials differ beyond "
                                 "atol=0.25 + rtol=0.25*|ref| (first in trial 1 at index (9): "
                                 "got 9, expected 1)")

    def test_no_finite_pair_gives_non_finite_statistics(self):
        t = Tally(["y"])
        t.add(0, "y", check([np.nan], [1.0]))
        r = t.record()
        self.assertTrue(math.isnan(r["max_abs_error"]))
        self.assertTrue(math.isnan(r["rel_norm"]))
        self.assertEqual(r["matched_ratio"], 0.0)


class DegenerateReference(unittest.TestCase):
    def test_largest_finite_magnitude_ignores_nan_and_inf(self):
        self.assertEqual(largest_finite_magnitude(np.array([np.nan, -np.inf, -3e-5, 1e-5])), 3e-5)
        self.assertEqual(largest_finite_magnitude(np.zeros((2, 2))), 0.0)
        self.assertEqual(largest_finite_magnitude(np.array([np.nan])), 0.0)
        self.assertEqual(largest_finite_magnitude(np.zeros(0)), 0.0)
        self.assertEqual(largest_finite_magnitude(np.array([False, True])), 1.0)
        self.assertEqual(largest_finite_magnitude(np.array([False])), 0.0)


class FastPath(unittest.TestCase):
    """FastCheck.passes must imply that compare() finds no mismatch (it may fail more often)."""

    def fast(self, out, ref, atol, rtol):
        return FastCheck(out.shape, out.dtype, atol, rtol).passes(out, ref)

    def test_passing_fast_check_implies_the_full_rule(self):
        # Element by element (FastCheck.verdicts): accepted by the fast test => within
        # |out - ref| <= atol + rtol * |ref| in float64, for errors straddling the bound.
        rng = np.random.default_rng(0)
        for dtype, ref_dtype, atol, rtol in [(np.float32, np.float32, 1e-8, 1e-3),
                                             (np.float32, np.float64, 1e-4, 1e-4),
                                             (np.float32, np.float32, 0.0, 1e-4),
                                             (np.float32, np.float32, 1e-3, 0.0),
                                             (np.float16, np.float16, 1e-2, 1e-2),
                                             (np.float16, np.float32, 1e-3, 1e-3),
                                             (np.float64, np.float64, 1e-6, 1e-6)]:
            n = 50000
            ref = (rng.standard_t(3, n) * 10.0 ** rng.integers(-4, 3, n)).astype(ref_dtype)
            r64 = ref.astype(np.float64)
            bound = atol + rtol * np.abs(r64)
            scale = rng.uniform(1 - 2 ** -7, 1 + 2 ** -7, n) * rng.choice([-1, 1], n)
            out = (r64 + scale * bound).astype(dtype)
            fast = FastCheck(out.shape, out.dtype, atol, rtol).verdicts(out, ref)
            full = np.abs(out.astype(np.float64) - r64) <= bound
            self.assertFalse((fast & ~full).any(), dtype)
            self.assertGreater(fast.mean(), 0.2, dtype)  # not vacuous
            self.assertLess(fast.mean(), full.mean(), dtype)  # the margin fails a few more
            accepted = fast.nonzero()[0]
            self.assertTrue(self.fast(out[accepted], ref[accepted], atol, rtol), dtype)
            self.assertEqual(compare(out[accepted], ref[accepted], atol, rtol).mismatched, 0)

    def test_nan_poison_and_non_finite_values_go_to_the_full_rule(self):
        ref = np.array([1.0, 2.0, 3.0], np.float32)
        self.assertTrue(self.fast(ref.copy(), ref, 1e-4, 1e-4))
        out = ref.copy()
        out[1] = np.nan
        self.assertFalse(self.fast(out, ref, 1e-4, 1e-4))
        both = np.array([np.inf, np.nan, 1.0], np.float32)
        self.assertFalse(self.fast(both, both, 1e-4, 1e-4))  # compare() decides these
        self.assertFalse(self.fast(np.array([1.0002], np.float32), np.array([1.0], np.float32),
                                   1e-4, 1e-4))

    def test_integers_and_bools_must_be_equal(self):
        ints = np.array([1, 5, -3], np.int32)
        self.assertTrue(self.fast(ints.copy(), ints.astype(np.int64), 0.0, 0.0))
        self.assertFalse(self.fast(ints + 1, ints, 0.0, 0.0))
        poisoned = np.empty(3, np.bool_)
        dtypes.poison(poisoned)
        truth = np.array([True, False, True])
        self.assertFalse(self.fast(poisoned, truth, 0.0, 0.0))
        self.assertTrue(self.fast(truth.copy(), truth, 0.0, 0.0))
        self.assertTrue(self.fast(truth.copy(), truth.astype(np.float32), 0.0, 0.0))


if __name__ == "__main__":
    unittest.main()


def _compare_whole(out, ref, atol, rtol):
    """compare() as it was before it worked in chunks (whole-array temporaries): the oracle the
    chunked one must agree with."""
    from ksearch_harness.compare import Check
    c = Check()
    if out.dtype.kind == "b":
        o = out.reshape(-1).view(np.uint8).astype(np.float64)
        r = (np.asarray(ref).reshape(-1) != 0).astype(np.float64)
    else:
        o, r = out.reshape(-1).astype(np.float64), np.asarray(ref).reshape(-1).astype(np.float64)
    c.elements = o.size
    if o.size == 0:
        return c
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(o - r)
        abs_r = np.abs(r)
        ok = diff <= abs_r * rtol + atol
        both = np.isfinite(o) & np.isfinite(r)
        ok &= both
        ok |= np.isnan(o) & np.isnan(r)
        ok |= np.isinf(o) & (o == r)
    c.mismatched = int(o.size - np.count_nonzero(ok))
    c.pairs = int(np.count_nonzero(both))
    if c.pairs:
        d, a = diff[both], abs_r[both]
        c.max_abs = float(d.max())
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = (d / a)[a != 0]
        if rel.size:
            c.max_rel = float(rel.max())
        c.sq_diff, c.sq_ref = float(np.dot(d, d)), float(np.dot(a, a))
    if c.mismatched:
        flat = int(np.argmin(ok))
        c.first = tuple(int(i) for i in np.unravel_index(flat, out.shape))
        c.got, c.expected = float(o[flat]), float(r[flat])
        if out.dtype.kind in "iub" and math.isfinite(c.got):
            c.got = int(c.got)
        if out.dtype.kind in "iub" and math.isfinite(c.expected):
            c.expected = int(c.expected)
        bad = ~ok
        if out.dtype.kind == "f":
            still = np.isnan(o) & ~np.isnan(r)
        elif out.dtype.kind == "b":
            still = o == dtypes.POISON_BOOL_BYTE
        else:
            still = o == float(np.iinfo(out.dtype).max)
        c.unwritten = int(np.count_nonzero(still & bad))
    return c


class Chunked(unittest.TestCase):
    """compare() works HOST_CHUNK elements at a time; every count, the first mismatch and the
    statistics agree with the whole-array rule, also across chunk boundaries."""

    def same(self, out, ref, atol, rtol):
        a, b = compare(out, ref, atol, rtol), _compare_whole(out, ref, atol, rtol)
        for f in ("elements", "mismatched", "pairs", "first", "got", "expected", "unwritten"):
            ga, gb = getattr(a, f), getattr(b, f)
            if isinstance(ga, float) and math.isnan(ga):
                self.assertTrue(math.isnan(gb), f)
            else:
                self.assertEqual(ga, gb, f)
        for f in ("max_abs", "max_rel", "sq_diff", "sq_ref"):
            ga, gb = getattr(a, f), getattr(b, f)
            if math.isnan(gb):
                self.assertTrue(math.isnan(ga), f)
            else:
                self.assertAlmostEqual(ga, gb, delta=1e-12 * max(1.0, abs(gb)), msg=f)

    def test_floats_with_mismatches_nan_and_inf_across_chunks(self):
        from ksearch_harness.compare import HOST_CHUNK
        rng = np.random.default_rng(5)
        n = 3 * 123 * (HOST_CHUNK // 123 + 1)  # a multiple of 123, past three chunks
        ref = rng.standard_normal(n).astype(np.float32)
        for case in range(6):
            out = ref + rng.standard_normal(n).astype(np.float32) * 1e-4
            if case >= 1:
                out[HOST_CHUNK + 7] += 1.0  # the first mismatch, in the second chunk
                out[2 * HOST_CHUNK + 1] = np.nan
            if case >= 2:
                ref2 = ref.copy()
                ref2[[5, HOST_CHUNK * 2 + 9]] = np.inf
                out[5] = np.inf
                out[HOST_CHUNK * 2 + 9] = -np.inf
            else:
                ref2 = ref
            if case >= 3:
                ref2 = ref2.copy()
                ref2[HOST_CHUNK * 3 + 3] = np.nan
                out[HOST_CHUNK * 3 + 3] = np.nan
            if case == 4:
                ref2 = np.zeros(n, np.float32)
            if case == 5:
                out = out.astype(np.float16)
            self.same(out.reshape(-1, 123) if case == 4 else out,
                      ref2.reshape(-1, 123) if case == 4 else ref2, 1e-3, 1e-3)

    def test_integers_bools_and_empty(self):
        from ksearch_harness.compare import HOST_CHUNK
        rng = np.random.default_rng(6)
        n = 2 * HOST_CHUNK + 5
        ints = rng.integers(-100, 100, n).astype(np.int32)
        got = ints.copy()
        got[[3, HOST_CHUNK + 1]] = np.iinfo(np.int32).max
        self.same(got, ints, 0, 0)
        truth = rng.integers(0, 2, n).astype(np.bool_)
        b = truth.copy()
        b.view(np.uint8)[HOST_CHUNK + 2] = dtypes.POISON_BOOL_BYTE
        self.same(b, truth, 0, 0)
        self.same(np.zeros(0, np.float32), np.zeros(0, np.float32), 1e-3, 1e-3)
        self.same(np.array(1.5, np.float32), np.array(2.5, np.float32), 1e-3, 1e-3)
