#!/bin/sh
# Prints the processor's version, the one `make build` bakes in
# (processor --version, the start log line, processor_build_info) and the
# image's build argument VERSION. The rule (docs/running.md, CHANGELOG.md):
#
#   v<VERSION>                       HEAD is the tag v<VERSION> and no
#                                    tracked file is modified: a release
#   v<VERSION>-dev+<hash>            any other commit (<hash>: the first 12
#                                    hex digits of HEAD)
#   v<VERSION>-dev+<hash>.dirty      ... with tracked files modified
#   v<VERSION>-dev                   no git, not a repository, or no commit
#                                    yet (an image build: its context has
#                                    no .git)
#
# <VERSION> is the VERSION file beside scripts/: MAJOR.MINOR.PATCH, the
# release being worked towards, so a -dev build sorts before it.
# Untracked files do not make a build dirty (as with git describe --dirty).
# Only shell built-ins and git are used. Exits 1, saying why, when VERSION
# is missing or not MAJOR.MINOR.PATCH.
set -eu

case $0 in
*/*) root=${0%/*}/.. ;;
*) root=.. ;;
esac

fail() {
	echo "scripts/version.sh: $*" >&2
	exit 1
}

base=
if ! { IFS= read -r base || [ -n "$base" ]; } <"$root/VERSION" 2>/dev/null; then
	fail "cannot read $root/VERSION: want one line MAJOR.MINOR.PATCH, e.g. 0.4.0"
fi
case $base in
*.*.*) ;;
*) fail "VERSION is \"$base\": want MAJOR.MINOR.PATCH, e.g. 0.4.0" ;;
esac
major=${base%%.*}
rest=${base#*.}
minor=${rest%%.*}
patch=${rest#*.}
for n in "$major" "$minor" "$patch"; do
	case $n in
	'' | *[!0-9]* | 0?*) fail "VERSION is \"$base\": want MAJOR.MINOR.PATCH, e.g. 0.4.0 (no v, no leading zeros)" ;;
	esac
done
v=v$base

if ! command -v git >/dev/null 2>&1 ||
	! head=$(git -C "$root" rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null); then
	echo "$v-dev"
	exit 0
fi
dirty=
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=.dirty
fi
tagged=$(git -C "$root" rev-parse -q --verify "refs/tags/$v^{commit}" 2>/dev/null || true)
if [ "$tagged" = "$head" ] && [ -z "$dirty" ]; then
	echo "$v"
	exit 0
fi
echo "$v-dev+$(git -C "$root" rev-parse --short=12 HEAD)$dirty"
