// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dmtrack: create, inspect and drive dm-track devices.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libtrack.h>
#include <libtrack/dm.h>

#include "dsync_util.h"

static const char usage_text[] =
"Usage: dmtrack COMMAND NAME [ARGS]\n"
"\n"
"  create NAME DEVICE [--block-size BYTES] [--metadata DEV [--region-size BYTES]] [--cow-dev DEV] [--clean]\n"
"                     [--offset SECTORS] [--length SECTORS] [--uuid UUID]\n"
"                      make /dev/mapper/NAME track writes to DEVICE\n"
"  status NAME [--json] block size, dirty blocks, epochs, memory\n"
"  list NAME [--frozen] [--ranges]\n"
"                      dirty block numbers, one per line (or FIRST-LAST)\n"
"  freeze NAME [--fsfreeze MOUNTPOINT]\n"
"                      start a new epoch; prints the frozen epoch (with\n"
"                      --fsfreeze, the file system on it is frozen for it)\n"
"  commit NAME EPOCH   the replica has the frozen epoch: drop it\n"
"  abort NAME EPOCH    the sync failed: give the frozen blocks back\n"
"  clear NAME          forget every dirty block (replica is identical)\n"
"  mark-all NAME       mark every block dirty (next sync is a full one)\n"
"  remove NAME         remove the device (it must not be in use)\n"
"\n"
"NAME is a device-mapper name or uuid. Needs root. See dmtrack(8).\n";

static void usage(int status)
{
	fputs(usage_text, status ? stderr : stdout);
	exit(status);
}

/* Explain a libtrack error about device NAME and exit 1. */
static void fail(const char *what, const char *name, int err)
{
	const char *hint;

	switch (-err) {
	case ENODEV:
	case ENXIO:
		hint = "no such device-mapper device ('dmsetup ls' lists them; is device-mapper in this kernel?)";
		break;
	case EMEDIUMTYPE:
		hint = "not a dm-track device (its table does not use the 'track' target)";
		break;
	case EPERM:
	case EACCES:
		hint = "permission denied: dm-track needs root (CAP_SYS_ADMIN)";
		break;
	case ESTALE:
		hint = "that epoch is not the frozen one ('dmtrack status' shows it)";
		break;
	case EBUSY:
		hint = "the device is in use (mounted or open)";
		break;
	default:
		hint = strerror(-err);
		break;
	}
	fprintf(stderr, "dmtrack: %s %s: %s\n", what, name, hint);
	exit(1);
}

static struct track_dm *open_dev(const char *name)
{
	struct track_dm *dm;
	int r = track_dm_open(name, &dm);

	if (r)
		fail("cannot open", name, r);
	return dm;
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s || *s == '-') {
		fprintf(stderr, "dmtrack: invalid %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "block-size", required_argument, NULL, 'b' },
		{ "metadata", required_argument, NULL, 'm' },
		{ "region-size", required_argument, NULL, 'r' },
		{ "cow-dev", required_argument, NULL, 'w' },
		{ "clean", no_argument, NULL, 'c' },
		{ "offset", required_argument, NULL, 'o' },
		{ "length", required_argument, NULL, 'l' },
		{ "uuid", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct track_dm_params p = { 0 };
	const char *name;
	int c, r;

	while ((c = getopt_long(argc, argv, "b:m:r:w:co:l:u:h", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			p.block_size = parse_u64(optarg, "block size");
			if (p.block_size < 512 || p.block_size > (32U << 20) ||
			    (p.block_size & (p.block_size - 1))) {
				fprintf(stderr, "dmtrack: block size must be a power of two from 512 to 33554432 bytes\n");
				exit(2);
			}
			break;
		case 'm':
			p.metadata_dev = optarg;
			break;
		case 'w':
			p.cow_dev = optarg;
			break;
		case 'r':
			p.region_size = parse_u64(optarg, "region size");
			if (p.region_size < 512 ||
			    (p.region_size & (p.region_size - 1))) {
				fprintf(stderr, "dmtrack: region size must be a power of two of at least the block size, in bytes\n");
				exit(2);
			}
			break;
		case 'c':
			p.clean = 1;
			break;
		case 'o':
			p.offset = parse_u64(optarg, "offset");
			break;
		case 'l':
			p.length = parse_u64(optarg, "length");
			break;
		case 'u':
			p.uuid = optarg;
			break;
		case 'h':
			usage(0);
			break;
		default:
			usage(2);
		}
	}
	if (argc - optind != 2)
		usage(2);
	name = argv[optind];
	p.data_dev = argv[optind + 1];

	r = track_dm_create(name, &p);
	if (r == -EINVAL)
		fprintf(stderr, "dmtrack: cannot create %s: the kernel refused the table; 'dmesg' says why (is the dm-track module loaded? 'modprobe dm-track')\n",
			name);
	else if (r == -EEXIST || r == -EBUSY)
		fprintf(stderr, "dmtrack: cannot create %s: a device of that name exists\n",
			name);
	else if (r == -ENOTBLK)
		fprintf(stderr, "dmtrack: cannot create %s: %s is not a block device (use losetup for a file)\n",
			name, p.data_dev);
	else if (r)
		fail("cannot create", name, r);
	return r ? 1 : 0;
}

static int cmd_status(struct track_dm *dm, int json)
{
	static const char *const persist[] = { "none", "ok", "failed" };
	struct track_dm_status st;
	int r = track_dm_get_status(dm, &st);

	if (r)
		fail("cannot read the status of", track_dm_name(dm), r);

	if (json) {
		printf("{\"name\":\"%s\",\"uuid\":\"%s\",\"block_size\":%" PRIu64
		       ",\"blocks\":%" PRIu64 ",\"dirty_active\":%" PRIu64
		       ",\"dirty_frozen\":%" PRIu64 ",\"epoch\":%" PRIu64
		       ",\"frozen_epoch\":%" PRIu64
		       ",\"committed_epoch\":%" PRIu64 ",\"memory\":%" PRIu64
		       ",\"metadata\":\"%s\",\"track_id\":\"%s\"}\n",
		       track_dm_name(dm), track_dm_uuid(dm), st.block_size,
		       st.nr_blocks, st.dirty_active, st.dirty_frozen,
		       st.epoch, st.frozen_epoch, st.committed_epoch,
		       st.mem_bytes, persist[st.persist], st.track_id);
		return 0;
	}
	printf("device:          %s\n", track_dm_path(dm));
	printf("block size:      %" PRIu64 " bytes\n", st.block_size);
	printf("blocks:          %" PRIu64 "\n", st.nr_blocks);
	printf("dirty (active):  %" PRIu64 "\n", st.dirty_active);
	if (st.frozen_epoch)
		printf("dirty (frozen):  %" PRIu64 " in epoch %" PRIu64 "\n",
		       st.dirty_frozen, st.frozen_epoch);
	else
		printf("dirty (frozen):  - (nothing frozen)\n");
	printf("epoch:           %" PRIu64 " (last committed %" PRIu64 ")\n",
	       st.epoch, st.committed_epoch);
	printf("memory:          %" PRIu64 " bytes\n", st.mem_bytes);
	printf("metadata:        %s\n", persist[st.persist]);
	printf("track id:        %s\n", st.track_id);
	return 0;
}

static int print_blocks(uint64_t first, uint64_t count, void *arg)
{
	uint64_t i;

	if (*(int *)arg) {
		printf("%" PRIu64 "-%" PRIu64 "\n", first, first + count - 1);
		return 0;
	}
	for (i = 0; i < count; i++)
		if (printf("%" PRIu64 "\n", first + i) < 0)
			return -EIO;
	return 0;
}

static int cmd_list(struct track_dm *dm, int argc, char **argv)
{
	enum track_dm_set set = TRACK_DM_ACTIVE;
	int ranges = 0, i, r;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--frozen"))
			set = TRACK_DM_FROZEN;
		else if (!strcmp(argv[i], "--ranges"))
			ranges = 1;
		else
			usage(2);
	}
	r = track_dm_for_each_extent(dm, set, print_blocks, &ranges);
	if (r == -ENOENT) {
		fprintf(stderr, "dmtrack: %s: nothing is frozen ('dmtrack freeze' first)\n",
			track_dm_name(dm));
		return 1;
	}
	if (r)
		fail("cannot list the dirty blocks of", track_dm_name(dm), r);
	if (fflush(stdout)) {
		perror("dmtrack: writing the list");
		return 1;
	}
	return 0;
}

/*
 * Freeze DM's dirty set; with MNT, inside a FIFREEZE of the file system
 * mounted there (only the freeze message: the thaw follows whatever
 * happened, with SIGINT/SIGTERM/SIGHUP blocked in between).
 */
static int cmd_freeze(struct track_dm *dm, const char *mnt, uint64_t *epoch)
{
	char msg[512];
	int fd, r, t;

	if (!mnt)
		return track_dm_freeze(dm, epoch);
	fd = ds_fs_check(mnt, msg, sizeof(msg));
	if (fd < 0) {
		fprintf(stderr, "dmtrack: %s\n", msg);
		exit(fd == -EINVAL || fd == -ENOTDIR || fd == -ENOENT ? 2 : 1);
	}
	r = ds_fs_freeze(fd, mnt, msg, sizeof(msg));
	if (r) {
		fprintf(stderr, "dmtrack: %s\n", msg);
		exit(1);
	}
	r = track_dm_freeze(dm, epoch);
	t = ds_fs_thaw(fd, mnt, msg, sizeof(msg));
	close(fd);
	if (t) {
		fprintf(stderr, "dmtrack: %s\n", msg);
		if (!r)
			fprintf(stderr, "dmtrack: epoch %" PRIu64 " was "
				"frozen; 'dmtrack abort' gives it back\n",
				*epoch);
		exit(1);
	}
	return r;
}

int main(int argc, char **argv)
{
	const char *cmd, *name;
	struct track_dm *dm;
	uint64_t epoch;
	int r = 0;

	if (argc < 2)
		usage(2);
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		usage(0);
	if (!strcmp(cmd, "create"))
		return cmd_create(argc - 1, argv + 1);
	if (argc < 3)
		usage(2);
	name = argv[2];

	if (!strcmp(cmd, "remove")) {
		if (argc != 3)
			usage(2);
		dm = open_dev(name);
		track_dm_free(dm);
		r = track_dm_remove(name);
		if (r)
			fail("cannot remove", name, r);
		return 0;
	}

	if (strcmp(cmd, "status") && strcmp(cmd, "list") &&
	    strcmp(cmd, "freeze") && strcmp(cmd, "commit") &&
	    strcmp(cmd, "abort") && strcmp(cmd, "clear") &&
	    strcmp(cmd, "mark-all")) {
		fprintf(stderr, "dmtrack: unknown command '%s'\n", cmd);
		usage(2);
	}

	dm = open_dev(name);
	if (!strcmp(cmd, "status")) {
		if (argc > 4 || (argc == 4 && strcmp(argv[3], "--json")))
			usage(2);
		r = cmd_status(dm, argc == 4);
	} else if (!strcmp(cmd, "list")) {
		r = cmd_list(dm, argc - 3, argv + 3);
	} else if (!strcmp(cmd, "freeze")) {
		if (argc != 3 && (argc != 5 || strcmp(argv[3], "--fsfreeze")))
			usage(2);
		r = cmd_freeze(dm, argc == 5 ? argv[4] : NULL, &epoch);
		if (r)
			fail("cannot freeze", name, r);
		printf("%" PRIu64 "\n", epoch);
	} else if (!strcmp(cmd, "commit") || !strcmp(cmd, "abort")) {
		if (argc != 4)
			usage(2);
		epoch = parse_u64(argv[3], "epoch");
		r = cmd[0] == 'c' ? track_dm_commit(dm, epoch) :
				    track_dm_abort(dm, epoch);
		if (r)
			fail(cmd[0] == 'c' ? "cannot commit" : "cannot abort",
			     name, r);
	} else if (!strcmp(cmd, "clear") || !strcmp(cmd, "mark-all")) {
		if (argc != 3)
			usage(2);
		r = cmd[0] == 'c' ? track_dm_clear(dm) : track_dm_mark_all(dm);
		if (r)
			fail(cmd, name, r);
	}
	track_dm_free(dm);
	return r;
}
