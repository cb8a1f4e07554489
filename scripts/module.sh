#!/bin/bash
# Build the out-of-tree dm-track module against the test kernel.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
load_kernel_env
if [ ! -f "$top/dm-track/Makefile" ]; then
	echo "module: dm-track/ has no Makefile yet; skipping"
	exit 0
fi
make -s -C "$top/dm-track" KDIR="$KBUILD"
