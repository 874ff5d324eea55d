/*
 * test_faults.c - fault injection on one backend (--backend NAME): every call survives an
 * out-of-memory failure at any point.
 *
 * Host allocations: the test is linked with -Wl,--wrap=malloc,calloc,realloc,aligned_alloc,
 * free (tests/meson.build), so every allocation made by posenc's static-library objects
 * (and by this file) goes through the __wrap_* functions below. They keep the set of live
 * blocks and, when armed with n, fail the n-th allocation. Allocations inside the drivers
 * (PoCL, lavapipe, the loaders) are not wrapped: what is tested is posenc's own handling.
 *
 * Device buffers: src/context.c's test-only countdown pe_fault_countdown fails the n-th
 * device allocation as a device out of memory would: posenc_buffer_create (the user's and
 * the temporaries posenc makes itself) and the backends' own allocations
 * (pe_fault_device_alloc: OpenCL's attention temporaries and uploaded tables / bucket
 * lists, Vulkan's host-visible table and staging buffers).
 *
 * For each scenario (context creation, buffers, every op, RoPE scaling with tables and a
 * sequence length read back from the positions, the learned backward pass, attention with
 * its temporaries, ...), on a context of its own, and for n = 1, 2, ... until the call no
 * longer reaches an n-th allocation:
 *   - the call returns POSENC_ERR_OUT_OF_MEMORY with a message, and writes nothing to its
 *     outputs;
 *   - no block allocated during the call is still live, except what the context keeps
 *     (its live count never exceeds the count after a successful warm-up call);
 *   - the context still works: the same call, not armed, succeeds and gives the bytes of
 *     the warm-up call.
 * After each scenario the context is destroyed and every block posenc allocated for it must
 * be freed (the live count returns to where it was). On Vulkan the contexts run under the
 * validation layer, which reports device objects left behind at destruction.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the allocation wrappers ------------------------------------------------------------ */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
void __wrap_free(void *p);

/* posenc_buffer_create's countdown (src/context.c; test-only, not public) */
extern int64_t pe_fault_countdown;
/* first-use program builds / pipeline creations (src/context.c; test-only) */
extern int64_t pe_fault_build_countdown;
/* the bytes src/scratch.c keeps at most (test-only lowering) */
extern size_t pe_scratch_keep;
/* OpenCL's program cache size for the test (src/opencl/cl_program.c; test-only; weak:
 * absent from a build without OpenCL) */
extern int pe_cl_program_cap __attribute__((weak));

#define LIVE_CAP (1u << 20)
#define TOMB ((void *)1)
static void **live_tab;          /* open addressing, linear probing */
static size_t live_n, live_tombs;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long fail_at;             /* 0: never fail; else fail allocation number fail_at */
static long n_counted;           /* allocations since arming */
static int fired;

static size_t slot_of(const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & (LIVE_CAP - 1);
}

static void live_rebuild(void)
{
    void **old = live_tab;
    live_tab = __real_calloc(LIVE_CAP, sizeof(void *));
    if (!live_tab)
        abort();
    live_n = live_tombs = 0;
    for (size_t i = 0; old && i < LIVE_CAP; i++)
        if (old[i] && old[i] != TOMB) {
            size_t s = slot_of(old[i]);
            while (live_tab[s])
                s = (s + 1) & (LIVE_CAP - 1);
            live_tab[s] = old[i];
            live_n++;
        }
    __real_free(old);
}

static void live_add(void *p)
{
    if (!live_tab || live_tombs > LIVE_CAP / 4)
        live_rebuild();
    if (live_n > LIVE_CAP / 2)
        abort(); /* far more live blocks than this test ever makes */
    size_t s = slot_of(p);
    while (live_tab[s] && live_tab[s] != TOMB)
        s = (s + 1) & (LIVE_CAP - 1);
    if (live_tab[s] == TOMB)
        live_tombs--;
    live_tab[s] = p;
    live_n++;
}

static void live_remove(void *p)
{
    if (!live_tab)
        return;
    size_t s = slot_of(p);
    while (live_tab[s]) {
        if (live_tab[s] == p) {
            live_tab[s] = TOMB;
            live_tombs++;
            live_n--;
            return;
        }
        s = (s + 1) & (LIVE_CAP - 1);
    }
    /* not ours (allocated before tracking, or by code that is not wrapped) */
}

/* Count one allocation; true if it must fail. Called with mu held. */
static int should_fail(void)
{
    if (!fail_at)
        return 0;
    if (++n_counted == fail_at) {
        fired = 1;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size)
{
    pthread_mutex_lock(&mu);
    void *p = should_fail() ? NULL : __real_malloc(size);
    if (p)
        live_add(p);
    pthread_mutex_unlock(&mu);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    pthread_mutex_lock(&mu);
    void *p = should_fail() ? NULL : __real_calloc(n, size);
    if (p)
        live_add(p);
    pthread_mutex_unlock(&mu);
    return p;
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    pthread_mutex_lock(&mu);
    void *p = should_fail() ? NULL : __real_aligned_alloc(align, size);
    if (p)
        live_add(p);
    pthread_mutex_unlock(&mu);
    return p;
}

void *__wrap_realloc(void *old, size_t size)
{
    pthread_mutex_lock(&mu);
    void *p = should_fail() ? NULL : __real_realloc(old, size);
    if (p) {
        if (old)
            live_remove(old);
        live_add(p);
    }
    pthread_mutex_unlock(&mu);
    return p;
}

void __wrap_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&mu);
    live_remove(p);
    __real_free(p);
    pthread_mutex_unlock(&mu);
}

static size_t live_count(void)
{
    pthread_mutex_lock(&mu);
    size_t n = live_n;
    pthread_mutex_unlock(&mu);
    return n;
}

/* The live count once it equals `want`, or after 2 s of waiting for it. On CPU OpenCL
 * devices a large buffer is posenc's own host memory (huge_page_buffer in
 * src/opencl/backend_opencl.c), freed by the implementation's destructor callback: PoCL
 * runs it on its own thread when the buffer's last command is retired, which can be a
 * little after posenc_context_destroy returned (seen once under ASan with other tests
 * running: one block more live right after the destroy, freed before the next scenario
 * ended). A block that stays live for 2 s is still a leak. */
static size_t live_settled(size_t want)
{
    size_t n = live_count();
    for (int i = 0; i < 2000 && n != want; i++) {
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        n = live_count();
    }
    return n;
}

static void arm_host(long n)
{
    pthread_mutex_lock(&mu);
    fail_at = n;
    n_counted = 0;
    fired = 0;
    pthread_mutex_unlock(&mu);
}

/* Disarm; true if the armed allocation was reached (and failed). */
static int disarm_host(void)
{
    pthread_mutex_lock(&mu);
    int f = fired;
    fail_at = 0;
    fired = 0;
    pthread_mutex_unlock(&mu);
    return f;
}

/* ---- scenarios ----------------------------------------------------------------------------- */

enum { NB = 8 };

/* One scenario: a context of its own, buffers made by prepare(), an armed call(), and the
 * bytes of the output buffers (outs) compared with the warm-up's. */
struct sc {
    posenc_context *ctx;
    posenc_buffer *b[NB];
    int outs[NB];           /* b[i] is an output (reset to poison before each call) */
    unsigned char *init[NB];/* each buffer's content before a call */
    double host_out[256];   /* attention_decay */
    int which;
};

typedef void (*prepare_fn)(struct sc *s);
typedef posenc_status (*call_fn)(struct sc *s);

struct scenario {
    const char *name;
    prepare_fn prepare;
    call_fn call;
    /* buffers (bit i: b[i]) an op of several device passes may have written when it
     * fails with OUT_OF_MEMORY (posenc.h, "Errors"): sincos_2d's dst (two passes) */
    unsigned partial;
    /* POSENC_MAX_BINDING for the scenario's context (0: none): ops cut into several
     * launches, attention into query blocks, and every allocation of the multi-launch
     * call is failed in turn -- the outputs must stay untouched (issue #16) */
    unsigned long max_binding;
};

static long faults_survived;

static void mkbuf(struct sc *s, int i, size_t bytes, int is_out, int kind)
{
    unsigned char *img = malloc(bytes);
    assert_non_null(img);
    for (size_t k = 0; k < bytes / 4; k++) {
        uint32_t v;
        if (is_out) {
            v = 0xA5A5A5A5u;
        } else if (kind == 1) { /* i32 positions 0..7 */
            v = (uint32_t)(k % 8);
        } else {
            float f = (float)((int)(k % 13) - 6) * 0.125f;
            memcpy(&v, &f, 4);
        }
        memcpy(img + 4 * k, &v, 4);
    }
    s->b[i] = th_upload(s->ctx, img, bytes);
    s->init[i] = img;
    s->outs[i] = is_out;
}

static void reset_bufs(struct sc *s)
{
    for (int i = 0; i < NB; i++)
        if (s->b[i])
            assert_int_equal(posenc_buffer_write(s->b[i], 0, s->init[i], posenc_buffer_size(s->b[i])),
                             POSENC_OK);
    memset(s->host_out, 0xA5, sizeof(s->host_out));
}

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define I32 POSENC_DTYPE_I32
#define TC posenc_tensor_contiguous

static const float ones[64] = {1, 1.5f, 1, 2, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                               1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const float slopes[8] = {0.5f, 0.25f, 0.125f, 0.0625f};

static void prep_basic(struct sc *s)
{
    mkbuf(s, 0, 4096, 0, 0); /* x / q / logits */
    mkbuf(s, 1, 1024, 0, 1); /* positions */
    mkbuf(s, 2, 4096, 0, 0); /* tables / k / v */
    mkbuf(s, 3, 4096, 1, 0); /* out */
    mkbuf(s, 4, 4096, 1, 0); /* out 2 */
}

static posenc_status c_buffers(struct sc *s)
{
    posenc_buffer *b = NULL;
    unsigned char tmp[64];
    posenc_status st = posenc_buffer_create(s->ctx, 4096, &b);
    if (st != POSENC_OK)
        return st;
    st = posenc_buffer_write(b, 0, s->init[0], 4096);
    if (st == POSENC_OK)
        st = posenc_buffer_read(b, 100, tmp, 64);
    if (st == POSENC_OK)
        st = posenc_buffer_write(s->b[3], 0, tmp, 64);
    posenc_buffer_destroy(&b);
    return st;
}

static posenc_status c_copy(struct sc *s)
{
    posenc_tensor src = TC(s->b[0], 0, F32, 8, 4, 3, 1), dst = TC(s->b[3], 64, F16, 8, 4, 3, 1);
    src.nb[1] = 64; /* a padded source */
    return posenc_copy(s->ctx, &src, &dst);
}

static posenc_status c_sin(struct sc *s)
{
    posenc_tensor x = TC(s->b[0], 0, F32, 16, 5, 2, 1), pos = TC(s->b[1], 0, I32, 5, 1, 1, 1),
                  dst = TC(s->b[3], 0, F16, 16, 5, 2, 1);
    struct posenc_sinusoidal_params p = {.layout = POSENC_SIN_HALF_SPLIT, .x_scale = 2.0f};
    return posenc_sinusoidal(s->ctx, &x, &pos, &dst, &p);
}

static posenc_status c_rope_longrope(struct sc *s)
{
    posenc_tensor x = TC(s->b[0], 0, F16, 16, 3, 5, 2), pos = TC(s->b[1], 0, I32, 5, 1, 2, 1),
                  dst = TC(s->b[3], 0, F32, 16, 3, 5, 2);
    struct posenc_rope_params p = {.mode = POSENC_ROPE_NEOX,
                                   .freq_factors = ones,
                                   .scaling = {.kind = POSENC_ROPE_SCALING_LONGROPE,
                                               .factor = 8.0f,
                                               .original_ctx = 4,
                                               .short_factor = ones,
                                               .long_factor = ones + 1}};
    return posenc_rope(s->ctx, &x, &pos, &dst, &p); /* seq_len read back from pos */
}

static posenc_status c_rope_qk_yarn(struct sc *s)
{
    posenc_tensor q = TC(s->b[0], 0, F32, 16, 4, 5, 1), k = TC(s->b[2], 0, F32, 16, 2, 5, 1),
                  pos = TC(s->b[1], 0, I32, 5, 4, 1, 1), qo = TC(s->b[3], 0, F32, 16, 4, 5, 1),
                  ko = TC(s->b[4], 0, F16, 16, 2, 5, 1);
    struct posenc_rope_params p = {.mode = POSENC_ROPE_MROPE,
                                   .sections = {2, 3, 3, 0},
                                   .scaling = {.kind = POSENC_ROPE_SCALING_YARN,
                                               .factor = 4.0f,
                                               .original_ctx = 64,
                                               .mscale_all_dim = 1.0f}};
    return posenc_rope_qk(s->ctx, &q, &k, &pos, &qo, &ko, &p);
}

static posenc_status c_rerotate_dyn(struct sc *s)
{
    posenc_tensor k = TC(s->b[0], 0, F32, 16, 2, 6, 1), pf = TC(s->b[1], 0, I32, 6, 1, 1, 1),
                  pt = TC(s->b[1], 64, I32, 6, 1, 1, 1), dst = TC(s->b[3], 0, F32, 16, 2, 6, 1);
    struct posenc_rope_params from = {.mode = POSENC_ROPE_NEOX},
                              to = {.mode = POSENC_ROPE_NEOX,
                                    .scaling = {.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK,
                                                .factor = 2.0f,
                                                .original_ctx = 2}};
    return posenc_rope_rerotate(s->ctx, &k, &pf, &from, &pt, &to, &dst);
}

static posenc_status c_learned(struct sc *s)
{
    posenc_tensor x = TC(s->b[0], 0, F32, 8, 6, 2, 1), pos = TC(s->b[1], 0, I32, 6, 2, 1, 1),
                  tab = TC(s->b[2], 0, F16, 8, 8, 1, 1), dst = TC(s->b[3], 0, F32, 8, 6, 2, 1);
    return posenc_learned(s->ctx, &x, &pos, &tab, &dst);
}

static posenc_status c_learned_bwd(struct sc *s)
{
    posenc_tensor dy = TC(s->b[0], 0, F32, 8, 6, 2, 1), pos = TC(s->b[1], 0, I32, 6, 2, 1, 1),
                  dt = TC(s->b[3], 0, F32, 8, 8, 1, 1);
    return posenc_learned_backward(s->ctx, &dy, &pos, &dt);
}

static posenc_status c_sincos2d(struct sc *s)
{
    posenc_tensor dst = TC(s->b[3], 0, F32, 8, 3 * 4 + 1, 1, 1);
    struct posenc_2d_params p = {.cls_token = 1, .grid_scale = 2.0f};
    return posenc_sincos_2d(s->ctx, 3, 4, &dst, &p);
}

static posenc_status c_resize(struct sc *s)
{
    posenc_tensor src = TC(s->b[2], 0, F32, 8, 3 * 3 + 1, 1, 1),
                  dst = TC(s->b[3], 0, F16, 8, 5 * 4 + 1, 1, 1);
    struct posenc_resize_params p = {.cls_token = 1};
    return posenc_resize_2d(s->ctx, &src, 3, 3, &dst, 5, 4, &p);
}

static posenc_status c_relbias(struct sc *s)
{
    posenc_tensor l = TC(s->b[0], 0, F32, 6, 5, 2, 1), tab = TC(s->b[2], 0, F32, 32, 2, 1, 1),
                  dst = TC(s->b[3], 0, F32, 6, 5, 2, 1);
    struct posenc_relbias_params p = {.q_offset = 3};
    return posenc_relbias(s->ctx, &l, &tab, &dst, &p);
}

/* Enough queries per relative position that OpenCL on a CPU device lays the biases out
 * by relative position first (its pe_relbias_expand buffer, ops_encodings.c). */
static posenc_status c_relbias_rows(struct sc *s)
{
    posenc_tensor l = TC(s->b[0], 0, F32, 16, 16, 2, 1), tab = TC(s->b[2], 0, F32, 32, 2, 1, 1),
                  dst = TC(s->b[3], 0, F32, 16, 16, 2, 1);
    struct posenc_relbias_params p = {.k_offset = 2};
    return posenc_relbias(s->ctx, &l, &tab, &dst, &p);
}

static posenc_status c_relbias_bwd(struct sc *s)
{
    posenc_tensor dl = TC(s->b[0], 0, F32, 6, 5, 2, 1), dt = TC(s->b[3], 0, F32, 7, 2, 1, 1);
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_CLIPPED, .max_distance = 3};
    return posenc_relbias_backward(s->ctx, &dl, &dt, &p);
}

static posenc_status c_alibi(struct sc *s)
{
    posenc_tensor l = TC(s->b[0], 0, F16, 6, 5, 4, 1), dst = TC(s->b[3], 0, F32, 6, 5, 4, 1);
    struct posenc_alibi_params p = {.causal = 1, .slopes = slopes, .k_offset = 2};
    return posenc_alibi(s->ctx, &l, &dst, &p);
}

static posenc_status attention_with(struct sc *s, posenc_attention_encoding enc)
{
    posenc_tensor q = TC(s->b[0], 0, F32, 8, 2, 4, 1), k = TC(s->b[2], 0, F32, 8, 1, 5, 1),
                  v = TC(s->b[2], 512, F16, 8, 1, 5, 1), dst = TC(s->b[3], 0, F32, 8, 2, 4, 1),
                  w = TC(s->b[4], 0, F32, 5, 4, 2, 1), tab = TC(s->b[2], 1024, F32, 8, 16, 1, 1),
                  rtab = TC(s->b[2], 2048, F32, 32, 2, 1, 1);
    struct posenc_attention_params p = {.encoding = enc, .causal = 1, .q_offset = 1};
    p.learned_table = &tab;
    p.relbias_table = &rtab;
    p.rope.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.rope.scaling.factor = 2.0f;
    return posenc_attention(s->ctx, &q, &k, &v, &dst, &w, &p);
}

static posenc_status c_attn_rope(struct sc *s)
{
    return attention_with(s, POSENC_ATTENTION_ROPE);
}

static posenc_status c_attn_learned(struct sc *s)
{
    return attention_with(s, POSENC_ATTENTION_LEARNED);
}

static posenc_status c_attn_relbias(struct sc *s)
{
    return attention_with(s, POSENC_ATTENTION_RELBIAS);
}

static posenc_status c_attn_alibi(struct sc *s)
{
    return attention_with(s, POSENC_ATTENTION_ALIBI);
}

/* One pass (no weights) over 160 keys of one K/V head for a GQA-2 decode row: split into
 * key ranges and merged where the backend splits (lavapipe: 3 splits; Vulkan keeps the
 * partials in buffers of its own, made at the first calls). */
static posenc_status c_attn_one_pass(struct sc *s)
{
    posenc_tensor q = TC(s->b[0], 0, F32, 8, 2, 1, 1), k = TC(s->b[2], 0, F16, 8, 1, 160, 1),
                  v = TC(s->b[0], 1024, F16, 8, 1, 160, 1), dst = TC(s->b[3], 0, F32, 8, 2, 1, 1);
    struct posenc_attention_params p = {.encoding = POSENC_ATTENTION_ALIBI, .causal = 1,
                                        .q_offset = 159};
    return posenc_attention(s->ctx, &q, &k, &v, &dst, NULL, &p);
}

/* Multi-launch calls under POSENC_MAX_BINDING = 1024. Attention: 40 queries of 16 keys,
 * 64 bytes of logits each, run as query blocks of 16, 16 and 8. */
static posenc_status attention_blocks(struct sc *s, posenc_attention_encoding enc)
{
    posenc_tensor q = TC(s->b[0], 0, F32, 8, 1, 40, 1), k = TC(s->b[2], 0, F32, 8, 1, 16, 1),
                  v = TC(s->b[2], 512, F16, 8, 1, 16, 1), dst = TC(s->b[3], 0, F32, 8, 1, 40, 1),
                  w = TC(s->b[4], 0, F32, 16, 40, 1, 1), rtab = TC(s->b[2], 2048, F32, 32, 1, 1, 1);
    struct posenc_attention_params p = {.encoding = enc, .causal = 1, .q_offset = 3};
    p.relbias_table = &rtab;
    return posenc_attention(s->ctx, &q, &k, &v, &dst, &w, &p);
}

static posenc_status c_attn_blocks_alibi(struct sc *s)
{
    return attention_blocks(s, POSENC_ATTENTION_ALIBI);
}

static posenc_status c_attn_blocks_relbias(struct sc *s)
{
    return attention_blocks(s, POSENC_ATTENTION_RELBIAS);
}

static posenc_status c_attn_blocks_rope(struct sc *s)
{
    return attention_blocks(s, POSENC_ATTENTION_ROPE);
}

/* relbias [64 keys, 6 queries, 2 heads]: 1536 bytes a head, cut along heads and queries */
static posenc_status c_relbias_cut(struct sc *s)
{
    posenc_tensor l = TC(s->b[0], 0, F32, 64, 6, 2, 1), tab = TC(s->b[2], 0, F32, 32, 2, 1, 1),
                  dst = TC(s->b[3], 0, F32, 64, 6, 2, 1);
    struct posenc_relbias_params p = {.q_offset = 5, .k_offset = 1};
    return posenc_relbias(s->ctx, &l, &tab, &dst, &p);
}

/* learned [8, 12 tokens, 3 batches] f32, f16 table: 384 bytes a batch, cut in launches of
 * 2 and 1 batches. On Vulkan the two take different pipelines of the vector path (one
 * batch: positions read once for it, specialization 2; two: per batch, 1), so the second
 * launch's pipeline must exist before the first launch writes. */
static posenc_status c_learned_cut(struct sc *s)
{
    posenc_tensor x = TC(s->b[0], 0, F32, 8, 12, 3, 1), pos = TC(s->b[1], 0, I32, 12, 3, 1, 1),
                  tab = TC(s->b[2], 0, F16, 8, 8, 1, 1), dst = TC(s->b[3], 0, F32, 8, 12, 3, 1);
    return posenc_learned(s->ctx, &x, &pos, &tab, &dst);
}

/* ALiBi [40, 6, 3 heads]: 960 bytes a head, one launch per head (its own slopes) */
static posenc_status c_alibi_cut(struct sc *s)
{
    posenc_tensor l = TC(s->b[0], 0, F32, 40, 6, 3, 1), dst = TC(s->b[3], 0, F32, 40, 6, 3, 1);
    struct posenc_alibi_params p = {.causal = 1, .q_offset = 2};
    return posenc_alibi(s->ctx, &l, &dst, &p);
}

/* RoPE with a DYNAMIC_NTK table, [16, 4 heads, 8 tokens] f32: cut along tokens and heads */
static posenc_status c_rope_cut(struct sc *s)
{
    posenc_tensor x = TC(s->b[0], 0, F32, 16, 4, 8, 1), pos = TC(s->b[1], 0, I32, 8, 1, 1, 1),
                  dst = TC(s->b[3], 0, F32, 16, 4, 8, 1);
    struct posenc_rope_params p = {.scaling = {.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK,
                                               .factor = 2.0f, .original_ctx = 4}};
    return posenc_rope(s->ctx, &x, &pos, &dst, &p);
}

static posenc_status c_decay(struct sc *s)
{
    struct posenc_attention_params p = {.encoding = POSENC_ATTENTION_ROPE};
    return posenc_attention_decay(s->ctx, 8, 6, 3, 11, &p, s->host_out);
}

/* posenc_buffer_wrap_host (issue #17): wrap the test's own memory, fill it (the host's
 * turn after the wrap), copy from it into an output, destroy. Vulkan: UNSUPPORTED. */
static posenc_status c_wrap_host(struct sc *s)
{
    static _Alignas(4096) unsigned char host[4096];
    posenc_buffer *b = NULL;
    posenc_status st = posenc_buffer_wrap_host(s->ctx, host, sizeof(host), &b);
    if (st != POSENC_OK)
        return st;
    memcpy(host, s->init[0], sizeof(host));
    posenc_tensor src = TC(b, 256, F32, 8, 4, 3, 1), dst = TC(s->b[3], 64, F16, 8, 4, 3, 1);
    st = posenc_copy(s->ctx, &src, &dst);
    posenc_buffer_destroy(&b);
    return st;
}

static const struct scenario scenarios[] = {
    {"buffers", prep_basic, c_buffers, 0, 0},
    {"copy", prep_basic, c_copy, 0, 0},
    {"sinusoidal", prep_basic, c_sin, 0, 0},
    {"rope LONGROPE, seq_len read back", prep_basic, c_rope_longrope, 0, 0},
    {"rope_qk M-RoPE YaRN", prep_basic, c_rope_qk_yarn, 0, 0},
    {"rope_rerotate dynamic NTK", prep_basic, c_rerotate_dyn, 0, 0},
    {"learned", prep_basic, c_learned, 0, 0},
    {"learned_backward", prep_basic, c_learned_bwd, 0, 0},
    {"sincos_2d", prep_basic, c_sincos2d, 1u << 3, 0},
    {"resize_2d", prep_basic, c_resize, 0, 0},
    {"relbias", prep_basic, c_relbias, 0, 0},
    {"relbias, 16 x 16 (laid out by relative position)", prep_basic, c_relbias_rows, 0, 0},
    {"relbias_backward", prep_basic, c_relbias_bwd, 0, 0},
    {"alibi", prep_basic, c_alibi, 0, 0},
    {"attention ROPE", prep_basic, c_attn_rope, 0, 0},
    {"attention LEARNED", prep_basic, c_attn_learned, 0, 0},
    {"attention RELBIAS", prep_basic, c_attn_relbias, 0, 0},
    {"attention ALIBI", prep_basic, c_attn_alibi, 0, 0},
    {"attention_decay", prep_basic, c_decay, 0, 0},
    {"attention one pass, key splits", prep_basic, c_attn_one_pass, 0, 0},
    {"attention ALIBI, 3 query blocks", prep_basic, c_attn_blocks_alibi, 0, 1024},
    {"attention RELBIAS, 3 query blocks", prep_basic, c_attn_blocks_relbias, 0, 1024},
    {"attention ROPE, 3 query blocks", prep_basic, c_attn_blocks_rope, 0, 1024},
    {"relbias cut in 4 launches", prep_basic, c_relbias_cut, 0, 1024},
    {"alibi cut in 3 launches", prep_basic, c_alibi_cut, 0, 1024},
    {"rope cut in several launches", prep_basic, c_rope_cut, 0, 1024},
    {"learned cut in 2 launches of two pipelines", prep_basic, c_learned_cut, 0, 1024},
    {"wrap_host", prep_basic, c_wrap_host, 0, 0},
};

static posenc_context *new_ctx(unsigned long max_binding)
{
    struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                      .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    char err[512], lim[32];
    snprintf(lim, sizeof(lim), "%lu", max_binding);
    if (max_binding)
        setenv("POSENC_MAX_BINDING", lim, 1);
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    unsetenv("POSENC_MAX_BINDING");
    if (st != POSENC_OK)
        fail_msg("context: %s: %s", posenc_status_string(st), err);
    return ctx;
}

/* Everything the outputs hold after a call (outputs and host outputs), except the
 * buffers in `skip`. */
static unsigned char *snapshot(struct sc *s, size_t *n, unsigned skip)
{
    size_t total = sizeof(s->host_out);
    for (int i = 0; i < NB; i++)
        if (s->b[i] && s->outs[i] && !(skip & (1u << i)))
            total += posenc_buffer_size(s->b[i]);
    unsigned char *img = malloc(total), *p = img;
    assert_non_null(img);
    for (int i = 0; i < NB; i++)
        if (s->b[i] && s->outs[i] && !(skip & (1u << i))) {
            assert_int_equal(posenc_buffer_read(s->b[i], 0, p, posenc_buffer_size(s->b[i])),
                             POSENC_OK);
            p += posenc_buffer_size(s->b[i]);
        }
    memcpy(p, s->host_out, sizeof(s->host_out));
    *n = total;
    return img;
}

/* mode 0: host allocations, 1: device buffers */
static void run_scenario(const struct scenario *scn, int mode)
{
    const size_t live0 = live_count();
    struct sc s;
    memset(&s, 0, sizeof(s));
    s.ctx = new_ctx(scn->max_binding);
    scn->prepare(&s);

    /* warm-up: caches (programs, pipelines, scratch) are made here */
    reset_bufs(&s);
    posenc_status st = scn->call(&s);
    if (st == POSENC_ERR_UNSUPPORTED) {
        printf("  %s: unsupported on this backend\n", scn->name);
        goto done;
    }
    assert_int_equal(st, POSENC_OK);
    size_t n_gold;
    unsigned char *gold = snapshot(&s, &n_gold, 0);
    reset_bufs(&s);
    assert_int_equal(scn->call(&s), POSENC_OK); /* caches full: the live count settles */
    assert_int_equal(posenc_context_finish(s.ctx), POSENC_OK);
    reset_bufs(&s);
    size_t n_poison;
    unsigned char *poison = snapshot(&s, &n_poison, scn->partial);
    const size_t live_warm = live_count();

    long n = 1, survived = 0;
    for (;; n++) {
        reset_bufs(&s);
        int hit;
        if (mode == 0) {
            arm_host(n);
            st = scn->call(&s);
            hit = disarm_host();
        } else {
            pe_fault_countdown = n;
            st = scn->call(&s);
            hit = pe_fault_countdown == 0;
            pe_fault_countdown = 0;
        }
        if (!hit) {
            assert_int_equal(st, POSENC_OK); /* the call needs fewer than n */
            break;
        }
        if (st != POSENC_ERR_OUT_OF_MEMORY)
            fail_msg("%s: %s fault %ld: status %s, want out of memory (message: %s)", scn->name,
                     mode ? "device" : "host", n, posenc_status_string(st),
                     posenc_context_last_error(s.ctx));
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", posenc_context_last_error(s.ctx));
        if (!msg[0])
            fail_msg("%s: fault %ld: out of memory without a message", scn->name, n);
        assert_int_equal(posenc_context_finish(s.ctx), POSENC_OK);
        size_t n_now;
        unsigned char *now = snapshot(&s, &n_now, scn->partial);
        if (n_now != n_poison || memcmp(now, poison, n_now) != 0)
            fail_msg("%s: %s fault %ld (%s): the failing call wrote to its output", scn->name,
                     mode ? "device" : "host", n, msg);
        free(now);
        size_t live = live_count();
        if (live > live_warm)
            fail_msg("%s: %s fault %ld: %zu blocks live after the failed call, %zu before "
                     "(a leak)", scn->name, mode ? "device" : "host", n, live, live_warm);
        /* the context still works, with the same results */
        reset_bufs(&s);
        st = scn->call(&s);
        if (st != POSENC_OK)
            fail_msg("%s: after fault %ld the call fails: %s (%s)", scn->name, n,
                     posenc_status_string(st), posenc_context_last_error(s.ctx));
        now = snapshot(&s, &n_now, 0);
        if (n_now != n_gold || memcmp(now, gold, n_now) != 0)
            fail_msg("%s: after fault %ld the results differ from the first run", scn->name, n);
        free(now);
        survived++;
        th_check_warnings();
    }
    printf("  %s: %ld %s faults survived\n", scn->name, survived, mode ? "device" : "host");
    faults_survived += survived;
    free(gold);
    free(poison);
done:
    for (int i = 0; i < NB; i++) {
        posenc_buffer_destroy(&s.b[i]);
        free(s.init[i]);
    }
    posenc_context_destroy(&s.ctx);
    th_check_warnings();
    size_t live_end = live_settled(live0);
    if (live_end != live0)
        fail_msg("%s: %zu blocks live after the context was destroyed, %zu before: %s",
                 scn->name, live_end, live0, live_end > live0 ? "a leak" : "freed too much");
}

/*
 * Program builds and pipeline creations (OpenCL, Vulkan; made on first use and kept by the
 * context): for n = 1, 2, ... a fresh context runs the scenario's call with its n-th build
 * failing. The call must return BACKEND with a message and leave every output byte as it
 * was (a multi-pass op must build what every pass uses before the first pass writes),
 * and the same call must then succeed on that context.
 */
static void run_scenario_builds(const struct scenario *scn)
{
    long survived = 0;
    for (long n = 1;; n++) {
        const size_t live0 = live_count();
        struct sc s;
        memset(&s, 0, sizeof(s));
        s.ctx = new_ctx(scn->max_binding);
        scn->prepare(&s);
        reset_bufs(&s);
        size_t n_poison;
        unsigned char *poison = snapshot(&s, &n_poison, scn->partial);
        pe_fault_build_countdown = n;
        posenc_status st = scn->call(&s);
        const int hit = pe_fault_build_countdown == 0;
        pe_fault_build_countdown = 0;
        int done = !hit;
        if (!hit && st == POSENC_ERR_UNSUPPORTED)
            printf("  %s: unsupported on this backend\n", scn->name);
        else if (!hit)
            assert_int_equal(st, POSENC_OK); /* the call builds fewer than n */
        else {
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", posenc_context_last_error(s.ctx));
            if (st != POSENC_ERR_BACKEND || !msg[0])
                fail_msg("%s: build fault %ld: status %s, want backend with a message (%s)",
                         scn->name, n, posenc_status_string(st), msg);
            assert_int_equal(posenc_context_finish(s.ctx), POSENC_OK);
            size_t n_now;
            unsigned char *now = snapshot(&s, &n_now, scn->partial);
            if (n_now != n_poison || memcmp(now, poison, n_now) != 0)
                fail_msg("%s: build fault %ld (%s): the failing call wrote to its output",
                         scn->name, n, msg);
            free(now);
            reset_bufs(&s);
            st = scn->call(&s);
            if (st != POSENC_OK)
                fail_msg("%s: after build fault %ld the call fails: %s (%s)", scn->name, n,
                         posenc_status_string(st), posenc_context_last_error(s.ctx));
            survived++;
            th_check_warnings();
        }
        free(poison);
        for (int i = 0; i < NB; i++) {
            posenc_buffer_destroy(&s.b[i]);
            free(s.init[i]);
        }
        posenc_context_destroy(&s.ctx);
        th_check_warnings();
        if (live_settled(live0) != live0)
            fail_msg("%s: build fault %ld: %zu blocks live after the context was destroyed, "
                     "%zu before", scn->name, n, live_count(), live0);
        if (done)
            break;
    }
    printf("  %s: %ld build faults survived\n", scn->name, survived);
    faults_survived += survived;
}

/* A cut op whose launches use different program variants: ALiBi [1024 keys, 3072 queries,
 * 5 heads] f32 (60 MiB, no logits) under a 24 MiB binding limit runs as launches of 2, 2
 * and 1 heads; on CPU OpenCL devices (PoCL) the 24 MiB launches use non-temporal stores
 * (-DPE_NT_STORE=1, from 16 MiB) and the last 12 MiB one does not, so its program is first
 * used after two launches wrote dst. Only the builds test runs it (it is large). */
#define BIG_K 1024
#define BIG_Q 3072
#define BIG_H 5
static void prep_big(struct sc *s)
{
    mkbuf(s, 3, (size_t)4 * BIG_K * BIG_Q * BIG_H, 1, 0);
}

static posenc_status c_alibi_cut_variants(struct sc *s)
{
    posenc_tensor dst = TC(s->b[3], 0, F32, BIG_K, BIG_Q, BIG_H, 1);
    struct posenc_alibi_params p = {.causal = 1, .q_offset = 2};
    return posenc_alibi(s->ctx, NULL, &dst, &p);
}

static const struct scenario build_scenarios[] = {
    {"alibi cut in 3 launches of two program variants", prep_big, c_alibi_cut_variants, 0,
     24ul << 20},
};

static void test_scenarios_builds(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
        run_scenario_builds(&scenarios[i]);
    for (size_t i = 0; i < sizeof(build_scenarios) / sizeof(build_scenarios[0]); i++)
        run_scenario_builds(&build_scenarios[i]);
}

/*
 * A full OpenCL program cache (shrunk to 4 programs): posenc_attention with ALiBi in 3
 * query blocks needs 4 programs (softmax, the f32 packs of v and of the output, the ALiBi
 * kernel). Before the armed call the cache is brought into a state where attn_prepare's
 * programs are cached and the ALiBi one is not: the warm-up call, k1 other ops, the same
 * attention without a bias (which rebuilds its programs over the ALiBi one), k2 other ops.
 * For each (k1, k2) and n, the n-th build of the armed call fails: nothing written, and
 * the call then succeeds. Without pinning, the ALiBi build of the first block could evict
 * a prepared program, rebuilt only after the softmax wrote weights.
 */
static posenc_status c_attn_blocks_none(struct sc *s)
{
    return attention_blocks(s, POSENC_ATTENTION_NONE);
}

static void test_program_cache_full(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_OPENCL || !&pe_cl_program_cap) {
        printf("  (OpenCL only)\n");
        return;
    }
    static const call_fn others[] = {c_copy, c_sin, c_learned, c_resize};
    long survived = 0;
    for (int k1 = 0; k1 <= 2; k1++)
        for (int k2 = 0; k2 <= 3; k2++)
            for (long n = 1;; n++) {
                const size_t live0 = live_count();
                struct sc s;
                memset(&s, 0, sizeof(s));
                s.ctx = new_ctx(1024);
                pe_cl_program_cap = 4;
                prep_basic(&s);
                reset_bufs(&s);
                assert_int_equal(c_attn_blocks_alibi(&s), POSENC_OK);
                for (int i = 0; i < k1; i++)
                    assert_int_equal(others[i](&s), POSENC_OK);
                assert_int_equal(c_attn_blocks_none(&s), POSENC_OK);
                for (int i = 0; i < k2; i++)
                    assert_int_equal(others[(k1 + i) % 4](&s), POSENC_OK);
                assert_int_equal(posenc_context_finish(s.ctx), POSENC_OK);
                reset_bufs(&s);
                size_t n_poison;
                unsigned char *poison = snapshot(&s, &n_poison, 0);
                pe_fault_build_countdown = n;
                posenc_status st = c_attn_blocks_alibi(&s);
                const int hit = pe_fault_build_countdown == 0;
                pe_fault_build_countdown = 0;
                if (hit) {
                    if (st != POSENC_ERR_BACKEND)
                        fail_msg("full cache (%d, %d): build fault %ld: %s (%s)", k1, k2, n,
                                 posenc_status_string(st), posenc_context_last_error(s.ctx));
                    char msg[512];
                    snprintf(msg, sizeof(msg), "%s", posenc_context_last_error(s.ctx));
                    assert_int_equal(posenc_context_finish(s.ctx), POSENC_OK);
                    size_t n_now;
                    unsigned char *now = snapshot(&s, &n_now, 0);
                    if (n_now != n_poison || memcmp(now, poison, n_now) != 0)
                        fail_msg("full cache (%d, %d): build fault %ld (%s): the failing call "
                                 "wrote to its output", k1, k2, n, msg);
                    free(now);
                    reset_bufs(&s);
                    assert_int_equal(c_attn_blocks_alibi(&s), POSENC_OK);
                    survived++;
                } else {
                    assert_int_equal(st, POSENC_OK);
                }
                pe_cl_program_cap = 0;
                free(poison);
                for (int i = 0; i < NB; i++) {
                    posenc_buffer_destroy(&s.b[i]);
                    free(s.init[i]);
                }
                posenc_context_destroy(&s.ctx);
                th_check_warnings();
                if (live_settled(live0) != live0)
                    fail_msg("full cache: %zu blocks live after the context was destroyed, "
                             "%zu before", live_count(), live0);
                if (!hit)
                    break;
            }
    printf("  attention ALIBI, 3 query blocks, full program cache: %ld build faults "
           "survived\n", survived);
    faults_survived += survived;
}

static void test_scenarios_host(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
        run_scenario(&scenarios[i], 0);
}

/* Device faults with nothing kept by the scratch (src/scratch.c; pe_scratch_keep = 0): the
 * composite ops then make every temporary per call, and each of those allocations fails in
 * turn. (With the default, the warm-up calls leave the temporaries kept and a faulted call
 * makes none; the scratch's own fallbacks are tested in test_queue.c.) */
static void test_scenarios_device(void **state)
{
    (void)state;
    const size_t keep = pe_scratch_keep;
    pe_scratch_keep = 0;
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
        run_scenario(&scenarios[i], 1);
    pe_scratch_keep = keep;
}

/* Context creation: a failure at every host allocation returns OUT_OF_MEMORY with the
 * reason in the error buffer, and leaves nothing allocated. */
static void test_context_create(void **state)
{
    (void)state;
    long survived = 0, absorbed = 0;
    for (long n = 1;; n++) {
        const size_t live0 = live_count();
        struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                          .log_fn = th_log, .log_level = POSENC_LOG_WARN};
        posenc_context *ctx = (posenc_context *)&p;
        char err[512] = "";
        arm_host(n);
        posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
        int hit = disarm_host();
        if (!hit) {
            assert_int_equal(st, POSENC_OK);
            posenc_context_destroy(&ctx);
            break;
        }
        if (st == POSENC_OK) {
            /* An optional query whose allocation failed: the backends treat it as "not
             * present" (OpenCL's extension list, Vulkan's instance extensions and layers:
             * without the list the validation layer is reported missing, as a WARN). The
             * context must work and free everything. */
            posenc_buffer *b = NULL;
            assert_int_equal(posenc_buffer_create(ctx, 64, &b), POSENC_OK);
            posenc_buffer_destroy(&b);
            posenc_context_destroy(&ctx);
            if (live_count() != live0)
                fail_msg("context create: absorbed fault %ld: %zu blocks leaked", n,
                         live_count() - live0);
            th.warnings = 0;
            absorbed++;
            continue;
        }
        if (st != POSENC_ERR_OUT_OF_MEMORY)
            fail_msg("context create: fault %ld: %s, want out of memory (%s)", n,
                     posenc_status_string(st), err);
        assert_null(ctx);
        if (!err[0])
            fail_msg("context create: fault %ld: no message", n);
        if (live_count() != live0)
            fail_msg("context create: fault %ld: %zu blocks leaked (%s)", n,
                     live_count() - live0, err);
        survived++;
        th_check_warnings();
    }
    printf("  context create: %ld host faults survived (%ld of them absorbed by optional "
           "queries)\n", survived + absorbed, absorbed);
    survived += absorbed;
    faults_survived += survived;
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "faults");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_create),
        cmocka_unit_test(test_scenarios_host),
        cmocka_unit_test(test_scenarios_device),
        cmocka_unit_test(test_scenarios_builds),
        cmocka_unit_test(test_program_cache_full),
    };
    rc = th_run("faults", tests, sizeof(tests) / sizeof(tests[0]));
    printf("faults on %s: %ld injected faults survived\n", posenc_backend_name(th.kind),
           faults_survived);
    th_fini();
    return rc;
}
