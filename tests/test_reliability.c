/*
 * test_reliability.c - issue #16 on one backend (--backend NAME): inputs at the edges of
 * what posenc accepts, each once a crash, a hang, a wrong status or a clobbered output.
 * A failing call must return its documented status, leave a message and write nothing.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. buffer sizes whose round-up wraps ------------------------------------------ */

static void test_buffer_create_huge(void **state)
{
    (void)state;
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2, SIZE_MAX - 3, SIZE_MAX - 63,
                            SIZE_MAX - 64, (size_t)PTRDIFF_MAX + 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        posenc_buffer *b = (posenc_buffer *)1;
        posenc_status st = posenc_buffer_create(th.dut, sizes[i], &b);
        if (st != POSENC_ERR_UNSUPPORTED)
            fail_msg("posenc_buffer_create(%zu) = %s (%s), want UNSUPPORTED", sizes[i],
                     posenc_status_string(st), posenc_context_last_error(th.dut));
        assert_null(b);
        assert_true(strlen(posenc_context_last_error(th.dut)) > 0);
    }
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(th.dut, &info), POSENC_OK);
    /* the reported largest buffer is one the backend would at least try */
    assert_true(info.max_buffer_size < (uint64_t)SIZE_MAX - 2);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "reliability");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer_create_huge),
    };
    rc = th_run("reliability", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
