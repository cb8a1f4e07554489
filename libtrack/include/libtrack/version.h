/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef LIBTRACK_VERSION_H
#define LIBTRACK_VERSION_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the headers a program was built against. */
#define LIBTRACK_VERSION_MAJOR 2
#define LIBTRACK_VERSION_MINOR 0

/* True when the headers are at least version major.minor. */
#define LIBTRACK_CHECK_VERSION(major, minor)				\
	(LIBTRACK_VERSION_MAJOR > (major) ||				\
	 (LIBTRACK_VERSION_MAJOR == (major) &&				\
	  LIBTRACK_VERSION_MINOR >= (minor)))

/* The version of the library a program runs against. */
int track_version_major(void);
int track_version_minor(void);

/*
 * True when the running library is at least version major.minor and has the
 * same major version, so a program built against major.minor can use it.
 */
bool track_check_version(int major, int minor);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_VERSION_H */
