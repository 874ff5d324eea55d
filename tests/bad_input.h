/*
 * bad_input.h - what test_bad_input.c and its table (bad_input_rows.c) share: the ops, the
 * mutations a row applies to an op's valid base call, the row itself and the shorthand
 * the table is written in. See test_bad_input.c for how the rows are run.
 */
#ifndef POSENC_TESTS_BAD_INPUT_H
#define POSENC_TESTS_BAD_INPUT_H

#include "posenc.h"

#include <stddef.h>
#include <stdint.h>

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

/* The hand-written rows (bad_input_rows.c), grouped by op. */
extern const struct row bad_input_rows[];
extern const size_t bad_input_n_rows;

#endif
