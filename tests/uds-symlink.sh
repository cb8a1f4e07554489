#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: symlinks pointing outside are never followed (selftests/uds/symlink.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run symlink
