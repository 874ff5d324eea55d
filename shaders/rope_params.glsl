// rope_params.glsl - push constants of rope.comp and copy.comp, and rope.comp's flags
// (its specialization constant 0). Mirrors struct pe_vk_rope_push / pe_vk_copy_push and
// PE_ROPE_* in src/kernel_abi.h, where the sizes (128 and 72 bytes) and offsets are
// checked with _Static_assert and the fields and the rope table are explained. Change
// both together.
// Define PE_ROPE_PUSH or PE_COPY_PUSH before including: a shader has one block.

#ifndef PE_ROPE_PARAMS_GLSL
#define PE_ROPE_PARAMS_GLSL

#define PE_ROPE_FLAG_POS_F32   0x1u
#define PE_ROPE_FLAG_FROM      0x2u
#define PE_ROPE_FLAG_FROM_F32  0x4u
#define PE_ROPE_FLAG_NEG       0x8u
#define PE_ROPE_FLAG_PAIRING1  0x10u
#define PE_ROPE_FLAG_COPY_X    0x20u
#define PE_ROPE_FLAG_COPY_X2   0x40u
#define PE_ROPE_FLAG_HAS_X2    0x80u
#define PE_ROPE_GEOM_SHIFT     8u
#define PE_ROPE_X_ACC_SHIFT    10u
#define PE_ROPE_DST_ACC_SHIFT  12u
#define PE_ROPE_X2_ACC_SHIFT   14u
#define PE_ROPE_DST2_ACC_SHIFT 16u
#define PE_ROPE_FLAG_ROWS      0x40000u
#define PE_ROPE_FLAG_ROWS_I64  0x80000u

#ifdef PE_ROPE_PUSH
layout(push_constant, std430) uniform PeRopePush {
    uint x_off, x_st0, x_st1, x_st2, x_st3;                 // 0
    uint dst_off, dst_st0, dst_st1, dst_st2, dst_st3;       // 20
    uint x2_off, x2_st0, x2_st1, x2_st2, x2_st3;            // 40
    uint dst2_off, dst2_st0, dst2_st1, dst2_st2, dst2_st3;  // 60
    uint pos_st0, pos_st2;                                  // 80
    uint from_st0, from_st2;                                // 88
    uint n_rot, n_units;                                    // 96
    uint ne1, ne1b, ne2;                                    // 104
    uint n_total;                                           // 116
    float mscale;                                           // 120
    uint flags;                                             // 124: POS_F32, FROM_F32, NEG
} pc;                                                       // 128 bytes
#endif

#ifdef PE_COPY_PUSH
layout(push_constant, std430) uniform PeCopyPush {
    uint src_off, src_st0, src_st1, src_st2, src_st3;       // 0
    uint dst_off, dst_st0, dst_st1, dst_st2, dst_st3;       // 20
    uint n_units, ne1, ne2;                                 // 40
    uint units_magic, ne1_magic, ne2_magic, shifts;         // 52
    uint n_total;                                           // 68
} pc;                                                       // 72 bytes
#endif

#endif
