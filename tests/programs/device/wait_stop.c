/* A kernel that blocks until the host asks it to retire: bumps its progress word until LAUNCH_STOP != 0, then
   reports error 1 ("stopped by the host"), as every blocking wait of the real kernels does. Runs on any core. */
#include "tt.h"
#define LAUNCH_STOP 0x14u
int main(void) {
    while (!REG32(LAUNCH_STOP)) REG32(ARGS_BASE + 0x80u) += 1u;
    return 1;
}
