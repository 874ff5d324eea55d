/*
 * wrap_host_ab.c - what posenc_buffer_wrap_host saves a CPU runtime (issue #17): RoPE on a
 * tensor that lives in the runtime's host memory, two ways, alternated in one process:
 *   copy:    posenc_buffer_write(x) + posenc_rope into a posenc buffer + posenc_buffer_read
 *            (what a runtime without zero copy does for every op);
 *   wrapped: x, y and the positions wrapped once with posenc_buffer_wrap_host, then
 *            posenc_rope + posenc_context_finish (the host may then read y in place).
 * Shape [128, 32, T, 1] f32 NEOX (T = 1: a decode step, T = 512: a prefill), per backend
 * that can wrap host memory. Prints the median per-iteration time of each way over 15
 * alternated rounds, and checks that both ways give the same bytes.
 *
 *   wrap_host_ab [cpu|opencl] [T] [iterations per round]
 */
#include "posenc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define CHECK(call)                                                                       \
    do {                                                                                  \
        posenc_status st_ = (call);                                                       \
        if (st_ != POSENC_OK) {                                                           \
            fprintf(stderr, "%s: %s: %s\n", #call, posenc_status_string(st_),             \
                    posenc_context_last_error(ctx));                                      \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv)
{
    posenc_backend_kind kind = POSENC_BACKEND_CPU;
    if (argc > 1 && !strcmp(argv[1], "opencl"))
        kind = POSENC_BACKEND_OPENCL;
    const int T = argc > 2 ? atoi(argv[2]) : 1;
    const int iters = argc > 3 ? atoi(argv[3]) : (T > 64 ? 10 : 200);
    if (T < 1 || iters < 1) {
        fprintf(stderr, "usage: wrap_host_ab [cpu|opencl] [T >= 1] [iterations >= 1]\n");
        return 2;
    }
    struct posenc_context_params p = {.backend = kind};
    posenc_context *ctx = NULL;
    char err[256];
    posenc_status cst = posenc_context_create(&p, &ctx, err, sizeof(err));
    if (cst != POSENC_OK) {
        fprintf(stderr, "%s: %s\n", posenc_backend_name(kind), err);
        return cst == POSENC_ERR_UNAVAILABLE ? 77 : 1; /* 77: meson's SKIP */
    }
    size_t align = 0;
    CHECK(posenc_buffer_host_alignment(ctx, &align));
    const size_t n = (size_t)128 * 32 * (size_t)T, bytes = n * 4;
    const size_t alloc = (bytes + 4095) / 4096 * 4096; /* aligned_alloc: a multiple */
    float *host = aligned_alloc(4096, alloc), *out = aligned_alloc(4096, alloc);
    float *out_copy = malloc(bytes);
    int32_t *pos = aligned_alloc(4096, (T * 4 + 4095) / 4096 * 4096);
    if (!host || !out || !out_copy || !pos || align > 4096)
        return 1;
    for (int t = 0; t < T; t++)
        pos[t] = t + 100;
    for (size_t i = 0; i < n; i++)
        host[i] = (float)(i % 97) / 97.0f;
    posenc_buffer *bx, *by, *bp, *hx, *hy, *hp;
    CHECK(posenc_buffer_create(ctx, bytes, &bx));
    CHECK(posenc_buffer_create(ctx, bytes, &by));
    CHECK(posenc_buffer_create(ctx, (size_t)T * 4, &bp));
    CHECK(posenc_buffer_write(bp, 0, pos, (size_t)T * 4));
    CHECK(posenc_buffer_wrap_host(ctx, host, bytes, &hx));
    CHECK(posenc_buffer_wrap_host(ctx, out, bytes, &hy));
    CHECK(posenc_buffer_wrap_host(ctx, pos, (size_t)T * 4, &hp));
    const struct posenc_rope_params rp = {.mode = POSENC_ROPE_NEOX};
    posenc_tensor x = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, 128, 32, T, 1);
    posenc_tensor y = posenc_tensor_contiguous(by, 0, POSENC_DTYPE_F32, 128, 32, T, 1);
    posenc_tensor ps = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor wx = posenc_tensor_contiguous(hx, 0, POSENC_DTYPE_F32, 128, 32, T, 1);
    posenc_tensor wy = posenc_tensor_contiguous(hy, 0, POSENC_DTYPE_F32, 128, 32, T, 1);
    posenc_tensor wp = posenc_tensor_contiguous(hp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    enum { R = 15 };
    double a[R], b[R];
    for (int r = 0; r < R; r++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) {
            CHECK(posenc_buffer_write(bx, 0, host, bytes));
            CHECK(posenc_rope(ctx, &x, &ps, &y, &rp));
            CHECK(posenc_buffer_read(by, 0, out_copy, bytes));
        }
        a[r] = (now() - t0) / iters * 1e6;
        t0 = now();
        for (int i = 0; i < iters; i++) {
            CHECK(posenc_rope(ctx, &wx, &wp, &wy, &rp));
            CHECK(posenc_context_finish(ctx));
        }
        b[r] = (now() - t0) / iters * 1e6;
    }
    /* after the last finish, y is the host's to read in place */
    const int same = memcmp(out, out_copy, bytes) == 0;
    qsort(a, R, sizeof(a[0]), cmp);
    qsort(b, R, sizeof(b[0]), cmp);
    printf("%s [128, 32, %d] f32 (%zu KiB): copy in/out %.1f us, wrapped %.1f us per op "
           "(medians of %d alternated rounds of %d)%s\n",
           posenc_backend_name(kind), T, bytes / 1024, a[R / 2], b[R / 2], R, iters,
           same ? "" : "  RESULTS DIFFER");
    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&by);
    posenc_buffer_destroy(&bp);
    posenc_buffer_destroy(&hx);
    posenc_buffer_destroy(&hy);
    posenc_buffer_destroy(&hp);
    posenc_context_destroy(&ctx);
    free(host);
    free(out);
    free(out_copy);
    free(pos);
    return same ? 0 : 1;
}
