/*
 * test_threads.c - separate contexts used from several threads at once (--backend NAME).
 *
 * posenc.h promises that different contexts are independent and may be used from
 * different threads at the same time. Each of N_THREADS threads creates its own context on
 * the backend under test (with the validation layer on Vulkan), its own buffers, and runs
 * a mix of ops ROUNDS times (sinusoidal, RoPE with YaRN and with LongRoPE tables and a
 * sequence length read back from the positions, learned forward and backward, relative
 * bias, ALiBi, 2-D sin-cos with its temporaries, attention), reading every result back.
 * The bytes must equal those of the same work done first on one thread, and no thread may
 * see an error or a validation message. scripts/test also runs this program under
 * ThreadSanitizer.
 *
 * One context used from two threads at once is a usage error that posenc detects (issue
 * #16): the second call is refused with POSENC_ERR_INVALID_ARGUMENT and a message on its
 * own thread, and writes nothing. test_one_context_refused holds one thread inside a call
 * (its log callback waits) and checks the other's calls deterministically;
 * test_one_context_hammered runs two threads on one context and checks that every call
 * either succeeds with the right bytes or is refused.
 */
#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_THREADS 4
#define ROUNDS 3
#define OUT_BYTES 16384

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define I32 POSENC_DTYPE_I32
#define TC posenc_tensor_contiguous

struct job {
    int id;
    posenc_status st;
    char err[512];
    int warnings;
    unsigned char *out; /* ROUNDS x OUT_BYTES */
};

static void count_warn(posenc_log_level level, const char *msg, void *user)
{
    struct job *j = user;
    if (level == POSENC_LOG_WARN) {
        j->warnings++;
        fprintf(stderr, "thread %d: posenc warning: %s\n", j->id, msg);
    }
}

static const float ones[16] = {1, 1.25f, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

#define TRY(expr)                                                                            \
    do {                                                                                     \
        posenc_status st_ = (expr);                                                          \
        if (st_ != POSENC_OK) {                                                              \
            snprintf(j->err, sizeof(j->err), "%s: %s", #expr,                                \
                     posenc_context_last_error(ctx));                                        \
            j->st = st_;                                                                     \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

/* One thread's work: its own context, buffers, ops; results into j->out. */
static void *work(void *arg)
{
    struct job *j = arg;
    posenc_context *ctx = NULL;
    posenc_buffer *in = NULL, *pos = NULL, *tab = NULL, *out = NULL;
    struct posenc_context_params cp = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                       .log_fn = count_warn, .log_level = POSENC_LOG_WARN,
                                       .log_user_data = j};
    j->st = posenc_context_create(&cp, &ctx, j->err, sizeof(j->err));
    if (j->st != POSENC_OK)
        return NULL;
    float inv[1024];
    int32_t posv[64];
    for (int i = 0; i < 1024; i++)
        inv[i] = (float)((i * 5) % 11 - 5) * 0.125f;
    for (int i = 0; i < 64; i++)
        posv[i] = (i * 3) % 10;
    TRY(posenc_buffer_create(ctx, sizeof(inv), &in));
    TRY(posenc_buffer_create(ctx, sizeof(posv), &pos));
    TRY(posenc_buffer_create(ctx, sizeof(inv), &tab));
    TRY(posenc_buffer_create(ctx, OUT_BYTES, &out));
    TRY(posenc_buffer_write(in, 0, inv, sizeof(inv)));
    TRY(posenc_buffer_write(pos, 0, posv, sizeof(posv)));
    TRY(posenc_buffer_write(tab, 0, inv, sizeof(inv)));
    for (int r = 0; r < ROUNDS; r++) {
        unsigned char zero[OUT_BYTES];
        memset(zero, 0, sizeof(zero));
        TRY(posenc_buffer_write(out, 0, zero, sizeof(zero)));
        /* sinusoidal, fused, f16 out */
        posenc_tensor x = TC(in, 0, F32, 16, 8, 2, 1), p = TC(pos, 0, I32, 8, 1, 1, 1);
        posenc_tensor d = TC(out, 0, F16, 16, 8, 2, 1);
        struct posenc_sinusoidal_params sp = {.x_scale = 4.0f};
        TRY(posenc_sinusoidal(ctx, &x, &p, &d, &sp));
        /* RoPE YaRN, NEOX */
        posenc_tensor rx = TC(in, 0, F32, 16, 4, 8, 1), rd = TC(out, 1024, F32, 16, 4, 8, 1);
        struct posenc_rope_params rp = {.mode = POSENC_ROPE_NEOX,
                                        .scaling = {.kind = POSENC_ROPE_SCALING_YARN,
                                                    .factor = 4.0f, .original_ctx = 32}};
        TRY(posenc_rope(ctx, &rx, &p, &rd, &rp));
        /* RoPE LongRoPE with tables, seq_len from the positions */
        posenc_tensor rd2 = TC(out, 3072, F32, 16, 4, 8, 1);
        struct posenc_rope_params lp = {.scaling = {.kind = POSENC_ROPE_SCALING_LONGROPE,
                                                    .factor = 4.0f, .original_ctx = 4,
                                                    .short_factor = ones,
                                                    .long_factor = ones + 1}};
        TRY(posenc_rope(ctx, &rx, &p, &rd2, &lp));
        /* learned forward and backward */
        posenc_tensor lx = TC(in, 0, F32, 8, 8, 1, 1), lt = TC(tab, 0, F32, 8, 10, 1, 1),
                      ld = TC(out, 5120, F32, 8, 8, 1, 1), lg = TC(out, 5376, F32, 8, 10, 1, 1);
        TRY(posenc_learned(ctx, &lx, &p, &lt, &ld));
        TRY(posenc_learned_backward(ctx, &lx, &p, &lg));
        /* relative bias and ALiBi on [K, Q, H] logits */
        posenc_tensor lo = TC(in, 0, F32, 8, 6, 2, 1), rt = TC(tab, 0, F32, 32, 2, 1, 1),
                      bd = TC(out, 6144, F32, 8, 6, 2, 1), ad = TC(out, 6528, F32, 8, 6, 2, 1);
        struct posenc_relbias_params bp = {.q_offset = 2};
        TRY(posenc_relbias(ctx, &lo, &rt, &bd, &bp));
        struct posenc_alibi_params ap = {.causal = 1};
        TRY(posenc_alibi(ctx, &lo, &ad, &ap));
        /* 2-D sin-cos: temporaries made and destroyed inside */
        posenc_tensor g = TC(out, 7168, F32, 8, 13, 1, 1);
        struct posenc_2d_params gp = {.cls_token = 1};
        TRY(posenc_sincos_2d(ctx, 3, 4, &g, &gp));
        /* attention with RoPE: temporaries, three backend steps */
        posenc_tensor q = TC(in, 0, F32, 8, 2, 5, 1), k = TC(in, 512, F32, 8, 1, 5, 1),
                      v = TC(in, 1024, F32, 8, 1, 5, 1), od = TC(out, 8192, F32, 8, 2, 5, 1);
        struct posenc_attention_params atp = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1};
        posenc_status st = posenc_attention(ctx, &q, &k, &v, &od, NULL, &atp);
        if (st != POSENC_OK && st != POSENC_ERR_UNSUPPORTED)
            TRY(st);
        TRY(posenc_buffer_read(out, 0, j->out + (size_t)r * OUT_BYTES, OUT_BYTES));
    }
done:
    posenc_buffer_destroy(&in);
    posenc_buffer_destroy(&pos);
    posenc_buffer_destroy(&tab);
    posenc_buffer_destroy(&out);
    posenc_context_destroy(&ctx);
    return NULL;
}

static void check_job(const struct job *j)
{
    if (j->st != POSENC_OK)
        fail_msg("thread %d: %s: %s", j->id, posenc_status_string(j->st), j->err);
    if (j->warnings)
        fail_msg("thread %d: %d driver/validation warnings", j->id, j->warnings);
}

static void test_threads(void **state)
{
    (void)state;
    /* the reference: the same work on this thread alone */
    struct job ref = {.id = -1};
    ref.out = calloc(ROUNDS, OUT_BYTES);
    assert_non_null(ref.out);
    work(&ref);
    check_job(&ref);
    for (int r = 1; r < ROUNDS; r++)
        assert_memory_equal(ref.out, ref.out + (size_t)r * OUT_BYTES, OUT_BYTES);

    struct job jobs[N_THREADS];
    pthread_t tid[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        memset(&jobs[i], 0, sizeof(jobs[i]));
        jobs[i].id = i;
        jobs[i].out = calloc(ROUNDS, OUT_BYTES);
        assert_non_null(jobs[i].out);
        assert_int_equal(pthread_create(&tid[i], NULL, work, &jobs[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++)
        assert_int_equal(pthread_join(tid[i], NULL), 0);
    for (int i = 0; i < N_THREADS; i++) {
        check_job(&jobs[i]);
        for (int r = 0; r < ROUNDS; r++)
            if (memcmp(jobs[i].out + (size_t)r * OUT_BYTES, ref.out, OUT_BYTES) != 0)
                fail_msg("thread %d, round %d: results differ from the single-threaded run",
                         i, r);
        free(jobs[i].out);
    }
    free(ref.out);
}

/* ---- one context, two threads ------------------------------------------------------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_armed, gate_inside, gate_release;

/* Log callback of the shared context: with the gate armed, the first ERROR message parks
 * its thread -- inside the posenc call that logs it -- until the test releases it. */
static void gate_log(posenc_log_level level, const char *msg, void *user)
{
    (void)msg;
    (void)user;
    if (level != POSENC_LOG_ERROR)
        return;
    pthread_mutex_lock(&gate_mu);
    if (gate_armed) {
        gate_armed = 0;
        gate_inside = 1;
        pthread_cond_broadcast(&gate_cv);
        while (!gate_release)
            pthread_cond_wait(&gate_cv, &gate_mu);
    }
    pthread_mutex_unlock(&gate_mu);
}

static void *gate_holder(void *arg)
{
    posenc_context *ctx = arg;
    posenc_buffer *b = NULL;
    /* size 0 fails and logs: gate_log holds this thread inside posenc_buffer_create */
    posenc_status st = posenc_buffer_create(ctx, 0, &b);
    return (void *)(intptr_t)(st == POSENC_ERR_INVALID_ARGUMENT);
}

static void expect_refused(posenc_context *ctx, posenc_status st, const char *call)
{
    if (st != POSENC_ERR_INVALID_ARGUMENT)
        fail_msg("%s while another thread is inside a call: %s, want INVALID_ARGUMENT", call,
                 posenc_status_string(st));
    const char *m = posenc_context_last_error(ctx);
    if (!strstr(m, "another thread"))
        fail_msg("%s refused with message \"%s\"", call, m);
}

static void test_one_context_refused(void **state)
{
    (void)state;
    struct posenc_context_params cp = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                       .log_fn = gate_log, .log_level = POSENC_LOG_ERROR};
    posenc_context *ctx = NULL;
    assert_int_equal(posenc_context_create(&cp, &ctx, NULL, 0), POSENC_OK);
    float src[64], got[64], before[64];
    int32_t posv[4] = {0, 1, 2, 3};
    for (int i = 0; i < 64; i++)
        src[i] = (float)i, before[i] = -1.0f;
    posenc_buffer *in = NULL, *out = NULL, *pos = NULL;
    assert_int_equal(posenc_buffer_create(ctx, sizeof(src), &in), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, sizeof(src), &out), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, sizeof(posv), &pos), POSENC_OK);
    assert_int_equal(posenc_buffer_write(in, 0, src, sizeof(src)), POSENC_OK);
    assert_int_equal(posenc_buffer_write(out, 0, before, sizeof(before)), POSENC_OK);
    assert_int_equal(posenc_buffer_write(pos, 0, posv, sizeof(posv)), POSENC_OK);

    gate_armed = 1;
    gate_inside = gate_release = 0;
    pthread_t holder;
    assert_int_equal(pthread_create(&holder, NULL, gate_holder, ctx), 0);
    pthread_mutex_lock(&gate_mu);
    while (!gate_inside)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);

    /* the holder is inside a call on ctx: every call here is refused and does nothing */
    posenc_tensor x = TC(in, 0, F32, 16, 4, 1, 1), d = TC(out, 0, F32, 16, 4, 1, 1);
    posenc_tensor p = TC(pos, 0, I32, 4, 1, 1, 1);
    expect_refused(ctx, posenc_copy(ctx, &x, &d), "posenc_copy");
    expect_refused(ctx, posenc_rope(ctx, &x, &p, &d, NULL), "posenc_rope");
    expect_refused(ctx, posenc_sinusoidal(ctx, NULL, &p, &d, NULL), "posenc_sinusoidal");
    expect_refused(ctx, posenc_buffer_write(out, 0, src, sizeof(src)), "posenc_buffer_write");
    expect_refused(ctx, posenc_buffer_read(out, 0, got, sizeof(got)), "posenc_buffer_read");
    posenc_buffer *extra = (posenc_buffer *)1;
    expect_refused(ctx, posenc_buffer_create(ctx, 64, &extra), "posenc_buffer_create");
    assert_null(extra);
    expect_refused(ctx, posenc_context_finish(ctx), "posenc_context_finish");
    struct posenc_device_info info;
    expect_refused(ctx, posenc_context_get_info(ctx, &info), "posenc_context_get_info");

    pthread_mutex_lock(&gate_mu);
    gate_release = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    void *ok = NULL;
    assert_int_equal(pthread_join(holder, &ok), 0);
    assert_true(ok != NULL);

    /* the holder's call is over: this thread's calls work, and nothing was written */
    assert_int_equal(posenc_buffer_read(out, 0, got, sizeof(got)), POSENC_OK);
    assert_string_equal(posenc_context_last_error(ctx), "");
    assert_memory_equal(got, before, sizeof(got));
    assert_int_equal(posenc_copy(ctx, &x, &d), POSENC_OK);
    assert_int_equal(posenc_buffer_read(out, 0, got, sizeof(got)), POSENC_OK);
    assert_memory_equal(got, src, sizeof(got));
    posenc_buffer_destroy(&in);
    posenc_buffer_destroy(&out);
    posenc_buffer_destroy(&pos);
    posenc_context_destroy(&ctx);
}

/* rounds per thread: enough for the two threads to meet inside calls (CPU calls are short) */
#define HAMMER_ROUNDS (th.kind == POSENC_BACKEND_CPU ? 5000 : 150)

struct hammer {
    posenc_context *ctx;
    int id;
    posenc_buffer *in, *pos, *out;
    const float *want;  /* [2][512] expected out after the two ops */
    char err[512];
    long refused;
};

/* Retry while refused (the other thread is inside a call); anything else is final. */
static posenc_status hammer_call(struct hammer *h, posenc_status st, const char *what)
{
    if (st == POSENC_ERR_INVALID_ARGUMENT &&
        strstr(posenc_context_last_error(h->ctx), "another thread")) {
        h->refused++;
        return POSENC_ERR_INVALID_ARGUMENT;
    }
    if (st != POSENC_OK && !h->err[0])
        snprintf(h->err, sizeof(h->err), "thread %d: %s: %s: %s", h->id, what,
                 posenc_status_string(st), posenc_context_last_error(h->ctx));
    return st;
}

#define HAMMER(h, expr)                                                                      \
    do {                                                                                     \
        posenc_status hst_;                                                                  \
        while ((hst_ = hammer_call(h, (expr), #expr)) == POSENC_ERR_INVALID_ARGUMENT &&      \
               !(h)->err[0])                                                                 \
            sched_yield();                                                                   \
        if (hst_ != POSENC_OK)                                                               \
            return false;                                                                    \
    } while (0)

/* One round: clear out, RoPE and sinusoidal into it, read it back into got[1024]. */
static bool hammer_round(struct hammer *h, float *got)
{
    posenc_tensor x = TC(h->in, 0, F32, 16, 4, 8, 1), d = TC(h->out, 0, F32, 16, 4, 8, 1);
    posenc_tensor p = TC(h->pos, 0, I32, 8, 1, 1, 1);
    posenc_tensor sd = TC(h->out, 2048, F32, 16, 8, 1, 1);
    struct posenc_rope_params rp = {.mode = h->id ? POSENC_ROPE_NEOX : POSENC_ROPE_NORMAL,
                                    .freq_base = h->id ? 500.0f : 10000.0f};
    struct posenc_sinusoidal_params sp = {.base = h->id ? 100.0f : 10000.0f};
    static const float zero[1024];
    HAMMER(h, posenc_buffer_write(h->out, 0, zero, sizeof(zero)));
    HAMMER(h, posenc_rope(h->ctx, &x, &p, &d, &rp));
    HAMMER(h, posenc_sinusoidal(h->ctx, NULL, &p, &sd, &sp));
    HAMMER(h, posenc_buffer_read(h->out, 0, got, 1024 * sizeof(float)));
    return true;
}

static void *hammer_work(void *arg)
{
    struct hammer *h = arg;
    float got[1024];
    for (int r = 0; r < HAMMER_ROUNDS && hammer_round(h, got); r++)
        if (memcmp(got, h->want, sizeof(got)) != 0) {
            snprintf(h->err, sizeof(h->err), "thread %d, round %d: wrong bytes", h->id, r);
            break;
        }
    return NULL;
}

static void test_one_context_hammered(void **state)
{
    (void)state;
    struct posenc_context_params cp = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                       .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    assert_int_equal(posenc_context_create(&cp, &ctx, NULL, 0), POSENC_OK);
    float inv[512];
    int32_t posv[8];
    for (int i = 0; i < 512; i++)
        inv[i] = (float)((i * 7) % 13 - 6) * 0.25f;
    for (int i = 0; i < 8; i++)
        posv[i] = 5 * i + 1;
    struct hammer h[2];
    float *want[2];
    pthread_t tid[2];
    for (int t = 0; t < 2; t++) {
        memset(&h[t], 0, sizeof(h[t]));
        h[t].ctx = ctx;
        h[t].id = t;
        assert_int_equal(posenc_buffer_create(ctx, sizeof(inv), &h[t].in), POSENC_OK);
        assert_int_equal(posenc_buffer_create(ctx, sizeof(posv), &h[t].pos), POSENC_OK);
        assert_int_equal(posenc_buffer_create(ctx, 4096, &h[t].out), POSENC_OK);
        assert_int_equal(posenc_buffer_write(h[t].in, 0, inv, sizeof(inv)), POSENC_OK);
        assert_int_equal(posenc_buffer_write(h[t].pos, 0, posv, sizeof(posv)), POSENC_OK);
        /* the expected bytes: one round on this thread alone */
        want[t] = calloc(1024, sizeof(float));
        assert_non_null(want[t]);
        h[t].want = want[t];
        if (!hammer_round(&h[t], want[t]))
            fail_msg("%s", h[t].err);
    }
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, hammer_work, &h[t]), 0);
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_join(tid[t], NULL), 0);
    for (int t = 0; t < 2; t++) {
        if (h[t].err[0])
            fail_msg("%s", h[t].err);
        printf("one context, thread %d: %d rounds, %ld calls refused while the other was "
               "inside one\n", t, HAMMER_ROUNDS, h[t].refused);
        posenc_buffer_destroy(&h[t].in);
        posenc_buffer_destroy(&h[t].pos);
        posenc_buffer_destroy(&h[t].out);
        free(want[t]);
    }
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "threads");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_one_context_refused),
        cmocka_unit_test(test_one_context_hammered),
    };
    rc = th_run("threads", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
