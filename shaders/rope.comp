#version 450
// rope.comp - rotary position embedding (posenc_rope, posenc_rope_qk with x2/dst2,
// posenc_rope_rerotate with pos_from), one dispatch for all of it.
//
// Variants (glslc -D, see shaders/meson.build): X_F16, DST_F16, X2_F16, DST2_F16 = 0
// (f32) or 1 (f16 stored in 32-bit words). Everything else that shapes the code is in
// specialization constant 0 (PE_ROPE_FLAG_*), so that a pipeline holds only the paths it
// runs: CPU implementations (lavapipe) execute both sides of every branch under a mask.
// Only the cheap per-unit choices (positions' dtype, sign) are push-constant flags.
// The grid, the push constants, the table and the flags are described in
// src/kernel_abi.h.
//
// Work decomposition: one loop iteration = one unit = (PU rotated pairs, token, batch),
// PU = 1, 2, 4 or 8. It reads the position(s), forms each angle from the frequency's two
// f32 words and takes sin and cos with posenc's own range reduction and polynomials
// (common.glsl's pe_angle_reduce, pe_sincos_red) ONCE, then rotates those pairs in every head of x and of x2
// (fused Q/K: x2 may have another head count). Units past n_rot copy G dims outside the
// rotated window from x to dst in every head, unless x is rotated in place. Both
// elements of a pair are read before either is written, so dst may be the very same view
// as x. Invocations of a subgroup take consecutive units of one token, so their accesses
// in each head are adjacent.
//
// Memory access: a unit's dims come in runs of W = 1, 2, 4 or 8 consecutive dims (the
// geometry G); a tensor whose rows are contiguous and aligned reads / writes a run as one
// vec2 / vec4 / two vec4 (f32) or one word / uvec2 / uvec4 (f16) access (its ACC level),
// otherwise element by element. G = 8 (f16 only, every tensor aligned to 8 elements) is
// for lavapipe, which scalarizes each access per 32-bit component with a bounds check:
// 16 bytes per access instead of 8 puts f16 at f32's bytes per access. f16 elements not written as whole words use atomicAnd/atomicOr on their word,
// since another invocation may own the other half.
#extension GL_GOOGLE_include_directive : require

#ifndef X_F16
#define X_F16 0
#endif
#ifndef DST_F16
#define DST_F16 0
#endif
#ifndef X2_F16
#define X2_F16 0
#endif
#ifndef DST2_F16
#define DST2_F16 0
#endif

#define PE_ROPE_PUSH
#include "common.glsl"
#include "rope_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ROPE_WG

layout(constant_id = 0) const uint FLAGS = 0u;

const bool HAS_X2 = (FLAGS & PE_ROPE_FLAG_HAS_X2) != 0u;
const bool PAIRING1 = (FLAGS & PE_ROPE_FLAG_PAIRING1) != 0u;
const uint GEOM = (FLAGS >> PE_ROPE_GEOM_SHIFT) & 3u;  // 0..3: runs of 1, 2, 4, 8 dims
const uint G = 1u << GEOM;
const uint PU = PAIRING1 ? G : (G >= 4u ? G / 2u : 1u); // pairs per unit
const uint RUN = PAIRING1 ? PU : 2u * PU;              // dims per run (a.., and b..)
const uint X_ACC = (FLAGS >> PE_ROPE_X_ACC_SHIFT) & 3u;
const uint DST_ACC = (FLAGS >> PE_ROPE_DST_ACC_SHIFT) & 3u;
const uint X2_ACC = (FLAGS >> PE_ROPE_X2_ACC_SHIFT) & 3u;
const uint DST2_ACC = (FLAGS >> PE_ROPE_DST2_ACC_SHIFT) & 3u;

vec2 pe_unpack2(uint w)
{
    return vec2(pe_f16_to_f32(w & 0xffffu), pe_f16_to_f32(w >> 16));
}

uint pe_pack2(vec2 v)
{
    return pe_f32_to_f16(v.x) | (pe_f32_to_f16(v.y) << 16);
}

// ---- element access, one set per tensor -------------------------------------------------
// Whole buffers, seen as 1-, 2- and 4-element arrays (blocks aliasing one binding). x2 /
// dst2 are bound to x when absent (then never touched); dst may be the same memory as x.
// ldv_T(e, st, n): elements e, e+st, .. (n = 1, 2, 4) in a vec4; with ACC >= 1 (st == 1,
// e a multiple of 2; ACC 2: of 4) as whole 2- / 4-element accesses. stv_T likewise.
// ld8v_T / st8v_T: 8 elements as (lo, hi); ACC 3 (e a multiple of 8): one uvec4 (f16) or
// two vec4 (f32), else two ldv / stv of 4.

#define PE_LOAD_F32(T, B, ACC)                                                             \
    layout(std430, set = 0, binding = B) readonly buffer T##B1 { float T##_1[]; };          \
    layout(std430, set = 0, binding = B) readonly buffer T##B2 { vec2 T##_2[]; };           \
    layout(std430, set = 0, binding = B) readonly buffer T##B4 { vec4 T##_4[]; };           \
    float ld_##T(uint e) { return T##_1[e]; }                                              \
    vec2 ld2_##T(uint e) { return T##_2[e >> 1]; }                                         \
    vec4 ld4_##T(uint e) { return T##_4[e >> 2]; }                                         \
    void ld8_##T(uint e, out vec4 lo, out vec4 hi)                                         \
    {                                                                                      \
        lo = T##_4[e >> 2];                                                                \
        hi = T##_4[(e >> 2) + 1u];                                                         \
    }

#define PE_LOAD_F16(T, B, ACC)                                                             \
    layout(std430, set = 0, binding = B) readonly buffer T##B1 { uint T##_1[]; };           \
    layout(std430, set = 0, binding = B) readonly buffer T##B2 { uvec2 T##_2[]; };          \
    layout(std430, set = 0, binding = B) readonly buffer T##B4 { uvec4 T##_4[]; };          \
    float ld_##T(uint e) { return pe_load_f16(T##_1[e >> 1], e & 1u); }                    \
    vec2 ld2_##T(uint e) { return pe_unpack2(T##_1[e >> 1]); }                             \
    vec4 ld4_##T(uint e)                                                                   \
    {                                                                                      \
        uvec2 w = T##_2[e >> 2];                                                           \
        return vec4(pe_unpack2(w.x), pe_unpack2(w.y));                                     \
    }                                                                                      \
    void ld8_##T(uint e, out vec4 lo, out vec4 hi)                                         \
    {                                                                                      \
        uvec4 w = T##_4[e >> 3];                                                           \
        lo = vec4(pe_unpack2(w.x), pe_unpack2(w.y));                                       \
        hi = vec4(pe_unpack2(w.z), pe_unpack2(w.w));                                       \
    }

#define PE_LOADV(T, ACC)                                                                   \
    vec4 ldv_##T(uint e, uint st, uint n)                                                  \
    {                                                                                      \
        if (n == 1u)                                                                       \
            return vec4(ld_##T(e), 0.0, 0.0, 0.0);                                         \
        if (n == 2u)                                                                       \
            return ACC >= 1u ? vec4(ld2_##T(e), 0.0, 0.0)                                  \
                             : vec4(ld_##T(e), ld_##T(e + st), 0.0, 0.0);                  \
        if (ACC >= 2u)                                                                     \
            return ld4_##T(e);                                                             \
        if (ACC == 1u)                                                                     \
            return vec4(ld2_##T(e), ld2_##T(e + 2u));                                      \
        return vec4(ld_##T(e), ld_##T(e + st), ld_##T(e + 2u * st), ld_##T(e + 3u * st));  \
    }                                                                                      \
    void ld8v_##T(uint e, uint st, out vec4 lo, out vec4 hi)                               \
    {                                                                                      \
        if (ACC == 3u) {                                                                   \
            ld8_##T(e, lo, hi);                                                            \
        } else {                                                                           \
            lo = ldv_##T(e, st, 4u);                                                       \
            hi = ldv_##T(e + 4u * st, st, 4u);                                             \
        }                                                                                  \
    }

#define PE_STORE_F32(T, B, ACC)                                                            \
    layout(std430, set = 0, binding = B) writeonly buffer T##B1 { float T##_1[]; };         \
    layout(std430, set = 0, binding = B) writeonly buffer T##B2 { vec2 T##_2[]; };          \
    layout(std430, set = 0, binding = B) writeonly buffer T##B4 { vec4 T##_4[]; };          \
    void st_##T(uint e, float v) { T##_1[e] = v; }                                         \
    void st2_##T(uint e, vec2 v) { T##_2[e >> 1] = v; }                                    \
    void st4_##T(uint e, vec4 v) { T##_4[e >> 2] = v; }                                    \
    void st8_##T(uint e, vec4 lo, vec4 hi)                                                 \
    {                                                                                      \
        T##_4[e >> 2] = lo;                                                                \
        T##_4[(e >> 2) + 1u] = hi;                                                         \
    }

#define PE_STORE_F16(T, B, ACC)                                                            \
    layout(std430, set = 0, binding = B) buffer T##B1 { uint T##_1[]; };                    \
    layout(std430, set = 0, binding = B) writeonly buffer T##B2 { uvec2 T##_2[]; };         \
    layout(std430, set = 0, binding = B) writeonly buffer T##B4 { uvec4 T##_4[]; };         \
    void st_##T(uint e, float v)                                                           \
    {                                                                                      \
        uint sh = (e & 1u) * 16u;                                                          \
        atomicAnd(T##_1[e >> 1], ~(0xffffu << sh));                                        \
        atomicOr(T##_1[e >> 1], pe_f32_to_f16(v) << sh);                                   \
    }                                                                                      \
    void st2_##T(uint e, vec2 v) { T##_1[e >> 1] = pe_pack2(v); }                          \
    void st4_##T(uint e, vec4 v) { T##_2[e >> 2] = uvec2(pe_pack2(v.xy), pe_pack2(v.zw)); } \
    void st8_##T(uint e, vec4 lo, vec4 hi)                                                 \
    {                                                                                      \
        T##_4[e >> 3] = uvec4(pe_pack2(lo.xy), pe_pack2(lo.zw), pe_pack2(hi.xy),           \
                              pe_pack2(hi.zw));                                            \
    }

#define PE_STOREV(T, ACC)                                                                  \
    void stv_##T(uint e, uint st, uint n, vec4 v)                                          \
    {                                                                                      \
        if (n == 1u) {                                                                     \
            st_##T(e, v.x);                                                                \
        } else if (n == 2u) {                                                              \
            if (ACC >= 1u) {                                                               \
                st2_##T(e, v.xy);                                                          \
            } else {                                                                       \
                st_##T(e, v.x);                                                            \
                st_##T(e + st, v.y);                                                       \
            }                                                                              \
        } else if (ACC >= 2u) {                                                            \
            st4_##T(e, v);                                                                 \
        } else if (ACC == 1u) {                                                            \
            st2_##T(e, v.xy);                                                              \
            st2_##T(e + 2u, v.zw);                                                         \
        } else {                                                                           \
            st_##T(e, v.x);                                                                \
            st_##T(e + st, v.y);                                                           \
            st_##T(e + 2u * st, v.z);                                                      \
            st_##T(e + 3u * st, v.w);                                                      \
        }                                                                                  \
    }                                                                                      \
    void st8v_##T(uint e, uint st, vec4 lo, vec4 hi)                                       \
    {                                                                                      \
        if (ACC == 3u) {                                                                   \
            st8_##T(e, lo, hi);                                                            \
        } else {                                                                           \
            stv_##T(e, st, 4u, lo);                                                        \
            stv_##T(e + 4u * st, st, 4u, hi);                                              \
        }                                                                                  \
    }

#if X_F16
PE_LOAD_F16(x, 0, X_ACC)
#else
PE_LOAD_F32(x, 0, X_ACC)
#endif
PE_LOADV(x, X_ACC)
#if DST_F16
PE_STORE_F16(dst, 1, DST_ACC)
#else
PE_STORE_F32(dst, 1, DST_ACC)
#endif
PE_STOREV(dst, DST_ACC)
#if X2_F16
PE_LOAD_F16(x2, 2, X2_ACC)
#else
PE_LOAD_F32(x2, 2, X2_ACC)
#endif
PE_LOADV(x2, X2_ACC)
#if DST2_F16
PE_STORE_F16(dst2, 3, DST2_ACC)
#else
PE_STORE_F32(dst2, 3, DST2_ACC)
#endif
PE_STOREV(dst2, DST2_ACC)

layout(std430, set = 0, binding = 4) readonly buffer PosBuf { int pos_i[]; };
layout(std430, set = 0, binding = 5) readonly buffer FromBuf { int from_i[]; };
layout(std430, set = 0, binding = 6) readonly buffer TabBuf { uvec4 tab[]; };
// posenc_rope_set_rows (PE_ROPE_FLAG_ROWS, no x2): binding 2 holds the row indices as
// 32-bit words (kernel_abi.h).
layout(std430, set = 0, binding = 2) readonly buffer RowsBuf { uint rows_w[]; };

// ---- one unit over the heads of one tensor -----------------------------------------------
// Pairing 0: the run at a holds PU adjacent pairs (x, y), (z, w) rotated by (c.x, s.x),
// (c.y, s.y). Pairing 1: runs at a and b hold the first and second elements of PU pairs.

vec4 pe_rot0(vec4 v, vec4 c, vec4 s)
{
    return vec4(v.x * c.x - v.y * s.x, v.x * s.x + v.y * c.x,
                v.z * c.y - v.w * s.y, v.z * s.y + v.w * c.y);
}

#define PE_ROT_HEADS(T, D, n_head, xr, xs0, xs1, dr, ds0, ds1)                               \
    {                                                                                      \
        uint xa = (xr) + a * (xs0), da = (dr) + a * (ds0);                                 \
        if (!PAIRING1) {                                                                   \
            for (uint h = 0u; h < (n_head); h++, xa += (xs1), da += (ds1))                 \
                stv_##D(da, (ds0), RUN, pe_rot0(ldv_##T(xa, (xs0), RUN), c, s));           \
        } else {                                                                           \
            uint xb = (xr) + b * (xs0), db = (dr) + b * (ds0);                             \
            for (uint h = 0u; h < (n_head); h++, xa += (xs1), da += (ds1), xb += (xs1),    \
                      db += (ds1)) {                                                       \
                vec4 va = ldv_##T(xa, (xs0), RUN);                                         \
                vec4 vb = ldv_##T(xb, (xs0), RUN);                                         \
                stv_##D(da, (ds0), RUN, va * c - vb * s);                                  \
                stv_##D(db, (ds0), RUN, va * s + vb * c);                                  \
            }                                                                              \
        }                                                                                  \
    }

// G == 8: the same with runs of 8 dims as (lo, hi) halves; pairs 0-3 of the unit use
// (c, s), pairs 4-7 (pairing 1 only) (c1, s1). Pairing 0: 4 adjacent pairs in one run.
#define PE_ROT_HEADS8(T, D, n_head, xr, xs0, xs1, dr, ds0, ds1)                              \
    {                                                                                      \
        uint xa = (xr) + a * (xs0), da = (dr) + a * (ds0);                                 \
        if (!PAIRING1) {                                                                   \
            for (uint h = 0u; h < (n_head); h++, xa += (xs1), da += (ds1)) {               \
                vec4 lo, hi;                                                               \
                ld8v_##T(xa, (xs0), lo, hi);                                               \
                st8v_##D(da, (ds0), pe_rot0(lo, c, s), pe_rot0(hi, c.zwzw, s.zwzw));       \
            }                                                                              \
        } else {                                                                           \
            uint xb = (xr) + b * (xs0), db = (dr) + b * (ds0);                             \
            for (uint h = 0u; h < (n_head); h++, xa += (xs1), da += (ds1), xb += (xs1),    \
                      db += (ds1)) {                                                       \
                vec4 al, ah, bl, bh;                                                       \
                ld8v_##T(xa, (xs0), al, ah);                                               \
                ld8v_##T(xb, (xs0), bl, bh);                                               \
                st8v_##D(da, (ds0), al * c - bl * s, ah * c1 - bh * s1);                   \
                st8v_##D(db, (ds0), al * s + bl * c, ah * s1 + bh * c1);                   \
            }                                                                              \
        }                                                                                  \
    }

// Copy the G dims from cd of every head.
#define PE_COPY_HEADS(T, D, n_head, xr, xs0, xs1, dr, ds0, ds1)                              \
    {                                                                                      \
        uint xe = (xr) + cd * (xs0), de = (dr) + cd * (ds0);                               \
        for (uint h = 0u; h < (n_head); h++, xe += (xs1), de += (ds1)) {                   \
            if (G == 8u) {                                                                 \
                vec4 lo, hi;                                                               \
                ld8v_##T(xe, (xs0), lo, hi);                                               \
                st8v_##D(de, (ds0), lo, hi);                                               \
            } else {                                                                       \
                stv_##D(de, (ds0), G, ldv_##T(xe, (xs0), G));                              \
            }                                                                              \
        }                                                                                  \
    }

// cos and sin (times mscale) of the pair with records r (freq hi bits, freq_from hi bits,
// pos_base, from_base) and r1 (a, b, freq lo bits, freq_from lo bits) at token i2, batch
// i3: common.glsl's pe_angle_reduce (the frequency in quarter turns as two f32 words;
// re-rotation reduces both angles and subtracts the reduced ones). The sign is the
// positions' (exact).
void pe_rope_cs(uvec4 r, uvec4 r1, uint i2, uint i3, out float c, out float s)
{
    int raw = pos_i[r.z + i2 * pc.pos_st0 + i3 * pc.pos_st2];
    float p = (pc.flags & PE_ROPE_FLAG_POS_F32) != 0u ? intBitsToFloat(raw) : float(raw);
    if ((pc.flags & PE_ROPE_FLAG_NEG) != 0u)
        p = -p;
    float n;
    float rr = pe_angle_reduce(p, uintBitsToFloat(r.x), uintBitsToFloat(r1.z), n);
    if ((FLAGS & PE_ROPE_FLAG_FROM) != 0u) {
        int rf = from_i[r.w + i2 * pc.from_st0 + i3 * pc.from_st2];
        float pf = (pc.flags & PE_ROPE_FLAG_FROM_F32) != 0u ? intBitsToFloat(rf) : float(rf);
        if ((pc.flags & PE_ROPE_FLAG_NEG) != 0u)
            pf = -pf;
        float nf;
        float rrf = pe_angle_reduce(pf, uintBitsToFloat(r.y), uintBitsToFloat(r1.w), nf);
        rr = pe_angle_sub(rr, rrf, n, nf);
    }
    float sn, cs;
    pe_sincos_red(rr, n, sn, cs);
    c = cs * pc.mscale;
    s = sn * pc.mscale;
}

void main()
{
    uvec4 hdr = tab[0];
    uint copy_first = tab[1].x;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;

    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, hdr.x, hdr.z & 0xffu);
        uint u = idx - row * pc.n_units;
        uint i3 = pe_udiv(row, hdr.y, (hdr.z >> 8) & 0xffu);
        uint i2 = row - i3 * pc.ne2;
        uint d2 = i2; // dst token
        if ((FLAGS & PE_ROPE_FLAG_ROWS) != 0u) {
            uint w = pc.x2_off + i2 * pc.x2_st0 + i3 * pc.x2_st1;
            d2 = rows_w[w];
            bool ok = (FLAGS & PE_ROPE_FLAG_ROWS_I64) != 0u
                          ? (rows_w[w + 1u] == 0u && d2 < pc.x2_st2)
                          : (int(d2) >= 0 && d2 < pc.x2_st2);
            if (!ok)
                continue; // POSENC_ROWS_UNCHECKED: the token is skipped
        }
        uint xr = pc.x_off + i2 * pc.x_st2 + i3 * pc.x_st3;
        uint dr = pc.dst_off + d2 * pc.dst_st2 + i3 * pc.dst_st3;
        uint x2r = pc.x2_off + i2 * pc.x2_st2 + i3 * pc.x2_st3;
        uint d2r = pc.dst2_off + i2 * pc.dst2_st2 + i3 * pc.dst2_st3;

        if ((FLAGS & (PE_ROPE_FLAG_COPY_X | PE_ROPE_FLAG_COPY_X2)) != 0u && u >= pc.n_rot) {
            // G dims outside the rotated window
            uint cd = tab[copy_first + (u - pc.n_rot)].x;
            if ((FLAGS & PE_ROPE_FLAG_COPY_X) != 0u)
                PE_COPY_HEADS(x, dst, pc.ne1, xr, pc.x_st0, pc.x_st1, dr, pc.dst_st0,
                              pc.dst_st1)
            if ((FLAGS & PE_ROPE_FLAG_COPY_X2) != 0u)
                PE_COPY_HEADS(x2, dst2, pc.ne1b, x2r, pc.x2_st0, pc.x2_st1, d2r,
                              pc.dst2_st0, pc.dst2_st1)
            continue;
        }

        uint j = PU * u; // the unit's first pair
        uvec4 r1 = tab[3u + 2u * j];
        uint a = r1.x, b = r1.y;
        vec4 c = vec4(0.0), s = vec4(0.0), c1 = vec4(0.0), s1 = vec4(0.0);
        pe_rope_cs(tab[2u + 2u * j], r1, i2, i3, c.x, s.x);
        if (PU >= 2u)
            pe_rope_cs(tab[4u + 2u * j], tab[5u + 2u * j], i2, i3, c.y, s.y);
        if (PU >= 4u) {
            pe_rope_cs(tab[6u + 2u * j], tab[7u + 2u * j], i2, i3, c.z, s.z);
            pe_rope_cs(tab[8u + 2u * j], tab[9u + 2u * j], i2, i3, c.w, s.w);
        }
        if (PU == 8u) {
            pe_rope_cs(tab[10u + 2u * j], tab[11u + 2u * j], i2, i3, c1.x, s1.x);
            pe_rope_cs(tab[12u + 2u * j], tab[13u + 2u * j], i2, i3, c1.y, s1.y);
            pe_rope_cs(tab[14u + 2u * j], tab[15u + 2u * j], i2, i3, c1.z, s1.z);
            pe_rope_cs(tab[16u + 2u * j], tab[17u + 2u * j], i2, i3, c1.w, s1.w);
        }

        if (G == 8u) {
            PE_ROT_HEADS8(x, dst, pc.ne1, xr, pc.x_st0, pc.x_st1, dr, pc.dst_st0, pc.dst_st1)
            if (HAS_X2)
                PE_ROT_HEADS8(x2, dst2, pc.ne1b, x2r, pc.x2_st0, pc.x2_st1, d2r, pc.dst2_st0,
                              pc.dst2_st1)
        } else {
            PE_ROT_HEADS(x, dst, pc.ne1, xr, pc.x_st0, pc.x_st1, dr, pc.dst_st0, pc.dst_st1)
            if (HAS_X2)
                PE_ROT_HEADS(x2, dst2, pc.ne1b, x2r, pc.x2_st0, pc.x2_st1, d2r, pc.dst2_st0,
                             pc.dst2_st1)
        }
    }
}
