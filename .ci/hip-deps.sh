#!/bin/sh
# hip-deps.sh installs what `tfc audit` needs on Debian 12 (bookworm), CI included: clang-19 and
# lld-19 compile HIP for AMD targets, llvm-19 has llvm-readelf-19, libamdhip64-dev has the HIP
# headers, rocm-device-libs the device libraries up to gfx90a and gfx103x.
#
# Debian 13's rocm-device-libs-17 adds gfx11 and gfx94x (gfx1100, gfx942). It is fetched from
# trixie with apt-get download and unpacked, not installed, into /opt/rocm-device-libs-17, where
# tfc audit looks. When it cannot be fetched, tfc audit skips those targets with a note.
set -eu
export DEBIAN_FRONTEND=noninteractive
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

$sudo apt-get update
$sudo apt-get install -y --no-install-recommends clang-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs

dest=/opt/rocm-device-libs-17
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/lists/partial" "$state/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$state/sources.list"
apt="apt-get -o Dir::Etc::SourceList=$state/sources.list -o Dir::Etc::SourceParts=- -o Dir::State::Lists=$state/lists -o Dir::Cache=$state -o APT::Sandbox::User=root"
if $apt update >/dev/null && (cd "$state" && $apt download rocm-device-libs-17); then
	$sudo rm -rf "$dest"
	$sudo mkdir -p "$dest"
	$sudo dpkg -x "$state"/rocm-device-libs-17_*.deb "$dest"
	echo "hip-deps: Debian 13 device libraries (gfx1100, gfx942) unpacked in $dest"
else
	echo "hip-deps: could not fetch Debian 13's rocm-device-libs-17; tfc audit will skip gfx1100 and gfx942" >&2
fi
