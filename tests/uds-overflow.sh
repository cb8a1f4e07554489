#!/bin/bash
# timeout: 300
# uds-plus, fallback mode: IN_Q_OVERFLOW with a small max_queued_events (root) (selftests/uds/overflow.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run overflow
