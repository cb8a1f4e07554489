#!/bin/bash
# timeout: 60
# inotify-range on the host (plain inotify): selftests/uds/inotify-range.sh.
. "$(dirname "$0")/uds-host.sh"
uds_host_run inotify-range
