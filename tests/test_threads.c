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
 */
#include "harness.h"

#include <pthread.h>
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

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "threads");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
    };
    rc = th_run("threads", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
