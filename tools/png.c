/* png.c - write a canvas as PNG through libpng (see plot.h). */
#include "plot.h"

#include "posenc.h"

#include <stdio.h>
#include <string.h>

#if POSENC_TOOL_HAVE_PNG

#include <png.h>

int png_available(void)
{
    return 1;
}

static void on_png_error(png_structp png, png_const_charp msg)
{
    char *err = png_get_error_ptr(png);
    snprintf(err, 256, "libpng: %s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* The libpng part, separate so that no local of it lives across setjmp/longjmp. */
static int write_stream(FILE *f, const struct canvas *c, const char *comment, char *err256)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, err256, on_png_error,
                                              on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        snprintf(err256, 256, "libpng: out of memory");
        return 0;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return 0;
    }
    png_init_io(png, f);
    png_set_compression_level(png, 9);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    char software[64];
    snprintf(software, sizeof(software), "posenc %s", posenc_version());
    png_text text[2];
    memset(text, 0, sizeof(text));
    text[0].compression = PNG_TEXT_COMPRESSION_NONE;
    text[0].key = (png_charp) "Software";
    text[0].text = software;
    text[1].compression = PNG_TEXT_COMPRESSION_NONE;
    text[1].key = (png_charp) "Comment";
    text[1].text = (png_charp)comment;
    png_set_text(png, info, text, comment ? 2 : 1);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++)
        png_write_row(png, c->rgb + (size_t)y * (size_t)c->w * 3);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 1;
}

int png_write(const char *path, const struct canvas *c, const char *comment, char *err,
              size_t err_size)
{
    char msg[256] = "";
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, err_size, "cannot open '%s' for writing", path);
        return 0;
    }
    int ok = write_stream(f, c, comment, msg);
    if (fclose(f) != 0 && ok) {
        ok = 0;
        snprintf(msg, sizeof(msg), "write error");
    }
    if (!ok) {
        snprintf(err, err_size, "%s: %s", path, msg);
        remove(path);
    }
    return ok;
}

#else /* !POSENC_TOOL_HAVE_PNG */

int png_available(void)
{
    return 0;
}

int png_write(const char *path, const struct canvas *c, const char *comment, char *err,
              size_t err_size)
{
    (void)path;
    (void)c;
    (void)comment;
    snprintf(err, err_size, "built without libpng: PNG output is not available "
                            "(install libpng-dev and rebuild)");
    return 0;
}

#endif
