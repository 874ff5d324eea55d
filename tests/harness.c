/* harness.c - see harness.h. */
#include "harness.h"
#include "check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct th_state th;

void th_log(posenc_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level <= POSENC_LOG_WARN) {
        if (level == POSENC_LOG_WARN) {
            th.warnings++;
            fprintf(stderr, "posenc warning: %s\n", msg);
        }
    }
}

static int required(posenc_backend_kind kind)
{
    const char *req = getenv("POSENC_TEST_REQUIRE");
    if (!req)
        return 0;
    const char *name = posenc_backend_name(kind);
    size_t n = strlen(name);
    for (const char *p = req; (p = strstr(p, name)) != NULL; p += n)
        if ((p == req || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

int th_init(int argc, char **argv, const char *suite)
{
    memset(&th, 0, sizeof(th));
    th.kind = POSENC_BACKEND_CPU;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            const char *b = argv[++i];
            int found = 0;
            for (int k = 1; k < POSENC_BACKEND_COUNT; k++)
                if (!strcmp(b, posenc_backend_name((posenc_backend_kind)k))) {
                    th.kind = (posenc_backend_kind)k;
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "%s: unknown backend '%s'\n", suite, b);
                return 1;
            }
        }
    }
    char err[512];
    /* the reference loops: the fast CPU path is tested against them like any backend */
    struct posenc_context_params rp = {.backend = POSENC_BACKEND_CPU,
                                       .flags = POSENC_CONTEXT_CPU_REFERENCE};
    if (posenc_context_create(&rp, &th.ref, err, sizeof(err)) != POSENC_OK) {
        fprintf(stderr, "%s: cannot create the CPU reference: %s\n", suite, err);
        return 1;
    }
    struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                      .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_status st = posenc_context_create(&p, &th.dut, err, sizeof(err));
    if (st != POSENC_OK) {
        posenc_context_destroy(&th.ref);
        if (st == POSENC_ERR_UNAVAILABLE && !required(th.kind)) {
            printf("SKIP %s on %s: %s\n", suite, posenc_backend_name(th.kind), err);
            return 77;
        }
        fprintf(stderr, "%s: backend %s: %s: %s\n", suite, posenc_backend_name(th.kind),
                posenc_status_string(st), err);
        return 1;
    }
    struct posenc_device_info info;
    posenc_context_get_info(th.dut, &info);
    printf("%s on %s: %s (%s)\n", suite, posenc_backend_name(th.kind), info.device_name,
           info.api_version);
    if (th.warnings) {
        fprintf(stderr, "%s: %d warnings while creating the context\n", suite, th.warnings);
        return 1;
    }
    return -1;
}

void th_fini(void)
{
    posenc_context_destroy(&th.dut);
    posenc_context_destroy(&th.ref);
}

void th_check_warnings(void)
{
    int n = th.warnings;
    th.warnings = 0;
    if (n)
        fail_msg("%d driver/validation warnings (see stderr)", n);
}

posenc_buffer *th_upload(posenc_context *ctx, const void *src, size_t bytes)
{
    posenc_buffer *b = NULL;
    assert_int_equal(posenc_buffer_create(ctx, bytes, &b), POSENC_OK);
    assert_int_equal(posenc_buffer_write(b, 0, src, bytes), POSENC_OK);
    return b;
}

void th_run_first_cases(posenc_context *ref, posenc_context *ctx, enum pc_op op,
                        size_t per_dtype, const char *what)
{
    size_t n = 0, ran[2] = {0, 0};
    struct pc_case *cases = pc_cases(op, &n);
    assert_non_null(cases);
    for (size_t i = 0; i < n; i++) {
        const int k = cases[i].dtype == POSENC_DTYPE_F16;
        if ((op == PC_OP_ATTENTION && cases[i].attn.big) || ran[k] >= per_dtype)
            continue;
        struct pc_result r;
        pc_run_case(ref, ctx, &cases[i], &r);
        th_check_warnings();
        if (!r.pass) {
            char name[192];
            snprintf(name, sizeof(name), "%s", cases[i].name);
            free(cases);
            fail_msg("%s: %s: %s (%lld bad of %lld, %lld guard bytes)", what, name, r.msg,
                     (long long)r.n_bad, (long long)r.n_checked, (long long)r.guard_bad);
        }
        ran[k]++;
    }
    free(cases);
    assert_true(ran[0] > 0 && ran[1] > 0);
}

posenc_context *th_limited_ctx(unsigned long long limit)
{
    char v[32], err[512];
    snprintf(v, sizeof(v), "%llu", limit);
    setenv("POSENC_MAX_BINDING", v, 1);
    struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                      .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    unsetenv("POSENC_MAX_BINDING");
    if (st != POSENC_OK)
        fail_msg("context with POSENC_MAX_BINDING=%s: %s", v, err);
    return ctx;
}

void *th_download(posenc_buffer *b)
{
    size_t n = posenc_buffer_size(b);
    void *p = malloc(n);
    assert_non_null(p);
    assert_int_equal(posenc_buffer_read(b, 0, p, n), POSENC_OK);
    return p;
}

double th_elem(const unsigned char *img, size_t i, int f16)
{
    if (f16) {
        uint16_t h;
        memcpy(&h, img + 2 * i, 2);
        return posenc_f16_to_f32(h);
    }
    float f;
    memcpy(&f, img + 4 * i, 4);
    return f;
}

void th_put_elem(unsigned char *img, size_t i, float v, int f16)
{
    if (f16) {
        const uint16_t h = posenc_f32_to_f16(v);
        memcpy(img + 2 * i, &h, 2);
    } else {
        memcpy(img + 4 * i, &v, 4);
    }
}

void th_fill_unit(float *v, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(2.0 * pc_rand_uniform(rng) - 1.0);
}

void th_fill_unit_f16(uint16_t *v, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        v[i] = posenc_f32_to_f16((float)(2.0 * pc_rand_uniform(rng) - 1.0));
}

char *th_env_save(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        return NULL;
    char *copy = strdup(v);
    assert_non_null(copy);
    return copy;
}

void th_env_restore(const char *name, char *saved)
{
    if (saved) {
        setenv(name, saved, 1);
        free(saved);
    } else {
        unsetenv(name);
    }
}

/* Whether name matches glob pattern p ('*' any run, '?' any one character), up to `end`. */
static int glob_match(const char *p, const char *end, const char *name)
{
    for (; p < end; p++, name++) {
        if (*p == '*') {
            for (;; name++) {
                if (glob_match(p + 1, end, name))
                    return 1;
                if (!*name)
                    return 0;
            }
        }
        if (!*name || (*p != '?' && *p != *name))
            return 0;
    }
    return *name == '\0';
}

int th_selected(const char *name)
{
    const char *f = getenv("POSENC_TEST_FILTER");
    if (!f || !*f)
        return 1;
    for (const char *p = f;;) {
        const char *bar = strchr(p, '|');
        const char *end = bar ? bar : p + strlen(p);
        if (glob_match(p, end, name))
            return 1;
        if (!bar)
            return 0;
        p = bar + 1;
    }
}

int th_run(const char *suite, const struct CMUnitTest *tests, size_t count)
{
    char name[128];
    snprintf(name, sizeof(name), "%s/%s", suite, posenc_backend_name(th.kind));
    /* POSENC_TEST_FILTER: only the tests it selects, and at least one */
    struct CMUnitTest *sel = calloc(count ? count : 1, sizeof *sel);
    if (!sel) {
        fprintf(stderr, "%s: out of memory\n", name);
        return 1;
    }
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (th_selected(tests[i].name))
            sel[n++] = tests[i];
    int rc;
    if (n == 0 && count > 0) {
        fprintf(stderr, "%s: POSENC_TEST_FILTER=%s selects none of the %zu tests\n", name,
                getenv("POSENC_TEST_FILTER"), count);
        rc = 1;
    } else {
        rc = _cmocka_run_group_tests(name, sel, n, NULL, NULL);
    }
    free(sel);
    return rc;
}

int th_run_with_cases(const char *suite, const struct CMUnitTest *fixed, size_t nfixed,
                      const enum pc_op *ops, size_t nops)
{
    struct pc_case *cases[PC_OP_COUNT] = {NULL};
    size_t counts[PC_OP_COUNT] = {0}, total = nfixed;
    bool ok = nops <= PC_OP_COUNT;
    for (size_t o = 0; ok && o < nops; o++) {
        cases[o] = pc_cases(ops[o], &counts[o]);
        ok = cases[o] != NULL;
        total += counts[o];
    }
    struct CMUnitTest *tests = ok ? calloc(total ? total : 1, sizeof(*tests)) : NULL;
    int rc = 1;
    if (tests) {
        memcpy(tests, fixed, nfixed * sizeof(*fixed));
        size_t m = nfixed;
        for (size_t o = 0; o < nops; o++)
            for (size_t i = 0; i < counts[o]; i++) {
                const struct pc_case *c = &cases[o][i];
                if (c->op == PC_OP_ATTENTION && c->attn.big)
                    continue;
                tests[m].name = c->name;
                tests[m].test_func = th_run_case;
                tests[m].initial_state = (void *)c;
                m++;
            }
        rc = th_run(suite, tests, m);
        free(tests);
    } else {
        fprintf(stderr, "%s: out of memory for the shared cases\n", suite);
    }
    for (size_t o = 0; o < nops && o < PC_OP_COUNT; o++)
        free(cases[o]);
    return rc;
}

void th_expect_untouched(posenc_buffer *b, unsigned char byte, const char *what)
{
    unsigned char *img = th_download(b);
    for (size_t i = 0; i < posenc_buffer_size(b); i++)
        if (img[i] != byte) {
            const unsigned got = img[i];
            free(img);
            fail_msg("%s: byte %zu of the buffer is 0x%02X, not 0x%02X: a failing call wrote it",
                     what, i, got, (unsigned)byte);
        }
    free(img);
}

void th_expect(posenc_status got, posenc_status want, const char *needle, const char *what)
{
    if (got != want)
        fail_msg("%s: status %s, want %s (message: %s)", what, posenc_status_string(got),
                 posenc_status_string(want), posenc_context_last_error(th.dut));
    if (needle && !strstr(posenc_context_last_error(th.dut), needle))
        fail_msg("%s: message \"%s\" does not name \"%s\"", what,
                 posenc_context_last_error(th.dut), needle);
}

void th_run_case(void **state)
{
    const struct pc_case *c = *state;
    struct pc_result r;
    pc_run_case(th.ref, th.dut, c, &r);
    th_check_warnings();
    if (!r.pass)
        fail_msg("%s: %s (max err %.3g, bound %.3g, %lld bad of %lld, %lld guard bytes)", c->name,
                 r.msg, r.max_err, r.bound_at_max, (long long)r.n_bad, (long long)r.n_checked,
                 (long long)r.guard_bad);
}
