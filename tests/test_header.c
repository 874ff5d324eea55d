/* The public header alone, as strict C11: it must compile with no other include. */
#include "posenc.h"

int main(void)
{
    struct posenc_context_params p = {0};
    struct posenc_sinusoidal_params s = {0};
    return (int)p.backend + (int)s.layout + (POSENC_OK == 0 ? 0 : 1);
}
