/* Quicksort 200 pseudo-random words (LCG); the sorted array is left at OUT for the test to check. */
#define N 200
#define OUT ((volatile int *)0x400)
static int data[N];

static void quicksort(int *a, int lo, int hi) {
    while (lo < hi) {
        int pivot = a[(lo + hi) / 2], i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) { int t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (j - lo < hi - i) { quicksort(a, lo, j); lo = i; } else { quicksort(a, i, hi); hi = j; }
    }
}

int main(void) {
    unsigned s = 12345;
    for (int i = 0; i < N; i++) { s = s * 1103515245u + 12345u; data[i] = (int)s >> 3; }
    quicksort(data, 0, N - 1);
    for (int i = 0; i < N; i++) OUT[i] = data[i];
    return N;
}
