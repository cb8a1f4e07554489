// SPDX-License-Identifier: GPL-2.0-or-later
/* Logging to stderr or syslog, with levels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>

#include "uds.h"

static const char *log_ident = "uds-plus";
static bool log_syslog;
static bool log_journal;	/* stderr is the journal: "<N>" prefixes */
static enum log_level log_max = LOG_INFO_;

static const char *const names[] = { "error", "warning", "notice", "info",
				     "debug" };
static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO,
			    LOG_DEBUG };

/* systemd sets JOURNAL_STREAM=dev:ino when stderr goes to the journal. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st))
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void log_setup(const char *ident, bool use_syslog, enum log_level level)
{
	log_ident = ident;
	log_syslog = use_syslog;
	log_max = level;
	if (use_syslog)
		openlog(ident, LOG_PID, LOG_DAEMON);
	log_journal = stderr_is_journal();
}

bool log_enabled(enum log_level level)
{
	return level <= log_max;
}

int log_level_parse(const char *s, enum log_level *level)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcasecmp(s, names[i])) {
			*level = (enum log_level)i;
			return 0;
		}
	}
	if (!strcasecmp(s, "err"))
		*level = LOG_ERR_;
	else if (!strcasecmp(s, "warn"))
		*level = LOG_WARN_;
	else
		return -1;
	return 0;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	if (log_syslog) {
		vsyslog(prio[level], fmt, ap);
	} else if (log_journal) {
		/* The journal adds time and name; it reads the level. */
		fprintf(stderr, "<%d>", prio[level]);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		struct timespec ts;
		struct tm tm;
		char when[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s: %s: ", when,
			ts.tv_nsec / 1000000, log_ident, names[level]);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

const char *log_path(const char *path)
{
	static char buf[4][1024];
	static int slot;
	char *out = buf[slot++ % 4];
	size_t o = 0;

	if (!path[0])
		return ".";
	for (const unsigned char *p = (const void *)path; *p; p++) {
		if (o + 5 >= sizeof(buf[0])) {
			memcpy(out + o, "...", 4);
			return out;
		}
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			o += (size_t)snprintf(out + o, 5, *p == '\\' ? "\\\\" :
					      *p == '\n' ? "\\n" : "\\x%02x",
					      *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = '\0';
	return out;
}
