/*
 * test_checker.c - the verify checker itself (src/check): every backend's results are
 * judged by pc_compare and stored in pc_img images, so a checker that never counted a bad
 * element would let every suite pass whatever the kernels wrote. Pure host code, run once
 * (--backend cpu).
 *
 *  - pc_compare: an error within its bound passes, one past it fails and the first is
 *    described (its indices, the output's name, both values); NaN and infinities; a zero
 *    bound; the largest error and the worst error / bound ratio are the ones kept. The
 *    expected errors are computed here in double from the same two values, so they are
 *    exact; ratios are compared to 1e-15 relative (one division's rounding is 1.1e-16).
 *  - pc_img: the image starts as poison, elements are stored rounded to the image's type
 *    and read back, the random fill is seeded (the same seed, the same image) and every
 *    value lies in [-2, 2).
 */
#include "check_internal.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct pc_result fresh(void)
{
    struct pc_result r;
    memset(&r, 0, sizeof(r));
    return r;
}

static void test_within_bound(void **state)
{
    (void)state;
    struct pc_result r = fresh();
    pc_compare(&r, "dst", 0, 0, 0, 0, 1.0, 1.0, 0.0); /* equal, zero bound */
    pc_compare(&r, "dst", 1, 0, 0, 0, 1.25, 1.0, 0.5);
    pc_compare(&r, "dst", 2, 0, 0, 0, -3.0, -3.5, 0.5); /* exactly at the bound */
    assert_int_equal(r.n_checked, 3);
    assert_int_equal(r.n_bad, 0);
    assert_string_equal(r.msg, "");
    assert_true(r.max_err == 0.5 && r.bound_at_max == 0.5);
    assert_true(r.worst_ratio == 1.0);
}

static void test_past_bound(void **state)
{
    (void)state;
    struct pc_result r = fresh();
    pc_compare(&r, "weights", 0, 0, 0, 0, 2.0, 2.0, 1e-6);
    pc_compare(&r, "weights", 3, 1, 4, 1, 2.5, 2.0, 0.25);
    pc_compare(&r, "weights", 5, 9, 2, 6, 9.0, 2.0, 0.5); /* a second bad one: counted */
    assert_int_equal(r.n_checked, 3);
    assert_int_equal(r.n_bad, 2);
    /* the first bad element is the one described */
    assert_non_null(strstr(r.msg, "first bad element of weights (3,1,4,1)"));
    assert_non_null(strstr(r.msg, "got 2.5,"));
    assert_non_null(strstr(r.msg, "reference 2,"));
    assert_true(r.max_err == 7.0 && r.bound_at_max == 0.5);
    assert_true(fabs(r.worst_ratio - 14.0) <= 14.0 * 1e-15);

    struct pc_result u = fresh();
    pc_compare(&u, NULL, 1, 2, 3, 4, 1.0, 0.0, 0.5); /* no output name */
    assert_int_equal(u.n_bad, 1);
    assert_non_null(strstr(u.msg, "first bad element (1,2,3,4)"));
}

static void test_nan_inf(void **state)
{
    (void)state;
    const double inf = INFINITY, nan = NAN;
    const struct {
        double dv, rv;
        int bad;
    } c[] = {
        {nan, nan, 0}, {inf, inf, 0},  {-inf, -inf, 0}, {nan, 1.0, 1},  {1.0, nan, 1},
        {inf, -inf, 1}, {inf, 1e30, 1}, {1e30, inf, 1},  {-inf, nan, 1}, {nan, inf, 1},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        struct pc_result r = fresh();
        pc_compare(&r, "dst", (int64_t)i, 0, 0, 0, c[i].dv, c[i].rv, 1e300);
        if (r.n_bad != c[i].bad)
            fail_msg("case %zu (%g against %g): %lld bad, expected %d", i, c[i].dv, c[i].rv,
                     (long long)r.n_bad, c[i].bad);
        /* a mismatch counts as an infinite error, whatever the bound */
        assert_true(c[i].bad ? isinf(r.max_err) && isinf(r.worst_ratio)
                             : r.max_err == 0.0 && r.worst_ratio == 0.0);
    }
}

static void test_zero_bound(void **state)
{
    (void)state;
    struct pc_result r = fresh();
    pc_compare(&r, "dst", 0, 0, 0, 0, 0x1p-149, 0.0, 0.0); /* one denormal ulp */
    assert_int_equal(r.n_bad, 1);
    assert_true(isinf(r.worst_ratio));
    struct pc_result s = fresh();
    pc_compare(&s, "dst", 0, 0, 0, 0, -0.0, 0.0, 0.0); /* signed zeros are equal */
    assert_int_equal(s.n_bad, 0);
    assert_true(s.worst_ratio == 0.0);
}

static void test_images(void **state)
{
    (void)state;
    const int64_t ne[4] = {5, 3, 2, 2};
    struct pc_img a, b;
    assert_true(pc_img_alloc(&a, ne, POSENC_DTYPE_F16, make_layout(ne, 2, PC_VIEW_PADDED)));
    assert_true(pc_img_alloc(&b, ne, POSENC_DTYPE_F16, make_layout(ne, 2, PC_VIEW_PADDED)));
    for (size_t i = 0; i < a.l.bytes; i++)
        assert_int_equal(a.img[i], PC_POISON);
    /* stored rounded to f16 (nearest, ties to even), read back as that value */
    pc_img_put(&a, 4, 2, 1, 1, 1.0 + 0x1p-11);
    assert_true(pc_img_val(&a, 4, 2, 1, 1) == 1.0);
    pc_img_put(&a, 4, 2, 1, 1, 1.0 + 0x1p-11 + 0x1p-20);
    assert_true(pc_img_val(&a, 4, 2, 1, 1) == 1.0 + 0x1p-10);

    uint64_t s1 = 42, s2 = 42;
    pc_img_fill_random(&a, &s1);
    pc_img_fill_random(&b, &s2);
    assert_memory_equal(a.img, b.img, a.l.bytes); /* poison between the rows included */
    double lo = 1e300, hi = -1e300;
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                    const double v = pc_img_val(&a, i0, i1, i2, i3);
                    lo = fmin(lo, v);
                    hi = fmax(hi, v);
                }
    assert_true(lo >= -2.0 && hi <= 2.0 && hi > lo);
    /* the guard bytes before the view are still poison */
    for (size_t i = 0; i < PC_GUARD; i++)
        assert_int_equal(a.img[i], PC_POISON);
    free(a.img);
    free(b.img);
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "checker");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_within_bound), cmocka_unit_test(test_past_bound),
        cmocka_unit_test(test_nan_inf),      cmocka_unit_test(test_zero_bound),
        cmocka_unit_test(test_images),
    };
    rc = th_run("checker", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
