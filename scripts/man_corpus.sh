#!/usr/bin/env bash
# Write this machine's manual pages of common commands as plain-text files into DIR: the
# third evaluation corpus (`kg-fuse eval --set manpages`), command-line manuals as a user
# would save them (`man CMD | col -b > CMD.txt`). Its figures depend on the installed pages.
set -euo pipefail
dir=${1:?usage: scripts/man_corpus.sh DIR}
command -v man >/dev/null || { echo "man is not installed: apt-get install man-db" >&2; exit 1; }
mkdir -p "$dir"
commands=(ls cp mv rm grep tar gzip find sed chmod chown ssh ps kill df du sort uniq head tail
          cut wc xargs diff curl ln mkdir touch date cat less top free ip)
written=0
for cmd in "${commands[@]}"; do
    if page=$(MANWIDTH=80 man "$cmd" 2>/dev/null | col -b) && [ -n "$page" ]; then
        printf '%s\n' "$page" > "$dir/$cmd.txt"
        written=$((written + 1))
    else
        echo "no manual page for $cmd (skipped)" >&2
    fi
done
echo "wrote $written manual pages to $dir"
