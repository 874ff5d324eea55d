/*
 * ops_rope_vk.c - the Vulkan RoPE op (posenc_rope, posenc_rope_qk, posenc_rope_rerotate:
 * one dispatch of shaders/rope.comp each) and posenc_copy (strided copy and f32 <-> f16
 * conversion: shaders/copy.comp).
 *
 * RoPE: the grid, the push constants and the per-call table are laid out in
 * src/kernel_abi.h. The table (pair frequencies, position bases, dims, copy dims) goes to
 * host table slot 0 (pe_vk_table: a fresh range of the current batch's arena each call,
 * nothing waited for); everything else travels as push constants.
 */
#include "vk_internal.h"

#include "kernel_abi.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* SPIR-V built by shaders/meson.build: rope_<x><dst><x2><dst2>, copy_<src><dst>
 * (0 = f32, 1 = f16). */
static const uint32_t spv_rope_0000[] =
#include "shaders/rope_0000.spv.h"
    ;
static const uint32_t spv_rope_0001[] =
#include "shaders/rope_0001.spv.h"
    ;
static const uint32_t spv_rope_0010[] =
#include "shaders/rope_0010.spv.h"
    ;
static const uint32_t spv_rope_0011[] =
#include "shaders/rope_0011.spv.h"
    ;
static const uint32_t spv_rope_0100[] =
#include "shaders/rope_0100.spv.h"
    ;
static const uint32_t spv_rope_0101[] =
#include "shaders/rope_0101.spv.h"
    ;
static const uint32_t spv_rope_0110[] =
#include "shaders/rope_0110.spv.h"
    ;
static const uint32_t spv_rope_0111[] =
#include "shaders/rope_0111.spv.h"
    ;
static const uint32_t spv_rope_1000[] =
#include "shaders/rope_1000.spv.h"
    ;
static const uint32_t spv_rope_1001[] =
#include "shaders/rope_1001.spv.h"
    ;
static const uint32_t spv_rope_1010[] =
#include "shaders/rope_1010.spv.h"
    ;
static const uint32_t spv_rope_1011[] =
#include "shaders/rope_1011.spv.h"
    ;
static const uint32_t spv_rope_1100[] =
#include "shaders/rope_1100.spv.h"
    ;
static const uint32_t spv_rope_1101[] =
#include "shaders/rope_1101.spv.h"
    ;
static const uint32_t spv_rope_1110[] =
#include "shaders/rope_1110.spv.h"
    ;
static const uint32_t spv_rope_1111[] =
#include "shaders/rope_1111.spv.h"
    ;
static const uint32_t spv_copy_00[] =
#include "shaders/copy_00.spv.h"
    ;
static const uint32_t spv_copy_01[] =
#include "shaders/copy_01.spv.h"
    ;
static const uint32_t spv_copy_10[] =
#include "shaders/copy_10.spv.h"
    ;
static const uint32_t spv_copy_11[] =
#include "shaders/copy_11.spv.h"
    ;

struct pe_vk_shader {
    const char *name;
    const uint32_t *code;
    size_t size;
};

/* Indexed by x_f16 << 3 | dst_f16 << 2 | x2_f16 << 1 | dst2_f16. */
static const struct pe_vk_shader rope_shaders[16] = {
    {"rope_0000", spv_rope_0000, sizeof spv_rope_0000},
    {"rope_0001", spv_rope_0001, sizeof spv_rope_0001},
    {"rope_0010", spv_rope_0010, sizeof spv_rope_0010},
    {"rope_0011", spv_rope_0011, sizeof spv_rope_0011},
    {"rope_0100", spv_rope_0100, sizeof spv_rope_0100},
    {"rope_0101", spv_rope_0101, sizeof spv_rope_0101},
    {"rope_0110", spv_rope_0110, sizeof spv_rope_0110},
    {"rope_0111", spv_rope_0111, sizeof spv_rope_0111},
    {"rope_1000", spv_rope_1000, sizeof spv_rope_1000},
    {"rope_1001", spv_rope_1001, sizeof spv_rope_1001},
    {"rope_1010", spv_rope_1010, sizeof spv_rope_1010},
    {"rope_1011", spv_rope_1011, sizeof spv_rope_1011},
    {"rope_1100", spv_rope_1100, sizeof spv_rope_1100},
    {"rope_1101", spv_rope_1101, sizeof spv_rope_1101},
    {"rope_1110", spv_rope_1110, sizeof spv_rope_1110},
    {"rope_1111", spv_rope_1111, sizeof spv_rope_1111},
};

/* Indexed by src_f16 << 1 | dst_f16. */
static const struct pe_vk_shader copy_shaders[4] = {
    {"copy_00", spv_copy_00, sizeof spv_copy_00},
    {"copy_01", spv_copy_01, sizeof spv_copy_01},
    {"copy_10", spv_copy_10, sizeof spv_copy_10},
    {"copy_11", spv_copy_11, sizeof spv_copy_11},
};

/* Workgroups per dispatch on CPU devices (lavapipe pays per workgroup). */
#define PE_VK_ROPE_CPU_GROUPS 64u

/* ------------------------------------------------------------------------------------ */
/* rope                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* Offset and strides of a [head_dim, heads, T, B] view into the push constants. */
static posenc_status put_x_view(struct pe_vk_backend *be, const struct pe_view *v, uint32_t *p,
                                const char *name, struct pe_vk_bind *bind)
{
    return pe_vk_put_view(be, "rope", v, 4, v->ne, &p[0],
                          (uint32_t *const[]){&p[1], &p[2], &p[3], &p[4]}, name, bind);
}

/* Access level of a view for runs of 2^geom dims (p: off, st0..st3 as sent; unused
 * strides are 0): 3 when rows are contiguous and start on multiples of 8 elements, 2 on
 * multiples of 4, 1 on multiples of 2, else 0; never above geom. */
static uint32_t access_level(const uint32_t *p, uint32_t geom)
{
    if (p[1] != 1u)
        return 0;
    const uint32_t any = p[0] | p[2] | p[3] | p[4];
    const uint32_t lvl = (any & 7u) == 0 ? 3 : (any & 3u) == 0 ? 2 : (any & 1u) == 0 ? 1 : 0;
    return lvl < geom ? lvl : geom;
}

/* off (the pushed offset of pos: relative to its binding) + stream * pos.st[1] as a
 * uint32 table entry. */
static posenc_status pos_base(struct pe_vk_backend *be, const struct pe_view *pos, uint32_t off,
                              uint8_t stream, uint32_t *out)
{
    return pe_vk_put_u32(be, "rope", out, (int64_t)off + (int64_t)stream * pos->st[1],
                         "position index");
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

posenc_status pe_vk_rope(struct pe_backend *b, const struct pe_rope_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const struct pe_view *x = &op->x, *dst = &op->dst, *pos = &op->pos;
    const bool has_x2 = op->x2.mem != NULL;
    const bool has_from = op->pos_from.mem != NULL;
    const struct pe_view *x2 = has_x2 ? &op->x2 : x, *dst2 = has_x2 ? &op->dst2 : dst;
    const struct pe_view *from = has_from ? &op->pos_from : pos;
    const int64_t n_pairs = op->n_pairs, n_offs = op->n_offs, d = x->ne[0];
    const int64_t ne1 = x->ne[1], ne1b = has_x2 ? x2->ne[1] : 0, ne2 = x->ne[2], ne3 = x->ne[3];
    if (n_pairs <= 0 || ne2 <= 0 || ne3 <= 0 || (ne1 <= 0 && ne1b <= 0))
        return POSENC_OK;

    struct pe_vk_rope_push pc;
    memset(&pc, 0, sizeof pc);
    /* x, dst, x2, dst2, pos, pos_from, table (kernel_abi.h). */
    struct pe_vk_bind binds[7];
    PE_RETURN_IF_ERROR(put_x_view(be, x, &pc.x_off, "x", &binds[0]));
    PE_RETURN_IF_ERROR(put_x_view(be, dst, &pc.dst_off, "dst", &binds[1]));
    binds[2] = binds[0];
    binds[3] = binds[1];
    if (has_x2) {
        PE_RETURN_IF_ERROR(put_x_view(be, x2, &pc.x2_off, "x2", &binds[2]));
        PE_RETURN_IF_ERROR(put_x_view(be, dst2, &pc.dst2_off, "dst2", &binds[3]));
    }
    /* The positions' offsets travel in the table (pos_base), one per stream. */
    uint32_t pos_off, from_off = 0, unused_st1;
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, "rope", pos, 3, pos->ne, &pos_off,
                                      (uint32_t *const[]){&pc.pos_st0, &unused_st1, &pc.pos_st2},
                                      "pos", &binds[4]));
    binds[5] = binds[4];
    if (has_from)
        PE_RETURN_IF_ERROR(pe_vk_put_view(
            be, "rope", from, 3, from->ne, &from_off,
            (uint32_t *const[]){&pc.from_st0, &unused_st1, &pc.from_st2}, "pos_from",
            &binds[5]));
    uint32_t rows_flags = 0;
    if (op->rows.mem) {
        /* rope_set_rows: the indices in the x2 fields and binding 2, in 32-bit words */
        const struct pe_view *r = &op->rows;
        uint32_t roff, rst0, rst1;
        PE_RETURN_IF_ERROR(pe_vk_put_view(be, "rope", r, 2, r->ne, &roff,
                                          (uint32_t *const[]){&rst0, &rst1}, "rows", &binds[2]));
        const int64_t w = r->dtype == POSENC_DTYPE_I64 ? 2 : 1;
        const int64_t last =
            ((int64_t)roff + (r->ne[0] - 1) * rst0 + (r->ne[1] - 1) * rst1) * w + (w - 1);
        uint32_t unused;
        PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &unused, last, "last index word"));
        pc.x2_off = (uint32_t)(roff * w);
        pc.x2_st0 = (uint32_t)(rst0 * w);
        pc.x2_st1 = (uint32_t)(rst1 * w);
        PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &pc.x2_st2, op->n_rows, "dst rows"));
        rows_flags = PE_ROPE_FLAG_ROWS | (w == 2 ? PE_ROPE_FLAG_ROWS_I64 : 0u);
    }
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &pc.ne1, ne1, "heads of x"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &pc.ne1b, ne1b, "heads of x2"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &pc.ne2, ne2, "tokens"));

    /* Geometry: the largest G (runs of G dims starting on multiples of G) that n_offs,
     * head_dim and n_pairs allow (kernel_abi.h). G = 8 only with an f16 tensor and every
     * tensor at access level 3 (one uvec4 of 8 halves per run; f32 keeps G <= 4). */
    const bool pairing1 = op->pairing != 0;
    const bool any_f16 = x->dtype == POSENC_DTYPE_F16 || dst->dtype == POSENC_DTYPE_F16 ||
                         (has_x2 && (x2->dtype == POSENC_DTYPE_F16 ||
                                     dst2->dtype == POSENC_DTYPE_F16));
    const bool aligned8 = access_level(&pc.x_off, 3) == 3 && access_level(&pc.dst_off, 3) == 3 &&
                          (!has_x2 || (access_level(&pc.x2_off, 3) == 3 &&
                                       access_level(&pc.dst2_off, 3) == 3));
    uint32_t geom = 0;
    for (uint32_t g = any_f16 && aligned8 ? 3 : 2; g >= 1 && geom == 0; g--) {
        const int64_t m = (int64_t)1 << g; /* G */
        const int64_t pm = pairing1 ? m : m / 2; /* pairs per unit */
        if (n_offs % m == 0 && d % m == 0 && n_pairs % pm == 0)
            geom = g;
    }
    const int64_t pu = pairing1 ? (int64_t)1 << geom : (geom >= 2 ? (int64_t)1 << (geom - 1) : 1);
    if (pos->dtype == POSENC_DTYPE_F32)
        pc.flags |= PE_ROPE_FLAG_POS_F32;
    if (has_from && from->dtype == POSENC_DTYPE_F32)
        pc.flags |= PE_ROPE_FLAG_FROM_F32;
    if (op->sign < 0)
        pc.flags |= PE_ROPE_FLAG_NEG;
    uint32_t flags = geom << PE_ROPE_GEOM_SHIFT | rows_flags; /* specialization constant 0 */
    if (has_from)
        flags |= PE_ROPE_FLAG_FROM;
    if (pairing1)
        flags |= PE_ROPE_FLAG_PAIRING1;
    flags |= access_level(&pc.x_off, geom) << PE_ROPE_X_ACC_SHIFT;
    flags |= access_level(&pc.dst_off, geom) << PE_ROPE_DST_ACC_SHIFT;
    if (has_x2) {
        flags |= PE_ROPE_FLAG_HAS_X2;
        flags |= access_level(&pc.x2_off, geom) << PE_ROPE_X2_ACC_SHIFT;
        flags |= access_level(&pc.dst2_off, geom) << PE_ROPE_DST2_ACC_SHIFT;
    }
    /* Dims outside the window are copied unless that tensor is rotated in place. */
    const int64_t n_out = d - 2 * n_pairs;
    if (n_out > 0 && ne1 > 0 && !pe_vk_same_view(x, dst))
        flags |= PE_ROPE_FLAG_COPY_X;
    if (n_out > 0 && ne1b > 0 && !pe_vk_same_view(x2, dst2))
        flags |= PE_ROPE_FLAG_COPY_X2;
    pc.mscale = (float)op->mscale;

    const int64_t n_rot = n_pairs / pu;
    const int64_t n_copy =
        (flags & (PE_ROPE_FLAG_COPY_X | PE_ROPE_FLAG_COPY_X2)) ? n_out >> geom : 0;
    const int64_t n_units = n_rot + n_copy;
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &pc.n_rot, n_rot, "pairs"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "rope", &pc.n_units, n_units, "units per token"));
    if (n_units > INT64_MAX / ne2 || n_units * ne2 > INT64_MAX / ne3 ||
        !pe_vk_grid_fits(be, (uint64_t)(n_units * ne2 * ne3), PE_VK_ROPE_WG))
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan rope: %" PRId64 " units x %" PRId64 " tokens x %" PRId64
                        " batches is more than this backend handles in one launch",
                        n_units, ne2, ne3);
    pc.n_total = (uint32_t)(n_units * ne2 * ne3);

    /* The table: 2 header records, 2 per pair, 1 per copy unit (kernel_abi.h). */
    const size_t n_rec = 2 + 2 * (size_t)n_pairs + (size_t)n_copy;
    /* Tables of up to 256 records (127 pairs with their copy units: head sizes up to
     * 254) live on the stack: no allocation per call. */
    uint32_t stack_tab[256][4];
    uint32_t(*tab)[4] = stack_tab;
    if (n_rec <= 256)
        memset(stack_tab, 0, n_rec * sizeof *tab);
    else
        tab = calloc(n_rec, sizeof *tab);
    if (!tab)
        return pe_error(b->ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory (rope table)");
    posenc_status st = POSENC_OK;
    uint32_t l_units, l_ne2;
    pe_vk_magic(pc.n_units, &tab[0][0], &l_units);
    pe_vk_magic(pc.ne2, &tab[0][1], &l_ne2);
    tab[0][2] = l_units | l_ne2 << 8;
    tab[1][0] = (uint32_t)(2 + 2 * n_pairs);
    for (int64_t j = 0; j < n_pairs && st == POSENC_OK; j++) {
        uint32_t *r0 = tab[2 + 2 * j], *r1 = tab[3 + 2 * j];
        r0[0] = f32_bits(op->freq_f32[j]);           /* hi and lo words (pe_freq_split) */
        r1[2] = f32_bits(op->freq_f32[n_pairs + j]);
        st = pos_base(be, pos, pos_off, op->stream[j], &r0[2]);
        if (has_from && st == POSENC_OK) {
            r0[1] = f32_bits(op->freq_from_f32[j]);
            r1[3] = f32_bits(op->freq_from_f32[n_pairs + j]);
            st = pos_base(be, from, from_off, op->stream_from[j], &r0[3]);
        }
        const int64_t a = pairing1 ? n_offs + j : n_offs + 2 * j;
        r1[0] = (uint32_t)a; /* dims < d, which put_view checked fit in uint32 */
        r1[1] = (uint32_t)(pairing1 ? a + n_pairs : a + 1);
    }
    if (n_copy > 0) {
        const int64_t step = (int64_t)1 << geom;
        int64_t k = 2 + 2 * n_pairs;
        for (int64_t i = 0; i < d; i += step)
            if (i < n_offs || i >= n_offs + 2 * n_pairs)
                tab[k++][0] = (uint32_t)i;
    }
    if (st == POSENC_OK)
        st = pe_vk_table(be, 0, tab, n_rec * sizeof *tab, &binds[6]);
    if (tab != stack_tab)
        free(tab);
    PE_RETURN_IF_ERROR(st);

    const int variant =
        (x->dtype == POSENC_DTYPE_F16) << 3 | (dst->dtype == POSENC_DTYPE_F16) << 2 |
        (has_x2 && x2->dtype == POSENC_DTYPE_F16) << 1 | (has_x2 && dst2->dtype == POSENC_DTYPE_F16);
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline_spec(be, rope_shaders[variant].name,
                                           rope_shaders[variant].code, rope_shaders[variant].size,
                                           &flags, 1, &pipe));
    const uint32_t gx = pe_vk_groups(be, pc.n_total, PE_VK_ROPE_WG, PE_VK_ROPE_CPU_GROUPS);
    /* only dst and dst2 are written (barriers follow real dependencies: pe_vk_access) */
    return pe_vk_dispatch_rw(be, pipe, 7, binds, 1u << 1 | 1u << 3, &pc, sizeof pc, gx, 1, 1);
}

/* ------------------------------------------------------------------------------------ */
/* copy                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* Whether every row of a view (p: off, st0..st3 as sent) starts on a multiple of g
 * elements and its elements are contiguous. */
static bool rows_aligned(const uint32_t *p, uint32_t g)
{
    return p[1] == 1u && p[0] % g == 0 && p[2] % g == 0 && p[3] % g == 0 && p[4] % g == 0;
}

posenc_status pe_vk_copy(struct pe_backend *b, const struct pe_copy_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const struct pe_view *src = &op->src, *dst = &op->dst;
    for (int k = 0; k < 4; k++)
        if (dst->ne[k] <= 0)
            return POSENC_OK;

    /* Drop dims of one element and merge a dim into the one below it where both views
     * continue contiguously: a packed tensor becomes one long row. */
    int64_t ne[4] = {1, 1, 1, 1}, ss[4] = {0, 0, 0, 0}, ds[4] = {0, 0, 0, 0};
    int n = 0;
    for (int k = 0; k < 4; k++) {
        if (dst->ne[k] == 1)
            continue;
        if (n > 0 && src->st[k] == ss[n - 1] * ne[n - 1] && dst->st[k] == ds[n - 1] * ne[n - 1]) {
            ne[n - 1] *= dst->ne[k];
            continue;
        }
        ne[n] = dst->ne[k];
        ss[n] = src->st[k];
        ds[n] = dst->st[k];
        n++;
    }
    if (n == 0) { /* one element */
        ss[0] = ds[0] = 1;
    }
    const struct pe_view sv = {src->mem, src->dtype, src->offset, {ne[0], ne[1], ne[2], ne[3]},
                               {ss[0], ss[1], ss[2], ss[3]}};
    const struct pe_view dv = {dst->mem, dst->dtype, dst->offset, {ne[0], ne[1], ne[2], ne[3]},
                               {ds[0], ds[1], ds[2], ds[3]}};

    struct pe_vk_copy_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind binds[2];
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, "copy", &sv, 4, ne, &pc.src_off,
        (uint32_t *const[]){&pc.src_st0, &pc.src_st1, &pc.src_st2, &pc.src_st3}, "src",
        &binds[0]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, "copy", &dv, 4, ne, &pc.dst_off,
        (uint32_t *const[]){&pc.dst_st0, &pc.dst_st1, &pc.dst_st2, &pc.dst_st3}, "dst",
        &binds[1]));
    if (ne[0] == 1) { /* a row of one element: any unit stride will do */
        pc.src_st0 = pc.dst_st0 = 1;
    }
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "copy", &pc.ne1, ne[1], "ne[1]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "copy", &pc.ne2, ne[2], "ne[2]"));

    /* Units of 4 or 2 elements where both views allow whole aligned accesses. */
    const uint32_t *sp = &pc.src_off, *dp = &pc.dst_off;
    uint32_t spec[2] = {0, 0}; /* log2 G, one row */
    if (ne[0] % 4 == 0 && rows_aligned(sp, 4) && rows_aligned(dp, 4))
        spec[0] = 2;
    else if (ne[0] % 2 == 0 && rows_aligned(sp, 2) && rows_aligned(dp, 2))
        spec[0] = 1;
    const uint32_t g = 1u << spec[0];
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "copy", &pc.n_units, ne[0] / g, "units per row"));
    const int64_t rows = ne[1] * ne[2] * ne[3];
    if (rows > INT64_MAX / pc.n_units ||
        !pe_vk_grid_fits(be, (uint64_t)pc.n_units * (uint64_t)rows, PE_VK_ROPE_WG))
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan copy: %" PRId64 " x %" PRId64
                        " elements is more than this backend handles in one launch",
                        ne[0], rows);
    pc.n_total = (uint32_t)((uint64_t)pc.n_units * (uint64_t)rows);
    uint32_t l0, l1, l2;
    pe_vk_magic(pc.n_units, &pc.units_magic, &l0);
    pe_vk_magic(pc.ne1, &pc.ne1_magic, &l1);
    pe_vk_magic(pc.ne2, &pc.ne2_magic, &l2);
    pc.shifts = l0 | l1 << 8 | l2 << 16;
    spec[1] = rows == 1;

    const int variant = (src->dtype == POSENC_DTYPE_F16) << 1 | (dst->dtype == POSENC_DTYPE_F16);
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline_spec(be, copy_shaders[variant].name,
                                           copy_shaders[variant].code, copy_shaders[variant].size,
                                           spec, 2, &pipe));
    const uint32_t gx = pe_vk_groups(be, pc.n_total, PE_VK_ROPE_WG, PE_VK_ROPE_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, 2, binds, 1u << 1 /* dst */, &pc, sizeof pc, gx, 1, 1);
}
