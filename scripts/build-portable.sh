#!/usr/bin/env bash
# Builds dist/stoker and dist/stoker-full, x86-64 programs that run on any Linux with glibc >= 2.36
# (Debian 12) without installing anything. `stoker` runs the short client commands itself and
# stoker-full, which must sit in the same directory, for every other command (src/cli/programs.h). libstdc++, libgcc, OpenSSL, SQLite, yaml-cpp, spdlog/fmt,
# cpp-httplib and simdjson are linked statically (Boost.Beast/Asio are header-only); glibc stays dynamic because NVML is loaded with dlopen().
#
# Debian packages cpp-httplib only as a shared library, so this script takes the upstream
# single-file httplib.h from Debian's *source* package (apt-get source; no other download).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build-portable
mkdir -p "$work/third_party" dist

# Debian source packages (apt-get source; no other download) for what Debian ships only as a
# shared library: the single-file httplib.h and simdjson's single-file amalgamation.
fetch_source() {  # fetch_source PACKAGE
  local apt_dir=$work/apt
  mkdir -p "$apt_dir/lists/partial"
  cat >"$apt_dir/sources.list" <<'LIST'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
LIST
  local apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
                  -o Dir::State::Lists="$apt_dir/lists" -o Debug::NoDropPrivs=1)
  [[ -n $(ls "$apt_dir/lists" 2>/dev/null | grep -v partial) ]] || apt-get "${apt_opts[@]}" update -qq
  (cd "$apt_dir" && apt-get "${apt_opts[@]}" source --download-only -qq "$1")
  ls "$apt_dir/$1"_*.orig.tar.* | head -n 1
}
if [[ ! -f $work/third_party/httplib.h ]]; then
  orig=$(fetch_source cpp-httplib)
  tar -xf "$orig" -C "$work/apt" --wildcards '*/httplib.h'
  cp "$(find "$work/apt" -name httplib.h | head -n 1)" "$work/third_party/httplib.h"
fi
if [[ ! -f $work/third_party/simdjson/simdjson.cpp ]]; then
  orig=$(fetch_source simdjson)
  tar -xf "$orig" -C "$work/apt" --wildcards '*/singleheader/simdjson.*'
  mkdir -p "$work/third_party/simdjson"
  cp "$(find "$work/apt" -path '*singleheader/simdjson.h' | head -n 1)" \
     "$(find "$work/apt" -path '*singleheader/simdjson.cpp' | head -n 1)" "$work/third_party/simdjson/"
fi

cmake -S . -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKER_PORTABLE=ON \
  -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_BENCH=OFF \
  -DSTOKER_HTTPLIB_INCLUDE_DIR="$work/third_party" \
  -DSTOKER_SIMDJSON_DIR="$work/third_party/simdjson" >/dev/null
ninja -C "$work/build" stoker stoker-full
for program in stoker stoker-full; do
  cp "$work/build/bin/$program" "dist/$program"
  strip "dist/$program"

  # Check the promise: only glibc's own libraries are needed, at symbol versions <= 2.36.
  needed=$(objdump -p "dist/$program" | awk '/NEEDED/ {print $2}' | sort | tr '\n' ' ')
  for lib in $needed; do
    case $lib in
      libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1|ld-linux-x86-64.so.2) ;;
      *) echo "dist/$program needs $lib: not portable" >&2; exit 1 ;;
    esac
  done
  max_glibc=$(objdump -T "dist/$program" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
  echo "dist/$program: $(du -h "dist/$program" | cut -f1), needs only: $needed, newest symbol version: $max_glibc"
  if [[ $(printf '%s\n' "$max_glibc" GLIBC_2.36 | sort -V | tail -n 1) != GLIBC_2.36 ]]; then
    echo "dist/$program needs $max_glibc > GLIBC_2.36" >&2; exit 1
  fi
done
