/* Benchmark: a tight integer loop over an L1 array (loads, stores, ALU, branches). */
#define N 256
static unsigned a[N];

int main(void) {
    unsigned h = 1;
    for (int rep = 0; rep < 200; rep++)
        for (int i = 0; i < N; i++) {
            h = (h ^ a[i]) * 16777619u + (unsigned)i;
            a[i] = h >> 3;
        }
    return (int)h;
}
