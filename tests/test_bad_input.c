/*
 * test_bad_input.c - the bad-input matrix: every public call with broken arguments, on one
 * backend (--backend NAME).
 *
 * One table drives it. A row names an op, a few mutations of a valid "base" call of that
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

/* ---- the ops ----------------------------------------------------------------------------- */

enum op {
    OP_CTX_CREATE,
    OP_DEV_COUNT,
    OP_GET_INFO,
    OP_FINISH,
    OP_BUF_CREATE,
    OP_BUF_WRITE,
    OP_BUF_READ,
    OP_COPY,
    OP_SIN,
    OP_SIN_FREQS,
    OP_ROPE_FREQS,
    OP_GGML,
    OP_ROPE,
    OP_ROPE_QK,
    OP_REROT,
    OP_LEARNED,
    OP_LEARNED_BWD,
    OP_SINCOS2D,
    OP_RESIZE,
    OP_BUCKET,
    OP_RELBIAS,
    OP_RELBIAS_BWD,
    OP_SLOPES,
    OP_ALIBI,
    OP_ATTN,
    OP_DECAY,
    OP_COUNT
};

/* Buffers of the fixture. */
enum { B_IN, B_POS, B_TAB, B_OUT, B_OUT2, B_FOREIGN, B_ORPHAN, B_COUNT };
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

/* ---- mutations --------------------------------------------------------------------------- */

enum tkind {
    TM_NONE = 0,
    TM_NULL,     /* pass NULL */
    TM_ON,       /* pass an AF_PAR tensor (it is absent in the base call) */
    TM_BUFNULL,  /* t.buffer = NULL */
    TM_BUF,      /* t.buffer = fixture buffer v */
    TM_DTYPE,    /* t.dtype = v */
    TM_NE,       /* t.ne[dim] = v, strides kept */
    TM_NEC,      /* t.ne[dim] = v, then contiguous strides */
    TM_NB,       /* t.nb[dim] = v */
    TM_OFF,      /* t.offset = v */
    TM_OFF_END,  /* t.offset = the size of its buffer */
    TM_OVERLAP,  /* the first dim >= 1 with ne > 1 gets nb = nb[0] */
    TM_ALIAS     /* t = t[dim] with offset + v */
};

struct tmut {
    enum tkind kind;
    int arg;
    int dim;
    int64_t v;
};

enum pkind {
    PK_NONE = 0,
    PK_F32,      /* float at off in params pidx */
    PK_I32,      /* int32 (or enum) */
    PK_U32,
    PK_PTR,      /* pointer to a static table */
    PK_SC,       /* scalar argument pidx = v */
    PK_CTX_NULL,
    PK_PARAMS_NULL, /* pidx 0: the params pointer, 1: the second (rerotate's `to`) */
    PK_HOUT_NULL,
    PK_BUF       /* buffer_write / read: the buffer handle (v = fixture index, -1 = NULL) */
};

struct pmut {
    enum pkind kind;
    int pidx;
    size_t off;
    double f;
    int64_t i;
};

/* Static tables rows point params at. */
enum { TB_NULL, TB_ONES, TB_NAN, TB_NEG, TB_ZERO, TB_INF, TB_U8_BAD, TB_SLOPES };
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

#define R_WRITES 1u /* a valid call that writes (UNSUPPORTED accepted) */
#define R_LATE 2u   /* UNSUPPORTED accepted when the op's base call was UNSUPPORTED */
#define R_BASE 4u   /* the op's base call: must write its output (or be UNSUPPORTED) */

struct row {
    enum op op;
    const char *what;
    posenc_status want;
    const char *needle;
    unsigned flags;
    struct tmut t[4];
    struct pmut p[8];
};

typedef struct posenc_context_params CTXP;
typedef struct posenc_sinusoidal_params SINP;
typedef struct posenc_rope_params ROPEP;
typedef struct posenc_2d_params G2P;
typedef struct posenc_resize_params RSP;
typedef struct posenc_relbias_params RBP;
typedef struct posenc_alibi_params ALP;
typedef struct posenc_attention_params ATP;

#define TN(a) {TM_NULL, a, 0, 0}
#define TON(a) {TM_ON, a, 0, 0}
#define TBUF(a, b) {TM_BUF, a, 0, b}
#define TDT(a, v) {TM_DTYPE, a, 0, v}
#define TNE(a, d, v) {TM_NE, a, d, v}
#define TNEC(a, d, v) {TM_NEC, a, d, v}
#define TNB(a, d, v) {TM_NB, a, d, v}
#define TOFF(a, v) {TM_OFF, a, 0, v}
#define TALIAS(a, b, add) {TM_ALIAS, a, b, add}

#define PF(S, fld, v) {PK_F32, 0, offsetof(S, fld), v, 0}
#define PI(S, fld, v) {PK_I32, 0, offsetof(S, fld), 0, v}
#define PU(S, fld, v) {PK_U32, 0, offsetof(S, fld), 0, v}
#define PP(S, fld, tb) {PK_PTR, 0, offsetof(S, fld), 0, tb}
#define PF2(S, fld, v) {PK_F32, 1, offsetof(S, fld), v, 0}
#define PI2(S, fld, v) {PK_I32, 1, offsetof(S, fld), 0, v}
#define PU2(S, fld, v) {PK_U32, 1, offsetof(S, fld), 0, v}
#define GI(idx, v) {PK_I32, 0, (idx) * 4, 0, v}
#define GF(idx, v) {PK_F32, 0, (idx) * 4, v, 0}
#define SC(idx, v) {PK_SC, idx, 0, 0, v}
#define CTXNULL {PK_CTX_NULL, 0, 0, 0, 0}
#define PNULL {PK_PARAMS_NULL, 0, 0, 0, 0}
#define PNULL2 {PK_PARAMS_NULL, 1, 0, 0, 0}
#define HOUTNULL {PK_HOUT_NULL, 0, 0, 0, 0}
#define BUFH(v) {PK_BUF, 0, 0, 0, v}

#define INV POSENC_ERR_INVALID_ARGUMENT
#define OOR POSENC_ERR_OUT_OF_RANGE
#define OK POSENC_OK

/* Scaling kinds as ints for PI(). */
#define K_LINEAR POSENC_ROPE_SCALING_LINEAR
#define K_NTK POSENC_ROPE_SCALING_NTK
#define K_DYN POSENC_ROPE_SCALING_DYNAMIC_NTK
#define K_YARN POSENC_ROPE_SCALING_YARN
#define K_LLAMA3 POSENC_ROPE_SCALING_LLAMA3
#define K_LONG POSENC_ROPE_SCALING_LONGROPE
#define K_GGYARN POSENC_ROPE_SCALING_GGML_YARN

/* The LONGROPE setup: factor 4 over original_ctx 16, seq_len 8, factor tables. */
#define LONGROPE_OK                                                                      \
    PI(ROPEP, scaling.kind, K_LONG), PF(ROPEP, scaling.factor, 4),                       \
        PI(ROPEP, scaling.original_ctx, 16), PI(ROPEP, scaling.seq_len, 8)

static const struct row rows_specific[] = {
    /* ---- context creation (message in the error buffer) ---- */
    {OP_CTX_CREATE, "params->reserved[6] = 1", INV, "params->reserved[6] = 1", 0, {{0}},
     {PU(CTXP, reserved[6], 1)}},
    {OP_CTX_CREATE, "backend 17", INV, "params->backend = 17", 0, {{0}},
     {PI(CTXP, backend, 17)}},
    {OP_CTX_CREATE, "backend -1", INV, "params->backend = -1", 0, {{0}},
     {PI(CTXP, backend, -1)}},
    {OP_CTX_CREATE, "unknown flag", INV, "params->flags = 0x80", 0, {{0}},
     {PU(CTXP, flags, 0x80)}},
    {OP_CTX_CREATE, "n_threads -1", INV, "params->n_threads = -1", 0, {{0}},
     {PI(CTXP, n_threads, -1)}},
    {OP_CTX_CREATE, "n_threads 5000", INV, "params->n_threads = 5000", 0, {{0}},
     {PI(CTXP, n_threads, 5000)}},
    {OP_CTX_CREATE, "log_level 9", INV, "params->log_level = 9", 0, {{0}},
     {PI(CTXP, log_level, 9)}},
    {OP_CTX_CREATE, "device -3", INV, "params->device = -3 is negative", 0, {{0}},
     {PI(CTXP, device, -3)}},
    {OP_CTX_CREATE, "device 1000", INV, "1000", 0, {{0}}, {PI(CTXP, device, 1000)}},
    {OP_CTX_CREATE, "out_ctx NULL", INV, "out_ctx is NULL", 0, {{0}}, {HOUTNULL}},

    {OP_DEV_COUNT, "backend AUTO", INV, "backend = 0 is not CPU, OPENCL or VULKAN", 0, {{0}},
     {SC(0, POSENC_BACKEND_AUTO)}},
    {OP_DEV_COUNT, "backend 9", INV, "backend = 9", 0, {{0}}, {SC(0, 9)}},
    {OP_DEV_COUNT, "out_count NULL", INV, "out_count is NULL", 0, {{0}}, {HOUTNULL}},

    {OP_GET_INFO, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_GET_INFO, "out_info NULL", INV, "out_info is NULL", 0, {{0}}, {HOUTNULL}},
    {OP_FINISH, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},

    {OP_BUF_CREATE, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_BUF_CREATE, "size 0", INV, "size = 0", 0, {{0}}, {SC(0, 0)}},
    {OP_BUF_CREATE, "out_buffer NULL", INV, "out_buffer is NULL", 0, {{0}}, {HOUTNULL}},

    {OP_BUF_WRITE, "valid", OK, NULL, R_WRITES, {{0}}, {{0}}},
    {OP_BUF_WRITE, "size 0 is a no-op", OK, NULL, 0, {{0}}, {SC(1, 0)}},
    {OP_BUF_WRITE, "past the end", INV, "offset + size = 8180 + 16 is past the end of the 8192",
     0, {{0}}, {SC(0, 8180)}},
    {OP_BUF_WRITE, "offset SIZE_MAX", INV, "past the end", 0, {{0}}, {SC(0, -1)}},
    {OP_BUF_WRITE, "size SIZE_MAX", INV, "past the end", 0, {{0}}, {SC(1, -1)}},
    {OP_BUF_WRITE, "src NULL", INV, "src is NULL", 0, {{0}}, {HOUTNULL}},
    {OP_BUF_WRITE, "buffer NULL", INV, NULL, 0, {{0}}, {BUFH(-1)}},
    {OP_BUF_WRITE, "orphaned buffer", INV, NULL, 0, {{0}}, {BUFH(B_ORPHAN)}},
    {OP_BUF_READ, "past the end", INV, "offset + size = 8190 + 64 is past the end", 0, {{0}},
     {SC(0, 8190)}},
    {OP_BUF_READ, "offset SIZE_MAX", INV, "past the end", 0, {{0}}, {SC(0, -1)}},
    {OP_BUF_READ, "dst NULL", INV, "dst is NULL", 0, {{0}}, {HOUTNULL}},
    {OP_BUF_READ, "buffer NULL", INV, NULL, 0, {{0}}, {BUFH(-1)}},
    {OP_BUF_READ, "orphaned buffer", INV, NULL, 0, {{0}}, {BUFH(B_ORPHAN)}},
    {OP_BUF_READ, "size 0 is a no-op", OK, NULL, 0, {{0}}, {SC(1, 0)}},

    /* ---- copy ---- */
    {OP_COPY, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_COPY, "f32 -> f16", OK, NULL, R_WRITES, {TDT(1, POSENC_DTYPE_F16)}, {{0}}},
    {OP_COPY, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_COPY, "i32 -> f32", INV, "src->dtype = i32, dst->dtype = f32", 0,
     {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_COPY, "f32 -> i32", INV, "src->dtype = f32, dst->dtype = i32", 0,
     {TDT(1, POSENC_DTYPE_I32)}, {{0}}},
    {OP_COPY, "shape mismatch", INV, "dst->ne = [8, 3, 2, 1] differs from src->ne", 0,
     {TNEC(1, 1, 3)}, {{0}}},
    {OP_COPY, "dst partially overlaps src", INV, "dst partially overlaps src", 0,
     {TALIAS(0, 1, 4)}, {{0}}},
    {OP_COPY, "src == dst is a no-op", OK, NULL, 0, {TALIAS(0, 1, 0)}, {{0}}},
    {OP_COPY, "empty", OK, NULL, 0, {TNE(0, 1, 0), TNE(1, 1, 0)}, {{0}}},
    {OP_COPY, "empty, shapes differ", INV, "dst->ne = [8, 0, 2, 1] differs from src->ne = [8, 4",
     0, {TNE(1, 1, 0)}, {{0}}},

    /* ---- sinusoidal ---- */
    {OP_SIN, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_SIN, "x NULL (the table alone)", OK, NULL, R_WRITES, {TN(0)}, {{0}}},
    {OP_SIN, "in place", OK, NULL, R_WRITES, {TALIAS(0, 2, 0)}, {{0}}},
    {OP_SIN, "f32 time stamps", OK, NULL, R_WRITES,
     {TDT(1, POSENC_DTYPE_F32), TOFF(1, 256)}, {{0}}},
    {OP_SIN, "f16 dst", OK, NULL, R_WRITES, {TDT(2, POSENC_DTYPE_F16)}, {{0}}},
    {OP_SIN, "params NULL", OK, NULL, R_WRITES, {{0}}, {PNULL}},
    {OP_SIN, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_SIN, "dst i32", INV, "dst->dtype = i32, must be f32 or f16", 0,
     {TDT(2, POSENC_DTYPE_I32)}, {{0}}},
    {OP_SIN, "pos f16", INV, "pos->dtype = f16, must be i32 or f32", 0,
     {TDT(1, POSENC_DTYPE_F16)}, {{0}}},
    {OP_SIN, "x i32", INV, "x->dtype = i32, must be f32 or f16", 0, {TDT(0, POSENC_DTYPE_I32)},
     {{0}}},
    {OP_SIN, "pos has 3 tokens for 4", INV, "pos->ne = [3, 1, 1, 1] does not fit dst->ne", 0,
     {TNE(1, 0, 3)}, {{0}}},
    {OP_SIN, "pos batch 3 for 2", INV, "pos->ne = [4, 3, 1, 1] does not fit", 0,
     {TNEC(1, 1, 3)}, {{0}}},
    {OP_SIN, "x shape differs", INV, "x->ne = [6, 4, 2, 1] differs from dst->ne = [8, 4, 2, 1]",
     0, {TNE(0, 0, 6)}, {{0}}},
    {OP_SIN, "x partially overlaps dst", INV, "x partially overlaps dst", 0, {TALIAS(0, 2, 4)},
     {{0}}},
    {OP_SIN, "pos overlaps dst", INV, "pos overlaps dst", 0,
     {TBUF(1, B_OUT), TOFF(1, 260)}, {{0}}},
    {OP_SIN, "odd d", INV, "d = 7: the encoding dimension must be even", 0,
     {TN(0), TNEC(2, 0, 7)}, {{0}}},
    {OP_SIN, "base NaN", INV, "params->base = nan must be finite and > 0", 0, {{0}},
     {PF(SINP, base, NAN)}},
    {OP_SIN, "base -1", INV, "params->base = -1 must be finite and > 0", 0, {{0}},
     {PF(SINP, base, -1)}},
    {OP_SIN, "base inf", INV, "params->base = inf", 0, {{0}}, {PF(SINP, base, INFINITY)}},
    {OP_SIN, "x_scale inf", INV, "params->x_scale = inf is not finite", 0, {{0}},
     {PF(SINP, x_scale, INFINITY)}},
    {OP_SIN, "x_scale NaN", INV, "params->x_scale = nan", 0, {{0}}, {PF(SINP, x_scale, NAN)}},
    {OP_SIN, "layout 3", INV, "params->layout = 3 is not a posenc_sin_layout", 0, {{0}},
     {PI(SINP, layout, 3)}},
    {OP_SIN, "layout -1", INV, "params->layout = -1", 0, {{0}}, {PI(SINP, layout, -1)}},
    {OP_SIN, "freq_shift = d/2", INV, "params->freq_shift = 4 must be finite and < d/2 = 4", 0,
     {{0}}, {PF(SINP, freq_shift, 4)}},
    {OP_SIN, "freq_shift NaN", INV, "params->freq_shift = nan", 0, {{0}},
     {PF(SINP, freq_shift, NAN)}},
    {OP_SIN, "reserved[2]", INV, "params->reserved[2] = 1, must be 0", 0, {{0}},
     {PU(SINP, reserved[2], 1)}},
    {OP_SIN, "empty T", OK, NULL, 0, {TN(0), TNE(2, 1, 0), TNE(1, 0, 0)}, {{0}}},
    {OP_SIN, "empty d", OK, NULL, 0, {TN(0), TNE(2, 0, 0)}, {{0}}},
    {OP_SIN, "empty batch, with x", OK, NULL, 0, {TNE(0, 2, 0), TNE(2, 2, 0)}, {{0}}},
    {OP_SIN, "empty but base NaN", INV, "params->base = nan", 0, {TN(0), TNE(2, 1, 0),
     TNE(1, 0, 0)}, {PF(SINP, base, NAN)}},

    /* ---- host helpers: status only ---- */
    {OP_SIN_FREQS, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_SIN_FREQS, "d 7", INV, NULL, 0, {{0}}, {SC(0, 7)}},
    {OP_SIN_FREQS, "d 0", INV, NULL, 0, {{0}}, {SC(0, 0)}},
    {OP_SIN_FREQS, "d -2", INV, NULL, 0, {{0}}, {SC(0, -2)}},
    {OP_SIN_FREQS, "base NaN", INV, NULL, 0, {{0}}, {PF(SINP, base, NAN)}},
    {OP_SIN_FREQS, "freq_shift inf", INV, NULL, 0, {{0}}, {PF(SINP, freq_shift, INFINITY)}},
    {OP_SIN_FREQS, "layout 9", INV, NULL, 0, {{0}}, {PI(SINP, layout, 9)}},
    {OP_SIN_FREQS, "out NULL", INV, NULL, 0, {{0}}, {HOUTNULL}},

    {OP_ROPE_FREQS, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_ROPE_FREQS, "head_dim 1", INV, NULL, 0, {{0}}, {SC(0, 1)}},
    {OP_ROPE_FREQS, "head_dim odd", INV, NULL, 0, {{0}}, {SC(0, 7)}},
    {OP_ROPE_FREQS, "head_dim -8", INV, NULL, 0, {{0}}, {SC(0, -8)}},
    {OP_ROPE_FREQS, "head_dim 2^40", INV, NULL, 0, {{0}}, {SC(0, (int64_t)1 << 40)}},
    {OP_ROPE_FREQS, "DYNAMIC_NTK without seq_len", INV, NULL, 0, {{0}},
     {PI(ROPEP, scaling.kind, K_DYN), PF(ROPEP, scaling.factor, 2),
      PI(ROPEP, scaling.original_ctx, 16)}},
    {OP_ROPE_FREQS, "freq_factors NaN", INV, NULL, 0, {{0}},
     {PP(ROPEP, freq_factors, TB_NAN)}},
    {OP_ROPE_FREQS, "YaRN beta_slow -1", INV, NULL, 0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PF(ROPEP, scaling.factor, 4),
      PI(ROPEP, scaling.original_ctx, 16), PF(ROPEP, scaling.beta_slow, -1)}},
    {OP_ROPE_FREQS, "out arrays NULL", OK, NULL, 0, {{0}}, {HOUTNULL}},

    {OP_GGML, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_GGML, "mode 1", INV, NULL, 0, {{0}}, {GI(2, 1)}},
    {OP_GGML, "mode 99", INV, NULL, 0, {{0}}, {GI(2, 99)}},
    {OP_GGML, "n_dims 0", INV, NULL, 0, {{0}}, {GI(1, 0)}},
    {OP_GGML, "n_dims 10 > head 8", INV, NULL, 0, {{0}}, {GI(1, 10)}},
    {OP_GGML, "n_dims odd", INV, NULL, 0, {{0}}, {GI(1, 7)}},
    {OP_GGML, "VISION n_dims 2^30", INV, NULL, 0, {{0}}, {GI(2, 24), GI(1, 1 << 30)}},
    {OP_GGML, "freq_base NaN", INV, NULL, 0, {{0}}, {GF(5, NAN)}},
    {OP_GGML, "freq_base 0", INV, NULL, 0, {{0}}, {GF(5, 0)}},
    {OP_GGML, "freq_scale 0", INV, NULL, 0, {{0}}, {GF(6, 0)}},
    {OP_GGML, "freq_scale NaN", INV, NULL, 0, {{0}}, {GF(6, NAN)}},
    {OP_GGML, "freq_scale -1", INV, NULL, 0, {{0}}, {GF(6, -1)}},
    {OP_GGML, "attn_factor -inf", INV, NULL, 0, {{0}}, {GF(8, -INFINITY)}},
    {OP_GGML, "ext_factor NaN", INV, NULL, 0, {{0}}, {GF(7, NAN)}},
    {OP_GGML, "beta_fast -1 (YaRN)", INV, NULL, 0, {{0}},
     {GF(6, 0.25), GF(7, 1), GI(4, 4096), GF(9, -1)}},
    {OP_GGML, "YaRN node", OK, NULL, R_WRITES, {{0}}, {GF(6, 0.25), GF(7, 1), GI(4, 4096)}},
    {OP_GGML, "MROPE sections all 0", INV, NULL, 0, {{0}}, {GI(2, 8)}},
    {OP_GGML, "MROPE section -1", INV, NULL, 0, {{0}}, {GI(2, 8), GI(11, -1), GI(12, 4)}},
    {OP_GGML, "out NULL", INV, NULL, 0, {{0}}, {HOUTNULL}},

    /* ---- rope ---- */
    {OP_ROPE, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_ROPE, "NEOX", OK, NULL, R_WRITES, {{0}}, {PI(ROPEP, mode, POSENC_ROPE_NEOX)}},
    {OP_ROPE, "in place", OK, NULL, R_WRITES, {TALIAS(0, 2, 0)}, {{0}}},
    {OP_ROPE, "f32 positions", OK, NULL, R_WRITES, {TDT(1, POSENC_DTYPE_F32), TOFF(1, 256)},
     {{0}}},
    {OP_ROPE, "f16 x and dst", OK, NULL, R_WRITES,
     {TDT(0, POSENC_DTYPE_F16), TDT(2, POSENC_DTYPE_F16)}, {{0}}},
    {OP_ROPE, "partial n_dims 4 at n_offs 2", OK, NULL, R_WRITES, {{0}},
     {PI(ROPEP, n_dims, 4), PI(ROPEP, n_offs, 2)}},
    {OP_ROPE, "backward", OK, NULL, R_WRITES, {{0}}, {PU(ROPEP, flags, POSENC_ROPE_BACKWARD)}},
    {OP_ROPE, "batched positions", OK, NULL, R_WRITES, {TNEC(1, 2, 2)}, {{0}}},
    {OP_ROPE, "LONGROPE with tables", OK, NULL, R_WRITES, {{0}},
     {LONGROPE_OK, PP(ROPEP, scaling.short_factor, TB_ONES),
      PP(ROPEP, scaling.long_factor, TB_ONES)}},
    {OP_ROPE, "DYNAMIC_NTK, seq_len from the positions", OK, NULL, R_WRITES, {{0}},
     {PI(ROPEP, scaling.kind, K_DYN), PF(ROPEP, scaling.factor, 2),
      PI(ROPEP, scaling.original_ctx, 2)}},
    {OP_ROPE, "MROPE, 4 streams", OK, NULL, R_WRITES, {TNEC(1, 1, 4)},
     {PI(ROPEP, mode, POSENC_ROPE_MROPE), PI(ROPEP, sections[0], 1), PI(ROPEP, sections[1], 1),
      PI(ROPEP, sections[2], 1), PI(ROPEP, sections[3], 1)}},
    {OP_ROPE, "params NULL", OK, NULL, R_WRITES, {{0}}, {PNULL}},
    {OP_ROPE, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_ROPE, "odd head dim", INV, "head_dim - n_offs = 7, which is odd", 0,
     {TNEC(0, 0, 7), TNEC(2, 0, 7)}, {{0}}},
    {OP_ROPE, "head dim 1", INV, "head_dim = 1 must be >= 2", 0, {TNEC(0, 0, 1), TNEC(2, 0, 1)},
     {{0}}},
    {OP_ROPE, "n_dims odd", INV, "params->n_dims = 5 must be even", 0, {{0}},
     {PI(ROPEP, n_dims, 5)}},
    {OP_ROPE, "n_dims > head_dim", INV, "params->n_dims = 10 > head_dim - n_offs = 8", 0, {{0}},
     {PI(ROPEP, n_dims, 10)}},
    {OP_ROPE, "n_dims -2", INV, "params->n_dims = -2 must be > 0", 0, {{0}},
     {PI(ROPEP, n_dims, -2)}},
    {OP_ROPE, "n_offs -1", INV, "params->n_offs = -1 must be >= 0", 0, {{0}},
     {PI(ROPEP, n_offs, -1)}},
    {OP_ROPE, "n_offs = head_dim", INV, "params->n_offs = 8 leaves no dims to rotate", 0, {{0}},
     {PI(ROPEP, n_offs, 8)}},
    {OP_ROPE, "n_offs + n_dims > head_dim", INV, "params->n_dims = 6 > head_dim - n_offs = 4",
     0, {{0}}, {PI(ROPEP, n_offs, 4), PI(ROPEP, n_dims, 6)}},
    {OP_ROPE, "mode 5", INV, "params->mode = 5 is not a posenc_rope_mode", 0, {{0}},
     {PI(ROPEP, mode, 5)}},
    {OP_ROPE, "mode -1", INV, "params->mode = -1", 0, {{0}}, {PI(ROPEP, mode, -1)}},
    {OP_ROPE, "unknown flag", INV, "params->flags = 0x10 has unknown bits", 0, {{0}},
     {PU(ROPEP, flags, 0x10)}},
    {OP_ROPE, "freq_base NaN", INV, "params->freq_base = nan must be finite", 0, {{0}},
     {PF(ROPEP, freq_base, NAN)}},
    {OP_ROPE, "freq_base -1", INV, "params->freq_base = -1", 0, {{0}},
     {PF(ROPEP, freq_base, -1)}},
    {OP_ROPE, "freq_base inf", INV, "params->freq_base = inf", 0, {{0}},
     {PF(ROPEP, freq_base, INFINITY)}},
    {OP_ROPE, "attn_factor -1", INV, "params->attn_factor = -1 must be finite", 0, {{0}},
     {PF(ROPEP, attn_factor, -1)}},
    {OP_ROPE, "attn_factor NaN", INV, "params->attn_factor = nan", 0, {{0}},
     {PF(ROPEP, attn_factor, NAN)}},
    {OP_ROPE, "sections with NORMAL", INV, "params->sections[1] = 2: only MROPE, IMROPE and "
     "VISION use sections", 0, {{0}}, {PI(ROPEP, sections[1], 2)}},
    {OP_ROPE, "MROPE without sections", INV, "params->sections = {0, 0, 0, 0}: MROPE needs", 0,
     {TNEC(1, 1, 4)}, {PI(ROPEP, mode, POSENC_ROPE_MROPE)}},
    {OP_ROPE, "MROPE section -1", INV, "params->sections[0] = -1 must be >= 0", 0,
     {TNEC(1, 1, 4)},
     {PI(ROPEP, mode, POSENC_ROPE_MROPE), PI(ROPEP, sections[0], -1), PI(ROPEP, sections[1], 2)}},
    {OP_ROPE, "MROPE with 1 position stream", INV, "pos->ne[1] = 1 streams, but the pairs use 4",
     0, {{0}},
     {PI(ROPEP, mode, POSENC_ROPE_MROPE), PI(ROPEP, sections[0], 1), PI(ROPEP, sections[1], 1),
      PI(ROPEP, sections[2], 1), PI(ROPEP, sections[3], 1)}},
    {OP_ROPE, "VISION sections do not cover the pairs", INV, "must equal n_dims/2 = 4 for VISION",
     0, {TNEC(1, 1, 2)},
     {PI(ROPEP, mode, POSENC_ROPE_VISION), PI(ROPEP, sections[0], 1), PI(ROPEP, sections[1], 1)}},
    {OP_ROPE, "VISION sections[2]", INV, "params->sections[2] = 1: VISION uses", 0,
     {TNEC(1, 1, 2)},
     {PI(ROPEP, mode, POSENC_ROPE_VISION), PI(ROPEP, sections[0], 2), PI(ROPEP, sections[1], 1),
      PI(ROPEP, sections[2], 1)}},
    {OP_ROPE, "pair_stream 7", INV, "params->pair_stream[1] = 7 must be 0..3", 0, {{0}},
     {PP(ROPEP, pair_stream, TB_U8_BAD)}},
    {OP_ROPE, "freq_factors NaN", INV, "params->freq_factors[1] = nan must be finite and > 0", 0,
     {{0}}, {PP(ROPEP, freq_factors, TB_NAN)}},
    {OP_ROPE, "freq_factors -1", INV, "params->freq_factors[1] = -1", 0, {{0}},
     {PP(ROPEP, freq_factors, TB_NEG)}},
    {OP_ROPE, "freq_factors 0", INV, "params->freq_factors[1] = 0", 0, {{0}},
     {PP(ROPEP, freq_factors, TB_ZERO)}},
    {OP_ROPE, "freqs inf", INV, "params->freqs[1] = inf", 0, {{0}}, {PP(ROPEP, freqs, TB_INF)}},
    {OP_ROPE, "freqs with freq_factors", INV, "params->freq_factors must be NULL when", 0, {{0}},
     {PP(ROPEP, freqs, TB_ONES), PP(ROPEP, freq_factors, TB_ONES)}},
    {OP_ROPE, "freqs with a scaling", INV, "params->freqs replaces the scaling", 0, {{0}},
     {PP(ROPEP, freqs, TB_ONES), PI(ROPEP, scaling.kind, K_LINEAR)}},
    {OP_ROPE, "scaling kind 8", INV, "params->scaling.kind = 8 is not a posenc_rope_scaling_kind",
     0, {{0}}, {PI(ROPEP, scaling.kind, 8)}},
    {OP_ROPE, "scaling kind -1", INV, "params->scaling.kind = -1", 0, {{0}},
     {PI(ROPEP, scaling.kind, -1)}},
    {OP_ROPE, "scaling flag unknown", INV, "params->scaling.flags = 0x4 has unknown bits", 0,
     {{0}}, {PU(ROPEP, scaling.flags, 4)}},
    {OP_ROPE, "NO_TRUNCATE with LINEAR", INV, "NO_TRUNCATE is only used by YARN", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_LINEAR), PU(ROPEP, scaling.flags, 1)}},
    {OP_ROPE, "factor with NONE", INV, "params->scaling.factor = 2 is not used by scaling kind "
     "NONE", 0, {{0}}, {PF(ROPEP, scaling.factor, 2)}},
    {OP_ROPE, "beta_fast with LINEAR", INV, "params->scaling.beta_fast = 3 is not used by", 0,
     {{0}}, {PI(ROPEP, scaling.kind, K_LINEAR), PF(ROPEP, scaling.beta_fast, 3)}},
    {OP_ROPE, "short_factor with LINEAR", INV, "params->scaling.short_factor is set but not used",
     0, {{0}}, {PI(ROPEP, scaling.kind, K_LINEAR), PP(ROPEP, scaling.short_factor, TB_ONES)}},
    {OP_ROPE, "LINEAR factor NaN", INV, "params->scaling.factor = nan must be finite", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_LINEAR), PF(ROPEP, scaling.factor, NAN)}},
    {OP_ROPE, "LINEAR factor -2", INV, "params->scaling.factor = -2", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_LINEAR), PF(ROPEP, scaling.factor, -2)}},
    {OP_ROPE, "NTK factor inf", INV, "params->scaling.factor = inf", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_NTK), PF(ROPEP, scaling.factor, INFINITY)}},
    {OP_ROPE, "NTK over 2 dims", INV, "params->n_dims = 2: scaling kind NTK needs a frequency "
     "dim > 2", 0, {{0}}, {PI(ROPEP, scaling.kind, K_NTK), PI(ROPEP, n_dims, 2)}},
    {OP_ROPE, "YARN without original_ctx", INV, "params->scaling.original_ctx = 0 must be > 0 "
     "for scaling kind YARN", 0, {{0}}, {PI(ROPEP, scaling.kind, K_YARN)}},
    {OP_ROPE, "YARN original_ctx -5", INV, "params->scaling.original_ctx = -5", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, -5)}},
    {OP_ROPE, "YARN beta_fast NaN", INV, "params->scaling.beta_fast = nan must be finite and >= 0",
     0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.beta_fast, NAN)}},
    {OP_ROPE, "YARN beta_slow -1", INV, "params->scaling.beta_slow = -1", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.beta_slow, -1)}},
    {OP_ROPE, "YARN attention_factor -1", INV, "params->scaling.attention_factor = -1", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.attention_factor, -1)}},
    {OP_ROPE, "YARN mscale NaN", INV, "params->scaling.mscale = nan", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.mscale, NAN)}},
    {OP_ROPE, "YARN mscale_all_dim inf", INV, "params->scaling.mscale_all_dim = inf", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.mscale_all_dim, INFINITY)}},
    {OP_ROPE, "YARN with base 1", INV, "params->freq_base = 1: scaling kind YARN's correction",
     0, {{0}},
     {PI(ROPEP, scaling.kind, K_YARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, freq_base, 1)}},
    {OP_ROPE, "GGML_YARN ext_factor -1", INV, "params->scaling.ext_factor = -1 must be finite",
     0, {{0}},
     {PI(ROPEP, scaling.kind, K_GGYARN), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.ext_factor, -1)}},
    {OP_ROPE, "LLAMA3 low_freq_factor NaN", INV, "params->scaling.low_freq_factor = nan", 0,
     {{0}},
     {PI(ROPEP, scaling.kind, K_LLAMA3), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.low_freq_factor, NAN)}},
    {OP_ROPE, "LLAMA3 high <= low", INV, "params->scaling.high_freq_factor = 2 must be > "
     "low_freq_factor = 4", 0, {{0}},
     {PI(ROPEP, scaling.kind, K_LLAMA3), PI(ROPEP, scaling.original_ctx, 16),
      PF(ROPEP, scaling.low_freq_factor, 4), PF(ROPEP, scaling.high_freq_factor, 2)}},
    {OP_ROPE, "DYNAMIC_NTK seq_len -1", INV, "params->scaling.seq_len = -1 must be >= 0", 0,
     {{0}},
     {PI(ROPEP, scaling.kind, K_DYN), PI(ROPEP, scaling.original_ctx, 16),
      PI(ROPEP, scaling.seq_len, -1)}},
    {OP_ROPE, "LONGROPE short_factor NULL", INV, "params->scaling.short_factor is NULL", 0,
     {{0}}, {LONGROPE_OK, PP(ROPEP, scaling.long_factor, TB_ONES)}},
    {OP_ROPE, "LONGROPE long_factor NULL", INV, "params->scaling.long_factor is NULL", 0, {{0}},
     {LONGROPE_OK, PP(ROPEP, scaling.short_factor, TB_ONES)}},
    {OP_ROPE, "LONGROPE long_factor NaN", INV, "params->scaling.long_factor[1] = nan", 0, {{0}},
     {LONGROPE_OK, PP(ROPEP, scaling.short_factor, TB_ONES),
      PP(ROPEP, scaling.long_factor, TB_NAN)}},
    {OP_ROPE, "LONGROPE short_factor -1", INV, "params->scaling.short_factor[1] = -1", 0, {{0}},
     {LONGROPE_OK, PP(ROPEP, scaling.short_factor, TB_NEG),
      PP(ROPEP, scaling.long_factor, TB_ONES)}},
    {OP_ROPE, "LONGROPE original_ctx 1", INV, "params->scaling.original_ctx = 1: LONGROPE's "
     "default attention factor", 0, {{0}},
     {LONGROPE_OK, PI(ROPEP, scaling.original_ctx, 1), PP(ROPEP, scaling.short_factor, TB_ONES),
      PP(ROPEP, scaling.long_factor, TB_ONES)}},
    {OP_ROPE, "reserved[0]", INV, "params->reserved[0] = 1, must be 0", 0, {{0}},
     {PU(ROPEP, reserved[0], 1)}},
    {OP_ROPE, "x i32", INV, "x->dtype = i32, must be f32 or f16", 0, {TDT(0, POSENC_DTYPE_I32)},
     {{0}}},
    {OP_ROPE, "dst i32", INV, "dst->dtype = i32, must be f32 or f16", 0,
     {TDT(2, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ROPE, "pos f16", INV, "pos->dtype = f16, must be i32 or f32", 0,
     {TDT(1, POSENC_DTYPE_F16)}, {{0}}},
    {OP_ROPE, "dst shape differs", INV, "dst->ne = [8, 1, 4, 2] differs from x->ne = [8, 2, 4, 2]",
     0, {TNEC(2, 1, 1)}, {{0}}},
    {OP_ROPE, "pos 3 tokens for 4", INV, "pos->ne = [3, 1, 1, 1] does not fit x->ne", 0,
     {TNE(1, 0, 3)}, {{0}}},
    {OP_ROPE, "pos batch 3 for 2", INV, "pos->ne = [4, 1, 3, 1] does not fit", 0, {TNEC(1, 2, 3)},
     {{0}}},
    {OP_ROPE, "pos ne[3] 2", INV, "pos->ne = [4, 1, 1, 2] does not fit", 0, {TNEC(1, 3, 2)},
     {{0}}},
    {OP_ROPE, "pos with 0 streams", INV, "pos->ne = [4, 0, 1, 1] does not fit", 0,
     {TNE(1, 1, 0)}, {{0}}},
    {OP_ROPE, "dst partially overlaps x", INV, "dst partially overlaps x", 0, {TALIAS(0, 2, 4)},
     {{0}}},
    {OP_ROPE, "pos overlaps dst", INV, "pos overlaps dst", 0, {TBUF(1, B_OUT), TOFF(1, 300)},
     {{0}}},
    {OP_ROPE, "empty T", OK, NULL, 0, {TNE(0, 2, 0), TNE(2, 2, 0), TNE(1, 0, 0)}, {{0}}},
    {OP_ROPE, "empty heads", OK, NULL, 0, {TNE(0, 1, 0), TNE(2, 1, 0)}, {{0}}},
    {OP_ROPE, "empty batch", OK, NULL, 0, {TNE(0, 3, 0), TNE(2, 3, 0)}, {{0}}},
    {OP_ROPE, "empty but n_dims odd", INV, "params->n_dims = 5 must be even", 0,
     {TNE(0, 1, 0), TNE(2, 1, 0)}, {PI(ROPEP, n_dims, 5)}},

    {OP_ROPE_QK, "valid (GQA)", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_ROPE_QK, "in place", OK, NULL, R_WRITES, {TALIAS(0, 3, 0), TALIAS(1, 4, 0)}, {{0}}},
    {OP_ROPE_QK, "empty q, k rotated", OK, NULL, R_WRITES, {TNE(0, 1, 0), TNE(3, 1, 0)}, {{0}}},
    {OP_ROPE_QK, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_ROPE_QK, "k head_dim differs", INV, "k->ne = [6, 1, 4, 2] must match q->ne = [8, 2, 4, 2]",
     0, {TNE(1, 0, 6)}, {{0}}},
    {OP_ROPE_QK, "k tokens differ", INV, "k->ne = [8, 1, 3, 2] must match", 0, {TNE(1, 2, 3)},
     {{0}}},
    {OP_ROPE_QK, "q_out shape", INV, "q_out->ne = [8, 1, 4, 2] differs from q->ne", 0,
     {TNEC(3, 1, 1)}, {{0}}},
    {OP_ROPE_QK, "k_out shape", INV, "k_out->ne = [8, 2, 4, 2] differs from k->ne", 0,
     {TNEC(4, 1, 2)}, {{0}}},
    {OP_ROPE_QK, "k_out overlaps q_out", INV, "k_out overlaps q_out", 0,
     {TALIAS(4, 3, 0), TNE(4, 1, 1)}, {{0}}},
    {OP_ROPE_QK, "q_out overlaps k", INV, "q_out overlaps k", 0,
     {TBUF(3, B_IN), TOFF(3, 2048)}, {{0}}},
    {OP_ROPE_QK, "k_out overlaps q", INV, "k_out overlaps q", 0, {TBUF(4, B_IN), TOFF(4, 64)},
     {{0}}},
    {OP_ROPE_QK, "q_out partially overlaps q", INV, "q_out partially overlaps q", 0,
     {TALIAS(0, 3, 8)}, {{0}}},
    {OP_ROPE_QK, "pos overlaps k_out", INV, "pos overlaps k_out", 0,
     {TBUF(2, B_OUT2), TOFF(2, 256)}, {{0}}},
    {OP_ROPE_QK, "k i32", INV, "k->dtype = i32, must be f32 or f16", 0,
     {TDT(1, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ROPE_QK, "k_out i32", INV, "k_out->dtype = i32", 0, {TDT(4, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ROPE_QK, "pos 2 tokens", INV, "pos->ne = [2, 1, 1, 1] does not fit", 0, {TNE(2, 0, 2)},
     {{0}}},
    {OP_ROPE_QK, "n_dims 3", INV, "params->n_dims = 3 must be even", 0, {{0}},
     {PI(ROPEP, n_dims, 3)}},
    {OP_ROPE_QK, "LONGROPE factor NaN", INV, "params->scaling.short_factor[1] = nan", 0, {{0}},
     {LONGROPE_OK, PP(ROPEP, scaling.short_factor, TB_NAN),
      PP(ROPEP, scaling.long_factor, TB_ONES)}},
    {OP_ROPE_QK, "empty", OK, NULL, 0,
     {TNE(0, 3, 0), TNE(1, 3, 0), TNE(3, 3, 0), TNE(4, 3, 0)}, {{0}}},

    {OP_REROT, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_REROT, "from and to NULL", OK, NULL, R_WRITES, {{0}}, {PNULL, PNULL2}},
    {OP_REROT, "in place", OK, NULL, R_WRITES, {TALIAS(0, 3, 0)}, {{0}}},
    {OP_REROT, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_REROT, "from BACKWARD", INV, "POSENC_ROPE_BACKWARD is not meaningful", 0, {{0}},
     {PU(ROPEP, flags, POSENC_ROPE_BACKWARD)}},
    {OP_REROT, "to BACKWARD", INV, "POSENC_ROPE_BACKWARD is not meaningful", 0, {{0}},
     {PU2(ROPEP, flags, POSENC_ROPE_BACKWARD)}},
    {OP_REROT, "NEOX to NORMAL", INV, "from and to rotate different dims: pairing half/adjacent",
     0, {{0}}, {PI(ROPEP, mode, POSENC_ROPE_NEOX)}},
    {OP_REROT, "n_dims 4 to 8", INV, "n_dims 4/8", 0, {{0}}, {PI(ROPEP, n_dims, 4)}},
    {OP_REROT, "to freq_base NaN", INV, "params->freq_base = nan", 0, {{0}},
     {PF2(ROPEP, freq_base, NAN)}},
    {OP_REROT, "to scaling kind 77", INV, "params->scaling.kind = 77", 0, {{0}},
     {PI2(ROPEP, scaling.kind, 77)}},
    {OP_REROT, "pos_from f16", INV, "pos_from->dtype = f16, must be i32 or f32", 0,
     {TDT(1, POSENC_DTYPE_F16)}, {{0}}},
    {OP_REROT, "pos_to 3 tokens", INV, "pos_to->ne = [3, 1, 1, 1] does not fit", 0,
     {TNE(2, 0, 3)}, {{0}}},
    {OP_REROT, "pos_to overlaps dst", INV, "pos_to overlaps dst", 0,
     {TBUF(2, B_OUT), TOFF(2, 256)}, {{0}}},
    {OP_REROT, "dst shape", INV, "dst->ne = [8, 2, 4, 1] differs from k->ne", 0, {TNEC(3, 3, 1)},
     {{0}}},
    {OP_REROT, "empty", OK, NULL, 0, {TNE(0, 2, 0), TNE(3, 2, 0), TNE(1, 0, 0), TNE(2, 0, 0)},
     {{0}}},

    /* ---- learned ---- */
    {OP_LEARNED, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_LEARNED, "x NULL", OK, NULL, R_WRITES, {TN(0)}, {{0}}},
    {OP_LEARNED, "in place", OK, NULL, R_WRITES, {TALIAS(0, 3, 0)}, {{0}}},
    {OP_LEARNED, "f16 table", OK, NULL, R_WRITES, {TDT(2, POSENC_DTYPE_F16)}, {{0}}},
    {OP_LEARNED, "positions per batch row", OK, NULL, R_WRITES, {TNEC(1, 1, 2)}, {{0}}},
    {OP_LEARNED, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_LEARNED, "position 8 of 8 rows", OOR, "pos[2, 0] = 8: token 2 (batch 0) has position 8, "
     "outside the table's 8 rows", 0, {TOFF(1, 512)}, {{0}}},
    {OP_LEARNED, "position -1", OOR, "pos[1, 0] = -1", 0, {TOFF(1, 768)}, {{0}}},
    {OP_LEARNED, "bad position in batch row 1", OOR, "pos[2, 1] = 8", 0,
     {TNEC(1, 1, 2), TNB(1, 1, 512)}, {{0}}},
    {OP_LEARNED, "table of 2 rows", OOR, "outside the table's 2 rows (valid positions 0..1)", 0,
     {TNE(2, 1, 2)}, {{0}}},
    {OP_LEARNED, "pos f32", INV, "pos->dtype = f32, must be i32", 0, {TDT(1, POSENC_DTYPE_F32)},
     {{0}}},
    {OP_LEARNED, "table i32", INV, "table->dtype = i32, must be f32 or f16", 0,
     {TDT(2, POSENC_DTYPE_I32)}, {{0}}},
    {OP_LEARNED, "dst i32", INV, "dst->dtype = i32, must be f32 or f16", 0,
     {TDT(3, POSENC_DTYPE_I32)}, {{0}}},
    {OP_LEARNED, "x i32", INV, "x->dtype = i32", 0, {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_LEARNED, "table 3-D", INV, "table->ne = [8, 8, 2, 1]: ne[2] must be 1", 0,
     {TNE(2, 2, 2)}, {{0}}},
    {OP_LEARNED, "table d 6", INV, "table->ne[0] = 6 differs from dst->ne[0] = 8", 0,
     {TNE(2, 0, 6)}, {{0}}},
    {OP_LEARNED, "dst 4-D", INV, "dst->ne = [8, 4, 2, 2]: ne[3] must be 1", 0, {TNEC(3, 3, 2)},
     {{0}}},
    {OP_LEARNED, "pos 3 tokens", INV, "pos->ne = [3, 1, 1, 1] does not fit dst->ne", 0,
     {TNE(1, 0, 3)}, {{0}}},
    {OP_LEARNED, "x shape", INV, "x->ne = [6, 4, 2, 1] differs from dst->ne", 0, {TNE(0, 0, 6)},
     {{0}}},
    {OP_LEARNED, "table overlaps dst", INV, "table overlaps dst in the same buffer", 0,
     {TBUF(2, B_OUT), TOFF(2, 256)}, {{0}}},
    {OP_LEARNED, "pos overlaps dst", INV, "pos overlaps dst in the same buffer", 0,
     {TBUF(1, B_OUT), TOFF(1, 256)}, {{0}}},
    {OP_LEARNED, "x partially overlaps dst", INV, "x partially overlaps dst", 0,
     {TALIAS(0, 3, 4)}, {{0}}},
    {OP_LEARNED, "empty T", OK, NULL, 0, {TNE(0, 1, 0), TNE(3, 1, 0), TNE(1, 0, 0)}, {{0}}},
    {OP_LEARNED, "empty batch, bad positions unread", OK, NULL, 0,
     {TNE(0, 2, 0), TNE(3, 2, 0), TOFF(1, 512)}, {{0}}},
    {OP_LEARNED, "empty d", OK, NULL, 0, {TN(0), TNE(3, 0, 0), TNE(2, 0, 0)}, {{0}}},

    {OP_LEARNED_BWD, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_LEARNED_BWD, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_LEARNED_BWD, "position 8 of 8 rows", OOR, "pos[2, 0] = 8", 0, {TOFF(1, 512)}, {{0}}},
    {OP_LEARNED_BWD, "position -1", OOR, "pos[1, 0] = -1", 0, {TOFF(1, 768)}, {{0}}},
    {OP_LEARNED_BWD, "dtable d 6", INV, "dtable->ne[0] = 6 differs from dy->ne[0] = 8", 0,
     {TNEC(2, 0, 6)}, {{0}}},
    {OP_LEARNED_BWD, "dtable 3-D", INV, "dtable->ne = [8, 4, 2, 1]: ne[2] must be 1", 0,
     {TNEC(2, 1, 4), TNEC(2, 2, 2)}, {{0}}},
    {OP_LEARNED_BWD, "dy i32", INV, "dy->dtype = i32", 0, {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_LEARNED_BWD, "dtable i32", INV, "dtable->dtype = i32", 0, {TDT(2, POSENC_DTYPE_I32)},
     {{0}}},
    {OP_LEARNED_BWD, "pos f32", INV, "pos->dtype = f32, must be i32", 0,
     {TDT(1, POSENC_DTYPE_F32)}, {{0}}},
    {OP_LEARNED_BWD, "pos 5 tokens", INV, "pos->ne = [5, 1, 1, 1] does not fit dy->ne", 0,
     {TNE(1, 0, 5)}, {{0}}},
    {OP_LEARNED_BWD, "dy overlaps dtable", INV, "dy overlaps dtable in the same buffer", 0,
     {TBUF(0, B_OUT), TOFF(0, 256)}, {{0}}},
    {OP_LEARNED_BWD, "pos overlaps dtable", INV, "pos overlaps dtable", 0,
     {TBUF(1, B_OUT), TOFF(1, 300)}, {{0}}},
    {OP_LEARNED_BWD, "empty", OK, NULL, 0, {TNE(0, 1, 0), TNE(1, 0, 0)}, {{0}}},
    {OP_LEARNED_BWD, "empty, bad positions unread", OK, NULL, 0, {TNE(0, 2, 0), TOFF(1, 512)},
     {{0}}},

    /* ---- 2-D ---- */
    {OP_SINCOS2D, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_SINCOS2D, "class token", OK, NULL, R_WRITES, {TNEC(0, 1, 7)},
     {PI(G2P, cls_token, 1)}},
    {OP_SINCOS2D, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_SINCOS2D, "d 6", INV, "dst->ne[0] = 6: d must be a multiple of 4", 0, {TNEC(0, 0, 6)},
     {{0}}},
    {OP_SINCOS2D, "grid_h 0", INV, "grid_h = 0, grid_w = 3: each must be in [1, 2^24]", 0,
     {{0}}, {SC(0, 0)}},
    {OP_SINCOS2D, "grid_w -1", INV, "grid_w = -1", 0, {{0}}, {SC(1, -1)}},
    {OP_SINCOS2D, "grid_h 2^25", INV, "grid_h = 33554432", 0, {{0}}, {SC(0, 1 << 25)}},
    {OP_SINCOS2D, "grid 3x3 for 6 rows", INV, "dst->ne = [8, 6, 1, 1]: ne[1] must be 9", 0,
     {{0}}, {SC(0, 3)}},
    {OP_SINCOS2D, "base NaN", INV, "params->base = nan must be finite and > 0", 0, {{0}},
     {PF(G2P, base, NAN)}},
    {OP_SINCOS2D, "base -1", INV, "params->base = -1", 0, {{0}}, {PF(G2P, base, -1)}},
    {OP_SINCOS2D, "grid_scale -1", INV, "params->grid_scale = -1 must be finite and > 0", 0,
     {{0}}, {PF(G2P, grid_scale, -1)}},
    {OP_SINCOS2D, "grid_scale inf", INV, "params->grid_scale = inf", 0, {{0}},
     {PF(G2P, grid_scale, INFINITY)}},
    {OP_SINCOS2D, "cls_token 2", INV, "params->cls_token = 2, must be 0 or 1", 0, {{0}},
     {PI(G2P, cls_token, 2)}},
    {OP_SINCOS2D, "reserved[3]", INV, "params->reserved[3] = 1, must be 0", 0, {{0}},
     {PU(G2P, reserved[3], 1)}},
    {OP_SINCOS2D, "dst i32", INV, "dst->dtype = i32, must be f32 or f16", 0,
     {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_SINCOS2D, "empty d", OK, NULL, 0, {TNE(0, 0, 0)}, {{0}}},

    {OP_RESIZE, "valid (bicubic)", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_RESIZE, "bilinear", OK, NULL, R_WRITES, {{0}},
     {PI(RSP, filter, POSENC_RESIZE_BILINEAR)}},
    {OP_RESIZE, "class token", OK, NULL, R_WRITES, {TNEC(0, 1, 5), TNEC(1, 1, 10)},
     {PI(RSP, cls_token, 1)}},
    {OP_RESIZE, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_RESIZE, "filter 2", INV, "params->filter = 2 is not a posenc_resize_filter", 0, {{0}},
     {PI(RSP, filter, 2)}},
    {OP_RESIZE, "filter -1", INV, "params->filter = -1", 0, {{0}}, {PI(RSP, filter, -1)}},
    {OP_RESIZE, "cls_token 3", INV, "params->cls_token = 3, must be 0 or 1", 0, {{0}},
     {PI(RSP, cls_token, 3)}},
    {OP_RESIZE, "reserved[0]", INV, "params->reserved[0] = 1", 0, {{0}},
     {PU(RSP, reserved[0], 1)}},
    {OP_RESIZE, "src_h 0", INV, "src_h = 0, must be in [1, 2^31)", 0, {{0}}, {SC(0, 0)}},
    {OP_RESIZE, "dst_w -4", INV, "dst_w = -4", 0, {{0}}, {SC(3, -4)}},
    {OP_RESIZE, "src_w 2^31", INV, "src_w = 2147483648", 0, {{0}},
     {SC(1, (int64_t)1 << 31)}},
    {OP_RESIZE, "src grid 3x2 for 4 rows", INV, "src->ne = [8, 4, 1, 1]: ne[1] must be 6", 0,
     {{0}}, {SC(0, 3)}},
    {OP_RESIZE, "dst grid 2x3 for 9 rows", INV, "dst->ne = [8, 9, 1, 1]: ne[1] must be 6", 0,
     {{0}}, {SC(2, 2)}},
    {OP_RESIZE, "d differs", INV, "dst->ne = [6, 9, 1, 1]: ne[0] must be 8", 0,
     {TNEC(1, 0, 6)}, {{0}}},
    {OP_RESIZE, "src i32", INV, "src->dtype = i32", 0, {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_RESIZE, "dst i32", INV, "dst->dtype = i32", 0, {TDT(1, POSENC_DTYPE_I32)}, {{0}}},
    {OP_RESIZE, "src overlaps dst", INV, "src overlaps dst in the same buffer", 0,
     {TBUF(0, B_OUT), TOFF(0, 256)}, {{0}}},
    {OP_RESIZE, "empty d", OK, NULL, 0, {TNE(0, 0, 0), TNE(1, 0, 0)}, {{0}}},

    /* ---- relative bias ---- */
    {OP_BUCKET, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_BUCKET, "rel INT64_MIN", OK, NULL, R_WRITES, {{0}}, {SC(0, INT64_MIN)}},
    {OP_BUCKET, "rel INT64_MAX, causal", OK, NULL, R_WRITES, {{0}},
     {SC(0, INT64_MAX), PI(RBP, causal, 1)}},
    {OP_BUCKET, "kind 2", INV, NULL, 0, {{0}}, {PI(RBP, kind, 2)}},
    {OP_BUCKET, "num_buckets 3", INV, NULL, 0, {{0}}, {PI(RBP, num_buckets, 3)}},
    {OP_BUCKET, "num_buckets -5", INV, NULL, 0, {{0}}, {PI(RBP, num_buckets, -5)}},
    {OP_BUCKET, "max_distance 8 for 32 buckets", INV, NULL, 0, {{0}},
     {PI(RBP, max_distance, 8)}},
    {OP_BUCKET, "causal 2", INV, NULL, 0, {{0}}, {PI(RBP, causal, 2)}},
    {OP_BUCKET, "q_offset -1", INV, NULL, 0, {{0}}, {PI(RBP, q_offset, -1)}},
    {OP_BUCKET, "CLIPPED num_buckets 5", INV, NULL, 0, {{0}},
     {PI(RBP, kind, POSENC_RELBIAS_CLIPPED), PI(RBP, num_buckets, 5), PI(RBP, max_distance, 2)}},
    {OP_BUCKET, "CLIPPED max_distance 0", INV, NULL, 0, {{0}},
     {PI(RBP, kind, POSENC_RELBIAS_CLIPPED)}},
    {OP_BUCKET, "CLIPPED max_distance 2^30", INV, NULL, 0, {{0}},
     {PI(RBP, kind, POSENC_RELBIAS_CLIPPED), PI(RBP, max_distance, 1 << 30)}},
    {OP_BUCKET, "out NULL", INV, NULL, 0, {{0}}, {HOUTNULL}},

    {OP_RELBIAS, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_RELBIAS, "logits NULL", OK, NULL, R_WRITES, {TN(0)}, {{0}}},
    {OP_RELBIAS, "in place", OK, NULL, R_WRITES, {TALIAS(0, 2, 0)}, {{0}}},
    {OP_RELBIAS, "CLIPPED", OK, NULL, R_WRITES, {TNEC(1, 0, 7)},
     {PI(RBP, kind, POSENC_RELBIAS_CLIPPED), PI(RBP, max_distance, 3)}},
    {OP_RELBIAS, "causal T5 with offsets", OK, NULL, R_WRITES, {{0}},
     {PI(RBP, causal, 1), PI(RBP, q_offset, 3), PI(RBP, k_offset, 1)}},
    {OP_RELBIAS, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_RELBIAS, "kind 5", INV, "params->kind = 5 is not a posenc_relbias_kind", 0, {{0}},
     {PI(RBP, kind, 5)}},
    {OP_RELBIAS, "num_buckets 3", INV, "params->num_buckets = 3, must be >= 4", 0, {{0}},
     {PI(RBP, num_buckets, 3)}},
    {OP_RELBIAS, "causal num_buckets 1", INV, "params->num_buckets = 1, must be >= 2", 0, {{0}},
     {PI(RBP, causal, 1), PI(RBP, num_buckets, 1)}},
    {OP_RELBIAS, "max_distance 8", INV, "params->max_distance = 8, must be > 8", 0, {{0}},
     {PI(RBP, max_distance, 8)}},
    {OP_RELBIAS, "CLIPPED num_buckets 7", INV, "params->num_buckets = 7, must be 0 for CLIPPED",
     0, {{0}},
     {PI(RBP, kind, POSENC_RELBIAS_CLIPPED), PI(RBP, num_buckets, 7), PI(RBP, max_distance, 3)}},
    {OP_RELBIAS, "CLIPPED max_distance -1", INV, "params->max_distance = -1, must be in [1, 2^30)",
     0, {{0}}, {PI(RBP, kind, POSENC_RELBIAS_CLIPPED), PI(RBP, max_distance, -1)}},
    {OP_RELBIAS, "CLIPPED causal", INV, "params->causal = 1 is only defined for T5", 0, {{0}},
     {PI(RBP, kind, POSENC_RELBIAS_CLIPPED), PI(RBP, max_distance, 3), PI(RBP, causal, 1)}},
    {OP_RELBIAS, "causal 2", INV, "params->causal = 2, must be 0 or 1", 0, {{0}},
     {PI(RBP, causal, 2)}},
    {OP_RELBIAS, "q_offset -1", INV, "params->q_offset = -1, must be >= 0", 0, {{0}},
     {PI(RBP, q_offset, -1)}},
    {OP_RELBIAS, "k_offset -3", INV, "params->k_offset = -3", 0, {{0}}, {PI(RBP, k_offset, -3)}},
    {OP_RELBIAS, "reserved[1]", INV, "params->reserved[1] = 1", 0, {{0}},
     {PU(RBP, reserved[1], 1)}},
    {OP_RELBIAS, "table of 16 buckets", INV, "table->ne[0] = 16, but the params give 32 buckets",
     0, {TNE(1, 0, 16)}, {{0}}},
    {OP_RELBIAS, "table of 3 heads", INV, "table->ne = [32, 3, 1, 1]: ne[1] must be 2", 0,
     {TNE(1, 1, 3)}, {{0}}},
    {OP_RELBIAS, "logits shape", INV, "logits->ne = [3, 4, 2, 1] differs from dst->ne", 0,
     {TNE(0, 0, 3)}, {{0}}},
    {OP_RELBIAS, "logits partially overlaps dst", INV, "logits partially overlaps dst", 0,
     {TALIAS(0, 2, 4)}, {{0}}},
    {OP_RELBIAS, "table overlaps dst", INV, "table overlaps dst", 0,
     {TBUF(1, B_OUT), TOFF(1, 256)}, {{0}}},
    {OP_RELBIAS, "dst i32", INV, "dst->dtype = i32, must be f32 or f16", 0,
     {TDT(2, POSENC_DTYPE_I32)}, {{0}}},
    {OP_RELBIAS, "logits i32", INV, "logits->dtype = i32", 0, {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_RELBIAS, "table i32", INV, "table->dtype = i32", 0, {TDT(1, POSENC_DTYPE_I32)}, {{0}}},
    {OP_RELBIAS, "empty keys", OK, NULL, 0, {TNE(0, 0, 0), TNE(2, 0, 0)}, {{0}}},
    {OP_RELBIAS, "empty heads", OK, NULL, 0, {TN(0), TNE(2, 2, 0), TNE(1, 1, 0)}, {{0}}},
    {OP_RELBIAS, "empty but table wrong", INV, "table->ne[0] = 16", 0,
     {TNE(0, 0, 0), TNE(2, 0, 0), TNE(1, 0, 16)}, {{0}}},

    {OP_RELBIAS_BWD, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_RELBIAS_BWD, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_RELBIAS_BWD, "kind 9", INV, "params->kind = 9", 0, {{0}}, {PI(RBP, kind, 9)}},
    {OP_RELBIAS_BWD, "dtable 16 buckets", INV, "dtable->ne[0] = 16, but the params give 32", 0,
     {TNEC(1, 0, 16)}, {{0}}},
    {OP_RELBIAS_BWD, "dlogits i32", INV, "dlogits->dtype = i32", 0,
     {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_RELBIAS_BWD, "dtable i32", INV, "dtable->dtype = i32", 0, {TDT(1, POSENC_DTYPE_I32)},
     {{0}}},
    {OP_RELBIAS_BWD, "dlogits overlaps dtable", INV, "dlogits overlaps dtable", 0,
     {TBUF(0, B_OUT), TOFF(0, 256)}, {{0}}},
    {OP_RELBIAS_BWD, "empty", OK, NULL, 0, {TNE(0, 1, 0)}, {{0}}},

    /* ---- ALiBi ---- */
    {OP_SLOPES, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_SLOPES, "12 heads", OK, NULL, R_WRITES, {{0}}, {SC(0, 12)}},
    {OP_SLOPES, "user slopes", OK, NULL, R_WRITES, {{0}}, {PP(ALP, slopes, TB_SLOPES)}},
    {OP_SLOPES, "n_head 0", INV, NULL, 0, {{0}}, {SC(0, 0)}},
    {OP_SLOPES, "n_head -1", INV, NULL, 0, {{0}}, {SC(0, -1)}},
    {OP_SLOPES, "max_bias NaN", INV, NULL, 0, {{0}}, {PF(ALP, max_bias, NAN)}},
    {OP_SLOPES, "max_bias -8", INV, NULL, 0, {{0}}, {PF(ALP, max_bias, -8)}},
    {OP_SLOPES, "symmetric 2", INV, NULL, 0, {{0}}, {PI(ALP, symmetric, 2)}},
    {OP_SLOPES, "user slope NaN", INV, NULL, 0, {{0}}, {PP(ALP, slopes, TB_NAN)}},
    {OP_SLOPES, "out NULL", INV, NULL, 0, {{0}}, {HOUTNULL}},

    {OP_ALIBI, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_ALIBI, "logits NULL", OK, NULL, R_WRITES, {TN(0)}, {{0}}},
    {OP_ALIBI, "in place", OK, NULL, R_WRITES, {TALIAS(0, 1, 0)}, {{0}}},
    {OP_ALIBI, "causal, symmetric, user slopes", OK, NULL, R_WRITES, {{0}},
     {PI(ALP, causal, 1), PI(ALP, symmetric, 1), PP(ALP, slopes, TB_SLOPES)}},
    {OP_ALIBI, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_ALIBI, "max_bias NaN", INV, "params->max_bias = nan must be finite and > 0", 0, {{0}},
     {PF(ALP, max_bias, NAN)}},
    {OP_ALIBI, "max_bias -8", INV, "params->max_bias = -8", 0, {{0}}, {PF(ALP, max_bias, -8)}},
    {OP_ALIBI, "max_bias inf", INV, "params->max_bias = inf", 0, {{0}},
     {PF(ALP, max_bias, INFINITY)}},
    {OP_ALIBI, "causal 2", INV, "params->causal = 2, must be 0 or 1", 0, {{0}},
     {PI(ALP, causal, 2)}},
    {OP_ALIBI, "symmetric -1", INV, "params->symmetric = -1, must be 0 or 1", 0, {{0}},
     {PI(ALP, symmetric, -1)}},
    {OP_ALIBI, "q_offset -1", INV, "params->q_offset = -1, must be >= 0", 0, {{0}},
     {PI(ALP, q_offset, -1)}},
    {OP_ALIBI, "k_offset -1", INV, "params->k_offset = -1", 0, {{0}}, {PI(ALP, k_offset, -1)}},
    {OP_ALIBI, "positions past 2^24", INV, "k_offset + K - 1 = 16777219", 0, {{0}},
     {PI(ALP, k_offset, 1 << 24)}},
    {OP_ALIBI, "slope NaN", INV, "params->slopes[1] = nan is not finite", 0, {{0}},
     {PP(ALP, slopes, TB_NAN)}},
    {OP_ALIBI, "slope inf", INV, "params->slopes[1] = inf", 0, {{0}}, {PP(ALP, slopes, TB_INF)}},
    {OP_ALIBI, "reserved[0]", INV, "params->reserved[0] = 1", 0, {{0}},
     {PU(ALP, reserved[0], 1)}},
    {OP_ALIBI, "logits shape", INV, "logits->ne = [4, 4, 3, 1] differs from dst->ne", 0,
     {TNE(0, 2, 3)}, {{0}}},
    {OP_ALIBI, "logits partially overlaps dst", INV, "logits partially overlaps dst", 0,
     {TALIAS(0, 1, 8)}, {{0}}},
    {OP_ALIBI, "dst i32", INV, "dst->dtype = i32", 0, {TDT(1, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ALIBI, "logits i32", INV, "logits->dtype = i32", 0, {TDT(0, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ALIBI, "empty", OK, NULL, 0, {TNE(0, 0, 0), TNE(1, 0, 0)}, {{0}}},
    {OP_ALIBI, "empty but slope NaN", INV, "params->slopes[1] = nan", 0,
     {TNE(0, 0, 0), TNE(1, 0, 0)}, {PP(ALP, slopes, TB_NAN)}},

    /* ---- attention ---- */
    {OP_ATTN, "valid (NoPE, GQA)", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_ATTN, "weights NULL, causal", OK, NULL, R_WRITES, {TN(4)}, {PI(ATP, causal, 1)}},
    {OP_ATTN, "LEARNED", OK, NULL, R_WRITES, {TON(8)},
     {PI(ATP, encoding, POSENC_ATTENTION_LEARNED)}},
    {OP_ATTN, "ROPE with positions", OK, NULL, R_WRITES, {TON(6), TON(7)},
     {PI(ATP, encoding, POSENC_ATTENTION_ROPE)}},
    {OP_ATTN, "RELBIAS", OK, NULL, R_WRITES, {TON(9)},
     {PI(ATP, encoding, POSENC_ATTENTION_RELBIAS)}},
    {OP_ATTN, "ALIBI with a mask", OK, NULL, R_WRITES, {TON(5)},
     {PI(ATP, encoding, POSENC_ATTENTION_ALIBI)}},
    {OP_ATTN, "SINUSOIDAL on V too", OK, NULL, R_WRITES, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_SINUSOIDAL), PU(ATP, flags, POSENC_ATTENTION_PE_ON_V)}},
    {OP_ATTN, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_ATTN, "k head_dim 6", INV, "k->ne = [6, 1, 4, 1], must be [8, Hk, Tk, 1]", 0,
     {TNE(1, 0, 6)}, {{0}}},
    {OP_ATTN, "3 K/V heads for 2 query heads", INV, "q->ne[1] = 2 query heads is not a multiple "
     "of k->ne[1] = 3", 0, {TNE(1, 1, 3)}, {{0}}},
    {OP_ATTN, "v heads", INV, "v->ne = [8, 2, 4, 1], must be [Dv, 1, 4, 1]", 0, {TNE(2, 1, 2)},
     {{0}}},
    {OP_ATTN, "dst shape", INV, "dst->ne = [6, 2, 4, 1], must be [8, 2, 4, 1]", 0,
     {TNEC(3, 0, 6)}, {{0}}},
    {OP_ATTN, "weights shape", INV, "weights->ne = [3, 4, 2, 1], must be [4, 4, 2, 1]", 0,
     {TNEC(4, 0, 3)}, {{0}}},
    {OP_ATTN, "q i32", INV, "q->dtype = i32, must be f32 or f16", 0, {TDT(0, POSENC_DTYPE_I32)},
     {{0}}},
    {OP_ATTN, "v i32", INV, "v->dtype = i32", 0, {TDT(2, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ATTN, "dst i32", INV, "dst->dtype = i32", 0, {TDT(3, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ATTN, "weights i32", INV, "weights->dtype = i32", 0, {TDT(4, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ATTN, "encoding 9", INV, "params->encoding = 9 is not a posenc_attention_encoding", 0,
     {{0}}, {PI(ATP, encoding, 9)}},
    {OP_ATTN, "encoding -1", INV, "params->encoding = -1", 0, {{0}}, {PI(ATP, encoding, -1)}},
    {OP_ATTN, "scale NaN", INV, "params->scale = nan is not finite", 0, {{0}},
     {PF(ATP, scale, NAN)}},
    {OP_ATTN, "scale -inf", INV, "params->scale = -inf", 0, {{0}}, {PF(ATP, scale, -INFINITY)}},
    {OP_ATTN, "causal 2", INV, "params->causal = 2, must be 0 or 1", 0, {{0}},
     {PI(ATP, causal, 2)}},
    {OP_ATTN, "q_offset -1", INV, "params->q_offset = -1, must be >= 0", 0, {{0}},
     {PI(ATP, q_offset, -1)}},
    {OP_ATTN, "k_offset -1", INV, "params->k_offset = -1", 0, {{0}}, {PI(ATP, k_offset, -1)}},
    {OP_ATTN, "q_offset INT32_MAX", INV, "positions up to q_offset + Tq - 1 = 2147483650", 0,
     {{0}}, {PI(ATP, q_offset, INT32_MAX)}},
    {OP_ATTN, "unknown flag", INV, "params->flags = 0x4 has unknown bits", 0, {{0}},
     {PU(ATP, flags, 4)}},
    {OP_ATTN, "reserved[3]", INV, "params->reserved[3] = 1", 0, {{0}},
     {PU(ATP, reserved[3], 1)}},
    {OP_ATTN, "PE_ON_V with ROPE", INV, "needs encoding SINUSOIDAL or LEARNED", 0, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_ROPE), PU(ATP, flags, POSENC_ATTENTION_PE_ON_V)}},
    {OP_ATTN, "PE_ON_V with Dv 4", INV, "v->ne[0] = 4 must equal q->ne[0] = 8", 0,
     {TNE(2, 0, 4), TNEC(3, 0, 4)},
     {PI(ATP, encoding, POSENC_ATTENTION_SINUSOIDAL), PU(ATP, flags, POSENC_ATTENTION_PE_ON_V)}},
    {OP_ATTN, "SINUSOIDAL with odd head_dim", INV, "q->ne[0] = 7: SINUSOIDAL needs an even "
     "head_dim", 0, {TNE(0, 0, 7), TNE(1, 0, 7)}, {PI(ATP, encoding, POSENC_ATTENTION_SINUSOIDAL)}},
    {OP_ATTN, "ALIBI with alibi.causal", INV, "params->alibi.causal = 1, must be 0", 0, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_ALIBI), PI(ATP, alibi.causal, 1)}},
    {OP_ATTN, "ALIBI with alibi.q_offset", INV, "params->alibi.q_offset = 2, k_offset = 0", 0,
     {{0}}, {PI(ATP, encoding, POSENC_ATTENTION_ALIBI), PI(ATP, alibi.q_offset, 2)}},
    {OP_ATTN, "RELBIAS with relbias.k_offset", INV, "params->relbias.q_offset = 0, k_offset = 1",
     0, {TON(9)}, {PI(ATP, encoding, POSENC_ATTENTION_RELBIAS), PI(ATP, relbias.k_offset, 1)}},
    {OP_ATTN, "RELBIAS without a table", INV, "params->relbias_table is NULL", 0, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_RELBIAS)}},
    {OP_ATTN, "LEARNED without a table", INV, "params->learned_table is NULL", 0, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_LEARNED)}},
    {OP_ATTN, "LEARNED table d 6", INV, "params->learned_table->ne = [6, 8, 1, 1], must be [8, "
     "rows, 1, 1]", 0, {TON(8), TNE(8, 0, 6)}, {PI(ATP, encoding, POSENC_ATTENTION_LEARNED)}},
    {OP_ATTN, "LEARNED queries past the table", OOR, "query positions q_offset .. q_offset + Tq "
     "- 1 = 6 .. 9 reach past the 8 rows", 0, {TON(8)},
     {PI(ATP, encoding, POSENC_ATTENTION_LEARNED), PI(ATP, q_offset, 6)}},
    {OP_ATTN, "LEARNED keys past the table", OOR, "key positions k_offset .. k_offset + Tk - 1 "
     "= 5 .. 8", 0, {TON(8)},
     {PI(ATP, encoding, POSENC_ATTENTION_LEARNED), PI(ATP, k_offset, 5)}},
    {OP_ATTN, "LEARNED explicit position 8", OOR, "params->q_pos[2, 0, 0] = 8: query 2", R_LATE,
     {TON(8), TON(6), TOFF(6, 512)}, {PI(ATP, encoding, POSENC_ATTENTION_LEARNED)}},
    {OP_ATTN, "LEARNED f32 positions", INV, "params->q_pos->dtype = f32, must be i32 (LEARNED)",
     0, {TON(8), TON(6), TDT(6, POSENC_DTYPE_F32)},
     {PI(ATP, encoding, POSENC_ATTENTION_LEARNED)}},
    {OP_ATTN, "mask shape", INV, "params->mask->ne = [3, 4, 1, 1], must be [4, 4, 1 or 2, 1 or 1]",
     0, {TON(5), TNE(5, 0, 3)}, {{0}}},
    {OP_ATTN, "mask i32", INV, "params->mask->dtype = i32", 0,
     {TON(5), TDT(5, POSENC_DTYPE_I32)}, {{0}}},
    {OP_ATTN, "q_pos 3 tokens", INV, "params->q_pos->ne = [3, 1, 1, 1], must be [4, streams", 0,
     {TON(6), TNE(6, 0, 3)}, {PI(ATP, encoding, POSENC_ATTENTION_ROPE)}},
    {OP_ATTN, "k_pos f16", INV, "params->k_pos->dtype = f16, must be i32 or f32", 0,
     {TON(7), TDT(7, POSENC_DTYPE_F16)}, {PI(ATP, encoding, POSENC_ATTENTION_ROPE)}},
    {OP_ATTN, "ROPE freq_base NaN", INV, "params->rope: params->freq_base = nan", 0, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_ROPE), PF(ATP, rope.freq_base, NAN)}},
    {OP_ATTN, "ROPE n_dims 10", INV, "params->rope: params->n_dims = 10 > head_dim", 0, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_ROPE), PI(ATP, rope.n_dims, 10)}},
    {OP_ATTN, "ROPE MROPE with 1 stream", INV, "have 1 / 1 streams, but the RoPE pairs use 4", 0,
     {TON(6), TON(7)},
     {PI(ATP, encoding, POSENC_ATTENTION_ROPE), PI(ATP, rope.mode, POSENC_ROPE_MROPE),
      PI(ATP, rope.sections[0], 1), PI(ATP, rope.sections[1], 1), PI(ATP, rope.sections[2], 1),
      PI(ATP, rope.sections[3], 1)}},
    {OP_ATTN, "ALIBI max_bias NaN", INV, "params->max_bias = nan", R_LATE, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_ALIBI), PF(ATP, alibi.max_bias, NAN)}},
    {OP_ATTN, "RELBIAS num_buckets 3", INV, "params->num_buckets = 3", R_LATE, {TON(9)},
     {PI(ATP, encoding, POSENC_ATTENTION_RELBIAS), PI(ATP, relbias.num_buckets, 3)}},
    {OP_ATTN, "SINUSOIDAL base NaN", INV, "params->base = nan", R_LATE, {{0}},
     {PI(ATP, encoding, POSENC_ATTENTION_SINUSOIDAL), PF(ATP, sinusoidal.base, NAN)}},
    {OP_ATTN, "q overlaps dst", INV, "q overlaps dst in the same buffer", 0,
     {TBUF(0, B_OUT), TOFF(0, 256)}, {{0}}},
    {OP_ATTN, "weights overlaps dst", INV, "weights overlaps dst in the same buffer", 0,
     {TBUF(4, B_OUT), TOFF(4, 300)}, {{0}}},
    {OP_ATTN, "mask overlaps weights", INV, "params->mask overlaps weights", 0,
     {TON(5), TBUF(5, B_OUT2), TOFF(5, 256)}, {{0}}},
    {OP_ATTN, "empty queries", OK, NULL, 0, {TNE(0, 2, 0), TNE(3, 2, 0), TNE(4, 1, 0)}, {{0}}},
    {OP_ATTN, "empty keys", OK, NULL, 0, {TNE(1, 2, 0), TNE(2, 2, 0), TNE(4, 0, 0)}, {{0}}},
    {OP_ATTN, "empty but scale NaN", INV, "params->scale = nan", 0,
     {TNE(0, 2, 0), TNE(3, 2, 0), TNE(4, 1, 0)}, {PF(ATP, scale, NAN)}},

    {OP_DECAY, "valid", OK, NULL, R_WRITES | R_BASE, {{0}}, {{0}}},
    {OP_DECAY, "ctx NULL", INV, NULL, 0, {{0}}, {CTXNULL}},
    {OP_DECAY, "head_dim 0", INV, "head_dim = 0, must be in [1, 2^20]", 0, {{0}}, {SC(0, 0)}},
    {OP_DECAY, "n_keys 0", INV, "n_keys = 0, must be in [1, 2^31)", 0, {{0}}, {SC(1, 0)}},
    {OP_DECAY, "n_samples -1", INV, "n_samples = -1", 0, {{0}}, {SC(2, -1)}},
    {OP_DECAY, "too many weights", INV, "weights is too many", 0, {{0}},
     {SC(1, INT32_MAX), SC(2, 1 << 24)}},
    {OP_DECAY, "out_weight NULL", INV, "out_weight is NULL", 0, {{0}}, {HOUTNULL}},
    {OP_DECAY, "explicit positions", INV, "params->q_pos / k_pos must be NULL", 0, {TON(6)},
     {{0}}},
    {OP_DECAY, "k_offset -1", INV, "params->k_offset = -1 with 4 keys", 0, {{0}},
     {PI(ATP, k_offset, -1)}},
    {OP_DECAY, "encoding 9", INV, "params->encoding = 9", 0, {{0}}, {PI(ATP, encoding, 9)}},
    {OP_DECAY, "LEARNED table too short", OOR, "reach past the 8 rows", 0, {TON(8)},
     {PI(ATP, encoding, POSENC_ATTENTION_LEARNED), PI(ATP, k_offset, 5)}},
};

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
    size_t cap = TB_LEN(rows_specific) + OP_COUNT * 10 * BAT_COUNT;
    rows = calloc(cap, sizeof(*rows));
    assert_non_null(rows);
    for (int op = 0; op < OP_COUNT; op++) {
        for (size_t i = 0; i < TB_LEN(rows_specific); i++)
            if (rows_specific[i].op == (enum op)op)
                add_row(&rows_specific[i], rows_specific[i].needle, rows_specific[i].what);
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
           posenc_backend_name(th.kind), n_rows, TB_LEN(rows_specific),
           n_rows - TB_LEN(rows_specific), n_rows_run, n_unsupported);
    free(tests);
    free(rows);
    th_fini();
    return rc;
}
