#!/bin/bash -eu
# OSS-Fuzz build: the same script as ClusterFuzzLite's, from the cloned repository, so the target list lives in one place.
exec "$SRC/delegation-harness/.clusterfuzzlite/build.sh"
