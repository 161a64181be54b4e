#!/usr/bin/env bash
# bench/agent/crate_source.sh CRATE VERSION: prints the directory holding the sources of the
# crate CRATE (VERSION a cargo requirement, e.g. "2"), fetched by cargo from crates.io into
# its cache when absent, through a throwaway project depending on it. The benchmarks build
# the C projects some crates bundle (zlib in libz-sys, libffi in libffi-sys) from there.
set -euo pipefail
crate=$1 version=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/src" && : >"$dir/src/lib.rs"
printf '[package]\nname = "crate-source"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = { version = "%s", default-features = false }\n' \
  "$crate" "$version" >"$dir/Cargo.toml"
(cd "$dir" && cargo fetch -q)
host=$(rustc -vV | sed -n 's/^host: //p')
(cd "$dir" && cargo metadata -q --format-version 1 --filter-platform "$host") |
  python3 -c 'import json, os, sys
name = sys.argv[1]
meta = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in meta["packages"] if p["name"] == name))' "$crate"
