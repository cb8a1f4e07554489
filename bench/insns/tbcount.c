// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts the guest instructions executed in the
 * kernel's text, per translation block, between the first and the second
 * time the kernel enters the function at "mark=" (bench/write-path-insns.sh
 * gives ksys_sync: its guest calls sync() before and after what it
 * measures). At the second, it writes one line per block that ran,
 * "VADDR INSNS EXECUTIONS" (hex, decimal, decimal), to the file named by
 * "out="; bench/insns/profile.py turns that into instructions per
 * function. With QEMU's -icount, even the timer interrupts in the window
 * come at the same instructions: the same guest run counts the same,
 * whatever the host does.
 *
 *   qemu-system-x86_64 -icount shift=0 ... \
 *	-plugin libtbcount.so,out=FILE,mark=HEX_ADDRESS
 *
 * Only the few calls of QEMU's plugin interface (version 1, as QEMU 7.2
 * exports it) that this uses are declared here.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;

enum { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
	void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
	int op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
	void (*cb)(unsigned int vcpu_index, void *userdata), int flags,
	void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
	void (*cb)(qemu_plugin_id_t id, void *userdata), void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

#define EXPORT __attribute__((visibility("default")))

EXPORT int qemu_plugin_version = 1;

/* The kernel's text mapping on x86-64 (the guest boots with nokaslr) */
#define KERNEL_TEXT 0xffffffff80000000ull

/* One per translation; a block translated again gets another counter. */
struct block {
	uint64_t vaddr, insns, runs;
	struct block *next;
};

static struct block *blocks;
static const char *out;
static uint64_t mark;
static int marks_seen;

static void dump(void)
{
	FILE *f = fopen(out, "w");
	struct block *b;

	if (!f) {
		perror(out);
		return;
	}
	for (b = blocks; b; b = b->next)
		if (b->runs)
			fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
				b->vaddr, b->insns, b->runs);
	if (fclose(f))
		perror(out);
}

/* The kernel entered the mark: start counting, or write what was counted */
static void marked(unsigned int vcpu_index, void *userdata)
{
	struct block *b;

	if (++marks_seen == 1)
		for (b = blocks; b; b = b->next)
			b->runs = 0;
	else if (marks_seen == 2)
		dump();
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	struct block *b;

	if (vaddr < KERNEL_TEXT)
		return;
	b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	b->vaddr = vaddr;
	b->insns = qemu_plugin_tb_n_insns(tb);
	b->next = blocks;
	blocks = b;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &b->runs, 1);
	if (vaddr == mark)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, marked, 0, NULL);
}

static void finished(qemu_plugin_id_t id, void *userdata)
{
	if (marks_seen < 2)
		fprintf(stderr, "tbcount: the guest entered the mark %d times, not 2; %s not written\n",
			marks_seen, out);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
			       int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
		else if (!strncmp(argv[i], "mark=", 5))
			mark = strtoull(argv[i] + 5, NULL, 16);
	if (!out || !mark) {
		fprintf(stderr, "tbcount: usage: out=FILE,mark=HEX_ADDRESS\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, finished, NULL);
	return 0;
}
