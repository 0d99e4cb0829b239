/*
 * fxrt_nn_norm.c - normalizations: inference BatchNormalization,
 * InstanceNormalization, LayerNormalization, LRN, MeanVarianceNormalization
 * and LpNormalization, float32 over raw pointers.
 *
 * Statistics are computed in two passes (the mean, then the mean of squared
 * deviations) rather than as E[x^2] - E[x]^2: the one-pass formula cancels
 * catastrophically when the mean is large next to the spread.  Sums are
 * float, taken relative to the row's first element, which keeps them
 * accurate for offset data and cheap on cores whose FPU has no double, and
 * kept in STAT_LANES independent partial sums: one running sum is a chain
 * of dependent additions that the compiler may not reorder into vectors
 * (ConvNeXt's LayerNorms over 96 to 768 channels per pixel spent most of
 * their time waiting on it).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"

void fxrt_batchnorm_f32(int64_t n, int64_t c, int64_t inner, const float *x, const float *scale,
                        const float *bias, const float *mean, const float *var, float eps,
                        float *y)
{
    for (int64_t ch = 0; ch < c; ch++) {
        /* y = x * a + b with the per-channel constants folded once. */
        float a = scale[ch] / sqrtf(var[ch] + eps);
        float b = bias[ch] - mean[ch] * a;
        for (int64_t i = 0; i < n; i++) {
            const float *xp = x + (i * c + ch) * inner;
            float *yp = y + (i * c + ch) * inner;
            for (int64_t j = 0; j < inner; j++)
                yp[j] = xp[j] * a + b;
        }
    }
}

enum { STAT_LANES = 16 };

/* The sum of the lanes, pairwise. */
static float lanes_sum(float lanes[STAT_LANES])
{
    for (int width = STAT_LANES / 2; width > 0; width /= 2)
        for (int l = 0; l < width; l++)
            lanes[l] += lanes[l + width];
    return lanes[0];
}

/* Mean and population variance of v[0..len).  The sum is taken relative to
 * v[0]: data far from zero (an offset of 1000 over a spread of 1) would
 * otherwise lose the spread to float rounding in the running sum. */
static void row_stats(const float *v, int64_t len, float *mean, float *var)
{
    if (len <= 0) {
        *mean = *var = 0.0f;
        return;
    }
    float pivot = v[0], lanes[STAT_LANES] = {0.0f};
    int64_t whole = len - len % STAT_LANES;
    for (int64_t i = 0; i < whole; i += STAT_LANES)
        for (int l = 0; l < STAT_LANES; l++)
            lanes[l] += v[i + l] - pivot;
    float s = lanes_sum(lanes);
    for (int64_t i = whole; i < len; i++)
        s += v[i] - pivot;
    float m = pivot + s / (float)len;
    for (int l = 0; l < STAT_LANES; l++)
        lanes[l] = 0.0f;
    for (int64_t i = 0; i < whole; i += STAT_LANES)
        for (int l = 0; l < STAT_LANES; l++) {
            float d = v[i + l] - m;
            lanes[l] += d * d;
        }
    float q = lanes_sum(lanes);
    for (int64_t i = whole; i < len; i++) {
        float d = v[i] - m;
        q += d * d;
    }
    *mean = m;
    *var = q / (float)len;
}

void fxrt_instancenorm_f32(int64_t n, int64_t c, int64_t inner, const float *x,
                           const float *scale, const float *bias, float eps, float *y)
{
    for (int64_t i = 0; i < n * c; i++) {
        const float *xp = x + i * inner;
        float *yp = y + i * inner;
        float m, v;
        row_stats(xp, inner, &m, &v);
        float a = scale[i % c] / sqrtf(v + eps);
        float b = bias[i % c];
        for (int64_t j = 0; j < inner; j++)
            yp[j] = (xp[j] - m) * a + b;
    }
}

void fxrt_groupnorm_f32(int64_t n, int64_t c, int64_t groups, int64_t inner, const float *x,
                        const float *scale, const float *bias, int64_t per_scale, float eps,
                        float *y)
{
    int64_t group_channels = c / groups, len = group_channels * inner;
    for (int64_t i = 0; i < n * groups; i++) {
        const float *xg = x + i * len;
        float *yg = y + i * len;
        float m, v;
        row_stats(xg, len, &m, &v);
        float inv = 1.0f / sqrtf(v + eps);
        for (int64_t k = 0; k < group_channels; k++) {
            int64_t ch = (i % groups) * group_channels + k;
            float a = scale[ch / per_scale] * inv, b = bias[ch / per_scale];
            for (int64_t j = 0; j < inner; j++)
                yg[k * inner + j] = (xg[k * inner + j] - m) * a + b;
        }
    }
}

void fxrt_layernorm_f32(int64_t rows, int64_t cols, const float *x, const float *scale,
                        const float *bias, float eps, float *y, float *mean, float *inv_std)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xp = x + r * cols;
        float *yp = y + r * cols;
        float m, v;
        row_stats(xp, cols, &m, &v);
        float inv = 1.0f / sqrtf(v + eps);
        for (int64_t j = 0; j < cols; j++)
            yp[j] = (xp[j] - m) * inv;
        if (scale)
            for (int64_t j = 0; j < cols; j++)
                yp[j] *= scale[j];
        if (bias)
            for (int64_t j = 0; j < cols; j++)
                yp[j] += bias[j];
        if (mean)
            mean[r] = m;
        if (inv_std)
            inv_std[r] = inv;
    }
}

/* The channels-last LayerNorm read from NCHWc: a tile of pixels at a time,
 * so each block is read as one run of PIXEL_TILE * 32 bytes (three times:
 * mean, variance, output, the second and third from L1), and each pixel's
 * sums kept in the eight lanes of a block, taken relative to its channel 0
 * like row_stats.  The lane loops have a fixed count so that the compiler
 * makes them vector operations; a partial last block is summed from a copy
 * whose padding lanes hold the pixel's centre, which adds nothing. */
enum { PIXEL_TILE = 16, BLOCK = FXRT_NCHWC_BLOCK };

static void add_deviations(float *restrict sum, const float *restrict x, float center)
{
    for (int l = 0; l < BLOCK; l++)
        sum[l] += x[l] - center;
}

static void add_squared_deviations(float *restrict sum, const float *restrict x, float center)
{
    for (int l = 0; l < BLOCK; l++)
        sum[l] += (x[l] - center) * (x[l] - center);
}

static void normalize_block(float *restrict y, const float *restrict x, const float *restrict scale,
                            const float *restrict bias, float center, float inv_std)
{
    for (int l = 0; l < BLOCK; l++)
        y[l] = (x[l] - center) * inv_std * scale[l] + bias[l];
}

/* The sum of a block's eight lanes, pairwise. */
static float block_sum(const float v[BLOCK])
{
    float a = (v[0] + v[4]) + (v[2] + v[6]), b = (v[1] + v[5]) + (v[3] + v[7]);
    return a + b;
}

/* The sums of a tile's pixels over `blocks` blocks of stride `block_stride`,
 * of deviations from center (squared or not); the last block holds `tail`
 * real lanes (BLOCK when full). */
static void tile_sums(const float *x, int64_t blocks, int64_t block_stride, int tail, int tile,
                      const float *center, int squared, float sums[PIXEL_TILE][BLOCK])
{
    memset(sums, 0, sizeof(float[PIXEL_TILE][BLOCK]));
    for (int64_t cb = 0; cb < blocks; cb++) {
        const float *xb = x + cb * block_stride;
        bool partial = cb == blocks - 1 && tail < BLOCK;
        for (int s = 0; s < tile; s++) {
            const float *v = xb + s * BLOCK;
            float padded[BLOCK];
            if (partial) {
                for (int l = 0; l < BLOCK; l++)
                    padded[l] = l < tail ? v[l] : center[s];
                v = padded;
            }
            if (squared)
                add_squared_deviations(sums[s], v, center[s]);
            else
                add_deviations(sums[s], v, center[s]);
        }
    }
}

/* Pixels [s0, s0 + tile) of image n in portable C. */
static void layernorm_nchwc_tile(int64_t channels, int64_t spatial, const float *xn,
                                 const float *scale, const float *bias, float eps, float *yn,
                                 int64_t s0, int tile)
{
    static const float no_bias[BLOCK];
    int64_t blocks = fxrt_nchwc_blocks(channels), full = channels / BLOCK;
    int tail = channels % BLOCK ? (int)(channels % BLOCK) : BLOCK;
    const float *xt = xn + s0 * BLOCK;
    float center[PIXEL_TILE] = {0}, inv[PIXEL_TILE], sums[PIXEL_TILE][BLOCK];
    for (int s = 0; s < tile; s++)
        center[s] = xt[s * BLOCK];
    tile_sums(xt, blocks, spatial * BLOCK, tail, tile, center, 0, sums);
    for (int s = 0; s < tile; s++)
        center[s] += block_sum(sums[s]) / (float)channels;
    tile_sums(xt, blocks, spatial * BLOCK, tail, tile, center, 1, sums);
    for (int s = 0; s < tile; s++)
        inv[s] = 1.0f / sqrtf(block_sum(sums[s]) / (float)channels + eps);
    float *yt = yn + s0 * channels;
    for (int64_t cb = 0; cb < blocks; cb++) {
        const float *xb = xt + cb * spatial * BLOCK;
        const float *sc = scale + cb * BLOCK, *bi = bias ? bias + cb * BLOCK : no_bias;
        for (int s = 0; s < tile; s++) {
            float *yp = yt + s * channels + cb * BLOCK;
            if (cb < full)
                normalize_block(yp, xb + s * BLOCK, sc, bi, center[s], inv[s]);
            else
                for (int l = 0; l < tail; l++)
                    yp[l] = (xb[s * BLOCK + l] - center[s]) * inv[s] * sc[l] + bi[l];
        }
    }
}

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2,fma")))
/* The eight pixels of an AVX2 tile: one accumulator each while the blocks
 * stream past, eight sums made one vector by a transposing reduction. */
enum { AVX2_PIXELS = 8 };

/* [sum(v[0]), ..., sum(v[7])] */
AVX2_FN static __m256 sum_each(const __m256 v[AVX2_PIXELS])
{
    __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* The sums over the blocks of each pixel's deviations from its centre
 * (squared or not), the padding lanes of the last block masked out. */
AVX2_FN static __m256 deviation_sums(const float *xt, int64_t blocks, int64_t block_stride,
                                     __m256 last_mask, const float center[AVX2_PIXELS],
                                     int squared)
{
    __m256 acc[AVX2_PIXELS], c[AVX2_PIXELS];
    for (int s = 0; s < AVX2_PIXELS; s++) {
        acc[s] = _mm256_setzero_ps();
        c[s] = _mm256_set1_ps(center[s]);
    }
    for (int64_t cb = 0; cb < blocks; cb++) {
        const float *xb = xt + cb * block_stride;
        __m256 mask = cb == blocks - 1 ? last_mask : _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int s = 0; s < AVX2_PIXELS; s++) {
            __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_loadu_ps(xb + s * BLOCK), c[s]), mask);
            acc[s] = squared ? _mm256_fmadd_ps(d, d, acc[s]) : _mm256_add_ps(acc[s], d);
        }
    }
    return sum_each(acc);
}

/* Pixels [s0, s0 + 8) of image n: the portable tile's arithmetic (the
 * same centres, two passes for the statistics) on whole vectors. */
AVX2_FN static void layernorm_nchwc_tile_avx2(int64_t channels, int64_t spatial, const float *xn,
                                              const float *scale, const float *bias, float eps,
                                              float *yn, int64_t s0)
{
    int64_t blocks = fxrt_nchwc_blocks(channels);
    int tail = channels % BLOCK ? (int)(channels % BLOCK) : BLOCK;
    __m256i tail_bits = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 tail_mask = _mm256_castsi256_ps(tail_bits);
    const float *xt = xn + s0 * BLOCK;
    float center[AVX2_PIXELS], inv[AVX2_PIXELS];
    for (int s = 0; s < AVX2_PIXELS; s++)
        center[s] = xt[s * BLOCK];
    __m256 n = _mm256_set1_ps((float)channels);
    __m256 mean = _mm256_add_ps(_mm256_loadu_ps(center),
                                _mm256_div_ps(deviation_sums(xt, blocks, spatial * BLOCK, tail_mask,
                                                             center, 0),
                                              n));
    _mm256_storeu_ps(center, mean);
    __m256 var = _mm256_div_ps(deviation_sums(xt, blocks, spatial * BLOCK, tail_mask, center, 1), n);
    _mm256_storeu_ps(inv, _mm256_div_ps(_mm256_set1_ps(1.0f),
                                        _mm256_sqrt_ps(_mm256_add_ps(var, _mm256_set1_ps(eps)))));
    float *yt = yn + s0 * channels;
    for (int64_t cb = 0; cb < blocks; cb++) {
        const float *xb = xt + cb * spatial * BLOCK;
        bool last = cb == blocks - 1;
        __m256 sc = last ? _mm256_maskload_ps(scale + cb * BLOCK, tail_bits)
                         : _mm256_loadu_ps(scale + cb * BLOCK);
        __m256 bi = !bias ? _mm256_setzero_ps()
                    : last ? _mm256_maskload_ps(bias + cb * BLOCK, tail_bits)
                           : _mm256_loadu_ps(bias + cb * BLOCK);
        for (int s = 0; s < AVX2_PIXELS; s++) {
            __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xb + s * BLOCK),
                                                   _mm256_set1_ps(center[s])),
                                     _mm256_set1_ps(inv[s]));
            __m256 y = _mm256_fmadd_ps(d, sc, bi);
            float *yp = yt + s * channels + cb * BLOCK;
            if (last && tail < BLOCK)
                _mm256_maskstore_ps(yp, tail_bits, y);
            else
                _mm256_storeu_ps(yp, y);
        }
    }
}

static int isa_cap = 1;

void fxrt_layernorm_nchwc_limit_isa(int level) { isa_cap = level; }

static bool use_avx2(void)
{
    return isa_cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
void fxrt_layernorm_nchwc_limit_isa(int level) { (void)level; }
#endif

void fxrt_layernorm_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                              const float *scale, const float *bias, float eps, float *y)
{
    int64_t blocks = fxrt_nchwc_blocks(channels);
    for (int64_t n = 0; n < batch; n++) {
        const float *xn = x + n * blocks * spatial * BLOCK;
        float *yn = y + n * spatial * channels;
        int64_t s0 = 0;
#ifdef AVX2_FN
        if (use_avx2())
            for (; s0 + AVX2_PIXELS <= spatial; s0 += AVX2_PIXELS)
                layernorm_nchwc_tile_avx2(channels, spatial, xn, scale, bias, eps, yn, s0);
#endif
        for (; s0 < spatial; s0 += PIXEL_TILE) {
            int tile = spatial - s0 < PIXEL_TILE ? (int)(spatial - s0) : PIXEL_TILE;
            layernorm_nchwc_tile(channels, spatial, xn, scale, bias, eps, yn, s0, tile);
        }
    }
}

void fxrt_lrn_f32(int64_t n, int64_t c, int64_t inner, int64_t size, float alpha, float beta,
                  float bias, const float *x, float *y)
{
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    float k = alpha / (float)size;
    for (int64_t b = 0; b < n; b++) {
        const float *xb = x + b * c * inner;
        float *yb = y + b * c * inner;
        for (int64_t ch = 0; ch < c; ch++) {
            int64_t c0 = ch - before < 0 ? 0 : ch - before;
            int64_t c1 = ch + after >= c ? c - 1 : ch + after;
            for (int64_t j = 0; j < inner; j++) {
                float s = 0.0f;
                for (int64_t cc = c0; cc <= c1; cc++) {
                    float v = xb[cc * inner + j];
                    s += v * v;
                }
                float base = bias + k * s;
                /* beta is 0.75 in nearly every model; powf is exact enough */
                yb[ch * inner + j] = xb[ch * inner + j] / powf(base, beta);
            }
        }
    }
}

/* --- MeanVarianceNormalization ---------------------------------------------- */

int64_t fxrt_mvn_scratch_floats(int rank, const int64_t *dims, uint32_t axes_mask)
{
    int64_t kept = 1;
    for (int d = 0; d < rank; d++)
        if (!(axes_mask >> d & 1u))
            kept *= dims[d];
    return 2 * kept;
}

/* Strides of the statistics table: kept dims only, row-major. */
static void mvn_stat_strides(int rank, const int64_t *dims, uint32_t axes_mask,
                             int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = (axes_mask >> d & 1u) ? 0 : s;
        if (!(axes_mask >> d & 1u))
            s *= dims[d];
    }
}

/* Runs BODY for every element e of x in order, with st the index of its
 * statistics (uses the caller's rank, dims, strides and total). */
#define MVN_WALK(BODY)                                                          \
    do {                                                                        \
        int64_t idx_[FXRT_MAX_RANK] = {0}, st = 0;                              \
        for (int64_t e = 0; e < total; e++) {                                   \
            BODY;                                                               \
            for (int d = rank - 1; d >= 0; d--) {                               \
                st += strides[d];                                               \
                if (++idx_[d] < dims[d])                                        \
                    break;                                                      \
                st -= strides[d] * dims[d];                                     \
                idx_[d] = 0;                                                    \
            }                                                                   \
        }                                                                       \
    } while (0)

void fxrt_mvn_f32(int rank, const int64_t *dims, uint32_t axes_mask, const float *x, float *y,
                  float *scratch)
{
    int64_t strides[FXRT_MAX_RANK], total = 1, kept = 1, count = 1;
    mvn_stat_strides(rank, dims, axes_mask, strides);
    for (int d = 0; d < rank; d++) {
        total *= dims[d];
        if (axes_mask >> d & 1u)
            count *= dims[d];
        else
            kept *= dims[d];
    }
    float *mean = scratch, *var = scratch + kept;
    for (int64_t i = 0; i < 2 * kept; i++)
        scratch[i] = 0.0f;
    MVN_WALK(mean[st] += x[e]);
    for (int64_t i = 0; i < kept; i++)
        mean[i] /= (float)count;
    MVN_WALK({
        float dv = x[e] - mean[st];
        var[st] += dv * dv;
    });
    for (int64_t i = 0; i < kept; i++)
        var[i] = sqrtf(var[i] / (float)count) + 1e-9f; /* the ONNX function's epsilon */
    MVN_WALK(y[e] = (x[e] - mean[st]) / var[st]);
}

void fxrt_lpnorm_f32(int64_t outer, int64_t len, int64_t inner, int p, const float *x,
                     float *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float s = 0.0f;
            for (int64_t l = 0; l < len; l++) {
                float v = xp[l * inner];
                s += p == 1 ? fabsf(v) : v * v;
            }
            float norm = p == 1 ? s : sqrtf(s);
            /* a zero vector stays zero (ONNX's reference), not 0/0 */
            for (int64_t l = 0; l < len; l++)
                yp[l * inner] = norm == 0.0f ? 0.0f : xp[l * inner] / norm;
        }
}
