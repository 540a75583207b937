/* Naive RMSNorm: y[i, j] = x[i, j] / sqrt(mean_j(x[i, j]^2) + 1e-6) * weight[j].
 * Two passes per row, fp32 throughout. */
#include <stdint.h>
#include <math.h>

void rmsnorm(const float *x, const float *weight, float *y, int64_t M, int64_t N)
{
    const float eps = 1e-6f;
    for (int64_t i = 0; i < M; i++) {
        const float *xr = x + i * N;
        float *yr = y + i * N;

        float ss = 0.0f;
        for (int64_t j = 0; j < N; j++)
            ss += xr[j] * xr[j];

        float rstd = 1.0f / sqrtf(ss / (float)N + eps);
        for (int64_t j = 0; j < N; j++)
            yr[j] = xr[j] * rstd * weight[j];
    }
}
