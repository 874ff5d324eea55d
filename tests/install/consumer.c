/*
 * consumer.c - a program outside posenc, built the way its users build it: against an
 * installed posenc through pkg-config (shared and static), or with posenc as a meson
 * subproject (tests/install/check_install.py builds it each way).
 *
 *   consumer [EXPECTED_VERSION]
 *
 * Checks that the version macros, posenc_version() and EXPECTED_VERSION (what pkg-config
 * or meson reported) agree, then runs one op on every backend that is available (the CPU
 * always is) and compares it with the formula. Exit 0 when everything agrees.
 */
#include <posenc.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static int run_sinusoidal(posenc_backend_kind kind)
{
    enum { D = 6, T = 3 };
    struct posenc_context_params cp = {.backend = kind};
    posenc_context *ctx = NULL;
    char err[256];
    posenc_status st = posenc_context_create(&cp, &ctx, err, sizeof(err));
    if (st == POSENC_ERR_UNAVAILABLE) {
        printf("  %-7s unavailable (%s)\n", posenc_backend_name(kind), err);
        return 0;
    }
    if (st != POSENC_OK) {
        printf("  %-7s context: %s: %s\n", posenc_backend_name(kind), posenc_status_string(st),
               err);
        return 1;
    }
    const int32_t pos[T] = {0, 1, 2};
    float pe[T][D];
    posenc_buffer *pb = NULL, *db = NULL;
    if ((st = posenc_buffer_create(ctx, sizeof(pos), &pb)) == POSENC_OK &&
        (st = posenc_buffer_create(ctx, sizeof(pe), &db)) == POSENC_OK &&
        (st = posenc_buffer_write(pb, 0, pos, sizeof(pos))) == POSENC_OK) {
        posenc_tensor p = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
        posenc_tensor d = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, T, 1, 1);
        st = posenc_sinusoidal(ctx, NULL, &p, &d, NULL);
        if (st == POSENC_OK)
            st = posenc_buffer_read(db, 0, pe, sizeof(pe));
    }
    if (st != POSENC_OK)
        printf("  %-7s sinusoidal: %s: %s\n", posenc_backend_name(kind), posenc_status_string(st),
               posenc_context_last_error(ctx));
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&db);
    posenc_context_destroy(&ctx);
    if (st != POSENC_OK)
        return 1;
    double max_err = 0.0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            double w = pow(10000.0, -(double)(i - i % 2) / D);
            double want = i % 2 ? cos(t * w) : sin(t * w);
            max_err = fmax(max_err, fabs(pe[t][i] - want));
        }
    printf("  %-7s PE(2) = [%.3f, %.3f, %.3f, %.3f, %.3f, %.3f], max error %.1e\n",
           posenc_backend_name(kind), pe[2][0], pe[2][1], pe[2][2], pe[2][3], pe[2][4], pe[2][5],
           max_err);
    return max_err > 1e-5;
}

int main(int argc, char **argv)
{
    char macros[32];
    snprintf(macros, sizeof(macros), "%d.%d.%d", POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR,
             POSENC_VERSION_PATCH);
    printf("posenc_version() %s, header %s, expected %s\n", posenc_version(), macros,
           argc > 1 ? argv[1] : "(not given)");
    int bad = strcmp(posenc_version(), macros) != 0 || (argc > 1 && strcmp(argv[1], macros) != 0);
    if (bad)
        printf("version mismatch\n");
    const posenc_backend_kind kinds[] = {POSENC_BACKEND_CPU, POSENC_BACKEND_OPENCL,
                                         POSENC_BACKEND_VULKAN};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        bad |= run_sinusoidal(kinds[i]);
    return bad;
}
