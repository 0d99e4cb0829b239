/*
 * check_runtime_channel_gather.c - fxrt_channel_gather_f32 against a naive
 * reference that reads every output element through the layouts' index
 * formulas.  The sources mix plain and blocked tensors whose channel counts
 * do not fill a block (58, 13, 3) on a batch of two; the padding lanes of
 * blocked sources are NaN, so one that leaked would fail the comparison,
 * and a blocked output's padding lanes must be zero.  The maps cover each
 * path of the kernel: ShuffleNet's interleave of two blocked sources, whole
 * source blocks in order (a block copy), plain sources only (one stride),
 * mixed strides, random maps, and plain outputs from both layouts.  A copy
 * is exact, so values are compared bit for bit.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"

#define BLOCK FXRT_NCHWC_BLOCK

enum { BATCH = 2, SPATIAL = 35, MAX_CHANNELS = 128 };

static uint32_t rng_state = 77u;
static uint32_t next_random(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

/* A source of `channels` channels, its values distinct and its blocked
 * padding lanes NaN. */
static FxrtGatherSource make_source(int64_t channels, int blocked)
{
    int64_t per_image = blocked ? fxrt_nchwc_blocks(channels) * BLOCK : channels;
    float *x = malloc((size_t)(BATCH * per_image * SPATIAL) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int64_t n = 0; n < BATCH; n++)
        for (int64_t c = 0; c < per_image; c++)
            for (int64_t s = 0; s < SPATIAL; s++) {
                int64_t at = blocked ? ((n * (per_image / BLOCK) + c / BLOCK) * SPATIAL + s) *
                                                   BLOCK + c % BLOCK
                                     : (n * channels + c) * SPATIAL + s;
                x[at] = c < channels ? (float)(next_random() % 100000) * 0.25f - 5000.0f : NAN;
            }
    return (FxrtGatherSource){x, channels, blocked};
}

static float source_value(const FxrtGatherSource *src, int64_t n, int64_t c, int64_t s)
{
    if (!src->blocked)
        return src->x[(n * src->channels + c) * SPATIAL + s];
    int64_t blocks = fxrt_nchwc_blocks(src->channels);
    return src->x[((n * blocks + c / BLOCK) * SPATIAL + s) * BLOCK + c % BLOCK];
}

/* Runs the kernel on the map and checks every element of Y, padding lanes
 * included. */
static void check_gather(const FxrtGatherSource *sources, int64_t channels,
                         const int32_t *from_source, const int32_t *from_channel, int y_blocked)
{
    int64_t blocks = fxrt_nchwc_blocks(channels);
    int64_t per_image = y_blocked ? blocks * BLOCK : channels;
    size_t count = (size_t)(BATCH * per_image * SPATIAL);
    float *y = malloc(count * sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < count; i++)
        y[i] = NAN;
    fxrt_channel_gather_f32(BATCH, SPATIAL, sources, channels, from_source, from_channel,
                            y_blocked, y);
    for (int64_t n = 0; n < BATCH; n++)
        for (int64_t c = 0; c < per_image; c++)
            for (int64_t s = 0; s < SPATIAL; s++) {
                int64_t at = y_blocked ? ((n * blocks + c / BLOCK) * SPATIAL + s) * BLOCK +
                                                 c % BLOCK
                                       : (n * channels + c) * SPATIAL + s;
                float want = c < channels ? source_value(&sources[from_source[c]], n,
                                                         from_channel[c], s)
                                          : 0.0f;
                ck_assert_msg(memcmp(&y[at], &want, sizeof want) == 0,
                              "image %lld channel %lld pixel %lld: got %g, want %g",
                              (long long)n, (long long)c, (long long)s, (double)y[at],
                              (double)want);
            }
    free(y);
}

static void free_sources(FxrtGatherSource *s, int count)
{
    for (int k = 0; k < count; k++)
        free((float *)s[k].x);
}

/* ShuffleNet's second half after a shuffle of two groups: channel j reads
 * channel (C + j) / 2 of source (C + j) % 2, both blocked, into a blocked
 * output (the path of the next unit's first convolution) and a plain one. */
START_TEST(test_shuffle_interleave)
{
    FxrtGatherSource s[2] = {make_source(58, 1), make_source(58, 1)};
    int32_t from_source[58], from_channel[58];
    for (int j = 0; j < 58; j++) {
        from_source[j] = (58 + j) % 2;
        from_channel[j] = (58 + j) / 2;
    }
    check_gather(s, 58, from_source, from_channel, 1);
    check_gather(s, 58, from_source, from_channel, 0);
    free_sources(s, 2);
}
END_TEST

/* All of a blocked source in order (whole blocks copied) followed by a
 * second source's channels: the last block mixes two sources. */
START_TEST(test_whole_blocks)
{
    FxrtGatherSource s[2] = {make_source(13, 1), make_source(58, 1)};
    int32_t from_source[30], from_channel[30];
    for (int j = 0; j < 30; j++) {
        from_source[j] = j < 16 ? 1 : 0;
        from_channel[j] = j < 16 ? j : j - 16;
    }
    check_gather(s, 30, from_source, from_channel, 1);
    free_sources(s, 2);
}
END_TEST

/* Plain sources only into a blocked output (the ToNCHWc-like path, a stride
 * of 1 on every lane) and into a plain one (a memcpy per channel). */
START_TEST(test_plain_sources)
{
    FxrtGatherSource s[2] = {make_source(13, 0), make_source(3, 0)};
    int32_t from_source[16], from_channel[16];
    for (int j = 0; j < 16; j++) {
        from_source[j] = j % 3 == 2;
        from_channel[j] = j % 3 == 2 ? j % 3 : 12 - j % 13;
    }
    check_gather(s, 16, from_source, from_channel, 1);
    check_gather(s, 16, from_source, from_channel, 0);
    check_gather(s, 11, from_source, from_channel, 1);
    free_sources(s, 2);
}
END_TEST

/* Random maps over plain and blocked sources at once: lanes of different
 * strides in one block, channel counts 1 to MAX_CHANNELS. */
START_TEST(test_random_maps)
{
    FxrtGatherSource s[4] = {make_source(58, 1), make_source(13, 0), make_source(3, 1),
                             make_source(24, 0)};
    int32_t from_source[MAX_CHANNELS], from_channel[MAX_CHANNELS];
    for (int round = 0; round < 40; round++) {
        int64_t channels = 1 + next_random() % MAX_CHANNELS;
        for (int64_t j = 0; j < channels; j++) {
            from_source[j] = (int32_t)(next_random() % 4);
            from_channel[j] = (int32_t)(next_random() % s[from_source[j]].channels);
        }
        check_gather(s, channels, from_source, from_channel, round % 2);
    }
    free_sources(s, 4);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_channel_gather");
    TCase *t = tcase_create("gather");
    tcase_add_test(t, test_shuffle_interleave);
    tcase_add_test(t, test_whole_blocks);
    tcase_add_test(t, test_plain_sources);
    tcase_add_test(t, test_random_maps);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
