#!/bin/sh
# Rebuilds the CUDA kernels the binary carries (crates/histfit-cuda/kernels/prebuilt/: a gzip'd
# cubin per architecture and MANIFEST with their keys) from kernels/histfit.cu. Needs NVRTC
# (libnvrtc.so.13 of CUDA 13), not a GPU; run it whenever histfit.cu or the constants it shares
# with Rust change (the test `prebuilt_kernels_match_the_source` fails until then).
#
#   scripts/build_cuda_kernels.sh [OUT_DIR]
#
# OUT_DIR defaults to crates/histfit-cuda/kernels/prebuilt. Where cargo is not on the CUDA host
# (histfit's lent GPU hosts have no Rust), build the program on the development machine with
#   cargo build --release -p histfit-cuda --example prebuild_kernels
# take it along and name it in PREBUILD=path/to/prebuild_kernels; then copy OUT_DIR's six files
# back into crates/histfit-cuda/kernels/prebuilt/ and commit them.
set -eu
out=${1:-crates/histfit-cuda/kernels/prebuilt}
bin=${PREBUILD:-}
if [ -z "$bin" ]; then
    cargo build --release -p histfit-cuda --example prebuild_kernels
    bin=${CARGO_TARGET_DIR:-target}/release/examples/prebuild_kernels
fi
mkdir -p "$out"
"$bin" "$out"
ls -l "$out"
