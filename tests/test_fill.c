/*
 * test_fill.c - posenc_fill on one backend (--backend NAME).
 *
 *  - f32, f16 and i32 values with known bits (ties to even, overflow to infinity,
 *    subnormals, -0, infinities, NaN, memset byte patterns), written into contiguous,
 *    padded, gapped (element stride 3), permuted and odd-offset f16 views: every element
 *    of the view holds exactly the expected bits and every other byte of the buffer is as
 *    before (tolerance 0: the value is converted once on the host, every backend stores
 *    bits). The expected bits are constants worked out by hand from IEEE 754, not from
 *    posenc.
 *  - the same fills on the CPU reference context give the same bytes;
 *  - a context with POSENC_MAX_BINDING = 1024 (f32 views of up to 1.6 KiB cut into several
 *    launches) gives the
 *    same bytes;
 *  - bad input: exact statuses, a message naming the argument, the buffer untouched; empty
 *    views are no-ops.
 *  - the library's internal ramp (pe_fill_ramp_i32: start + step * i0 in every element of an
 *    i32 view, 32-bit wrapping; posenc_attention's implicit positions are made with it): the
 *    same views, starts and steps that wrap past INT32_MAX and below INT32_MIN, on the
 *    backend, on the reference and cut into launches under POSENC_MAX_BINDING = 1024 (a
 *    cut of dimension 0 starts its slice further along the ramp); expected values worked
 *    out here with uint32_t arithmetic (tolerance 0: integers).
 */
#include "harness.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES 4096
#define GUARD 0xA5

/* A view by its byte layout (offset, ne, nb in bytes). */
struct view {
    const char *name;
    size_t off; /* in elements */
    int64_t ne[4];
    int64_t nb[4]; /* in elements */
};

static const struct view views[] = {
    {"contiguous", 0, {7, 3, 2, 1}, {1, 7, 21, 42}},
    {"padded", 3, {5, 3, 2, 3}, {1, 8, 32, 96}},
    {"gapped", 1, {4, 3, 5, 2}, {3, 13, 40, 201}},
    {"permuted", 2, {3, 4, 2, 2}, {8, 1, 24, 50}},
    {"odd_offset", 5, {9, 1, 3, 1}, {1, 9, 11, 33}},
    {"one", 7, {1, 1, 1, 1}, {1, 1, 1, 1}},
};

static posenc_tensor make_tensor(posenc_buffer *b, posenc_dtype dt, const struct view *v)
{
    const int64_t es = (int64_t)posenc_dtype_size(dt);
    posenc_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.dtype = dt;
    t.offset = v->off * (size_t)es;
    for (int k = 0; k < 4; k++) {
        t.ne[k] = v->ne[k];
        t.nb[k] = v->nb[k] * es;
    }
    return t;
}

/* The bytes of `before` with every element of t set to the es bytes at `bits`. */
static void expected_bytes(unsigned char *img, const posenc_tensor *t, const void *bits)
{
    const size_t es = posenc_dtype_size(t->dtype);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    memcpy(img + t->offset + (size_t)(i0 * t->nb[0] + i1 * t->nb[1] +
                                                      i2 * t->nb[2] + i3 * t->nb[3]),
                           bits, es);
}

static posenc_buffer *guard_buffer(posenc_context *ctx)
{
    unsigned char img[BUF_BYTES];
    memset(img, GUARD, sizeof img);
    return th_upload(ctx, img, sizeof img);
}

/* Fill every view with `value` on ctx and compare each buffer with the expected bytes. */
static void check_value(posenc_context *ctx, posenc_dtype dt, double value, const void *bits,
                        bool nan)
{
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        posenc_buffer *b = guard_buffer(ctx);
        posenc_tensor t = make_tensor(b, dt, &views[i]);
        posenc_status st = posenc_fill(ctx, &t, value);
        if (st != POSENC_OK)
            fail_msg("%s %s %.17g: %s: %s", posenc_dtype_name(dt), views[i].name, value,
                     posenc_status_string(st), posenc_context_last_error(ctx));
        unsigned char *got = th_download(b);
        unsigned char want[BUF_BYTES], in_view[BUF_BYTES];
        memset(want, GUARD, sizeof want);
        memset(in_view, 0, sizeof in_view);
        expected_bytes(want, &t, bits);
        const unsigned char ones[4] = {1, 1, 1, 1};
        expected_bytes(in_view, &t, ones);
        for (size_t k = 0; k < BUF_BYTES; k++) {
            if (nan && in_view[k])
                continue; /* any NaN of the dtype will do: checked below */
            if (got[k] != want[k])
                fail_msg("%s %s fill %.17g: byte %zu is 0x%02x, want 0x%02x%s",
                         posenc_dtype_name(dt), views[i].name, value, k, got[k], want[k],
                         in_view[k] ? "" : " (outside the view)");
        }
        if (nan) { /* each element must be a NaN of the dtype */
            const size_t es = posenc_dtype_size(dt);
            for (size_t at = 0; at + es <= BUF_BYTES; at += es) {
                if (!in_view[at])
                    continue;
                bool is_nan;
                if (es == 4) {
                    float f;
                    memcpy(&f, got + at, 4);
                    is_nan = isnan(f);
                } else {
                    uint16_t h;
                    memcpy(&h, got + at, 2);
                    is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
                }
                if (!is_nan)
                    fail_msg("%s %s: element at byte %zu is not a NaN", posenc_dtype_name(dt),
                             views[i].name, at);
            }
        }
        free(got);
        posenc_buffer_destroy(&b);
    }
    if (ctx == th.dut)
        th_check_warnings();
}

struct f32_case {
    double value;
    uint32_t bits;
};
struct f16_case {
    double value;
    uint16_t bits;
};

static const struct f32_case f32_cases[] = {
    {0.0, 0x00000000u},
    {-0.0, 0x80000000u},
    {1.0, 0x3f800000u},
    {0.1, 0x3dcccccdu},                   /* nearest f32 to 0.1 */
    {3.0 + 0x1p-23, 0x40400000u},         /* a tie between 3 and 3 + 2^-22: even (3) */
    {3.0 + 3 * 0x1p-23, 0x40400002u},     /* a tie between odd and even: even (3 + 2^-21) */
    {-1e300, 0xff800000u},                /* overflow: -infinity */
    {1e-50, 0x00000000u},                 /* underflow: +0 */
    {0x1p-149, 0x00000001u},              /* the smallest subnormal */
    {INFINITY, 0x7f800000u},
};
static const struct f16_case f16_cases[] = {
    {0.0, 0x0000u},
    {-0.0, 0x8000u},
    {1.0, 0x3c00u},
    {0.1, 0x2e66u},                       /* 0.0999755859375 */
    {1.0 + 0x1p-11, 0x3c00u},             /* tie: even (1) */
    {1.0 + 3 * 0x1p-11, 0x3c02u},         /* tie: even (1 + 2^-9) */
    {65519.0, 0x7bffu},                   /* below 65520: 65504 */
    {65520.0, 0x7c00u},                   /* 65504 + half an ulp: infinity */
    {-0x1p-25, 0x8000u},                  /* tie between -0 and -2^-24: even (-0) */
    {0x1.8p-25, 0x0001u},                 /* 1.5 * 2^-25: the smallest subnormal */
    {-INFINITY, 0xfc00u},
};
static const struct {
    double value;
    int32_t bits;
} i32_cases[] = {
    {0.0, 0},
    {-1.0, -1},
    {16843009.0, 0x01010101},             /* memset pattern of byte 0x01 */
    {-1515870811.0, (int32_t)0xa5a5a5a5u}, /* byte 0xa5 as int32 */
    {2147483647.0, INT32_MAX},
    {-2147483648.0, INT32_MIN},
};

static void test_fill_values(void **state)
{
    (void)state;
    posenc_context *ctxs[2] = {th.dut, th.ref};
    for (int c = 0; c < 2; c++) {
        for (size_t i = 0; i < sizeof(f32_cases) / sizeof(f32_cases[0]); i++)
            check_value(ctxs[c], POSENC_DTYPE_F32, f32_cases[i].value, &f32_cases[i].bits, false);
        for (size_t i = 0; i < sizeof(f16_cases) / sizeof(f16_cases[0]); i++)
            check_value(ctxs[c], POSENC_DTYPE_F16, f16_cases[i].value, &f16_cases[i].bits, false);
        for (size_t i = 0; i < sizeof(i32_cases) / sizeof(i32_cases[0]); i++)
            check_value(ctxs[c], POSENC_DTYPE_I32, i32_cases[i].value, &i32_cases[i].bits, false);
        const uint32_t nan32 = 0x7fc00000u;
        const uint16_t nan16 = 0x7e00u;
        check_value(ctxs[c], POSENC_DTYPE_F32, NAN, &nan32, true);
        check_value(ctxs[c], POSENC_DTYPE_F16, NAN, &nan16, true);
    }
}

/* src/split.h (not in posenc.h): the implicit positions of posenc_attention. */
posenc_status pe_fill_ramp_i32(posenc_context *ctx, const posenc_tensor *dst, int32_t start,
                               int32_t step);

/* A long row, for the cuts of dimension 0 under POSENC_MAX_BINDING = 1024 (256 elements). */
static const struct view ramp_views[] = {
    {"row_700", 5, {700, 1, 1, 1}, {1, 700, 700, 700}},
    {"rows_300x3", 2, {300, 3, 1, 1}, {1, 301, 903, 903}},
    {"strided_row", 1, {400, 1, 1, 1}, {2, 800, 800, 800}},
};

static void check_ramp_view(posenc_context *ctx, const struct view *v, int32_t start,
                            int32_t step)
{
    posenc_buffer *b = guard_buffer(ctx);
    posenc_tensor t = make_tensor(b, POSENC_DTYPE_I32, v);
    posenc_status st = pe_fill_ramp_i32(ctx, &t, start, step);
    if (st != POSENC_OK)
        fail_msg("ramp %s start %d step %d: %s: %s", v->name, (int)start, (int)step,
                 posenc_status_string(st), posenc_context_last_error(ctx));
    unsigned char *got = th_download(b);
    unsigned char want[BUF_BYTES];
    memset(want, GUARD, sizeof want);
    for (int64_t i3 = 0; i3 < t.ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t.ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t.ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t.ne[0]; i0++) {
                    const uint32_t w = (uint32_t)start + (uint32_t)step * (uint32_t)i0;
                    memcpy(want + t.offset + (size_t)(i0 * t.nb[0] + i1 * t.nb[1] +
                                                      i2 * t.nb[2] + i3 * t.nb[3]),
                           &w, 4);
                }
    for (size_t k = 0; k < BUF_BYTES; k++)
        if (got[k] != want[k])
            fail_msg("ramp %s start %d step %d: byte %zu is 0x%02x, want 0x%02x", v->name,
                     (int)start, (int)step, k, got[k], want[k]);
    free(got);
    posenc_buffer_destroy(&b);
}

static void check_ramps(posenc_context *ctx)
{
    static const int32_t starts[] = {0, 4095, -7, INT32_MAX - 100, INT32_MIN + 3};
    static const int32_t steps[] = {1, -1, 3};
    for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++)
        for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
            for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
                check_ramp_view(ctx, &views[i], starts[s], steps[k]);
            for (size_t i = 0; i < sizeof(ramp_views) / sizeof(ramp_views[0]); i++)
                check_ramp_view(ctx, &ramp_views[i], starts[s], steps[k]);
        }
}

static void test_fill_ramp(void **state)
{
    (void)state;
    check_ramps(th.dut);
    check_ramps(th.ref);
    posenc_context *ctx = th_limited_ctx(1024);
    check_ramps(ctx);
    /* not i32: refused, nothing written */
    posenc_buffer *b = guard_buffer(ctx);
    posenc_tensor t = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 8, 1, 1, 1);
    assert_int_equal(pe_fill_ramp_i32(ctx, &t, 1, 1), POSENC_ERR_INVALID_ARGUMENT);
    if (!strstr(posenc_context_last_error(ctx), "i32")) /* internal: no PE_ENTER, so the */
        fail_msg("f32 ramp: \"%s\" does not name i32", /* thread's last error is not set */
                 posenc_context_last_error(ctx));
    unsigned char *got = th_download(b);
    for (size_t k = 0; k < BUF_BYTES; k++)
        if (got[k] != GUARD)
            fail_msg("byte %zu changed by a refused ramp", k);
    free(got);
    posenc_buffer_destroy(&b);
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

/* A fill cut into several launches: POSENC_MAX_BINDING = 1024 bytes (the least it takes). */
static void test_fill_split(void **state)
{
    (void)state;
    posenc_context *ctx = th_limited_ctx(1024);
    const uint16_t h = 0x3555u; /* 0.33325195 */
    const uint32_t f = 0x3eaaaaabu; /* nearest f32 to 1/3 */
    check_value(ctx, POSENC_DTYPE_F16, 1.0 / 3.0, &h, false);
    check_value(ctx, POSENC_DTYPE_F32, 1.0 / 3.0, &f, false);
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

static void test_fill_bad_input(void **state)
{
    (void)state;
    posenc_buffer *b = guard_buffer(th.dut);
    posenc_tensor t = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 8, 4, 1, 1);
    th_expect(posenc_fill(NULL, &t, 1.0), POSENC_ERR_INVALID_ARGUMENT, NULL, "NULL ctx");
    th_expect(posenc_fill(th.dut, NULL, 1.0), POSENC_ERR_INVALID_ARGUMENT, "dst", "NULL dst");
    posenc_tensor u = t;
    u.dtype = POSENC_DTYPE_I64;
    u.nb[0] = 8;
    u.nb[1] = 64;
    th_expect(posenc_fill(th.dut, &u, 1.0), POSENC_ERR_INVALID_ARGUMENT, "dtype", "i64 dst");
    u = t;
    u.dtype = (posenc_dtype)9;
    th_expect(posenc_fill(th.dut, &u, 1.0), POSENC_ERR_INVALID_ARGUMENT, "dst->dtype", "bad dtype");
    u = t;
    u.nb[1] = 4; /* rows on top of each other */
    th_expect(posenc_fill(th.dut, &u, 1.0), POSENC_ERR_INVALID_ARGUMENT, "dst->nb", "self-overlap");
    u = posenc_tensor_contiguous(b, BUF_BYTES - 16, POSENC_DTYPE_F32, 8, 1, 1, 1);
    th_expect(posenc_fill(th.dut, &u, 1.0), POSENC_ERR_INVALID_ARGUMENT, "past", "out of buffer");
    u = t;
    u.offset = 2;
    th_expect(posenc_fill(th.dut, &u, 1.0), POSENC_ERR_INVALID_ARGUMENT, "offset", "misaligned");
    u = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_I32, 8, 4, 1, 1);
    const double bad_i32[] = {0.5, -0.25, 2147483648.0, -2147483649.0, NAN, INFINITY, 1e300};
    for (size_t i = 0; i < sizeof(bad_i32) / sizeof(bad_i32[0]); i++)
        th_expect(posenc_fill(th.dut, &u, bad_i32[i]), POSENC_ERR_INVALID_ARGUMENT, "value",
                  "non-integer i32 value");
    unsigned char *got = th_download(b);
    for (size_t k = 0; k < BUF_BYTES; k++)
        if (got[k] != GUARD)
            fail_msg("byte %zu changed by a failed call", k);
    free(got);
    /* an empty view: a no-op (the value is still checked first) */
    u = t;
    u.ne[2] = 0;
    th_expect(posenc_fill(th.dut, &u, 2.0), POSENC_OK, NULL, "empty");
    assert_string_equal(posenc_context_last_error(th.dut), "");
    got = th_download(b);
    for (size_t k = 0; k < BUF_BYTES; k++)
        if (got[k] != GUARD)
            fail_msg("byte %zu changed by an empty fill", k);
    free(got);
    posenc_buffer_destroy(&b);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "fill");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_values),
        cmocka_unit_test(test_fill_split),
        cmocka_unit_test(test_fill_ramp),
        cmocka_unit_test(test_fill_bad_input),
    };
    rc = th_run("fill", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
