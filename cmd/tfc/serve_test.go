package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIKey: the key comes from --api-key, else the first line of --api-key-file, else
// $TFC_API_KEY; a file with no key, a missing file or both flags are refused.
func TestAPIKey(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, blank := file("key", "  s3cret \nsecond line\n"), file("blank", "\n\nkey on line 3\n")
	for _, c := range []struct{ flag, file, env, want, err string }{
		{flag: "a", env: "e", want: "a"},
		{env: "e", want: "e"},
		{},
		{file: good, env: "e", want: "s3cret"},
		{flag: "a", file: good, err: "both give a key"},
		{file: blank, err: "has no key on its first line"},
		{file: filepath.Join(dir, "missing"), err: "no such file"},
	} {
		got, err := apiKey(c.flag, c.file, c.env)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("apiKey(%q, %q, %q) = %q, %v; want an error with %q", c.flag, c.file, c.env, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("apiKey(%q, %q, %q) = %q, %v; want %q", c.flag, c.file, c.env, got, err, c.want)
		}
	}
}
