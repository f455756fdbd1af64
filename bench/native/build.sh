#!/usr/bin/env bash
# Builds the native heap counter (bench/native/malloc-count.c) next to its source; needs a C compiler.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cc -O2 -Wall -shared -fPIC -o "$here/malloc-count.so" "$here/malloc-count.c" -lpthread
echo "$here/malloc-count.so"
