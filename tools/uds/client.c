// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Client profiles: how the cloud client behind SYNCFOLDER batches, and how
 * to hand it a change.
 *
 * generic    a client that syncs every change at once (Dropbox, the UDS
 *            paper's case): the paper's policy, t = 5 s, c = 250 KB,
 *            f = 30 s.
 * syncthing  Syncthing batches already. Its watcher holds a changed path
 *            until a tick (every fsWatcherDelayS, d) finds it quiet for
 *            more than d/2, or until it has been pending longer than
 *            notifyTimeout(d) (6 d, at most 60 s; d beyond 60 s). So
 *            uds-plus pushes after t = 1.5 d of quiet (a gap Syncthing
 *            alone would certainly have scanned in), at the latest
 *            f = timeout + d after the first change (Syncthing alone
 *            scans a path that keeps changing about that often), and has
 *            no counter (Syncthing has none): every push is a batch
 *            Syncthing alone would have made too, so there are no more
 *            syncs than without uds-plus. t and f are never below the
 *            paper's 5 s and 30 s: a fast Syncthing (d = 1 s) gets the
 *            paper's batching. Earlier than t where Syncthing's ticks
 *            are known: a model of its watcher, run on SAVINGBOX's
 *            changes, says when Syncthing alone would have scanned a
 *            batch (client_changed()); a lone change goes after d.
 *            With scan mode (--syncthing-scan) uds-plus turns the
 *            folder's watcher off through Syncthing's REST API and asks
 *            for a scan of exactly the paths each push wrote (POST
 *            /rest/db/scan?folder=ID&sub=PATH): one sync per push, no
 *            whole-folder scans, no watcher delay on top of uds-plus's.
 *            The watcher is turned back on at exit.
 *
 * The folder, its watcher delay, the GUI address and the API key come
 * from Syncthing's config.xml (the one given, or the default places).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "uds.h"

#define UDS_SCAN_PATHS_MAX 4096

struct client {
	enum uds_client kind;
	bool scan;		/* scan mode: we ask Syncthing to scan */
	bool hint;		/* watcher on, but we ask for a scan too */
	bool hint_failed;	/* a hint failed: said once */
	bool watcher_was_on;	/* and turned its watcher off */
	bool scan_all;		/* a scan request failed: scan all next */
	char *folder_id;
	char *host, *port;
	char *apikey;
	double delay_s;		/* fsWatcherDelayS */
	char **paths;		/* written into SYNCFOLDER since the last scan */
	size_t nr_paths, cap_paths;
	/* Syncthing's watcher as it would run alone on SAVINGBOX's changes */
	bool align;		/* push at its ticks (t not set by the user) */
	uint64_t d_ms, timeout_ms;
	bool sim_on, sim_pending;
	uint64_t sim_next, sim_first, sim_last;
	uint64_t hash_bps;	/* its hash rate, from its scans; 0 unknown */
};

/* --- a little XML: attributes and element text of Syncthing's config --- */

static char *xml_unescape(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	size_t i = 0;

	if (!out)
		return NULL;
	while (i < n) {
		if (s[i] != '&') {
			*o++ = s[i++];
			continue;
		}
		if (!strncmp(s + i, "&amp;", 5)) {
			*o++ = '&';
			i += 5;
		} else if (!strncmp(s + i, "&lt;", 4)) {
			*o++ = '<';
			i += 4;
		} else if (!strncmp(s + i, "&gt;", 4)) {
			*o++ = '>';
			i += 4;
		} else if (!strncmp(s + i, "&quot;", 6)) {
			*o++ = '"';
			i += 6;
		} else if (!strncmp(s + i, "&apos;", 6)) {
			*o++ = '\'';
			i += 6;
		} else if (s[i + 1] == '#') {
			unsigned long c = s[i + 2] == 'x' ?
				strtoul(s + i + 3, NULL, 16) :
				strtoul(s + i + 2, NULL, 10);
			const char *e = memchr(s + i, ';', n - i);

			*o++ = c && c < 128 ? (char)c : '?';
			i = e ? (size_t)(e - s) + 1 : n;
		} else {
			*o++ = s[i++];
		}
	}
	*o = '\0';
	return out;
}

/* The value of attribute NAME in the start tag at TAG (up to its '>'). */
static char *xml_attr(const char *tag, const char *name)
{
	const char *end = strchr(tag, '>'), *p = tag;
	size_t n = strlen(name);

	while (end && (p = strstr(p, name)) && p < end) {
		if (isspace((unsigned char)p[-1]) && p[n] == '=' &&
		    (p[n + 1] == '"' || p[n + 1] == '\'')) {
			const char *v = p + n + 2, *q = strchr(v, p[n + 1]);

			if (!q || q > end)
				return NULL;
			return xml_unescape(v, (size_t)(q - v));
		}
		p += n;
	}
	return NULL;
}

/* The text of the first <NAME> after FROM, before LIMIT. */
static char *xml_text(const char *from, const char *limit, const char *name)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", name);
	snprintf(close, sizeof(close), "</%s>", name);
	a = strstr(from, open);
	if (!a || (limit && a > limit))
		return NULL;
	a += strlen(open);
	b = strstr(a, close);
	if (!b)
		return NULL;
	while (a < b && isspace((unsigned char)*a))
		a++;
	while (b > a && isspace((unsigned char)b[-1]))
		b--;
	return xml_unescape(a, (size_t)(b - a));
}

static char *read_file(const char *path, int *err)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st)) {
		*err = -errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		*err = -ENOMEM;
		return NULL;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		*err = -errno;
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* Syncthing's own search order for its home (v1.x). */
static char *default_config(void)
{
	const char *home = getenv("HOME"), *x;
	char *p;

	x = getenv("XDG_STATE_HOME");
	if (x && x[0] == '/' &&
	    asprintf(&p, "%s/syncthing/config.xml", x) >= 0) {
		if (!access(p, R_OK))
			return p;
		free(p);
	}
	if (home && asprintf(&p, "%s/.local/state/syncthing/config.xml",
			     home) >= 0) {
		if (!access(p, R_OK))
			return p;
		free(p);
	}
	x = getenv("XDG_CONFIG_HOME");
	if (x && x[0] == '/' &&
	    asprintf(&p, "%s/syncthing/config.xml", x) >= 0) {
		if (!access(p, R_OK))
			return p;
		free(p);
	}
	if (home && asprintf(&p, "%s/.config/syncthing/config.xml",
			     home) >= 0) {
		if (!access(p, R_OK))
			return p;
		free(p);
	}
	return NULL;
}

/* Is Syncthing's folder path P (maybe "~/...") the directory REAL? */
static bool same_dir(const char *p, const char *real)
{
	const char *home = getenv("HOME");
	char *full = NULL, *r;
	bool same;

	if (p[0] == '~' && (p[1] == '/' || !p[1]) && home) {
		if (asprintf(&full, "%s%s", home, p + 1) < 0)
			return false;
		p = full;
	}
	r = realpath(p, NULL);
	same = r && !strcmp(r, real);
	free(r);
	free(full);
	return same;
}

static int parse_address(struct client *cl, const char *addr)
{
	const char *a = addr, *colon;

	if (!strncmp(a, "http://", 7))
		a += 7;
	else if (strstr(a, "://"))
		return -EPROTONOSUPPORT;
	if (a[0] == '[') {
		const char *e = strchr(a, ']');

		if (!e || e[1] != ':')
			return -EINVAL;
		cl->host = strndup(a + 1, (size_t)(e - a - 1));
		cl->port = strdup(e + 2);
	} else {
		colon = strrchr(a, ':');
		if (!colon)
			return -EINVAL;
		cl->host = strndup(a, (size_t)(colon - a));
		cl->port = strdup(colon + 1);
	}
	if (!cl->host || !cl->port)
		return -ENOMEM;
	/* Listening on all addresses: talk to it on loopback. */
	if (!strcmp(cl->host, "0.0.0.0") || !cl->host[0]) {
		free(cl->host);
		cl->host = strdup("127.0.0.1");
	} else if (!strcmp(cl->host, "::")) {
		free(cl->host);
		cl->host = strdup("::1");
	}
	return cl->host ? 0 : -ENOMEM;
}

static int syncthing_config(struct client *cl, struct config *cfg)
{
	char *file = cfg->syncthing_config ? strdup(cfg->syncthing_config) :
		     default_config();
	char *xml, *real, *p, *defaults, *gui, *addr = NULL, *tls = NULL;
	int err = 0;

	if (!file) {
		err_("--client syncthing: Syncthing's config.xml is not in "
		     "~/.local/state/syncthing or ~/.config/syncthing: name "
		     "it with --syncthing-config FILE");
		return -1;
	}
	xml = read_file(file, &err);
	if (!xml) {
		err_("--client syncthing: cannot read %s: %s (name Syncthing's "
		     "config.xml with --syncthing-config FILE)", file,
		     strerror(-err));
		free(file);
		return -1;
	}
	real = realpath(cfg->syncfolder, NULL);
	if (!real) {
		err_("SYNCFOLDER %s: %s", cfg->syncfolder, strerror(errno));
		goto fail;
	}
	defaults = strstr(xml, "<defaults>");
	for (p = xml; (p = strstr(p, "<folder ")); p++) {
		char *path, *end;

		if (defaults && p > defaults) {
			end = strstr(defaults, "</defaults>");
			if (end && p < end)
				continue;
		}
		path = xml_attr(p, "path");
		if (path && same_dir(path, real)) {
			char *v;

			cl->folder_id = xml_attr(p, "id");
			v = xml_attr(p, "fsWatcherDelayS");
			cl->delay_s = v ? strtod(v, NULL) : 10;
			free(v);
			v = xml_attr(p, "fsWatcherEnabled");
			cl->watcher_was_on = !v || !strcmp(v, "true");
			free(v);
			free(path);
			break;
		}
		free(path);
	}
	if (!cl->folder_id) {
		err_("--client syncthing: SYNCFOLDER %s is not a folder in %s; "
		     "share it in Syncthing first (or use --client generic)",
		     real, file);
		goto fail;
	}
	if (cl->delay_s <= 0)
		cl->delay_s = 10;
	gui = strstr(xml, "<gui ");
	if (gui) {
		char *end = strstr(gui, "</gui>");

		tls = xml_attr(gui, "tls");
		addr = xml_text(gui, end, "address");
		cl->apikey = xml_text(gui, end, "apikey");
	}
	if (getenv("STGUIADDRESS")) {
		free(addr);
		addr = strdup(getenv("STGUIADDRESS"));
	}
	if (getenv("STGUIAPIKEY")) {
		free(cl->apikey);
		cl->apikey = strdup(getenv("STGUIAPIKEY"));
	}
	/*
	 * Without scan mode, a push is still followed by a scan request for
	 * the pushed paths when the GUI is reachable: Syncthing then syncs
	 * at once instead of waiting its watcher delay on top of uds-plus's
	 * timer; its watcher, left on, finds nothing new when it fires.
	 */
	if (!cfg->syncthing_scan && cfg->syncthing_hint && addr &&
	    cl->apikey && cl->apikey[0] && !(tls && !strcmp(tls, "true")) &&
	    !parse_address(cl, addr))
		cl->hint = true;
	if (cfg->syncthing_scan) {
		if (!addr || !cl->apikey || !cl->apikey[0]) {
			err_("--syncthing-scan: %s names no GUI address or API "
			     "key; enable Syncthing's GUI (or drop "
			     "--syncthing-scan)", file);
			goto fail;
		}
		if ((tls && !strcmp(tls, "true")) ||
		    parse_address(cl, addr)) {
			err_("--syncthing-scan: Syncthing's GUI at %s is not "
			     "plain HTTP (tls=\"true\", or a Unix socket); "
			     "uds-plus talks to it over loopback HTTP only: "
			     "turn \"Use HTTPS for GUI\" off, or drop "
			     "--syncthing-scan", addr);
			goto fail;
		}
		cl->scan = true;
	}
	free(tls);
	free(addr);
	free(real);
	free(xml);
	free(file);
	return 0;
fail:
	free(tls);
	free(addr);
	free(real);
	free(xml);
	free(file);
	return -1;
}

/* --- REST -------------------------------------------------------------- */

/*
 * One request to Syncthing's REST API; the HTTP status, or -errno. A
 * scan request returns when the scan is done: small for the few paths
 * of a push, so a bound of 10 s only stops a hung Syncthing from hanging
 * uds-plus (the scan goes on without us).
 */
static int rest(struct client *cl, const char *method, const char *path,
		const char *body)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	struct timeval tv = { .tv_sec = 10 };
	char *req, resp[256];
	size_t len = 0;
	ssize_t n;
	int fd = -1, err, status;

	err = getaddrinfo(cl->host, cl->port, &hints, &ai);
	if (err)
		return -EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (!connect(fd, a->ai_addr, a->ai_addrlen))
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return -ECONNREFUSED;
	n = asprintf(&req, "%s %s HTTP/1.0\r\nHost: %s:%s\r\nX-API-Key: %s\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s", method, path, cl->host,
		     cl->port, cl->apikey, body ? strlen(body) : 0,
		     body ? body : "");
	if (n < 0) {
		close(fd);
		return -ENOMEM;
	}
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);

		if (w <= 0) {
			err = w < 0 ? -errno : -EPIPE;
			free(req);
			close(fd);
			return err;
		}
		off += (size_t)w;
	}
	free(req);
	while (len < sizeof(resp) - 1 &&
	       (n = recv(fd, resp + len, sizeof(resp) - 1 - len, 0)) > 0)
		len += (size_t)n;
	err = n < 0 && !len ? -errno : 0;
	close(fd);
	if (err)
		return err == -EAGAIN ? -ETIMEDOUT : err;
	resp[len] = '\0';
	if (sscanf(resp, "HTTP/%*s %d", &status) != 1)
		return -EPROTO;
	return status;
}

static int set_watcher(struct client *cl, bool on)
{
	char path[PATH_MAX];
	int st;

	snprintf(path, sizeof(path), "/rest/config/folders/%s", cl->folder_id);
	st = rest(cl, "PATCH", path, on ? "{\"fsWatcherEnabled\":true}" :
		  "{\"fsWatcherEnabled\":false}");
	if (st == 200)
		return 0;
	if (st < 0)
		err_("Syncthing at %s:%s: %s", cl->host, cl->port,
		     strerror(-st));
	else
		err_("Syncthing at %s:%s answered %d to PATCH %s%s", cl->host,
		     cl->port, st, path, st == 403 ? " (wrong API key?)" : "");
	return -1;
}

/* Append S to *Q; percent-encoded (a query value, '/' stays) if ENC. */
static int qs_append(char **q, size_t *len, size_t *cap, const char *s,
		     bool enc)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (*len + 4 > *cap) {
			size_t nc = *cap ? *cap * 2 : 1024;
			char *nq = realloc(*q, nc);

			if (!nq)
				return -ENOMEM;
			*q = nq;
			*cap = nc;
		}
		if (!enc || isalnum(c) || strchr("-._~/", c)) {
			(*q)[(*len)++] = (char)c;
		} else {
			(*q)[(*len)++] = '%';
			(*q)[(*len)++] = hex[c >> 4];
			(*q)[(*len)++] = hex[c & 15];
		}
	}
	(*q)[*len] = '\0';
	return 0;
}

/* POST /rest/db/scan for PATHS[0..N) (all of the folder if N is 0). */
static int scan_request(struct client *cl, char **paths, size_t n)
{
	char *q = NULL;
	size_t len = 0, cap = 0;
	int st;

	if (qs_append(&q, &len, &cap, "/rest/db/scan?folder=", false) ||
	    qs_append(&q, &len, &cap, cl->folder_id, true)) {
		free(q);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (qs_append(&q, &len, &cap, "&sub=", false) ||
		    qs_append(&q, &len, &cap, paths[i], true)) {
			free(q);
			return -ENOMEM;
		}
	}
	st = rest(cl, "POST", q, NULL);
	free(q);
	return st == 200 ? 0 : st < 0 ? st : -EPROTO;
}

/* --- the profile --------------------------------------------------------- */

#define UDS_ST_FAILSAFE_MS 120000
/* The paper's t: the least quiet a batch waits for, but a lone change. */
#define UDS_QUIET_MIN_MS TRACK_BATCH_DEFAULT_TIMER_MS

static double syncthing_timeout_s(double d)
{
	/* Syncthing's notifyTimeout() (lib/watchaggregator). */
	if (d < 10)
		return (double)(long)(d * 6);
	if (d < 60)
		return 60;
	return d;
}

int client_setup(struct config *cfg)
{
	struct client *cl;
	uint64_t t, f;

	if (cfg->client == UDS_CLIENT_GENERIC)
		return 0;
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return -1;
	cl->kind = cfg->client;
	if (syncthing_config(cl, cfg)) {
		client_free(cl);
		return -1;
	}
	cfg->cl = cl;
	/* Never below the paper's: a fast Syncthing gets its batching. */
	t = (uint64_t)(cl->delay_s * 1500);
	f = (uint64_t)((syncthing_timeout_s(cl->delay_s) + cl->delay_s) * 1000);
	/*
	 * A path that never stays quiet for t (appends, a download) is pushed
	 * only by the fail-safe; Syncthing alone scans it every timeout + d
	 * and the time a scan takes: 7.8 s on average at d = 1 s in a 5 MB
	 * download at 80 kbit/s (bench/uds-syncthing.sh). 70 s, ten times
	 * timeout + d, made that 7.7x fewer syncs, the last push after the
	 * download included; 2 minutes make it 10x and more. The paper's
	 * 30 s is for a client that syncs every change at once.
	 */
	if (f < UDS_ST_FAILSAFE_MS)
		f = UDS_ST_FAILSAFE_MS;
	if (!cfg->timer_set && t > cfg->timer_ms)
		cfg->timer_ms = t;
	if (!cfg->failsafe_set && f > cfg->failsafe_ms)
		cfg->failsafe_ms = f;
	if (!cfg->counter_set)
		cfg->counter_bytes = UINT64_MAX;
	/*
	 * Alone, Syncthing's first look at a change after a quiet period
	 * comes d after it (its aggregator's timer starts with the change)
	 * and takes it if it has been quiet for d/2: a lone change pushed
	 * after d is never earlier than Syncthing alone, and a change in
	 * (d/2, d] is a burst, held as Syncthing would hold it.
	 */
	if (!cfg->lone_set)
		cfg->lone_ms = (uint64_t)(cl->delay_s * 1000);
	cl->d_ms = (uint64_t)(cl->delay_s * 1000);
	if (!cl->d_ms)
		cl->d_ms = 1;
	cl->timeout_ms = (uint64_t)(syncthing_timeout_s(cl->delay_s) * 1000);
	cl->align = !cfg->timer_set;
	notice_("client syncthing: folder '%s', watcher delay %g s%s; "
		"pushing after %g s of quiet (a lone change after %g s; "
		"at Syncthing's own tick after %g s of quiet), at the latest "
		"%g s after the first change%s", cl->folder_id,
		cl->delay_s, cl->watcher_was_on ? "" : " (watcher off)",
		cfg->timer_ms / 1000.0, cfg->lone_ms / 1000.0,
		UDS_QUIET_MIN_MS / 1000.0, cfg->failsafe_ms / 1000.0,
		cl->scan ? "; scanning exactly the pushed paths through "
		"Syncthing's REST API (watcher off)" : cl->hint ?
		"; asking Syncthing to scan the pushed paths (watcher on)" :
		"");
	return 0;
}

/*
 * The marker in the state directory says "we turned the watcher off": a
 * uds-plus killed before it could turn it on again finds it at the next
 * start, and turns the watcher on at that one's exit.
 */
static char *marker(const struct config *cfg)
{
	char *m;

	if (asprintf(&m, "%s/syncthing-watcher-off", cfg->state_dir) < 0)
		return NULL;
	return m;
}

int client_start(struct config *cfg)
{
	struct client *cl = cfg->cl;
	char *m;
	int fd;

	if (!cl || !cl->scan)
		return 0;
	m = marker(cfg);
	if (m && !cl->watcher_was_on && !access(m, F_OK)) {
		notice_("Syncthing's watcher for folder '%s' is still off from "
			"a uds-plus that did not exit cleanly", cl->folder_id);
		cl->watcher_was_on = true;
	}
	if (!cl->watcher_was_on) {
		free(m);
		return 0;
	}
	/* Marker first: a crash right after the PATCH still finds it. */
	fd = m ? open(m, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) : -1;
	if (fd >= 0)
		close(fd);
	free(m);
	if (set_watcher(cl, false)) {
		err_("--syncthing-scan: cannot turn Syncthing's watcher off for "
		     "folder '%s'; is Syncthing running?", cl->folder_id);
		return -1;
	}
	notice_("Syncthing's watcher for folder '%s' is off while uds-plus "
		"runs; it is turned on again at exit", cl->folder_id);
	return 0;
}

void client_free(struct client *cl)
{
	if (!cl)
		return;
	for (size_t i = 0; i < cl->nr_paths; i++)
		free(cl->paths[i]);
	free(cl->paths);
	free(cl->folder_id);
	free(cl->host);
	free(cl->port);
	free(cl->apikey);
	free(cl);
}

void client_close(struct config *cfg)
{
	struct client *cl = cfg->cl;

	if (!cl)
		return;
	if (cl->scan && cl->watcher_was_on && !set_watcher(cl, true)) {
		char *m = marker(cfg);

		if (m)
			unlink(m);
		free(m);
		notice_("Syncthing's watcher for folder '%s' is on again",
			cl->folder_id);
	}
	cfg->cl = NULL;
	client_free(cl);
}

void client_wrote(struct config *cfg, const char *path)
{
	struct client *cl = cfg->cl;
	char *p;

	if (!cl || !(cl->scan || cl->hint) || cl->scan_all)
		return;
	/*
	 * Up to this many, requests of 32 paths each (a few ms apiece);
	 * beyond, one scan of the whole folder is cheaper.
	 */
	if (cl->nr_paths >= UDS_SCAN_PATHS_MAX) {
		cl->scan_all = true;
		return;
	}
	for (size_t i = cl->nr_paths; i-- > 0;)
		if (!strcmp(cl->paths[i], path))
			return;
	if (cl->nr_paths == cl->cap_paths) {
		size_t nc = cl->cap_paths ? cl->cap_paths * 2 : 16;
		char **v = realloc(cl->paths, nc * sizeof(*v));

		if (!v) {
			cl->scan_all = true;
			return;
		}
		cl->paths = v;
		cl->cap_paths = nc;
	}
	p = strdup(path);
	if (!p) {
		cl->scan_all = true;
		return;
	}
	cl->paths[cl->nr_paths++] = p;
}

/*
 * Syncthing's hash rate, measured: a scan request returns when the scan
 * is done, and after a push of a file of SIZE bytes Syncthing hashes all
 * of it. Only sizes from 16 MiB up say something (a small scan is the
 * request's own overhead); the request's overhead in it makes the rate
 * lower than the hashing's, which only makes the batching floor that
 * uses it (engine.c, hash_ms()) longer.
 */
#define UDS_HASH_MEASURE_MIN (16ULL << 20)

uint64_t client_hash_bps(const struct config *cfg)
{
	return cfg->cl ? cfg->cl->hash_bps : 0;
}

int client_pushed(struct config *cfg, uint64_t size)
{
	struct client *cl = cfg->cl;
	size_t done = 0;
	bool failed = false, all;
	uint64_t start;
	int err = 0;

	if (!cl || !(cl->scan || cl->hint) ||
	    (!cl->nr_paths && !cl->scan_all))
		return 0;
	start = now_ms();
	all = cl->scan_all;
	if (cl->scan_all) {
		err = scan_request(cl, NULL, 0);
		done = cl->nr_paths;
	}
	/* A few paths per request keeps the URL short. */
	while (!err && done < cl->nr_paths) {
		size_t n = cl->nr_paths - done < 32 ? cl->nr_paths - done : 32;

		err = scan_request(cl, cl->paths + done, n);
		if (!err)
			done += n;
	}
	if (err && cl->hint) {
		failed = true;
		/* Only a hint: the watcher scans them after its delay. */
		if (!cl->hint_failed)
			notice_("asking Syncthing to scan %zu pushed paths of "
				"folder '%s' failed (%s); its watcher syncs "
				"them after its delay (said once)",
				cl->nr_paths - done, cl->folder_id,
				err == -EPROTO ? "it refused" :
				strerror(-err));
		cl->hint_failed = true;
		done = cl->nr_paths;
		err = 0;
	} else if (err) {
		warn_("asking Syncthing to scan %zu paths of folder '%s' failed "
		      "(%s); asking for the whole folder with the next push",
		      cl->nr_paths - done, cl->folder_id,
		      err == -EPROTO ? "it refused" : strerror(-err));
		cl->scan_all = true;
		return err;
	}
	if (!failed) {
		uint64_t ms = now_ms() - start;

		debug_("asked Syncthing to scan %zu paths of folder '%s'%s: "
		       "%llu ms", done, cl->folder_id, all ? " (all of it)" :
		       "", (unsigned long long)ms);
		/*
		 * Faster than 1 GiB/s: not a hash of the whole file (one
		 * the watcher had scanned already); not a rate to go by.
		 */
		if (!all && size >= UDS_HASH_MEASURE_MIN &&
		    size * 1000 / (ms ? ms : 1) <= (1ULL << 30))
			cl->hash_bps = size * 1000 / (ms ? ms : 1);
	}
	for (size_t i = 0; i < cl->nr_paths; i++)
		free(cl->paths[i]);
	cl->nr_paths = 0;
	cl->scan_all = false;
	return 0;
}

/* --- Syncthing's watcher, alone ----------------------------------------- */

/*
 * Syncthing's watch aggregator (lib/fs/watchaggregator, v1.x), fed the
 * changes the writer makes in SAVINGBOX as if they were made in its
 * folder. Idle, its timer starts with a change and fires d later; at each
 * tick it scans what has been quiet for more than d/2, or pending for
 * more than notifyTimeout, and fires again d later; a tick that finds
 * nothing pending stops it. The time its scans take is not modelled
 * (milliseconds for small files; hash_ms() in engine.c covers large ones).
 */
static void sim_advance(struct client *cl, uint64_t now)
{
	while (cl->sim_on && cl->sim_next <= now) {
		uint64_t t = cl->sim_next;

		if (!cl->sim_pending) {
			cl->sim_on = false;
			break;
		}
		if (t - cl->sim_last > cl->d_ms / 2 ||
		    t - cl->sim_first > cl->timeout_ms)
			cl->sim_pending = false;	/* scanned */
		cl->sim_next = t + cl->d_ms;
	}
}

/*
 * Where the watcher's ticks fall is known, so a batch need not wait
 * t = 1.5 d (the longest Syncthing alone may take) to be sure of not
 * splitting what Syncthing would batch: it is pushed at the tick at which
 * Syncthing alone would have scanned it (quiet for d/2, or pending for
 * notifyTimeout), or the paper's t of quiet after its last change if that
 * comes later. Each such push has a scan of Syncthing alone of its own
 * (after its last change, not after the push before), so there are no
 * more syncs; and the far side has the batch no later than with
 * Syncthing alone, or t after the last change. At d = 10 s that is
 * Syncthing alone's own delay (5-15 s after the last change), or 5 s
 * where a notifyTimeout scan would have come sooner, instead of 15 s; at
 * d <= 3.3 s, t = 5 s.
 *
 * *ALONE is when the client alone would start syncing the batch if
 * nothing else comes: that tick for Syncthing, NOW for a client that
 * syncs at once. It bounds the push's delay (engine.c, note_update()).
 */
uint64_t client_changed(struct config *cfg, uint64_t now, uint64_t *alone)
{
	struct client *cl = cfg->cl;
	uint64_t t;

	*alone = now;
	if (!cl || cl->kind != UDS_CLIENT_SYNCTHING)
		return 0;
	sim_advance(cl, now);
	if (!cl->sim_on) {
		cl->sim_on = true;
		cl->sim_next = now + cl->d_ms;
	}
	if (!cl->sim_pending) {
		cl->sim_pending = true;
		cl->sim_first = now;
	}
	cl->sim_last = now;
	for (t = cl->sim_next; t - now <= cl->d_ms / 2 &&
	     t - cl->sim_first <= cl->timeout_ms; t += cl->d_ms)
		;
	*alone = t;
	if (!cl->align)
		return 0;
	return t - now >= UDS_QUIET_MIN_MS ? t : now + UDS_QUIET_MIN_MS;
}
