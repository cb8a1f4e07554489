/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * track_stream_*: the dsync stream, the format dmextract writes and dmmerge
 * reads (docs/stream-format.md describes it byte by byte).
 *
 * A stream is a header (device size, block size, source id, epochs) and
 * a series of records in ascending block order: data runs, zero runs, and
 * an end record with totals and a digest of the whole stream. Every record
 * carries a CRC32C; the reader checks each record completely before it
 * hands it out, so a consumer never acts on a byte it has not verified.
 */
#ifndef LIBTRACK_STREAM_H
#define LIBTRACK_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct track_stream_writer;
struct track_stream_reader;

/*
 * The newest format version this library writes; it reads every 1.x. A
 * stream is written as 1.0 unless it uses something of 1.1 (an undo id).
 */
#define TRACK_STREAM_VERSION_MAJOR 1
#define TRACK_STREAM_VERSION_MINOR 1

/* Header flags. */
#define TRACK_STREAM_FULL	0x1u	/* every block is in the stream */
#define TRACK_STREAM_ZLIB	0x2u	/* data records may be deflated */
#define TRACK_STREAM_UNDO	0x4u	/* old contents saved by dmmerge --undo */

/* Limits of the format. */
#define TRACK_STREAM_MIN_BLOCK	512u
#define TRACK_STREAM_MAX_BLOCK	(1u << 25)
/* Raw bytes of one data record: at most this, or one block if larger. */
#define TRACK_STREAM_MAX_RECORD	(8u << 20)
#define TRACK_STREAM_ID_MAX	128		/* bytes of source id */

/* What the header says. */
struct track_stream_info {
	uint32_t flags;		/* TRACK_STREAM_* */
	uint32_t block_size;	/* bytes, a power of two, 512 .. 32 MiB */
	uint64_t device_size;	/* bytes; the last block may be partial */
	uint64_t base_epoch;	/* the receiver must hold at least this epoch */
	uint64_t new_epoch;	/* the receiver holds this epoch afterwards */
	uint64_t created;	/* Unix time the stream was started, 0 = unknown */
	uint16_t version_major;	/* set by the reader; ignored by the writer */
	uint16_t version_minor;
	uint32_t reserved0;
	char source_id[TRACK_STREAM_ID_MAX + 1]; /* printable ASCII, NUL-ended */
	char reserved[7];
	/*
	 * UNDO streams (1.1): random bytes that tell this undo file from any
	 * other, which dmmerge's state file names; all zero for other
	 * streams and for undo files written by 1.0.
	 */
	uint8_t undo_id[16];
	uint64_t reserved1[2];
};

/* Record types handed out by the reader. */
enum track_stream_record_type {
	TRACK_STREAM_DATA = 1,	/* data of blocks first .. first + count - 1 */
	TRACK_STREAM_ZERO = 2,	/* blocks first .. first + count - 1 are zero */
};

struct track_stream_record {
	uint32_t type;		/* enum track_stream_record_type */
	uint32_t reserved0;
	uint64_t first;		/* first block */
	uint64_t count;		/* blocks, at least 1 */
	uint64_t offset;	/* bytes from the start of the stream */
	uint64_t seq;		/* record number, from 0 */
	const void *data;	/* DATA only: valid until the next read */
	size_t length;		/* bytes at data (or zero bytes the run covers) */
};

/* Totals of a finished stream, as in its end record. */
struct track_stream_totals {
	uint64_t records;	/* records before the end record */
	uint64_t data_blocks;	/* blocks sent as data */
	uint64_t zero_blocks;	/* blocks sent as zero runs */
	uint64_t data_bytes;	/* bytes of block data, uncompressed */
	uint64_t stream_bytes;	/* bytes of the stream (with the end record) */
	uint32_t digest;	/* chained CRC32C of the header and records */
	uint32_t reserved0;
};

/*
 * Where a writer puts bytes: write all LEN bytes and return LEN, or return
 * a negative errno value. Where a reader gets bytes: return 1 .. LEN bytes,
 * 0 at the end of the input, or a negative errno value; -EAGAIN (or
 * -EWOULDBLOCK, -EINTR) means "nothing yet": the reader returns it to its
 * caller, keeps what it has, and resumes on the next call.
 */
typedef ssize_t (*track_stream_write_fn)(void *arg, const void *buf,
					 size_t len);
typedef ssize_t (*track_stream_read_fn)(void *arg, void *buf, size_t len);

/*
 * Start a stream described by INFO: its header goes into the writer's
 * output buffer, which reaches FN when it fills and at flush and finish.
 * INFO's epochs, ids and flags are checked as a reader would check them,
 * and its reserved fields must be zero (-EINVAL otherwise).
 */
int track_stream_writer_new(const struct track_stream_info *info,
			    track_stream_write_fn fn, void *arg,
			    struct track_stream_writer **wp);

/* The same, writing to the file descriptor FD (which stays open). */
int track_stream_writer_open(int fd, const struct track_stream_info *info,
			     struct track_stream_writer **wp);

/* Deflate level 1 (fastest, the default) .. 9 for a TRACK_STREAM_ZLIB
 * stream. */
int track_stream_writer_set_level(struct track_stream_writer *w, int level);

/*
 * Add blocks FIRST .. FIRST + COUNT - 1 with their contents at BUF (COUNT
 * blocks, the last one only up to the device size). Blocks must come in
 * ascending order and never twice (-EINVAL), and inside the device
 * (-ERANGE). All-zero blocks become zero runs; contiguous calls are merged
 * into large records.
 */
int track_stream_write_data(struct track_stream_writer *w, uint64_t first,
			    uint64_t count, const void *buf);

/* Add a run of zero blocks, under the same rules. */
int track_stream_write_zero(struct track_stream_writer *w, uint64_t first,
			    uint64_t count);

/*
 * Write every record gathered so far and hand all buffered bytes to FN, so
 * that the caller can sync them (the stream goes on afterwards).
 */
int track_stream_writer_flush(struct track_stream_writer *w);

/*
 * Totals so far. Before finish: records, blocks and stream_bytes count the
 * complete records, including bytes still in the output buffer (not yet
 * handed to FN; track_stream_writer_flush() hands them over); blocks
 * gathered for a record that is not complete yet are not counted.
 */
int track_stream_writer_totals(const struct track_stream_writer *w,
			       struct track_stream_totals *t);

/* Write what is pending and the end record; T (may be NULL) gets the
 * totals. After an error the stream is unusable: free the writer. */
int track_stream_writer_finish(struct track_stream_writer *w,
			       struct track_stream_totals *t);

/* Release a writer (an unfinished stream stays without an end record). */
void track_stream_writer_free(struct track_stream_writer *w);

/*
 * Read a stream through FN, or from the file descriptor FD (which stays
 * open). Nothing is read until track_stream_read_header().
 */
int track_stream_reader_new(track_stream_read_fn fn, void *arg,
			    struct track_stream_reader **rp);
int track_stream_reader_open(int fd, struct track_stream_reader **rp);

/*
 * Read and check the header. -EBADMSG: not a stream, or corrupt (reject
 * it); -ENODATA: the input ended early, truncated (transfer it again);
 * -EPROTONOSUPPORT: a format this library cannot read (a newer major
 * version, unknown flags); -EAGAIN: the read function had nothing yet.
 */
int track_stream_read_header(struct track_stream_reader *r,
			     struct track_stream_info *info);

/*
 * Read and check the next record: 1 with REC filled, 0 after the end record
 * was read and checked against everything before it (and nothing follows
 * it), or a negative errno value as for the header. Records of unknown
 * types that the format marks as skippable are checked and skipped.
 */
int track_stream_read_record(struct track_stream_reader *r,
			     struct track_stream_record *rec);

/* The totals of the stream; complete after read_record() returned 0. */
int track_stream_reader_totals(const struct track_stream_reader *r,
			       struct track_stream_totals *t);

/* Bytes consumed so far. */
uint64_t track_stream_reader_offset(const struct track_stream_reader *r);

/*
 * What went wrong in the last failed call, with the byte offset in the
 * stream, e.g. "offset 1064: record 3 (data, blocks 96-351): payload
 * checksum mismatch". "" if nothing failed. Valid until the next call.
 */
const char *track_stream_reader_error(const struct track_stream_reader *r);

/* Release a reader. */
void track_stream_reader_free(struct track_stream_reader *r);

/*
 * May a receiver whose last applied stream came from SOURCE_ID with new
 * epoch LAST_EPOCH apply the stream INFO? 0 if so; -EXDEV if the stream
 * comes from another source; -ENOENT if it is unversioned (epochs 0) and
 * not full; -ERANGE if its base epoch is past LAST_EPOCH (a gap: blocks
 * changed in between would be missing); -ESTALE if its new epoch is not
 * past LAST_EPOCH (an old stream: applying it would roll data back).
 * A full stream from the same source is always accepted.
 */
int track_stream_check_epoch(const struct track_stream_info *info,
			     const char *source_id, uint64_t last_epoch);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_STREAM_H */
