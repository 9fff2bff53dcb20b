#!/usr/bin/env bash
# Downloads Debian's Cyrus IMAP 3.6 (cyrus-common, cyrus-imapd, cyrus-caldav
# for httpd and its JMAP, sasl2-bin for saslpasswd2) and the libraries they
# need that are not installed, and unpacks them with `dpkg -x`: nothing is
# installed (cyrus-imapd conflicts with dovecot-imapd). The API tests start
# a throwaway Cyrus from the unpacked tree (server/tests/common/cyrus.rs).
#
#   tools/cyrus-unpack.sh [DEST]     DEST defaults to target/cyrus
#
# Prints the unpacked root, the value of FASTVIEW_TEST_CYRUS_ROOT:
#   export FASTVIEW_TEST_CYRUS_ROOT=$(tools/cyrus-unpack.sh)
# A second run reuses DEST. Fails (non-zero) when a package cannot be
# downloaded or an unpacked program lacks a library.
set -euo pipefail

dest=${1:-"$(cd "$(dirname "$0")/.." && pwd)/target/cyrus"}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
root="$dest/root"
if [ -f "$root/PACKAGES" ] && [ -x "$root/usr/lib/cyrus/bin/master" ]; then
  echo "$root"
  exit 0
fi

wanted="cyrus-common cyrus-imapd cyrus-caldav sasl2-bin"

installed() {
  dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q 'ok installed'
}

# The wanted packages, and the library packages (lib*) they depend on,
# directly or through other such libraries, that are not installed.
packages() {
  local seen="" queue="$wanted" next package dependency
  while [ -n "$queue" ]; do
    next=""
    for package in $queue; do
      case " $seen " in *" $package "*) continue ;; esac
      seen="$seen $package"
      for dependency in $(apt-cache depends --no-recommends --no-suggests --no-conflicts \
          --no-breaks --no-replaces --no-enhances --no-pre-depends "$package" 2>/dev/null \
          | awk '/^ *\|?Depends: lib/ {print $2}'); do
        installed "$dependency" || next="$next $dependency"
      done
    done
    queue="$next"
  done
  echo "$seen"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
list=$(packages)
echo "cyrus-unpack: downloading$list" >&2
# apt-get download needs the package lists; fetch them once if it fails.
if ! (cd "$work" && apt-get download $list >"$work/apt.log" 2>&1); then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -q >>"$work/apt.log" 2>&1 || true
  fi
  if ! (cd "$work" && apt-get download $list >>"$work/apt.log" 2>&1); then
    tail -n 5 "$work/apt.log" >&2
    echo "cyrus-unpack: apt-get download failed" >&2
    exit 1
  fi
fi

rm -rf "$root.partial"
mkdir -p "$root.partial"
for deb in "$work"/*.deb; do
  dpkg -x "$deb" "$root.partial"
  dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >>"$root.partial/PACKAGES.partial"
done

# Every unpacked program must find its libraries (the unpacked ones first).
library_path=$(find "$root.partial" -maxdepth 3 -type d -name '*-linux-gnu' | paste -sd :)
missing=$(for program in "$root.partial"/usr/lib/cyrus/bin/* "$root.partial"/usr/sbin/saslpasswd2; do
  [ "$(head -c 4 "$program" | tail -c 3)" = ELF ] || continue
  LD_LIBRARY_PATH="$library_path" ldd "$program" | grep 'not found' || true
done | sort -u)
if [ -n "$missing" ]; then
  echo "cyrus-unpack: unpacked programs lack libraries:" >&2
  echo "$missing" >&2
  exit 1
fi
sort "$root.partial/PACKAGES.partial" >"$root.partial/PACKAGES"
rm "$root.partial/PACKAGES.partial"
rm -rf "$root"
mv "$root.partial" "$root"
echo "cyrus-unpack: unpacked into $root:" >&2
sed 's/^/  /' "$root/PACKAGES" >&2
echo "$root"
