#!/bin/sh
# Builds libmicrohttpd for the shim fuzzer: the Debian source of exactly the version installed
# (libmicrohttpd-dev), with Debian's patches, compiled with AddressSanitizer and libFuzzer's
# coverage, so that the fuzzer sees and checks libmicrohttpd's own parsing, not only the shim.
#
# Usage: build-mhd.sh OUT_DIR CC
# Leaves OUT_DIR/lib/libmicrohttpd.a and OUT_DIR/include/microhttpd.h; exits non-zero when the
# source cannot be had (no network, no Debian source index). The source comes through apt-get
# with a private list directory: the machine's apt configuration is not touched.
set -eu
mkdir -p "$1"
out=$(cd "$1" && pwd)
cc=$2
version=$(dpkg-query -W -f='${Version}' libmicrohttpd-dev)
work="$out/src"
rm -rf "$work"
mkdir -p "$work/lists/partial" "$out/lib" "$out/include"
printf 'deb-src http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian bookworm-updates main\ndeb-src http://deb.debian.org/debian-security bookworm-security main\n' >"$work/sources.list"
apt_options="-q -o Dir::Etc::SourceList=$work/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$work/lists -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get $apt_options update >/dev/null
# shellcheck disable=SC2086
(cd "$work" && apt-get $apt_options source --download-only "libmicrohttpd=$version" >/dev/null)
upstream=${version%-*}
(cd "$work" && tar xf "libmicrohttpd_${upstream}.orig.tar."* && tar xf libmicrohttpd_"$version".debian.tar.*)
tree="$work/libmicrohttpd-$upstream"
if [ -f "$work/debian/patches/series" ]; then
    grep -v '^#' "$work/debian/patches/series" | while read -r patch; do
        [ -n "$patch" ] && patch -s -d "$tree" -p1 <"$work/debian/patches/$patch"
    done
fi
cd "$tree"
# HTTPS is off: the fuzzer speaks plain HTTP to the shim (TLS would only wrap the same parser).
./configure -q CC="$cc" CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address" \
    --disable-shared --enable-static --disable-https --disable-doc --disable-examples --disable-curl \
    --disable-nls >/dev/null
make -s -C src/microhttpd -j"$(nproc)" >/dev/null 2>&1
cp src/microhttpd/.libs/libmicrohttpd.a "$out/lib/"
cp src/include/microhttpd.h "$out/include/"
echo "build-mhd: libmicrohttpd $version built with ASan and fuzzer coverage in $out"
