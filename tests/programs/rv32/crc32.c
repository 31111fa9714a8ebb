/* Bitwise CRC-32 (reflected, poly 0xEDB88320) of 1000 bytes b[i] = (i * 7 + 3) & 0xFF (zlib.crc32 equivalent). */
int main(void) {
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 7 + 3);
    unsigned crc = 0xFFFFFFFFu;
    for (int i = 0; i < 1000; i++) {
        crc ^= buf[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & -(crc & 1));
    }
    return (int)~crc;
}
