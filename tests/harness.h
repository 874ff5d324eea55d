/*
 * harness.h - what every posenc test program shares: `--backend NAME` parsing, the
 * device-under-test context (created with POSENC_CONTEXT_DEBUG so that Vulkan runs under
 * the Khronos validation layer) plus a CPU reference context, and the warning counter
 * that turns any driver or validation message into a failure.
 *
 * Exit codes: 77 (meson's SKIP) only when the backend is absent (not compiled in or no
 * device) and not listed in POSENC_TEST_REQUIRE (comma-separated backend names, set by
 * CI so that a missing backend fails instead of skipping).
 */
#ifndef POSENC_TEST_HARNESS_H
#define POSENC_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h" /* enum pc_op (src/check) */
#include "posenc.h"

struct th_state {
    posenc_backend_kind kind;
    posenc_context *dut; /* the backend under test */
    posenc_context *ref; /* the CPU reference */
    int warnings;        /* WARN messages from the dut since the last th_check_warnings */
};
extern struct th_state th;

/* The log callback of the dut: counts WARN messages into th.warnings. Pass it to any
 * extra context a test creates so its validation messages fail the test too. */
void th_log(posenc_log_level level, const char *msg, void *user);

/* Parse args and open the contexts. Returns -1 to go on, or an exit code (77 = skip). */
int th_init(int argc, char **argv, const char *suite);
void th_fini(void);

/* Fail the current test if the dut logged warnings (validation messages) since the
 * last call, and reset the counter. */
void th_check_warnings(void);

/* Fail unless `got` is `want` and, with `needle`, the dut's last error message contains
 * it (the argument a bad call must name); `what` names the call in the failure. */
void th_expect(posenc_status got, posenc_status want, const char *needle, const char *what);

/* A cmocka test body for one shared case (state: its struct pc_case, src/check/check.h):
 * runs it on th.ref and th.dut and fails with the case's largest error, its bound and
 * the count of elements out of bounds. */
void th_run_case(void **state);

/* A context of the backend under test (debug flag, logging through th_log at WARN, so
 * validation messages fail the test) whose bindings hold at most `limit` bytes
 * (POSENC_MAX_BINDING: ops are cut into launches); fails the test if it cannot be made. */
posenc_context *th_limited_ctx(unsigned long long limit);

/* The first `per_dtype` cases of the shared set of `op` (src/check) with an f32 output and
 * the first with an f16 output (attention: not the big ones) on ctx against ref, within
 * the bounds of src/check/check.c; after each, th_check_warnings. A failure names `what`,
 * the case, its message and its count of bad elements; at least one case of each dtype
 * must run. */
void th_run_first_cases(posenc_context *ref, posenc_context *ctx, enum pc_op op,
                        size_t per_dtype, const char *what);

/* A buffer on `ctx` holding `bytes` bytes copied from `src` (asserts success). */
posenc_buffer *th_upload(posenc_context *ctx, const void *src, size_t bytes);
/* Read a whole buffer into a malloc'd block (asserts success). */
void *th_download(posenc_buffer *b);

/* Element i of a downloaded image of f16 (f16 != 0) or f32 values, as a double. */
double th_elem(const unsigned char *img, size_t i, int f16);
/* Store v as element i of an image of f16 (f16 != 0, rounded to nearest even) or f32
 * values: th_elem's inverse. */
void th_put_elem(unsigned char *img, size_t i, float v, int f16);

/* v[0 .. n) uniform in [-1, 1) from *rng (pc_rand_uniform), in order; the _f16 form
 * stores each value rounded to f16. */
void th_fill_unit(float *v, size_t n, uint64_t *rng);
void th_fill_unit_f16(uint16_t *v, size_t n, uint64_t *rng);

/* An environment variable's value now (a malloc'd copy; NULL when unset), and putting it
 * back (unset for NULL; frees saved): around a test that sets it for its own calls. */
char *th_env_save(const char *name);
void th_env_restore(const char *name, char *saved);

/* Run the cmocka tests (any count, heap arrays too) under the suite name. With
 * POSENC_TEST_FILTER set, only the tests whose names match one of its '|'-separated glob
 * patterns ('*', '?'), for a run that repeats part of a suite under another setting
 * (tests/meson.build); a filter that selects none of them fails the run. */
int th_run(const char *suite, const struct CMUnitTest *tests, size_t count);

/* th_run of the fixed tests followed by one th_run_case test per shared case (src/check)
 * of each of the nops ops, in order (attention: not the big ones, which `posenc verify
 * --op attention` runs). Returns 1 when the cases cannot be had (out of memory). */
int th_run_with_cases(const char *suite, const struct CMUnitTest *fixed, size_t nfixed,
                      const enum pc_op *ops, size_t nops);

/* Fail unless every byte of b is still `byte`, the pattern it was filled with before a
 * failing call (which must write nothing); `what` names the call or buffer. */
void th_expect_untouched(posenc_buffer *b, unsigned char byte, const char *what);

/* Whether POSENC_TEST_FILTER (unset: everything) selects the test called name. */
int th_selected(const char *name);

#endif
