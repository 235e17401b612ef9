#!/bin/sh
# Installs the clawless binary for this machine (Linux, x86_64 or aarch64).
#
#   curl -fsSL https://github.com/clawless/clawless/releases/latest/download/install.sh | sh
#
# CLAWLESS_DIST_URL: where the tarballs and SHA256SUMS are: an https:// or file:// URL or a
#   local directory (default: the latest release).
# CLAWLESS_PREFIX: where to install (default ~/.local: the binary goes to $PREFIX/bin/clawless).
# CLAWLESS_VERSION: which version's tarball (default: the one SHA256SUMS names).
# CLAWLESS_ARCH: the architecture to install for (default: `uname -m`).
#
# Everything is downloaded into a temporary directory and checked against SHA256SUMS before
# anything is installed; any failure is one sentence, exit 1, and nothing left behind.
set -eu

DIST_URL="${CLAWLESS_DIST_URL:-https://github.com/clawless/clawless/releases/latest/download}"
PREFIX="${CLAWLESS_PREFIX:-${HOME:?HOME is not set}/.local}"

fail() {
  echo "clawless install: $*" >&2
  exit 1
}

case "$(uname -s)" in
  Linux) ;;
  *) fail "there is no clawless binary for $(uname -s) (Linux only): build it with cargo instead." ;;
esac
ARCH="${CLAWLESS_ARCH:-$(uname -m)}"
case "$ARCH" in
  x86_64 | amd64) TARGET=x86_64-unknown-linux-musl ;;
  aarch64 | arm64) TARGET=aarch64-unknown-linux-musl ;;
  *) fail "there is no clawless binary for the $ARCH architecture (x86_64 and aarch64 only)." ;;
esac

TMP=$(mktemp -d "${TMPDIR:-/tmp}/clawless-install.XXXXXX") || fail "could not make a temporary directory."
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' HUP INT TERM

# fetch NAME: DIST_URL/NAME into $TMP/NAME.
fetch() {
  case "$DIST_URL" in
    http://* | https://*)
      if command -v curl >/dev/null 2>&1; then
        curl -fsSL --proto '=https,http' -o "$TMP/$1" "$DIST_URL/$1" 2>/dev/null
      elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$TMP/$1" "$DIST_URL/$1"
      else
        fail "neither curl nor wget is installed: install one, or download the files yourself and set CLAWLESS_DIST_URL to their directory."
      fi ;;
    file://*) cp "${DIST_URL#file://}/$1" "$TMP/$1" 2>/dev/null ;;
    *) cp "$DIST_URL/$1" "$TMP/$1" 2>/dev/null ;;
  esac || fail "could not get $DIST_URL/$1."
}

command -v sha256sum >/dev/null 2>&1 || command -v shasum >/dev/null 2>&1 \
  || fail "neither sha256sum nor shasum is installed, so the download cannot be checked."

fetch SHA256SUMS
if [ -n "${CLAWLESS_VERSION:-}" ]; then
  NAME="clawless-$CLAWLESS_VERSION-$TARGET.tar.gz"
else
  NAME=$(sed -n "s/^[0-9a-f]\{64\}  \(clawless-.*-$TARGET\.tar\.gz\)$/\1/p" "$TMP/SHA256SUMS" | tail -n 1)
  [ -n "$NAME" ] || fail "SHA256SUMS at $DIST_URL names no tarball for $TARGET."
fi
WANT=$(sed -n "s/^\([0-9a-f]\{64\}\)  $NAME$/\1/p" "$TMP/SHA256SUMS" | head -n 1)
[ -n "$WANT" ] || fail "SHA256SUMS at $DIST_URL has no sum for $NAME."
fetch "$NAME"
if command -v sha256sum >/dev/null 2>&1; then
  GOT=$(sha256sum "$TMP/$NAME" | cut -d ' ' -f 1)
else
  GOT=$(shasum -a 256 "$TMP/$NAME" | cut -d ' ' -f 1)
fi
[ "$GOT" = "$WANT" ] || fail "$NAME does not match its sum in SHA256SUMS (a broken or tampered download): nothing was installed."

mkdir "$TMP/unpacked"
tar -xzf "$TMP/$NAME" -C "$TMP/unpacked" 2>/dev/null || fail "$NAME is not a readable tarball."
DIR="$TMP/unpacked/${NAME%.tar.gz}"
[ -f "$DIR/clawless" ] || fail "$NAME holds no clawless binary."

# Staged beside its place, then renamed: a running clawless keeps its old file, and an
# interrupted install leaves no half-written binary.
mkdir -p "$PREFIX/bin" 2>/dev/null || fail "could not create $PREFIX/bin (set CLAWLESS_PREFIX to a directory you may write)."
cp "$DIR/clawless" "$PREFIX/bin/.clawless.new" 2>/dev/null || fail "could not write to $PREFIX/bin (set CLAWLESS_PREFIX to a directory you may write)."
chmod 755 "$PREFIX/bin/.clawless.new"
mv -f "$PREFIX/bin/.clawless.new" "$PREFIX/bin/clawless" || { rm -f "$PREFIX/bin/.clawless.new"; fail "could not replace $PREFIX/bin/clawless."; }

echo "Installed $("$PREFIX/bin/clawless" --version 2>/dev/null || echo "${NAME%.tar.gz}") to $PREFIX/bin/clawless."
case ":${PATH:-}:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "$PREFIX/bin is not on your PATH: add it (export PATH=\"$PREFIX/bin:\$PATH\") or call it by its full path." ;;
esac
echo "Next, in the folder the bot should keep its data in (it writes .env there): clawless init"
