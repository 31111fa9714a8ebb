/* The C library functions GCC may call even when freestanding (loops or struct copies turned into memset/memcpy).
 * Compiled once per compiler into an object every image links right after crt0 (runtime/compile.py), instead of in
 * every kernel's translation unit: the image holds the same bytes, each core's compile does less. Weak, so a kernel
 * may bring its own. */
#include <stdint.h>
#include <stddef.h>

void *memset(void *dst, int c, size_t n);
void *memcpy(void *dst, const void *src, size_t n);

__attribute__((weak)) void *memset(void *dst, int c, size_t n)
{
    volatile uint8_t *d = (volatile uint8_t *)dst;
    while (n--) *d++ = (uint8_t)c;
    return dst;
}

__attribute__((weak)) void *memcpy(void *dst, const void *src, size_t n)
{
    volatile uint8_t *d = (volatile uint8_t *)dst;
    const volatile uint8_t *s = (const volatile uint8_t *)src;
    while (n--) *d++ = *s++;
    return dst;
}
