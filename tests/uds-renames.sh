#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: renames and deletes of files and trees (selftests/uds/renames.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run renames
