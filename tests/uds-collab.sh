#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: two users editing random offsets (selftests/uds/collab.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run collab
