// SPDX-License-Identifier: LGPL-2.1-or-later
#include "internal.h"

TRACK_EXPORT int track_version_major(void)
{
	return LIBTRACK_VERSION_MAJOR;
}

TRACK_EXPORT int track_version_minor(void)
{
	return LIBTRACK_VERSION_MINOR;
}

TRACK_EXPORT bool track_check_version(int major, int minor)
{
	return major == LIBTRACK_VERSION_MAJOR &&
	       minor <= LIBTRACK_VERSION_MINOR;
}
