// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * uds-plus: the UDS+ middleware between a user and a cloud client. The user
 * works in SAVINGBOX; uds-plus batches the changes (track_batch_*) and
 * pushes them into SYNCFOLDER, reading only the changed byte ranges when
 * the kernel reports them (track_watch_*), and brings remote changes back.
 * The engine is in tools/uds/; see uds-plus(1) and docs/uds-plus.md.
 */
#include "uds.h"

int main(int argc, char **argv)
{
	struct config cfg;
	int ret;

	config_defaults(&cfg);
	ret = config_parse(&cfg, argc, argv);
	if (!ret)
		ret = uds_run(&cfg);
	config_free(&cfg);
	return ret;
}
