// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * uds-plus settings: defaults, a config file of "key = value" lines, and
 * command-line options, in that order of precedence (the last one wins).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "uds.h"

static const char usage[] =
"Usage: uds-plus [OPTION]... SAVINGBOX SYNCFOLDER\n"
"Work in SAVINGBOX; uds-plus batches your changes and pushes them into\n"
"SYNCFOLDER, the folder your cloud client (Dropbox, Nextcloud, Syncthing)\n"
"watches, and brings the client's changes back. With the UDS+ kernel it\n"
"reads only the bytes each write changed.\n"
"\n"
"Batching (a push happens when any one fires):\n"
"  -t, --timer TIME        quiet time after the last change (default 5s)\n"
"  -c, --counter SIZE      compressed size of pending changes (default 250KB)\n"
"  -f, --failsafe TIME     longest wait after the first pending change\n"
"                          (default 30s)\n"
"      --lone-delay TIME   push a change that follows 2 t of quiet after this\n"
"                          much more quiet plus the client's hash time of\n"
"                          the file, not after t (default 500ms; syncthing:\n"
"                          its watcher delay; 0 off)\n"
"Client profiles:\n"
"      --client NAME       generic (default: Dropbox, Nextcloud; the paper's\n"
"                          policy) or syncthing (t, c, f from its folder's\n"
"                          watcher delay, so it never syncs more)\n"
"      --syncthing-config FILE  Syncthing's config.xml (default: its own\n"
"                          places)\n"
"      --syncthing-scan    turn Syncthing's watcher off for the folder and\n"
"                          ask it to scan exactly the pushed paths\n"
"      --no-syncthing-hint  with the watcher on, do not ask Syncthing to\n"
"                          scan the pushed paths after a push\n"
"Other:\n"
"      --pull-delay TIME   quiet time in SYNCFOLDER before its changes are\n"
"                          copied back (default 1s)\n"
"      --rescan TIME       compare both folders with the journal this often,\n"
"                          for changes no event reports (default 1h, 0 off)\n"
"      --no-ranges         ignore the kernel's write ranges\n"
"      --no-fsync          do not fdatasync (faster; not crash-safe)\n"
"      --once              sync once and exit\n"
"      --ignore GLOB       never sync names matching GLOB (repeatable)\n"
"      --no-default-ignores  also sync the cloud clients' own files\n"
"      --hostname NAME     used in conflict copy names\n"
"      --state-dir DIR     journal and lock (default under ~/.local/state)\n"
"      --status-file FILE  statistics, rewritten after every push and on\n"
"                          SIGUSR1\n"
"      --stats             print statistics on stdout at exit\n"
"      --config FILE       read settings from FILE (see uds-plus(1))\n"
"      --log WHERE         'stderr' (default) or 'syslog'\n"
"      --log-level LEVEL   error, warning, notice, info (default), debug\n"
"  -v, --verbose           --log-level debug\n"
"  -q, --quiet             --log-level warning\n"
"  -h, --help              this text\n"
"      --version           the version\n"
"TIME is seconds, or a number with ms, s, m or h; SIZE is bytes, or a\n"
"number with K/M/G (1024s) or KB/MB/GB (1000s).\n"
"Signals: SIGUSR1 statistics, SIGHUP push now, SIGTERM push and exit.\n"
"Exit status: 0 ok, 1 failure, 2 usage error.\n";

/* Names of files cloud clients keep for themselves in their folder. */
static const char *const default_ignores[] = {
	".dropbox", ".dropbox.attr", ".dropbox.cache",
	".stfolder", ".stversions", ".stignore", ".syncthing.*.tmp",
	"~syncthing~*.tmp",
	".sync_*.db", ".sync_*.db-*", "._sync_*.db", "._sync_*.db-*",
	".owncloudsync.log*", ".nextcloudsync.log*", ".csync_journal.db*",
};

enum {
	OPT_PULL_DELAY = 256, OPT_RESCAN, OPT_NO_RANGES, OPT_NO_FSYNC,
	OPT_ONCE, OPT_IGNORE, OPT_NO_DEFAULT_IGNORES, OPT_HOSTNAME,
	OPT_STATE_DIR, OPT_STATUS_FILE, OPT_STATS, OPT_CONFIG, OPT_LOG,
	OPT_LOG_LEVEL, OPT_VERSION, OPT_LONE_DELAY, OPT_CLIENT,
	OPT_SYNCTHING_CONFIG, OPT_SYNCTHING_SCAN, OPT_NO_SYNCTHING_HINT,
};

static const struct option longopts[] = {
	{ "timer", required_argument, NULL, 't' },
	{ "counter", required_argument, NULL, 'c' },
	{ "failsafe", required_argument, NULL, 'f' },
	{ "pull-delay", required_argument, NULL, OPT_PULL_DELAY },
	{ "lone-delay", required_argument, NULL, OPT_LONE_DELAY },
	{ "client", required_argument, NULL, OPT_CLIENT },
	{ "syncthing-config", required_argument, NULL, OPT_SYNCTHING_CONFIG },
	{ "syncthing-scan", no_argument, NULL, OPT_SYNCTHING_SCAN },
	{ "no-syncthing-hint", no_argument, NULL, OPT_NO_SYNCTHING_HINT },
	{ "rescan", required_argument, NULL, OPT_RESCAN },
	{ "no-ranges", no_argument, NULL, OPT_NO_RANGES },
	{ "no-fsync", no_argument, NULL, OPT_NO_FSYNC },
	{ "once", no_argument, NULL, OPT_ONCE },
	{ "ignore", required_argument, NULL, OPT_IGNORE },
	{ "no-default-ignores", no_argument, NULL, OPT_NO_DEFAULT_IGNORES },
	{ "hostname", required_argument, NULL, OPT_HOSTNAME },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "status-file", required_argument, NULL, OPT_STATUS_FILE },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "log", required_argument, NULL, OPT_LOG },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->timer_ms = TRACK_BATCH_DEFAULT_TIMER_MS;
	c->counter_bytes = TRACK_BATCH_DEFAULT_COUNTER;
	c->failsafe_ms = TRACK_BATCH_DEFAULT_FAILSAFE_MS;
	c->pull_delay_ms = 1000;
	c->rescan_ms = 3600 * 1000;
	c->lone_ms = 500;
	c->syncthing_hint = true;
	c->fsync = true;
	c->default_ignores = true;
	c->log_level = LOG_INFO_;
}

void config_free(struct config *c)
{
	free(c->savingbox);
	free(c->syncfolder);
	free(c->state_dir);
	free(c->status_file);
	for (size_t i = 0; i < c->nr_ignore; i++)
		free(c->ignore[i]);
	free(c->ignore);
	free(c->hostname);
	free(c->syncthing_config);
	memset(c, 0, sizeof(*c));
}

int parse_duration_ms(const char *s, uint64_t *ms)
{
	char *end;
	double v, mult = 1000;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	while (*end == ' ')
		end++;
	if (!strcmp(end, "ms"))
		mult = 1;
	else if (!strcmp(end, "s") || !*end)
		mult = 1000;
	else if (!strcmp(end, "m") || !strcmp(end, "min"))
		mult = 60000;
	else if (!strcmp(end, "h"))
		mult = 3600000;
	else
		return -EINVAL;
	if (v * mult > 1e15)
		return -ERANGE;
	*ms = (uint64_t)(v * mult + 0.5);
	return 0;
}

int parse_size(const char *s, uint64_t *bytes)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "", 1 }, { "B", 1 },
		{ "K", 1024.0 }, { "KiB", 1024.0 }, { "KB", 1e3 },
		{ "k", 1024.0 }, { "kB", 1e3 },
		{ "M", 1048576.0 }, { "MiB", 1048576.0 }, { "MB", 1e6 },
		{ "G", 1073741824.0 }, { "GiB", 1073741824.0 }, { "GB", 1e9 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(end, units[i].unit)) {
			if (v * units[i].mult > 1e18)
				return -ERANGE;
			*bytes = (uint64_t)(v * units[i].mult + 0.5);
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_bool(const char *s, bool *b)
{
	if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") ||
	    !strcasecmp(s, "on") || !strcmp(s, "1"))
		*b = true;
	else if (!strcasecmp(s, "no") || !strcasecmp(s, "false") ||
		 !strcasecmp(s, "off") || !strcmp(s, "0"))
		*b = false;
	else
		return -EINVAL;
	return 0;
}

static int set_str(char **dst, const char *val)
{
	char *copy = strdup(val);

	if (copy && val[0] == '~' && (val[1] == '/' || !val[1])) {
		/* "~/x" in a config file means $HOME/x, as in a shell. */
		const char *home = getenv("HOME");

		free(copy);
		copy = NULL;
		if (!home || asprintf(&copy, "%s%s", home, val + 1) < 0)
			return -EINVAL;
	}

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static int add_ignore(struct config *c, const char *pattern)
{
	char **v = realloc(c->ignore, (c->nr_ignore + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	c->ignore = v;
	v[c->nr_ignore] = strdup(pattern);
	if (!v[c->nr_ignore])
		return -ENOMEM;
	c->nr_ignore++;
	return 0;
}

int config_set(struct config *c, const char *key, const char *val,
	       char *msg, size_t msglen)
{
	bool b;
	int err = 0;

	if (!strcmp(key, "timer"))
		err = parse_duration_ms(val, &c->timer_ms), c->timer_set = true;
	else if (!strcmp(key, "counter"))
		err = parse_size(val, &c->counter_bytes), c->counter_set = true;
	else if (!strcmp(key, "failsafe") || !strcmp(key, "fail-safe"))
		err = parse_duration_ms(val, &c->failsafe_ms),
		c->failsafe_set = true;
	else if (!strcmp(key, "lone-delay"))
		err = parse_duration_ms(val, &c->lone_ms), c->lone_set = true;
	else if (!strcmp(key, "client")) {
		if (!strcmp(val, "generic") || !strcmp(val, "dropbox") ||
		    !strcmp(val, "nextcloud"))
			c->client = UDS_CLIENT_GENERIC;
		else if (!strcmp(val, "syncthing"))
			c->client = UDS_CLIENT_SYNCTHING;
		else
			err = -EINVAL;
	} else if (!strcmp(key, "syncthing-config"))
		err = set_str(&c->syncthing_config, val);
	else if (!strcmp(key, "syncthing-scan"))
		err = parse_bool(val, &c->syncthing_scan);
	else if (!strcmp(key, "syncthing-hint"))
		err = parse_bool(val, &c->syncthing_hint);
	else if (!strcmp(key, "pull-delay"))
		err = parse_duration_ms(val, &c->pull_delay_ms);
	else if (!strcmp(key, "rescan"))
		err = parse_duration_ms(val, &c->rescan_ms);
	else if (!strcmp(key, "ranges"))
		err = parse_bool(val, &b), c->no_ranges = err ? c->no_ranges : !b;
	else if (!strcmp(key, "fsync"))
		err = parse_bool(val, &c->fsync);
	else if (!strcmp(key, "default-ignores"))
		err = parse_bool(val, &c->default_ignores);
	else if (!strcmp(key, "ignore"))
		err = add_ignore(c, val);
	else if (!strcmp(key, "savingbox"))
		err = set_str(&c->savingbox, val);
	else if (!strcmp(key, "syncfolder"))
		err = set_str(&c->syncfolder, val);
	else if (!strcmp(key, "state-dir"))
		err = set_str(&c->state_dir, val);
	else if (!strcmp(key, "status-file"))
		err = set_str(&c->status_file, val);
	else if (!strcmp(key, "hostname"))
		err = set_str(&c->hostname, val);
	else if (!strcmp(key, "log")) {
		if (!strcmp(val, "syslog"))
			c->use_syslog = true;
		else if (!strcmp(val, "stderr"))
			c->use_syslog = false;
		else
			err = -EINVAL;
	} else if (!strcmp(key, "log-level")) {
		err = log_level_parse(val, &c->log_level) ? -EINVAL : 0;
	} else {
		snprintf(msg, msglen, "unknown setting '%s'", key);
		return -ENOENT;
	}
	if (err)
		snprintf(msg, msglen, "bad value '%s' for '%s'", val, key);
	return err;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Read FILE; settings apply in order. Returns 0 or prints and returns 2. */
static int load_file(struct config *c, const char *file)
{
	char *line = NULL, msg[256];
	size_t cap = 0;
	unsigned int n = 0;
	FILE *f = fopen(file, "re");

	if (!f) {
		fprintf(stderr, "uds-plus: cannot read the config file %s: %s\n",
			file, strerror(errno));
		return 2;
	}
	while (getline(&line, &cap, f) > 0) {
		char *s = trim(line), *eq, *key, *val;

		n++;
		if (!*s || *s == '#' || *s == ';')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "uds-plus: %s:%u: expected 'key = "
				"value'\n", file, n);
			goto bad;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		if (strlen(val) >= 2 && val[0] == '"' &&
		    val[strlen(val) - 1] == '"') {
			val[strlen(val) - 1] = '\0';
			val++;
		}
		if (config_set(c, key, val, msg, sizeof(msg))) {
			fprintf(stderr, "uds-plus: %s:%u: %s\n", file, n, msg);
			goto bad;
		}
	}
	free(line);
	fclose(f);
	return 0;
bad:
	free(line);
	fclose(f);
	return 2;
}

static int bad_option(const char *opt, const char *val)
{
	fprintf(stderr, "uds-plus: bad value '%s' for --%s (see --help)\n",
		val, opt);
	return 2;
}

int config_parse(struct config *c, int argc, char **argv)
{
	const char *file = NULL;
	char msg[256];
	int opt, i, ret;

	/* First pass: only --config, so that options override the file. */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "t:c:f:vqh", longopts,
				  NULL)) != -1) {
		if (opt == OPT_CONFIG)
			file = optarg;
	}
	if (file) {
		ret = load_file(c, file);
		if (ret)
			return ret;
	}
	opterr = 1;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "t:c:f:vqh", longopts,
				  NULL)) != -1) {
		const char *key = NULL;

		switch (opt) {
		case 't':
			key = "timer";
			break;
		case 'c':
			key = "counter";
			break;
		case 'f':
			key = "failsafe";
			break;
		case OPT_PULL_DELAY:
			key = "pull-delay";
			break;
		case OPT_LONE_DELAY:
			key = "lone-delay";
			break;
		case OPT_CLIENT:
			key = "client";
			break;
		case OPT_SYNCTHING_CONFIG:
			key = "syncthing-config";
			break;
		case OPT_SYNCTHING_SCAN:
			c->syncthing_scan = true;
			break;
		case OPT_NO_SYNCTHING_HINT:
			c->syncthing_hint = false;
			break;
		case OPT_RESCAN:
			key = "rescan";
			break;
		case OPT_IGNORE:
			key = "ignore";
			break;
		case OPT_HOSTNAME:
			key = "hostname";
			break;
		case OPT_STATE_DIR:
			key = "state-dir";
			break;
		case OPT_STATUS_FILE:
			key = "status-file";
			break;
		case OPT_LOG:
			key = "log";
			break;
		case OPT_LOG_LEVEL:
			key = "log-level";
			break;
		case OPT_NO_RANGES:
			c->no_ranges = true;
			break;
		case OPT_NO_FSYNC:
			c->fsync = false;
			break;
		case OPT_ONCE:
			c->once = true;
			break;
		case OPT_NO_DEFAULT_IGNORES:
			c->default_ignores = false;
			break;
		case OPT_STATS:
			c->stats = true;
			break;
		case OPT_CONFIG:
			break;
		case 'v':
			c->log_level = LOG_DEBUG_;
			break;
		case 'q':
			c->log_level = LOG_WARN_;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		case OPT_VERSION:
			printf("uds-plus (libtrack) %d.%d\n",
			       track_version_major(), track_version_minor());
			exit(0);
		default:
			fputs(usage, stderr);
			return 2;
		}
		if (key && config_set(c, key, optarg, msg, sizeof(msg)))
			return bad_option(key, optarg);
	}
	i = optind;
	if (argc - i == 2) {
		if (set_str(&c->savingbox, argv[i]) ||
		    set_str(&c->syncfolder, argv[i + 1]))
			return 1;
	} else if (argc - i != 0) {
		fprintf(stderr, "uds-plus: expected SAVINGBOX and SYNCFOLDER, "
			"got %d argument%s (see --help)\n", argc - i,
			argc - i == 1 ? "" : "s");
		return 2;
	}
	if (c->syncthing_scan && c->client != UDS_CLIENT_SYNCTHING) {
		fprintf(stderr, "uds-plus: --syncthing-scan needs --client "
			"syncthing (or 'client = syncthing')\n");
		return 2;
	}
	if (!c->savingbox || !c->syncfolder) {
		fprintf(stderr, "uds-plus: SAVINGBOX and SYNCFOLDER are "
			"needed, as arguments or as 'savingbox =' and "
			"'syncfolder =' in the config file (see --help)\n");
		return 2;
	}
	if (c->default_ignores) {
		for (size_t k = 0; k < sizeof(default_ignores) /
				       sizeof(default_ignores[0]); k++)
			if (add_ignore(c, default_ignores[k]))
				return 1;
	}
	if (!c->hostname) {
		char host[256] = "";

		if (gethostname(host, sizeof(host) - 1) || !host[0])
			strcpy(host, "uds-plus");
		if (set_str(&c->hostname, host))
			return 1;
	}
	return 0;
}
