// encodings_params.glsl - push constants of learned.comp, learned_bwd.comp, resize.comp,
// relbias.comp, relbias_bwd.comp and alibi.comp (one block per shader, chosen by the
// PE_PUSH_* macro the shader defines first). Mirrors the pe_vk_*_push structs and
// PE_ENC_FLAG_* in src/kernel_abi.h, where sizes and offsets are checked with
// _Static_assert and the fields are explained. Change both together.
//
// Grids are flat (grid-stride loops over n_total); divisions by run-time extents use
// pe_udiv magic numbers, their shifts l packed 8 bits each in `shifts`.

#ifndef PE_ENCODINGS_PARAMS_GLSL
#define PE_ENCODINGS_PARAMS_GLSL

#define PE_ENC_FLAG_HAS_X     0x1u // an input x / logits is added
#define PE_ENC_FLAG_PAIRS     0x2u // f16 dst, a unit is elements 2u, 2u+1: one word store
#define PE_ENC_FLAG_CAUSAL    0x4u // alibi
#define PE_ENC_FLAG_SYMMETRIC 0x8u // alibi

// alibi.comp specialization constant 0 (src/kernel_abi.h)
#define PE_ALIBI_SPEC_VEC       0x1u
#define PE_ALIBI_SPEC_HAS_X     0x2u
#define PE_ALIBI_SPEC_CAUSAL    0x4u
#define PE_ALIBI_SPEC_SYMMETRIC 0x8u
#define PE_ALIBI_VEC_Q          4u

// relbias.comp specialization constant 0 (src/kernel_abi.h)
#define PE_RELBIAS_SPEC_VEC     0x1u
#define PE_RELBIAS_SPEC_HAS_X   0x2u
#define PE_RELBIAS_VEC_Q        4u

#if defined(PE_PUSH_LEARNED)
layout(push_constant, std430) uniform PeLearnedPush {
    uint dst_off, dst_st0, dst_st1, dst_st2;    // 0
    uint x_off, x_st0, x_st1, x_st2;            // 16
    uint tab_off, tab_st0, tab_st1;             // 32
    uint pos_off, pos_st0, pos_st1;             // 44
    uint n_units, ne1;                          // 56
    uint units_magic, ne1_magic, shifts;        // 64
    uint n_total, flags;                        // 76
    uint ne2;                                   // 84: B (the vector path, shared positions)
} pc;                                           // 88 bytes
#elif defined(PE_PUSH_LEARNED_BWD)
layout(push_constant, std430) uniform PeLearnedBwdPush {
    uint dtab_off, dtab_st0, dtab_st1;          // 0
    uint dy_off, dy_st0, dy_st1, dy_st2;        // 12
    uint n_i0, i0_magic;                        // 28
    uint n_tok, tok_magic;                      // 36
    uint shifts;                                // 44
    uint n_total;                               // 48
} pc;                                           // 52 bytes
#elif defined(PE_PUSH_RESIZE)
layout(push_constant, std430) uniform PeResizePush {
    uint dst_off, dst_st0, dst_st1;             // 0
    uint src_off, src_st0, src_st1;             // 12
    uint n_units, units_magic;                  // 24
    uint dst_w, dst_w_magic;                    // 32
    uint shifts;                                // 40
    uint src_w, cls;                            // 44
    uint n_total, flags;                        // 52
} pc;                                           // 60 bytes
#elif defined(PE_PUSH_BIAS)
layout(push_constant, std430) uniform PeBiasPush {
    uint dst_off, dst_st0, dst_st1, dst_st2, dst_st3;   // 0
    uint lg_off, lg_st0, lg_st1, lg_st2, lg_st3;        // 20
    uint tab_off, tab_st0, tab_st1;                     // 40
    uint n_units, ne1, ne2;                             // 52
    uint units_magic, ne1_magic, ne2_magic, shifts;     // 64
    uint n_total;                                       // 80
    int base;                                           // 84
    uint flags;                                         // 88
} pc;                                                   // 92 bytes
#elif defined(PE_PUSH_RELBIAS_BWD)
layout(push_constant, std430) uniform PeRelbiasBwdPush {
    uint dtab_off, dtab_st0, dtab_st1;                  // 0
    uint dl_off, dl_st0, dl_st1, dl_st2, dl_st3;        // 12
    uint ne0, ne1, ne3;                                 // 32: K, Q, B
    uint n_buckets, nb_magic, shifts;                   // 44
    uint n_total;                                       // 56
    int rel_delta;                                      // 60
} pc;                                                   // 64 bytes
#else
#error "define one PE_PUSH_* before including encodings_params.glsl"
#endif

#endif
