"""The element-wise correctness rule and its statistics (pure functions over NumPy arrays).

Per element, in float64: NaN must be NaN in both, +/-inf must be equal in both, and a finite
pair matches when |out - ref| <= atol + rtol * |ref|. Bool outputs are compared as bytes, so an
unwritten bool (poison byte 0xAA) never equals a written True or False.
"""

import math

import numpy as np

from . import dtypes


class Check:
    """One output of one trial compared with the reference."""

    __slots__ = ("elements", "mismatched", "pairs", "max_abs", "max_rel", "sq_diff", "sq_ref",
                 "first", "got", "expected", "unwritten")

    def __init__(self):
        self.elements = self.mismatched = self.unwritten = 0
        self.pairs = 0  # finite (out, ref) pairs, over which the error statistics run
        self.max_abs = self.max_rel = math.nan
        self.sq_diff = self.sq_ref = 0.0
        self.first = None  # index tuple of the first mismatch
        self.got = self.expected = None


# Elements compared at a time: the float64 temporaries of a chunk stay in the core's cache. Whole
# arrays made seven 8-byte temporaries of every element: 2.2 s for a 16.8 M-element float16 output
# (mlx_attention at L=4096, measured on a 2-core host), three times per workload.
HOST_CHUNK = 1 << 16


def _flat(out, ref):
    """The two sides flat: the candidate's bools as their raw bytes, the reference's as 0/1."""
    if out.dtype.kind == "b":
        return out.reshape(-1).view(np.uint8), (np.asarray(ref).reshape(-1) != 0).view(np.uint8)
    return out.reshape(-1), np.asarray(ref).reshape(-1)


def compare(out, ref, atol, rtol):
    check = Check()
    o_all, r_all = _flat(out, ref)
    check.elements = o_all.size
    first = None
    for start in range(0, o_all.size, HOST_CHUNK):
        o = o_all[start:start + HOST_CHUNK].astype(np.float64)
        r = r_all[start:start + HOST_CHUNK].astype(np.float64)
        at = _compare_chunk(check, out.dtype, o, r, atol, rtol)
        if at is not None and first is None:
            first = (start + at, o[at], r[at])
    if first is not None:
        flat, got, expected = first
        check.first = tuple(int(i) for i in np.unravel_index(flat, out.shape))
        check.got, check.expected = _value(out, [got], 0), _value(out, [expected], 0)
    return check


def _compare_chunk(check, dtype, o, r, atol, rtol):
    """Adds one chunk's counts and statistics to `check`; the chunk's first mismatch, or None."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(o - r)
        abs_r = np.abs(r)
        bound = abs_r * rtol
        bound += atol
        ok = diff <= bound  # False wherever either side is NaN
        all_finite = bool(np.isfinite(diff).all())
        if all_finite:
            # The common case: no NaN or inf on either side, so every pair is a finite pair.
            both_finite = None
        else:
            both_finite = np.isfinite(o) & np.isfinite(r)
            ok &= both_finite
            ok |= np.isnan(o) & np.isnan(r)
            ok |= np.isinf(o) & (o == r)
    mismatched = int(o.size - np.count_nonzero(ok))
    check.mismatched += mismatched

    pairs = o.size if all_finite else int(np.count_nonzero(both_finite))
    if pairs:
        check.pairs += pairs
        d, a = (diff, abs_r) if all_finite else (diff[both_finite], abs_r[both_finite])
        check.max_abs = _nanmax_value(check.max_abs, float(d.max()))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = d / a
        rel = rel[a != 0]
        if rel.size:
            check.max_rel = _nanmax_value(check.max_rel, float(rel.max()))
        with np.errstate(over="ignore"):
            check.sq_diff += float(np.dot(d, d))
            check.sq_ref += float(np.dot(a, a))

    if not mismatched:
        return None
    bad = ~ok
    if dtype.kind == "f":
        still = np.isnan(o) & ~np.isnan(r)
    elif dtype.kind == "b":
        still = o == dtypes.POISON_BOOL_BYTE
    else:
        still = o == float(np.iinfo(dtype).max)
    check.unwritten += int(np.count_nonzero(still & bad))
    return int(np.argmin(ok))


class FastCheck:
    """A cheap sufficient test of `compare(out, ref, atol, rtol)` finding no mismatch.

    Used on every timed call. Float outputs are tested in their own precision (float16 in
    float32) against a bound shrunk by a relative 2**-10 with atol and rtol rounded down, which
    covers the rounding of the cheaper arithmetic (up to the absolute rounding of values below
    ~1e-38 in float32); NaN or inf on either side fails it. Integer and bool outputs with no
    tolerance must be equal. When it returns False the caller runs `compare` for the verdict.
    Works in chunks of CHUNK elements, so its scratch stays in the core's cache and the
    harness's check evicts little of what the timed calls keep there.
    """

    _MARGIN = 1.0 - 2.0 ** -10
    CHUNK = 1 << 15

    def __init__(self, shape, dtype, atol, rtol):
        self.exact = dtype.kind in "iub" and atol == 0 and rtol == 0
        self.float = dtype.kind == "f"
        if self.float:
            work = np.dtype(np.float64 if dtype == np.float64 else np.float32)
            self.atol = _round_down(atol * self._MARGIN, work)
            self.rtol = _round_down(rtol * self._MARGIN, work)
            size = min(math.prod(shape), self.CHUNK)
            self.diff = np.empty(size, work)
            self.bound = np.empty(size, work)
            self.flags = np.empty(size, np.bool_)

    def passes(self, out, ref):
        ref = np.asarray(ref)
        if self.exact:
            if out.dtype.kind == "b":
                return np.array_equal(out.view(np.uint8), ref != 0)
            return np.array_equal(out, ref)
        if not self.float or ref.dtype.kind not in "fiu":
            return False
        return all(ok.all() for ok in self._chunks(out, ref))

    def verdicts(self, out, ref):
        """Per element, whether the float test accepts it (for tests)."""
        return np.concatenate([ok.copy() for ok in self._chunks(out, np.asarray(ref))])

    def _chunks(self, out, ref):
        o, r = out.reshape(-1), ref.reshape(-1)
        for start in range(0, o.size, self.CHUNK):
            stop = min(start + self.CHUNK, o.size)
            oc, rc = o[start:stop], r[start:stop]
            n = stop - start
            d, b, ok = self.diff[:n], self.bound[:n], self.flags[:n]
            with np.errstate(invalid="ignore", over="ignore"):
                if oc.dtype == d.dtype:
                    np.subtract(oc, rc, out=d, casting="same_kind")
                else:  # float16: subtract in float32, not in float16
                    np.copyto(d, oc)
                    np.subtract(d, rc, out=d, casting="same_kind")
                np.abs(d, out=d)
                np.abs(rc, out=b, casting="same_kind")
                np.multiply(b, self.rtol, out=b)
                np.add(b, self.atol, out=b)
                np.less_equal(d, b, out=ok)  # False wherever either side is NaN
            yield ok


def _round_down(value, dtype):
    """The largest `dtype` number not above `value` (value >= 0)."""
    x = dtype.type(value)
    while float(x) > value:
        x = np.nextafter(x, dtype.type(0))
    return x


def _value(out, flat_values, i):
    v = float(flat_values[i])
    if out.dtype.kind in "iub" and math.isfinite(v):
        return int(v)
    return v


def largest_finite_magnitude(ref):
    r = np.asarray(ref)
    if r.dtype.kind == "b":
        return 1.0 if r.any() else 0.0
    flat, largest = r.reshape(-1), 0.0
    for start in range(0, flat.size, HOST_CHUNK):  # in cache, as compare()
        c = np.abs(flat[start:start + HOST_CHUNK].astype(np.float64))
        c = c[np.isfinite(c)]
        if c.size:
            largest = max(largest, float(c.max()))
    return largest


class Tally:
    """Comparison results of one workload, over its outputs and trials."""

    def __init__(self, output_names):
        self.names = output_names
        self.trials = 0
        self.elements = self.mismatched = self.pairs = 0
        self.max_abs = self.max_rel = math.nan
        self.sq_diff = self.sq_ref = 0.0
        self.per_output = {n: [] for n in output_names}  # (trial, Check)

    def add(self, trial, name, check):
        self.per_output[name].append((trial, check))
        self.elements += check.elements
        self.mismatched += check.mismatched
        self.pairs += check.pairs
        self.max_abs = _nanmax(self.max_abs, check.max_abs)
        self.max_rel = _nanmax(self.max_rel, check.max_rel)
        self.sq_diff += check.sq_diff
        self.sq_ref += check.sq_ref

    @property
    def matched_ratio(self):
        if not self.elements:
            return 1.0  # nothing to mismatch; Rust reads this field as a number, never null
        return (self.elements - self.mismatched) / self.elements

    @property
    def rel_norm(self):
        if self.sq_ref > 0:
            return math.sqrt(self.sq_diff) / math.sqrt(self.sq_ref)
        return 0.0 if self.pairs and self.sq_diff == 0 else math.nan

    def record(self):
        return {"trials": self.trials, "max_abs_error": self.max_abs,
                "max_rel_error": self.max_rel, "rel_norm": self.rel_norm,
                "matched_ratio": self.matched_ratio, "mismatched": self.mismatched,
                "elements": self.elements}

    def failed(self, required_ratio):
        return self.mismatched > 0 and self.matched_ratio < required_ratio

    def reason(self, tolerances, required_ratio, unit="trial"):
        """One sentence naming the first output at fault, where, and by how much."""
        parts = []
        for name in self.names:
            checks = self.per_output[name]
            bad = sum(c.mismatched for _, c in checks)
            if not bad:
                continue
            if parts:
                parts.append(f"output '{name}' also has {bad} differing elements")
                continue
            total = sum(c.elements for _, c in checks)
            trial, first = next((t, c) for t, c in checks if c.mismatched)
            atol, rtol, dtype = tolerances[name]
            over = f" over {self.trials} {unit}s" if self.trials > 1 else ""
            rule = (f"beyond atol={atol:g} + rtol={rtol:g}*|ref|" if atol or rtol
                    else "from the reference (compared exactly)")
            text = (f"output '{name}': {bad} of {total} elements{over} differ {rule} "
                    f"(first in {unit} {trial} at index "
                    f"{_index(first.first)}: got {_fmt(first.got)}, expected "
                    f"{_fmt(first.expected)})")
            unwritten = sum(c.unwritten for _, c in checks)
            if unwritten:
                text += (f"; {unwritten} of them still hold {dtypes.poison_description(dtype)} "
                         f"of unwritten outputs")
            parts.append(text)
        if required_ratio < 1.0:
            parts.insert(0, f"only {self.matched_ratio:.6g} of elements match, below the "
                            f"required matched_ratio {required_ratio:g}")
        return "; ".join(parts)


def _nanmax(a, b):
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)


def _index(idx):
    return "(" + ", ".join(str(i) for i in idx) + ")"


def _fmt(v):
    return str(v) if isinstance(v, int) else f"{v:.6g}"


# ---- the same rules over torch tensors, where the outputs already are (GPU backends) ---------
#
# Each is the NumPy function above computed by torch on the tensors' device, element for
# element in the same precision (float64 for `compare`, the output's own precision for the fast
# test), with one transfer of a handful of scalars per call: the outputs never travel to the
# host. Only the order of the squared-error sums (rel_norm) may differ from NumPy's, by rounding.

# Elements per pass of `compare_tensors`: bounds its float64 temporaries (8 bytes each).
TENSOR_CHUNK = 1 << 26


def compare_tensors(torch, out, ref, atol, rtol):
    """`compare(out, ref, atol, rtol)` for tensors on one device."""
    check = Check()
    o_all, r_all = _flat_pair(torch, out, ref)
    n = o_all.numel()
    check.elements = n
    if n == 0:
        return check
    bool_out = out.dtype == torch.bool
    int_max = None if out.dtype.is_floating_point or bool_out else \
        float(torch.iinfo(out.dtype).max)
    first = None
    for start in range(0, n, TENSOR_CHUNK):
        o = o_all[start:start + TENSOR_CHUNK].to(torch.float64)
        r = r_all[start:start + TENSOR_CHUNK].to(torch.float64)
        diff = (o - r).abs()
        abs_r = r.abs()
        bound = abs_r * rtol
        bound += atol
        both = torch.isfinite(o) & torch.isfinite(r)
        # As compare(): False wherever either side is NaN or inf, unless both are NaN or both the
        # same infinity (when every pair is finite this is just diff <= bound).
        ok = (diff <= bound) & both
        ok |= torch.isnan(o) & torch.isnan(r)
        ok |= torch.isinf(o) & (o == r)
        zero = torch.zeros((), dtype=torch.float64, device=o.device)
        d = torch.where(both, diff, zero)
        a = torch.where(both, abs_r, zero)
        rel = torch.where(both & (a != 0), d / torch.where(a != 0, a, 1.0), -1.0)
        bad = ~ok
        if out.dtype.is_floating_point:
            still = torch.isnan(o) & ~torch.isnan(r)
        elif bool_out:
            still = o == dtypes.POISON_BOOL_BYTE
        else:
            still = o == int_max
        at = torch.argmin(ok.to(torch.uint8))  # the first mismatch (argmin takes the first)
        stats = torch.stack([
            bad.sum().to(torch.float64), both.sum().to(torch.float64), d.max(), rel.max(),
            torch.dot(d, d), torch.dot(a, a), at.to(torch.float64), o[at], r[at],
            (still & bad).sum().to(torch.float64)]).tolist()
        mismatched, pairs, max_abs, max_rel, sq_d, sq_r, at, got, expected, unwritten = stats
        mismatched, pairs, unwritten = int(mismatched), int(pairs), int(unwritten)
        check.mismatched += mismatched
        check.unwritten += unwritten
        if pairs:
            check.pairs += pairs
            check.max_abs = _nanmax_value(check.max_abs, max_abs)
            if max_rel >= 0:
                check.max_rel = _nanmax_value(check.max_rel, max_rel)
            check.sq_diff += sq_d
            check.sq_ref += sq_r
        if mismatched and first is None:
            first = (start + int(at), got, expected)
    if first is not None:
        flat, got, expected = first
        check.first = tuple(int(i) for i in np.unravel_index(flat, tuple(out.shape)))
        integral = not out.dtype.is_floating_point
        check.got = int(got) if integral and math.isfinite(got) else got
        check.expected = int(expected) if integral and math.isfinite(expected) else expected
    return check


def _flat_pair(torch, out, ref):
    """Flat views of the candidate's output (a bool output as its bytes) and the reference's
    (a bool reference as 0/1)."""
    o = out.detach().reshape(-1)
    if out.dtype == torch.bool:
        o = o.view(torch.uint8)
    r = ref.detach().reshape(-1)
    if out.dtype == torch.bool:
        r = (r != 0).to(torch.uint8)
    return o, r


def _nanmax_value(a, b):
    return b if math.isnan(a) else (a if math.isnan(b) else max(a, b))


class TensorFastCheck:
    """FastCheck (above) for tensors on one device: float outputs in float32 (float64 for
    float64 outputs) against the same shrunk bound; integers and bools with no tolerance
    exactly. One scalar crosses to the host per call."""

    def __init__(self, torch, dtype_name, atol, rtol):
        self.torch = torch
        integral = dtype_name == "bool" or dtype_name.startswith(("int", "uint"))
        self.exact = integral and atol == 0 and rtol == 0
        self.float = dtype_name in ("float64", "float32", "float16", "bfloat16")
        if self.float:
            wide = dtype_name == "float64"
            self.work = torch.float64 if wide else torch.float32
            npwork = np.dtype(np.float64 if wide else np.float32)
            self.atol = float(_round_down(atol * FastCheck._MARGIN, npwork))
            self.rtol = float(_round_down(rtol * FastCheck._MARGIN, npwork))

    def passes(self, out, ref):
        torch = self.torch
        if self.exact:
            if out.dtype == torch.bool:
                return bool(torch.equal(out.view(torch.uint8), (ref != 0).to(torch.uint8)))
            return bool((out == ref).all().item())
        if not self.float or not (ref.dtype.is_floating_point or ref.dtype in (
                torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)):
            return False
        o_all, r_all = out.detach().reshape(-1), ref.detach().reshape(-1)
        ok = None
        # In chunks, as compare_tensors: whole-tensor temporaries of a 7 GiB output (KernelBench
        # level 1's norms) ran the H200 out of memory (bench/results/importers.md, session 11).
        for start in range(0, o_all.numel(), TENSOR_CHUNK):
            o = o_all[start:start + TENSOR_CHUNK].to(self.work)
            r = r_all[start:start + TENSOR_CHUNK].to(self.work)
            d = (o - r).abs_()
            b = r.abs().mul_(self.rtol).add_(self.atol)  # r may be `ref` itself: not in place
            chunk = (d <= b).all()  # False wherever either side is NaN
            ok = chunk if ok is None else ok & chunk
            del o, r, d, b
        return True if ok is None else bool(ok.item())  # one scalar crosses to the host


def largest_finite_magnitude_tensor(torch, ref):
    """largest_finite_magnitude (above) for a tensor."""
    if ref.dtype == torch.bool:
        return 1.0 if bool(ref.any().item()) else 0.0
    if ref.numel() == 0:
        return 0.0
    flat = ref.detach().reshape(-1)
    zero = torch.zeros((), dtype=torch.float64, device=flat.device)
    largest = None
    for start in range(0, flat.numel(), TENSOR_CHUNK):  # bounded temporaries, as above
        r = flat[start:start + TENSOR_CHUNK].to(torch.float64).abs()
        chunk = torch.where(torch.isfinite(r), r, zero).max()
        largest = chunk if largest is None else torch.maximum(largest, chunk)
        del r
    return float(largest.item())
