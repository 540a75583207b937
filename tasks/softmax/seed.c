/* Naive row softmax: y[i, :] = exp(x[i, :] - max) / sum(exp(x[i, :] - max)).
 * Three passes per row (max, exp + sum, scale), fp32 throughout. */
#include <stdint.h>
#include <math.h>

void softmax(const float *x, float *y, int64_t M, int64_t N)
{
    for (int64_t i = 0; i < M; i++) {
        const float *xr = x + i * N;
        float *yr = y + i * N;

        float m = xr[0];
        for (int64_t j = 1; j < N; j++)
            if (xr[j] > m)
                m = xr[j];

        float s = 0.0f;
        for (int64_t j = 0; j < N; j++) {
            float e = expf(xr[j] - m);
            yr[j] = e;
            s += e;
        }

        for (int64_t j = 0; j < N; j++)
            yr[j] = yr[j] / s;
    }
}
