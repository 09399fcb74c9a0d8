/* The driver's own cost of a launch: n calls of cuLaunchKernel from a C loop, no Python in
 * between (benchmarks/probes/launch_floor_probe.py compiles this with cc and calls it by
 * ctypes). Returns the first nonzero status, or 0. */
#include <stdint.h>

typedef int (*launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, void *, void **, void **);

int launch_loop(uintptr_t launch, uintptr_t function, unsigned grid, unsigned block,
                uintptr_t stream, uintptr_t params, int n)
{
    launch_kernel_t fn = (launch_kernel_t)launch;
    for (int i = 0; i < n; i++) {
        int status = fn((void *)function, grid, 1, 1, block, 1, 1, 0, (void *)stream,
                        (void **)params, 0);
        if (status)
            return status;
    }
    return 0;
}
