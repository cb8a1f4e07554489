// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * CRC32C for the stream. The SSE4.2 crc32 instruction when the CPU has it
 * (checked once at run time), else slicing-by-8 tables.
 *
 * The instruction takes three cycles and can start one every cycle, so
 * one chain of it runs at a third of what the core can do. Long buffers
 * are cut in three that are checksummed side by side, and the three
 * CRCs combined: the CRC register is linear, so the CRC of A then B is
 * that of A shifted over len(B) zero bytes, xor that of B from zero. The
 * shift is four table lookups (crc_long, crc_short: the operator for
 * CRC_LONG and CRC_SHORT zero bytes, made once). The way is Mark Adler's
 * (crc32c.c, 2013). A stream checksums every byte on both ends, so at
 * tens of GB/s it is the checksum that goes unnoticed next to a pipe's
 * copies.
 */
#include <pthread.h>

#include "internal.h"
#include "stream_format.h"

#define CRC32C_POLY 0x82f63b78u	/* reflected Castagnoli polynomial */

#define CRC_LONG	8192	/* bytes in each of three long chains */
#define CRC_SHORT	256	/* the same for short ones */

static uint32_t crc_table[8][256];
static uint32_t crc_long[4][256], crc_short[4][256];
static int crc_use_hw;

/* MAT (32 columns) times VEC over GF(2) */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;

	for (; vec; vec >>= 1, mat++)
		if (vec & 1)
			sum ^= *mat;
	return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
	int n;

	for (n = 0; n < 32; n++)
		square[n] = gf2_times(mat, mat[n]);
}

/*
 * OP: the operator that moves a CRC register over LEN zero bytes; LEN is
 * a power of two.
 */
static void zeros_op(uint32_t *op, size_t len)
{
	uint32_t odd[32], even[32], row = 1;
	int n;

	odd[0] = CRC32C_POLY;		/* one zero bit */
	for (n = 1; n < 32; n++) {
		odd[n] = row;
		row <<= 1;
	}
	gf2_square(even, odd);		/* two */
	gf2_square(odd, even);		/* four */
	for (;;) {
		gf2_square(even, odd);	/* eight, 32, ... */
		len >>= 1;
		if (!len) {
			memcpy(op, even, sizeof(even));
			return;
		}
		gf2_square(odd, even);	/* 16, 64, ... */
		len >>= 1;
		if (!len) {
			memcpy(op, odd, sizeof(odd));
			return;
		}
	}
}

/*
 * zeros[k][n] is gf2_times(op, n << 8k): the xor of the columns of op for
 * the bits of n, so each entry is one xor away from a smaller one (every
 * process that checksums makes these tables; this is 16 times quicker).
 */
static void zeros_table(uint32_t zeros[4][256], size_t len)
{
	uint32_t op[32];
	unsigned int k, n, low;

	zeros_op(op, len);
	for (k = 0; k < 4; k++) {
		zeros[k][0] = 0;
		for (n = 1; n < 256; n++) {
			low = n & -n;
			zeros[k][n] = zeros[k][n ^ low] ^
				      op[8 * k + __builtin_ctz(low)];
		}
	}
}

static uint32_t crc_shift(const uint32_t zeros[4][256], uint32_t crc)
{
	return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^
	       zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	uint32_t c;
	int i, j;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++) {
		c = crc_table[0][i];
		for (j = 1; j < 8; j++) {
			c = crc_table[0][c & 0xff] ^ (c >> 8);
			crc_table[j][i] = c;
		}
	}
#if defined(__x86_64__)
	crc_use_hw = __builtin_cpu_supports("sse4.2");
#endif
	if (crc_use_hw) {
		zeros_table(crc_long, CRC_LONG);
		zeros_table(crc_short, CRC_SHORT);
	}
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t v;

	while (len && ((uintptr_t)p & 7)) {
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		v = __builtin_bswap64(v);
#endif
		v ^= crc;
		crc = crc_table[7][v & 0xff] ^
		      crc_table[6][(v >> 8) & 0xff] ^
		      crc_table[5][(v >> 16) & 0xff] ^
		      crc_table[4][(v >> 24) & 0xff] ^
		      crc_table[3][(v >> 32) & 0xff] ^
		      crc_table[2][(v >> 40) & 0xff] ^
		      crc_table[1][(v >> 48) & 0xff] ^
		      crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
/* Three chains of CHAIN bytes each from P side by side, into C */
#define CRC_3WAY(c, p, chain, zeros) do {				\
	uint64_t c1_ = 0, c2_ = 0, v0_, v1_, v2_;			\
	const unsigned char *end_ = (p) + (chain);			\
									\
	while ((p) < end_) {						\
		memcpy(&v0_, (p), 8);					\
		memcpy(&v1_, (p) + (chain), 8);				\
		memcpy(&v2_, (p) + 2 * (chain), 8);			\
		(c) = __builtin_ia32_crc32di((c), v0_);			\
		c1_ = __builtin_ia32_crc32di(c1_, v1_);			\
		c2_ = __builtin_ia32_crc32di(c2_, v2_);			\
		(p) += 8;						\
	}								\
	(c) = crc_shift((zeros), (uint32_t)(c)) ^ (uint32_t)c1_;	\
	(c) = crc_shift((zeros), (uint32_t)(c)) ^ (uint32_t)c2_;	\
	(p) += 2 * (chain);						\
} while (0)

__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc, v;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 3 * CRC_LONG) {
		CRC_3WAY(c, p, CRC_LONG, crc_long);
		len -= 3 * CRC_LONG;
	}
	while (len >= 3 * CRC_SHORT) {
		CRC_3WAY(c, p, CRC_SHORT, crc_short);
		len -= 3 * CRC_SHORT;
	}
	while (len >= 8) {
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t trk_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_sw(~crc, buf, len);
}

uint32_t trk_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
	if (crc_use_hw)
		return ~crc_hw(~crc, buf, len);
#endif
	return ~crc_sw(~crc, buf, len);
}

int trk_crc32c_hw(void)
{
	pthread_once(&crc_once, crc_init);
	return crc_use_hw;
}
