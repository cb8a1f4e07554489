/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The dsync stream on the wire: offsets, sizes, constants and
 * little-endian accessors. docs/stream-format.md is the prose version of
 * this file; keep the two in step. Never installed (the tests use it to
 * build damaged streams).
 */
#ifndef LIBTRACK_STREAM_FORMAT_H
#define LIBTRACK_STREAM_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <libtrack/stream.h>

/* "\x89DSYNC\r\n": the high byte catches 7-bit channels, CR LF catches
 * newline translation. */
#define SF_MAGIC		"\x89" "DSYNC\r\n"
#define SF_MAGIC_LEN		8

/* Header: SF_HDR_LEN bytes in version 1.0, longer headers allowed. */
#define SF_HDR_LEN		256
#define SF_HDR_MAX		4096
#define SF_H_MAGIC		0	/* 8 bytes */
#define SF_H_VMAJOR		8	/* u16 */
#define SF_H_VMINOR		10	/* u16 */
#define SF_H_CRC		12	/* u32, CRC32C of the header, field = 0 */
#define SF_H_LEN		16	/* u32 */
#define SF_H_FLAGS		20	/* u32 */
#define SF_H_BLOCK		24	/* u32 */
#define SF_H_RESERVED0		28	/* u32, zero */
#define SF_H_DEVSIZE		32	/* u64 */
#define SF_H_BASE		40	/* u64 */
#define SF_H_NEW		48	/* u64 */
#define SF_H_CREATED		56	/* u64 */
#define SF_H_SOURCE		64	/* 128 bytes, NUL padded */
#define SF_H_UNDO_ID		192	/* 16 bytes, UNDO streams (1.1); else zero */
#define SF_H_RESERVED		208	/* 48 bytes, zero */

#define SF_FLAGS_KNOWN	(TRACK_STREAM_FULL | TRACK_STREAM_ZLIB | \
			 TRACK_STREAM_UNDO)

/* Record header: 40 bytes, then payload_len bytes of payload. */
#define SF_REC_LEN		40
#define SF_R_TYPE		0	/* u16 */
#define SF_R_FLAGS		2	/* u16 */
#define SF_R_PLEN		4	/* u32 */
#define SF_R_SEQ		8	/* u64 */
#define SF_R_FIRST		16	/* u64 */
#define SF_R_COUNT		24	/* u64 */
#define SF_R_PCRC		32	/* u32, CRC32C of the payload */
#define SF_R_HCRC		36	/* u32, CRC32C of bytes 0 .. 35 */

#define SF_T_DATA		1
#define SF_T_ZERO		2
#define SF_T_END		3
/* Types with this bit set may be skipped by a reader that does not know
 * them; any other unknown type is an error. */
#define SF_T_SKIPPABLE		0x8000

#define SF_RF_ZLIB		0x1	/* payload is raw deflate */

/* End record payload. */
#define SF_END_LEN		48
#define SF_E_RECORDS		0	/* u64 */
#define SF_E_DATA_BLOCKS	8	/* u64 */
#define SF_E_ZERO_BLOCKS	16	/* u64 */
#define SF_E_DATA_BYTES		24	/* u64 */
#define SF_E_STREAM_BYTES	32	/* u64, offset of the end record */
#define SF_E_DIGEST		40	/* u32 */
#define SF_E_RESERVED		44	/* u32, zero */

/* Largest payload of a skippable record a reader will look at (its buffer
 * holds at least this much). */
#define SF_MAX_SKIP		TRACK_STREAM_MAX_RECORD

static inline void sf_put16(unsigned char *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static inline void sf_put32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static inline void sf_put64(unsigned char *p, uint64_t v)
{
	sf_put32(p, (uint32_t)v);
	sf_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t sf_get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t sf_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t sf_get64(const unsigned char *p)
{
	return (uint64_t)sf_get32(p) | (uint64_t)sf_get32(p + 4) << 32;
}

/*
 * CRC32C (Castagnoli, reflected, as in iSCSI and ext4): continue CRC over
 * LEN bytes; start with 0. crc32c(0, "123456789", 9) == 0xe3069283.
 * Uses the SSE4.2 instruction when the CPU has it.
 */
uint32_t trk_crc32c(uint32_t crc, const void *buf, size_t len);
/* The table-driven version, always (for tests and benchmarks). */
uint32_t trk_crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* 1 if trk_crc32c() uses a CPU instruction. */
int trk_crc32c_hw(void);

/* Blocks in a device of SIZE bytes (the last may be partial). */
static inline uint64_t sf_nr_blocks(uint64_t size, uint32_t bs)
{
	return size / bs + !!(size % bs);
}

/* Bytes of a run of COUNT blocks from FIRST: COUNT blocks, the last one
 * cut at the device size. 0 if the run is empty or not inside the device. */
static inline uint64_t sf_run_bytes(uint64_t first, uint64_t count,
				    uint32_t bs, uint64_t dev_size)
{
	uint64_t nr = sf_nr_blocks(dev_size, bs), end;

	if (count == 0 || first >= nr || count > nr - first)
		return 0;
	end = (first + count) * (uint64_t)bs;
	if (end > dev_size)
		end = dev_size;
	return end - first * bs;
}

#endif /* LIBTRACK_STREAM_FORMAT_H */
