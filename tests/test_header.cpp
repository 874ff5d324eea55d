// The public header alone, from C++ (extern "C" guards, no C-only constructs).
#include "posenc.h"

int main()
{
    posenc_context_params p = {};
    posenc_sinusoidal_params s = {};
    return static_cast<int>(p.backend) + static_cast<int>(s.layout);
}
