#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: a 4 KiB change to a large file reads it once (selftests/uds/largefile.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run largefile
