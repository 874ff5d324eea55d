/*
 * test_bad_input.c - the bad-input matrix: every public call with broken arguments, on one
 * backend (--backend NAME).
 *
 * One table drives it (bad_input_rows.c; the types in bad_input.h). A row names an op, a few mutations of a valid "base" call of that
 * op (tensor fields, params fields, scalars, NULL handles) and what must come back: the
 * exact status, and a substring of the message (posenc_context_last_error, or the error
 * buffer of posenc_context_create / posenc_backend_device_count) that names the argument
 * and its value. Host-only helpers (posenc_rope_freqs, posenc_alibi_slopes, ...) have no
 * context to carry a message: their rows check the status only.
 *
 * Around every row all output buffers are poisoned (0xA5) and every device buffer and host
 * output is compared afterwards: a failing call, and a valid call on an empty tensor, must
 * leave every byte as it was (the poisoned buffers double as guard regions around the
 * output views). Valid rows (R_WRITES) may return POSENC_ERR_UNSUPPORTED on a backend that
 * lacks the op; bad-input rows never may, since the front end validates before dispatch.
 * R_LATE rows are errors an encoding inside posenc_attention reports after the backend's
 * attention support is known: UNSUPPORTED is accepted there only where the backend's base
 * attention call was UNSUPPORTED too.
 *
 * Besides the hand-written rows, every tensor argument of every op gets the same battery
 * of descriptor faults (NULL, NULL buffer, another context's buffer, an orphaned buffer,
 * unknown dtype, negative ne / nb, misaligned nb / offset, views past the buffer, ne x nb
 * and element counts overflowing 64 bits, overlapping output strides).
 */
#include "harness.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_input.h"

/* ---- the fixture's buffers and the ops' signatures ---------------------------------- */

/* Sizes of the fixture's buffers (bad_input.h). */
static const size_t buf_size[B_COUNT] = {8192, 1024, 4096, 8192, 4096, 8192, 8192};
#define POISON 0xA5
#define TB_LEN(a) (sizeof(a) / sizeof((a)[0]))

enum { MSG_CTX = 0, MSG_ERRBUF = 1, MSG_NONE = 2 };

#define AF_OUT 1u  /* an output tensor (overlap checks apply) */
#define AF_OPT 2u  /* NULL is a valid value (optional input / output) */
#define AF_PAR 4u  /* a tensor passed inside the params (attention): needs enabling */

struct argdef {
    const char *name;
    unsigned flags;
};

struct opdef {
    const char *name;
    int msg;            /* where the message is */
    int n_args;
    struct argdef args[10];
};

static const struct opdef opdefs[OP_COUNT] = {
    [OP_CTX_CREATE] = {"context_create", MSG_ERRBUF, 0, {{0}}},
    [OP_DEV_COUNT] = {"backend_device_count", MSG_ERRBUF, 0, {{0}}},
    [OP_GET_INFO] = {"context_get_info", MSG_CTX, 0, {{0}}},
    [OP_FINISH] = {"context_finish", MSG_CTX, 0, {{0}}},
    [OP_BUF_CREATE] = {"buffer_create", MSG_CTX, 0, {{0}}},
    [OP_BUF_WRITE] = {"buffer_write", MSG_CTX, 0, {{0}}},
    [OP_BUF_READ] = {"buffer_read", MSG_CTX, 0, {{0}}},
    [OP_COPY] = {"copy", MSG_CTX, 2, {{"src", 0}, {"dst", AF_OUT}}},
    [OP_SIN] = {"sinusoidal", MSG_CTX, 3, {{"x", AF_OPT}, {"pos", 0}, {"dst", AF_OUT}}},
    [OP_SIN_FREQS] = {"sinusoidal_freqs", MSG_NONE, 0, {{0}}},
    [OP_ROPE_FREQS] = {"rope_freqs", MSG_NONE, 0, {{0}}},
    [OP_GGML] = {"rope_params_from_ggml", MSG_NONE, 0, {{0}}},
    [OP_ROPE] = {"rope", MSG_CTX, 3, {{"x", 0}, {"pos", 0}, {"dst", AF_OUT}}},
    [OP_ROPE_QK] = {"rope_qk", MSG_CTX, 5,
                    {{"q", 0}, {"k", 0}, {"pos", 0}, {"q_out", AF_OUT}, {"k_out", AF_OUT}}},
    [OP_REROT] = {"rope_rerotate", MSG_CTX, 4,
                  {{"k", 0}, {"pos_from", 0}, {"pos_to", 0}, {"dst", AF_OUT}}},
    [OP_LEARNED] = {"learned", MSG_CTX, 4,
                    {{"x", AF_OPT}, {"pos", 0}, {"table", 0}, {"dst", AF_OUT}}},
    [OP_LEARNED_BWD] = {"learned_backward", MSG_CTX, 3,
                        {{"dy", 0}, {"pos", 0}, {"dtable", AF_OUT}}},
    [OP_SINCOS2D] = {"sincos_2d", MSG_CTX, 1, {{"dst", AF_OUT}}},
    [OP_RESIZE] = {"resize_2d", MSG_CTX, 2, {{"src", 0}, {"dst", AF_OUT}}},
    [OP_BUCKET] = {"relbias_bucket", MSG_NONE, 0, {{0}}},
    [OP_RELBIAS] = {"relbias", MSG_CTX, 3, {{"logits", AF_OPT}, {"table", 0}, {"dst", AF_OUT}}},
    [OP_RELBIAS_BWD] = {"relbias_backward", MSG_CTX, 2, {{"dlogits", 0}, {"dtable", AF_OUT}}},
    [OP_SLOPES] = {"alibi_slopes", MSG_NONE, 0, {{0}}},
    [OP_ALIBI] = {"alibi", MSG_CTX, 2, {{"logits", AF_OPT}, {"dst", AF_OUT}}},
    [OP_ATTN] = {"attention", MSG_CTX, 10,
                 {{"q", 0},
                  {"k", 0},
                  {"v", 0},
                  {"dst", AF_OUT},
                  {"weights", AF_OUT | AF_OPT},
                  {"params->mask", AF_PAR},
                  {"params->q_pos", AF_PAR},
                  {"params->k_pos", AF_PAR},
                  {"params->learned_table", AF_PAR},
                  {"params->relbias_table", AF_PAR}}},
    [OP_DECAY] = {"attention_decay", MSG_CTX, 0, {{0}}},
};

/* ---- one call -------------------------------------------------------------------------- */

union hostout {
    unsigned char bytes[4096];
    double d[512];
    struct posenc_rope_params rp;
};

struct call {
    enum op op;
    int ctx_null;
    int params_null, params2_null;
    int hout_null;      /* the host output pointer is NULL */
    posenc_tensor t[10];
    int present[10];
    int64_t sc[4];      /* scalar arguments (sizes, head_dim, rel, ...) */
    int buf;            /* buffer_write / buffer_read: which fixture buffer (-1: NULL) */
    struct posenc_context_params cp;
    struct posenc_sinusoidal_params sin;
    struct posenc_rope_params rope, rope2;
    int32_t ggml[15];
    struct posenc_2d_params g2;
    struct posenc_resize_params rs;
    struct posenc_relbias_params rb;
    struct posenc_alibi_params al;
    struct posenc_attention_params at;
};

static const float tb_ones[64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static float tb_nan[64], tb_neg[64], tb_zero[64], tb_inf[64];
static const uint8_t tb_u8_bad[64] = {0, 7, 1, 1};
static const float tb_slopes[64] = {0.5f, 0.25f, 0.125f, 0.0625f, 0.5f, 0.5f, 0.5f, 0.5f};

static const void *table_ptr(int64_t which)
{
    switch (which) {
    case TB_ONES: return tb_ones;
    case TB_NAN: return tb_nan;
    case TB_NEG: return tb_neg;
    case TB_ZERO: return tb_zero;
    case TB_INF: return tb_inf;
    case TB_U8_BAD: return tb_u8_bad;
    case TB_SLOPES: return tb_slopes;
    default: return NULL;
    }
}


/* The descriptor battery applied to every tensor argument of every op. `needle` is a
 * format with one %s: the argument's name. */
enum {
    BAT_NULL,
    BAT_BUFNULL,
    BAT_FOREIGN,
    BAT_ORPHAN,
    BAT_DTYPE9,
    BAT_DTYPEM1,
    BAT_NENEG,
    BAT_NBNEG,
    BAT_NBODD,
    BAT_OFFODD,
    BAT_PAST,
    BAT_OFFMAX,
    BAT_NEOVF,
    BAT_NBOVF,
    BAT_OVERLAP,
    BAT_COUNT
};

static const struct battery {
    const char *what;
    const char *needle;
    int out_only;
    struct tmut t[2];
} battery[BAT_COUNT] = {
    [BAT_NULL] = {"NULL", "%s is NULL", 0, {{TM_NULL, 0, 0, 0}}},
    [BAT_BUFNULL] = {"buffer NULL", "%s->buffer is NULL", 0, {{TM_BUFNULL, 0, 0, 0}}},
    [BAT_FOREIGN] = {"buffer of another context", "%s->buffer belongs to another context", 0,
                     {{TM_BUF, 0, 0, B_FOREIGN}}},
    [BAT_ORPHAN] = {"buffer of a destroyed context",
                    "%s->buffer belongs to a context that was destroyed", 0,
                    {{TM_BUF, 0, 0, B_ORPHAN}}},
    [BAT_DTYPE9] = {"dtype 9", "%s->dtype = 9 is not a posenc_dtype", 0,
                    {{TM_DTYPE, 0, 0, 9}}},
    [BAT_DTYPEM1] = {"dtype -1", "%s->dtype = -1 is not a posenc_dtype", 0,
                     {{TM_DTYPE, 0, 0, -1}}},
    [BAT_NENEG] = {"ne[2] -1", "%s->ne[2] = -1 is negative", 0, {{TM_NE, 0, 2, -1}}},
    [BAT_NBNEG] = {"nb[1] backwards", "%s->nb[1] = -4 is negative (strides may not go backwards)",
                   0, {{TM_NB, 0, 1, -4}}},
    [BAT_NBODD] = {"nb[0] 3", "%s->nb[0] = 3 is not a multiple of the", 0, {{TM_NB, 0, 0, 3}}},
    [BAT_OFFODD] = {"offset 2", "%s->offset = 2 is not a multiple of the", 0,
                    {{TM_OFF, 0, 0, 2}}},
    [BAT_PAST] = {"view past the buffer", "%s runs past its buffer", 0,
                  {{TM_OFF_END, 0, 0, 0}}},
    [BAT_OFFMAX] = {"offset near SIZE_MAX", "%s runs past its buffer", 0,
                    {{TM_OFF, 0, 0, -4}}},
    [BAT_NEOVF] = {"element count overflows int64", "%s has ", 0,
                   {{TM_NE, 0, 2, (int64_t)1 << 40}, {TM_NE, 0, 3, (int64_t)1 << 40}}},
    [BAT_NBOVF] = {"ne x nb overflows 64 bits", "ne[3]*nb[3] = 1099511627776*1099511627776 "
                   "overflows 64 bits", 0,
                   {{TM_NE, 0, 3, (int64_t)1 << 40}, {TM_NB, 0, 3, (int64_t)1 << 40}}},
    [BAT_OVERLAP] = {"output elements overlap", "%s->nb[", 1, {{TM_OVERLAP, 0, 0, 0}}},
};

/* ---- the fixture ------------------------------------------------------------------------ */

static posenc_buffer *bufs[B_COUNT];
static unsigned char *host_img[B_COUNT]; /* what each buffer must hold between rows */
static posenc_context *orphan_ctx_gone;
static int op_supported[OP_COUNT];
static int n_rows_run, n_unsupported;

struct built_row {
    struct row r;
    char needle[160];
    char name[200];
};
static struct built_row *rows;
static size_t n_rows;

static void upload(int b)
{
    assert_int_equal(posenc_buffer_write(bufs[b], 0, host_img[b], buf_size[b]), POSENC_OK);
}

static int setup_fixture(void)
{
    for (int i = 0; i < 64; i++) {
        tb_nan[i] = i == 1 ? NAN : 1.0f;
        tb_neg[i] = i == 1 ? -1.0f : 1.0f;
        tb_zero[i] = i == 1 ? 0.0f : 1.0f;
        tb_inf[i] = i == 1 ? INFINITY : 1.0f;
    }
    for (int b = 0; b < B_COUNT; b++) {
        host_img[b] = malloc(buf_size[b]);
        if (!host_img[b])
            return -1;
        memset(host_img[b], POISON, buf_size[b]);
    }
    /* inputs: small dyadic floats */
    for (int b = 0; b < B_COUNT; b++) {
        if (b != B_IN && b != B_TAB && b != B_FOREIGN && b != B_ORPHAN)
            continue;
        for (size_t i = 0; i < buf_size[b] / 4; i++) {
            float v = (float)((int)(i % 17) - 8) * 0.125f;
            memcpy(host_img[b] + 4 * i, &v, 4);
        }
    }
    /* positions: [0,256) i32 t%4, [256,512) f32 0.5*t, [512,768) i32 with an 8 at index 2,
     * [768,1024) i32 with a -1 at index 1 */
    unsigned char *p = host_img[B_POS];
    for (int i = 0; i < 64; i++) {
        int32_t v = i % 4;
        float f = 0.5f * (float)(i % 4);
        int32_t bad = i == 2 ? 8 : i % 4;
        int32_t neg = i == 1 ? -1 : i % 4;
        memcpy(p + 4 * i, &v, 4);
        memcpy(p + 256 + 4 * i, &f, 4);
        memcpy(p + 512 + 4 * i, &bad, 4);
        memcpy(p + 768 + 4 * i, &neg, 4);
    }
    for (int b = 0; b < B_COUNT; b++) {
        posenc_context *owner = b == B_FOREIGN ? th.ref : th.dut;
        if (b == B_ORPHAN) {
            /* a buffer whose context is gone: posenc_context_destroy orphans it */
            struct posenc_context_params cp = {.backend = POSENC_BACKEND_CPU};
            if (posenc_context_create(&cp, &orphan_ctx_gone, NULL, 0) != POSENC_OK)
                return -1;
            owner = orphan_ctx_gone;
        }
        if (posenc_buffer_create(owner, buf_size[b], &bufs[b]) != POSENC_OK)
            return -1;
        if (posenc_buffer_write(bufs[b], 0, host_img[b], buf_size[b]) != POSENC_OK)
            return -1;
    }
    posenc_context_destroy(&orphan_ctx_gone); /* logs the orphan at ERROR; no callback */
    for (int i = 0; i < OP_COUNT; i++)
        op_supported[i] = 1;
    return 0;
}

static void teardown_fixture(void)
{
    for (int b = 0; b < B_COUNT; b++) {
        posenc_buffer_destroy(&bufs[b]);
        free(host_img[b]);
        host_img[b] = NULL;
    }
}

/* ---- building a call ----------------------------------------------------------------------- */

static posenc_tensor tens(int b, size_t off, posenc_dtype dt, int64_t n0, int64_t n1, int64_t n2,
                          int64_t n3)
{
    return posenc_tensor_contiguous(bufs[b], off, dt, n0, n1, n2, n3);
}

#define F32 POSENC_DTYPE_F32
#define I32 POSENC_DTYPE_I32

static void set_t(struct call *c, int i, posenc_tensor t, int present)
{
    c->t[i] = t;
    c->present[i] = present;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void base_call(struct call *c, enum op op)
{
    memset(c, 0, sizeof(*c));
    c->op = op;
    switch (op) {
    case OP_CTX_CREATE: c->cp.backend = th.kind; break;
    case OP_DEV_COUNT: c->sc[0] = th.kind; break;
    case OP_BUF_CREATE: c->sc[0] = 64; break;
    case OP_BUF_WRITE:
        c->buf = B_OUT;
        c->sc[0] = 16;
        c->sc[1] = 16;
        break;
    case OP_BUF_READ:
        c->buf = B_IN;
        c->sc[0] = 0;
        c->sc[1] = 64;
        break;
    case OP_COPY:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 4, 2, 1), 1);
        set_t(c, 1, tens(B_OUT, 256, F32, 8, 4, 2, 1), 1);
        break;
    case OP_SIN:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 4, 2, 1), 1);
        set_t(c, 1, tens(B_POS, 0, I32, 4, 1, 1, 1), 1);
        set_t(c, 2, tens(B_OUT, 256, F32, 8, 4, 2, 1), 1);
        break;
    case OP_SIN_FREQS: c->sc[0] = 8; break;
    case OP_ROPE_FREQS: c->sc[0] = 8; break;
    case OP_GGML: {
        const int32_t g[15] = {0, 8, 0, 4096, 0, (int32_t)fbits(10000.0f), (int32_t)fbits(1.0f),
                               0, (int32_t)fbits(1.0f), (int32_t)fbits(32.0f),
                               (int32_t)fbits(1.0f), 0, 0, 0, 0};
        memcpy(c->ggml, g, sizeof(g));
        c->sc[0] = 8;
        break;
    }
    case OP_ROPE:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 2, 4, 2), 1);
        set_t(c, 1, tens(B_POS, 0, I32, 4, 1, 1, 1), 1);
        set_t(c, 2, tens(B_OUT, 256, F32, 8, 2, 4, 2), 1);
        break;
    case OP_ROPE_QK:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 2, 4, 2), 1);
        set_t(c, 1, tens(B_IN, 2048, F32, 8, 1, 4, 2), 1);
        set_t(c, 2, tens(B_POS, 0, I32, 4, 1, 1, 1), 1);
        set_t(c, 3, tens(B_OUT, 256, F32, 8, 2, 4, 2), 1);
        set_t(c, 4, tens(B_OUT2, 256, F32, 8, 1, 4, 2), 1);
        break;
    case OP_REROT:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 2, 4, 2), 1);
        set_t(c, 1, tens(B_POS, 0, I32, 4, 1, 1, 1), 1);
        set_t(c, 2, tens(B_POS, 4, I32, 4, 1, 1, 1), 1);
        set_t(c, 3, tens(B_OUT, 256, F32, 8, 2, 4, 2), 1);
        break;
    case OP_LEARNED:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 4, 2, 1), 1);
        set_t(c, 1, tens(B_POS, 0, I32, 4, 1, 1, 1), 1);
        set_t(c, 2, tens(B_TAB, 0, F32, 8, 8, 1, 1), 1);
        set_t(c, 3, tens(B_OUT, 256, F32, 8, 4, 2, 1), 1);
        break;
    case OP_LEARNED_BWD:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 4, 2, 1), 1);
        set_t(c, 1, tens(B_POS, 0, I32, 4, 1, 1, 1), 1);
        set_t(c, 2, tens(B_OUT, 256, F32, 8, 8, 1, 1), 1);
        break;
    case OP_SINCOS2D:
        c->sc[0] = 2;
        c->sc[1] = 3;
        set_t(c, 0, tens(B_OUT, 256, F32, 8, 6, 1, 1), 1);
        break;
    case OP_RESIZE:
        c->sc[0] = c->sc[1] = 2;
        c->sc[2] = c->sc[3] = 3;
        set_t(c, 0, tens(B_TAB, 0, F32, 8, 4, 1, 1), 1);
        set_t(c, 1, tens(B_OUT, 256, F32, 8, 9, 1, 1), 1);
        break;
    case OP_BUCKET: c->sc[0] = 5; break;
    case OP_RELBIAS:
        set_t(c, 0, tens(B_IN, 0, F32, 4, 4, 2, 1), 1);
        set_t(c, 1, tens(B_TAB, 2048, F32, 32, 2, 1, 1), 1);
        set_t(c, 2, tens(B_OUT, 256, F32, 4, 4, 2, 1), 1);
        break;
    case OP_RELBIAS_BWD:
        set_t(c, 0, tens(B_IN, 0, F32, 4, 4, 2, 1), 1);
        set_t(c, 1, tens(B_OUT, 256, F32, 32, 2, 1, 1), 1);
        break;
    case OP_SLOPES: c->sc[0] = 8; break;
    case OP_ALIBI:
        set_t(c, 0, tens(B_IN, 0, F32, 4, 4, 2, 1), 1);
        set_t(c, 1, tens(B_OUT, 256, F32, 4, 4, 2, 1), 1);
        break;
    case OP_ATTN:
    case OP_DECAY:
        set_t(c, 0, tens(B_IN, 0, F32, 8, 2, 4, 1), op == OP_ATTN);
        set_t(c, 1, tens(B_IN, 2048, F32, 8, 1, 4, 1), op == OP_ATTN);
        set_t(c, 2, tens(B_IN, 4096, F32, 8, 1, 4, 1), op == OP_ATTN);
        set_t(c, 3, tens(B_OUT, 256, F32, 8, 2, 4, 1), op == OP_ATTN);
        set_t(c, 4, tens(B_OUT2, 256, F32, 4, 4, 2, 1), op == OP_ATTN);
        set_t(c, 5, tens(B_IN, 6144, F32, 4, 4, 1, 1), 0);
        set_t(c, 6, tens(B_POS, 0, I32, 4, 1, 1, 1), 0);
        set_t(c, 7, tens(B_POS, 0, I32, 4, 1, 1, 1), 0);
        set_t(c, 8, tens(B_TAB, 0, F32, 8, 8, 1, 1), 0);
        set_t(c, 9, tens(B_TAB, 2048, F32, 32, 2, 1, 1), 0);
        c->sc[0] = 8;
        c->sc[1] = 4;
        c->sc[2] = 2;
        break;
    default: break;
    }
}

static void apply_tmut(struct call *c, const struct tmut *m)
{
    posenc_tensor *t = &c->t[m->arg];
    switch (m->kind) {
    case TM_NONE: break;
    case TM_NULL: c->present[m->arg] = 0; break;
    case TM_ON: c->present[m->arg] = 1; break;
    case TM_BUFNULL: t->buffer = NULL; break;
    case TM_BUF: t->buffer = bufs[m->v]; break;
    case TM_DTYPE: t->dtype = (posenc_dtype)m->v; break;
    case TM_NE: t->ne[m->dim] = m->v; break;
    case TM_NEC:
        t->ne[m->dim] = m->v;
        *t = posenc_tensor_contiguous(t->buffer, t->offset, t->dtype, t->ne[0], t->ne[1],
                                      t->ne[2], t->ne[3]);
        break;
    case TM_NB: t->nb[m->dim] = m->v; break;
    case TM_OFF: t->offset = (size_t)m->v; break;
    case TM_OFF_END: t->offset = posenc_buffer_size(t->buffer); break;
    case TM_OVERLAP:
        for (int d = 1; d < 4; d++)
            if (t->ne[d] > 1) {
                t->nb[d] = t->nb[0];
                break;
            }
        break;
    case TM_ALIAS: {
        posenc_tensor src = c->t[m->dim];
        src.offset += (size_t)m->v;
        *t = src;
        c->present[m->arg] = 1;
        break;
    }
    }
}

static void *param_struct(struct call *c, int pidx)
{
    switch (c->op) {
    case OP_CTX_CREATE: return &c->cp;
    case OP_SIN:
    case OP_SIN_FREQS: return &c->sin;
    case OP_ROPE_FREQS:
    case OP_ROPE:
    case OP_ROPE_QK:
    case OP_REROT: return pidx ? &c->rope2 : &c->rope;
    case OP_GGML: return c->ggml;
    case OP_SINCOS2D: return &c->g2;
    case OP_RESIZE: return &c->rs;
    case OP_BUCKET:
    case OP_RELBIAS:
    case OP_RELBIAS_BWD: return &c->rb;
    case OP_SLOPES:
    case OP_ALIBI: return &c->al;
    case OP_ATTN:
    case OP_DECAY: return &c->at;
    default: return NULL;
    }
}

static void apply_pmut(struct call *c, const struct pmut *m)
{
    unsigned char *ps = param_struct(c, m->pidx);
    switch (m->kind) {
    case PK_NONE: break;
    case PK_F32: {
        float f = (float)m->f;
        memcpy(ps + m->off, &f, 4);
        break;
    }
    case PK_I32: {
        int32_t v = (int32_t)m->i;
        memcpy(ps + m->off, &v, 4);
        break;
    }
    case PK_U32: {
        uint32_t v = (uint32_t)m->i;
        memcpy(ps + m->off, &v, 4);
        break;
    }
    case PK_PTR: {
        const void *p = table_ptr(m->i);
        memcpy(ps + m->off, &p, sizeof(p));
        break;
    }
    case PK_SC: c->sc[m->pidx] = m->i; break;
    case PK_CTX_NULL: c->ctx_null = 1; break;
    case PK_PARAMS_NULL:
        if (m->pidx)
            c->params2_null = 1;
        else
            c->params_null = 1;
        break;
    case PK_HOUT_NULL: c->hout_null = 1; break;
    case PK_BUF: c->buf = (int)m->i; break;
    }
}

/* ---- running a call ---------------------------------------------------------------------- */

static union hostout hout;
static char errbuf[512];

static posenc_status do_call(struct call *c)
{
    posenc_context *ctx = c->ctx_null ? NULL : th.dut;
    const posenc_tensor *T[10];
    for (int i = 0; i < 10; i++)
        T[i] = c->present[i] ? &c->t[i] : NULL;
    void *ho = c->hout_null ? NULL : (void *)hout.bytes;
    errbuf[0] = '\0';
    switch (c->op) {
    case OP_CTX_CREATE: {
        posenc_context *nc = (posenc_context *)&hout;
        posenc_status st = posenc_context_create(&c->cp, c->hout_null ? NULL : &nc, errbuf,
                                                 sizeof(errbuf));
        if (st == POSENC_OK)
            posenc_context_destroy(&nc);
        else if (!c->hout_null && nc != NULL)
            fail_msg("posenc_context_create failed but did not set *out_ctx to NULL");
        return st;
    }
    case OP_DEV_COUNT:
        return posenc_backend_device_count((posenc_backend_kind)c->sc[0], ho, errbuf,
                                           sizeof(errbuf));
    case OP_GET_INFO: {
        struct posenc_device_info info;
        return posenc_context_get_info(ctx, c->hout_null ? NULL : &info);
    }
    case OP_FINISH: return posenc_context_finish(ctx);
    case OP_BUF_CREATE: {
        posenc_buffer *b = (posenc_buffer *)&hout;
        posenc_status st = posenc_buffer_create(ctx, (size_t)c->sc[0], c->hout_null ? NULL : &b);
        if (st == POSENC_OK)
            posenc_buffer_destroy(&b);
        else if (!c->hout_null && b != NULL)
            fail_msg("posenc_buffer_create failed but did not set *out_buffer to NULL");
        return st;
    }
    case OP_BUF_WRITE: {
        static const unsigned char src[64] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
        return posenc_buffer_write(c->buf < 0 ? NULL : bufs[c->buf], (size_t)c->sc[0],
                                   c->hout_null ? NULL : src, (size_t)c->sc[1]);
    }
    case OP_BUF_READ:
        return posenc_buffer_read(c->buf < 0 ? NULL : bufs[c->buf], (size_t)c->sc[0], ho,
                                  (size_t)c->sc[1]);
    case OP_COPY: return posenc_copy(ctx, T[0], T[1]);
    case OP_SIN: return posenc_sinusoidal(ctx, T[0], T[1], T[2], c->params_null ? NULL : &c->sin);
    case OP_SIN_FREQS:
        return posenc_sinusoidal_freqs(c->sc[0], c->params_null ? NULL : &c->sin, ho);
    case OP_ROPE_FREQS:
        return posenc_rope_freqs(c->sc[0], c->params_null ? NULL : &c->rope,
                                 c->hout_null ? NULL : hout.d,
                                 c->hout_null ? NULL : hout.bytes + 2048,
                                 c->hout_null ? NULL : (struct posenc_rope_info *)(hout.d + 384));
    case OP_GGML:
        return posenc_rope_params_from_ggml(c->ggml, 15, c->sc[0], NULL, ho);
    case OP_ROPE: return posenc_rope(ctx, T[0], T[1], T[2], c->params_null ? NULL : &c->rope);
    case OP_ROPE_QK:
        return posenc_rope_qk(ctx, T[0], T[1], T[2], T[3], T[4],
                              c->params_null ? NULL : &c->rope);
    case OP_REROT:
        return posenc_rope_rerotate(ctx, T[0], T[1], c->params_null ? NULL : &c->rope, T[2],
                                    c->params2_null ? NULL : &c->rope2, T[3]);
    case OP_LEARNED: return posenc_learned(ctx, T[0], T[1], T[2], T[3]);
    case OP_LEARNED_BWD: return posenc_learned_backward(ctx, T[0], T[1], T[2]);
    case OP_SINCOS2D:
        return posenc_sincos_2d(ctx, c->sc[0], c->sc[1], T[0], c->params_null ? NULL : &c->g2);
    case OP_RESIZE:
        return posenc_resize_2d(ctx, T[0], c->sc[0], c->sc[1], T[1], c->sc[2], c->sc[3],
                                c->params_null ? NULL : &c->rs);
    case OP_BUCKET:
        return posenc_relbias_bucket(c->params_null ? NULL : &c->rb, c->sc[0], ho);
    case OP_RELBIAS: return posenc_relbias(ctx, T[0], T[1], T[2], c->params_null ? NULL : &c->rb);
    case OP_RELBIAS_BWD:
        return posenc_relbias_backward(ctx, T[0], T[1], c->params_null ? NULL : &c->rb);
    case OP_SLOPES:
        return posenc_alibi_slopes(c->sc[0], c->params_null ? NULL : &c->al, ho);
    case OP_ALIBI: return posenc_alibi(ctx, T[0], T[1], c->params_null ? NULL : &c->al);
    case OP_ATTN:
    case OP_DECAY:
        c->at.mask = T[5];
        c->at.q_pos = T[6];
        c->at.k_pos = T[7];
        c->at.learned_table = T[8];
        c->at.relbias_table = T[9];
        if (c->op == OP_ATTN)
            return posenc_attention(ctx, T[0], T[1], T[2], T[3], T[4],
                                    c->params_null ? NULL : &c->at);
        return posenc_attention_decay(ctx, c->sc[0], c->sc[1], c->sc[2], 7,
                                      c->params_null ? NULL : &c->at, ho);
    case OP_COUNT: break;
    }
    return POSENC_ERR_INTERNAL;
}

static int op_has_hout(enum op op)
{
    return op == OP_SIN_FREQS || op == OP_ROPE_FREQS || op == OP_GGML || op == OP_BUCKET ||
           op == OP_SLOPES || op == OP_DECAY || op == OP_BUF_READ || op == OP_DEV_COUNT;
}

/* Every device buffer holds what it held before the row; returns the first bad buffer's
 * name and byte, or NULL. */
static const char *buffers_changed(size_t *at)
{
    static const char *const names[B_COUNT] = {"input buffer", "positions buffer",
                                                "tables buffer", "output buffer",
                                                "second output buffer",
                                                "another context's buffer", NULL};
    for (int b = 0; b < B_COUNT; b++) {
        if (b == B_ORPHAN)
            continue; /* its memory went with its context */
        unsigned char *img = th_download(bufs[b]);
        for (size_t i = 0; i < buf_size[b]; i++)
            if (img[i] != host_img[b][i]) {
                *at = i;
                free(img);
                return names[b];
            }
        free(img);
    }
    return NULL;
}

static void run_row(void **state)
{
    const struct built_row *br = *state;
    const struct row *r = &br->r;
    struct call c;
    base_call(&c, r->op);
    for (size_t i = 0; i < TB_LEN(r->t); i++)
        apply_tmut(&c, &r->t[i]);
    for (size_t i = 0; i < TB_LEN(r->p); i++)
        apply_pmut(&c, &r->p[i]);
    memset(&hout, POISON, sizeof(hout));

    posenc_status st = do_call(&c);
    n_rows_run++;
    const char *msg = opdefs[r->op].msg == MSG_ERRBUF ? errbuf
                      : opdefs[r->op].msg == MSG_CTX  ? posenc_context_last_error(th.dut)
                                                      : "";
    posenc_status want = r->want;
    int writes = (r->flags & R_WRITES) != 0;
    if (writes && st == POSENC_ERR_UNSUPPORTED) {
        want = st; /* the backend lacks the op (or this variant) */
        n_unsupported++;
    }
    if ((r->flags & R_LATE) && !op_supported[r->op])
        want = POSENC_ERR_UNSUPPORTED;
    if (r->flags & R_BASE)
        op_supported[r->op] = st != POSENC_ERR_UNSUPPORTED;
    if (st != want)
        fail_msg("%s: status %s, want %s (message: \"%s\")", br->name, posenc_status_string(st),
                 posenc_status_string(want), msg);
    if (st != POSENC_OK && st == r->want && br->needle[0] && !strstr(msg, br->needle))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", br->name, msg, br->needle);
    if (st != POSENC_OK && opdefs[r->op].msg == MSG_CTX && !c.ctx_null &&
        !(r->op == OP_BUF_WRITE || r->op == OP_BUF_READ) && msg[0] == '\0')
        fail_msg("%s: failed with an empty message", br->name);
    th_check_warnings();

    if (st == POSENC_OK && writes) {
        if ((r->flags & R_BASE) && !op_has_hout(r->op)) {
            /* the base call must visibly write, or the untouched checks prove nothing */
            size_t at;
            if (!buffers_changed(&at))
                fail_msg("%s: the valid call changed no byte of any buffer", br->name);
        }
        if ((r->flags & R_BASE) && op_has_hout(r->op)) {
            size_t i = 0;
            while (i < sizeof(hout) && hout.bytes[i] == POISON)
                i++;
            if (i == sizeof(hout))
                fail_msg("%s: the valid call wrote nothing to its host output", br->name);
        }
        upload(B_OUT);
        upload(B_OUT2);
        return;
    }
    /* an error, or a valid no-op: nothing anywhere was written */
    size_t at = 0;
    const char *bad = buffers_changed(&at);
    if (bad) {
        upload(B_OUT);
        upload(B_OUT2);
        fail_msg("%s (%s): byte %zu of the %s was written", br->name, posenc_status_string(st),
                 at, bad);
    }
    if (op_has_hout(r->op) && r->op != OP_DEV_COUNT)
        for (size_t i = 0; i < sizeof(hout); i++)
            if (hout.bytes[i] != POISON)
                fail_msg("%s (%s): byte %zu of the host output was written", br->name,
                         posenc_status_string(st), i);
}

/* ---- the table ---------------------------------------------------------------------------- */

static void add_row(const struct row *r, const char *needle, const char *what)
{
    struct built_row *br = &rows[n_rows++];
    br->r = *r;
    snprintf(br->needle, sizeof(br->needle), "%s", needle ? needle : "");
    snprintf(br->name, sizeof(br->name), "%s/%s", opdefs[r->op].name, what);
}

/* `fmt` with its one "%s" replaced by `name`. */
static void fill_name(char *out, size_t size, const char *fmt, const char *name)
{
    const char *at = strstr(fmt, "%s");
    if (!at) {
        snprintf(out, size, "%s", fmt);
        return;
    }
    snprintf(out, size, "%.*s%s%s", (int)(at - fmt), fmt, name, at + 2);
}

static void build_rows(void)
{
    size_t cap = bad_input_n_rows + OP_COUNT * 10 * BAT_COUNT;
    rows = calloc(cap, sizeof(*rows));
    assert_non_null(rows);
    for (int op = 0; op < OP_COUNT; op++) {
        for (size_t i = 0; i < bad_input_n_rows; i++)
            if (bad_input_rows[i].op == (enum op)op)
                add_row(&bad_input_rows[i], bad_input_rows[i].needle, bad_input_rows[i].what);
        const struct opdef *od = &opdefs[op];
        for (int a = 0; a < od->n_args; a++) {
            const struct argdef *ad = &od->args[a];
            for (int k = 0; k < BAT_COUNT; k++) {
                const struct battery *bt = &battery[k];
                if (bt->out_only && !(ad->flags & AF_OUT))
                    continue;
                if (k == BAT_NULL && (ad->flags & AF_PAR))
                    continue; /* NULL there means "not used": see the specific rows */
                struct row r;
                memset(&r, 0, sizeof(r));
                r.op = (enum op)op;
                r.want = POSENC_ERR_INVALID_ARGUMENT;
                int nt = 0;
                if (ad->flags & AF_PAR) {
                    /* pass the tensor, with the encoding that reads it */
                    r.t[nt++] = (struct tmut){TM_ON, a, 0, 0};
                    int enc = a == 8   ? POSENC_ATTENTION_LEARNED
                              : a == 9 ? POSENC_ATTENTION_RELBIAS
                              : a == 5 ? POSENC_ATTENTION_NONE
                                       : POSENC_ATTENTION_ROPE;
                    r.p[0] = (struct pmut){PK_I32, 0, offsetof(ATP, encoding), 0, enc};
                }
                for (int j = 0; j < 2; j++)
                    if (bt->t[j].kind != TM_NONE) {
                        r.t[nt] = bt->t[j];
                        r.t[nt].arg = a;
                        nt++;
                    }
                char needle[160], what[120];
                fill_name(needle, sizeof(needle), bt->needle, ad->name);
                snprintf(what, sizeof(what), "%s: %s", ad->name, bt->what);
                if (k == BAT_NULL && (ad->flags & AF_OPT)) {
                    r.want = POSENC_OK;
                    r.flags = R_WRITES;
                    needle[0] = '\0';
                }
                add_row(&r, needle, what);
            }
        }
    }
}

static int group_setup(void **state)
{
    (void)state;
    return setup_fixture();
}

static int group_teardown(void **state)
{
    (void)state;
    teardown_fixture();
    return 0;
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "bad_input");
    if (rc >= 0)
        return rc;
    build_rows();
    struct CMUnitTest *tests = calloc(n_rows, sizeof(*tests));
    assert_non_null(tests);
    for (size_t i = 0; i < n_rows; i++) {
        tests[i].name = rows[i].name;
        tests[i].test_func = run_row;
        tests[i].initial_state = &rows[i];
    }
    char name[64];
    snprintf(name, sizeof(name), "bad_input/%s", posenc_backend_name(th.kind));
    rc = _cmocka_run_group_tests(name, tests, n_rows, group_setup, group_teardown);
    printf("bad_input on %s: %zu rows in the matrix (%zu hand-written, %zu from the descriptor "
           "battery), %d run, %d valid calls unsupported by the backend\n",
           posenc_backend_name(th.kind), n_rows, bad_input_n_rows,
           n_rows - bad_input_n_rows, n_rows_run, n_unsupported);
    free(tests);
    free(rows);
    th_fini();
    return rc;
}
