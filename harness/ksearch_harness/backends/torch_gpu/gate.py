"""A gate on a CUDA stream that the host opens: the device waits while a call is being enqueued.

Why: a call's launch costs the host microseconds (ctypes, Python dispatch) during which an idle
device waits. Timed between two CUDA events on an idle device, that wait lies inside the
interval, so a 5 us kernel read 20-35 us (docs/protocol.md, "Timing on a GPU"). With the gate,
the host enqueues [gate, start event, the call's work, end event], then opens the gate: the
device runs the whole call back to back, and the events measure the device time of the work the
call enqueued, not the host's launch path.

The gate is a one-thread kernel (PTX below, loaded through the driver API with ctypes: no
compiler and no Python package needed) that spins on a word of pinned host memory until the
host writes 1 there, or until `limit_ns` have passed on the device's clock (%globaltimer). It
then writes who opened it into the next word: 1 the host, 2 the time limit. The limit keeps a
call that cannot be enqueued behind a closed gate from blocking forever: one that waits for the
device (a synchronising copy, cudaFree, .item(), a new cudaMalloc, the first launch of a kernel
whose module CUDA loads lazily) or fills the launch queue. Such a call is timed as without a
gate (its events include the host's gaps); `expired` says so. The timed calls follow the
correctness trials, so the kernels they launch are loaded by then.

The host clock around the gated call still starts before anything of the call is enqueued and
ends after a device-wide synchronise, so work on another stream or thread lies inside it as
before: the gate only moves the call's own work later, after its host-side launch.
"""

import ctypes

from ...errors import CandidateError

# Opened by the host, opened by the time limit.
OPENED, EXPIRED = 1, 2
# How long a closed gate waits for the host: far above an honest call's launch path (10-100 us
# for ctypes and Python launches), short enough that a call that cannot be gated costs little.
LIMIT_NS = 10_000_000

PTX = r"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry ksearch_gate(
    .param .u64 ksearch_gate_word,
    .param .u64 ksearch_gate_limit
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [ksearch_gate_word];
    ld.param.u64 %rd2, [ksearch_gate_limit];
    mov.u64 %rd3, %globaltimer;
$L_wait:
    ld.volatile.u32 %r1, [%rd1];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_opened;
    mov.u64 %rd4, %globaltimer;
    sub.u64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p2, %rd5, %rd2;
    @%p2 bra $L_wait;
    mov.u32 %r2, 2;
    st.volatile.u32 [%rd1+4], %r2;
    ret;
$L_opened:
    mov.u32 %r2, 1;
    st.volatile.u32 [%rd1+4], %r2;
    ret;
}
"""


class GateUnavailable(Exception):
    """The gate could not be set up here (no driver library, a refused module, no pinned
    memory); timing goes on without it."""


class Gate:
    """One gate for the current device; `close`, `enqueue(stream)`, then `open` per call."""

    def __init__(self, torch, limit_ns=LIMIT_NS):
        self.limit_ns = int(limit_ns)
        try:
            self._lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise GateUnavailable(f"no CUDA driver library ({e})") from None
        lib = self._lib
        # The runtime's primary context must be current on this thread (torch made it so).
        torch.cuda.synchronize()
        context = ctypes.c_void_p()
        self._check(lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
        if not context.value:
            raise GateUnavailable("no current CUDA context")
        self._module = ctypes.c_void_p()
        image = ctypes.create_string_buffer(PTX.encode("ascii"))
        self._check(lib.cuModuleLoadData(ctypes.byref(self._module), image), "cuModuleLoadData")
        self._function = ctypes.c_void_p()
        self._check(lib.cuModuleGetFunction(ctypes.byref(self._function), self._module,
                                            b"ksearch_gate"), "cuModuleGetFunction")
        # Two words of pinned host memory: [0] the host's "open", [1] who opened it.
        self._words = torch.zeros(2, dtype=torch.int32, pin_memory=True)
        host = self._words.data_ptr()
        device = ctypes.c_uint64()
        get = getattr(lib, "cuMemHostGetDevicePointer_v2", None) or lib.cuMemHostGetDevicePointer
        if get(ctypes.byref(device), ctypes.c_void_p(host), ctypes.c_uint(0)) != 0:
            device.value = host  # unified addressing: the host address is the device's too
        self._open = ctypes.c_int32.from_address(host)
        self._opened_by = ctypes.c_int32.from_address(host + 4)
        self._arg_word = ctypes.c_uint64(device.value)
        self._arg_limit = ctypes.c_uint64(self.limit_ns)
        self._params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(self._arg_word),
                                                         ctypes.c_void_p),
                                             ctypes.cast(ctypes.byref(self._arg_limit),
                                                         ctypes.c_void_p))
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + \
            [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.cuLaunchKernel.restype = ctypes.c_int
        self._probe(torch)

    def _check(self, code, what):
        if code != 0:
            raise GateUnavailable(f"{what} returned CUDA driver error {code}")

    def _probe(self, torch):
        """Closed, the gate holds the stream; opened, it lets it go and says who opened it."""
        stream = torch.cuda.current_stream()
        after = torch.cuda.Event()
        self.close()
        self.enqueue(stream.cuda_stream)
        after.record(stream)
        held = not after.query()
        self.open()
        torch.cuda.synchronize()
        if not held or self.opened_by() != OPENED:
            raise GateUnavailable(f"the gate did not hold the stream (held: {held}, opened "
                                  f"by: {self.opened_by()})")

    def close(self):
        self._open.value = 0
        self._opened_by.value = 0

    def enqueue(self, stream_handle):
        code = self._lib.cuLaunchKernel(self._function, 1, 1, 1, 1, 1, 1, 0,
                                        ctypes.c_void_p(stream_handle or None),
                                        self._params, None)
        if code != 0:
            raise CandidateError("runtime_error", f"the GPU refused the timing gate's launch "
                                                  f"(CUDA driver error {code}); the device is "
                                                  f"unusable after an earlier error")

    def open(self):
        self._open.value = 1

    def opened_by(self):
        """OPENED, EXPIRED, or 0 while the device has not run the gate (read after a
        synchronise)."""
        return self._opened_by.value


def make(torch):
    """(Gate, None), or (None, why not)."""
    try:
        return Gate(torch), None
    except GateUnavailable as e:
        return None, str(e)
    except (OSError, AttributeError, RuntimeError, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"
