/* slot.c -- the Redis Cluster hash slot of a key.
 *
 * As the Cluster specification defines it (keyHashSlot): if the key has a
 * '{' followed later by a '}' with at least one byte between them, only the
 * bytes between the first '{' and the first '}' after it are hashed; else
 * the whole key. The hash is CRC16-CCITT (XModem: polynomial 0x1021, initial
 * value 0), modulo 16384.
 *
 * Layer: 0 base */
#include <string.h>

#include "base.h"

static unsigned short crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (unsigned v = 0; v < 256; v++) {
        unsigned crc = v << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
        crc_table[v] = (unsigned short)crc;
    }
}

static unsigned crc16(const unsigned char *p, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++)
        crc = ((crc << 8) ^ crc_table[((crc >> 8) ^ p[i]) & 0xff]) & 0xffff;
    return crc;
}

unsigned distlock__key_slot(const char *key, size_t len)
{
    pthread_once(&crc_once, crc_init);
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open + 1 - key);
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return crc16((const unsigned char *)open + 1, (size_t)(close - open - 1)) &
                   (DISTLOCK__SLOTS - 1);
    }
    return crc16((const unsigned char *)key, len) & (DISTLOCK__SLOTS - 1);
}
