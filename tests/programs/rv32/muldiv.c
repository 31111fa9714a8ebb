/* Mixed signed/unsigned mul/div/rem, mulh, sign-extending byte/half loads; the test mirrors it in Python. */
static volatile signed char sb[4] = {-128, -1, 5, 127};
static volatile short sh[4] = {-32768, -2, 300, 32767};

int main(void) {
    unsigned acc = 1, s = 99;
    for (int i = 1; i <= 300; i++) {
        s = s * 1664525u + 1013904223u;
        int a = (int)s, b = (int)(s >> 7) - 0x100000;
        if ((i & 15) == 0) b = 0;
        if ((i & 31) == 1) { a = (int)0x80000000; b = -1; }
        int q = b == 0 ? -1 : (a == (int)0x80000000 && b == -1) ? a : a / b;
        int r = b == 0 ? a : (a == (int)0x80000000 && b == -1) ? 0 : a % b;
        unsigned qu = (unsigned)b == 0 ? 0xFFFFFFFFu : (unsigned)a / (unsigned)b;
        unsigned ru = (unsigned)b == 0 ? (unsigned)a : (unsigned)a % (unsigned)b;
        long long p = (long long)a * b;
        unsigned long long pu = (unsigned long long)(unsigned)a * (unsigned)b;
        acc = acc * 31u + (unsigned)q;
        acc = acc * 31u + (unsigned)r;
        acc = acc * 31u + qu + ru;
        acc ^= (unsigned)(p >> 32) + (unsigned)(pu >> 32) + (unsigned)p;
        acc += (unsigned)(sb[i & 3] * sh[(i >> 2) & 3]);
    }
    return (int)acc;
}
