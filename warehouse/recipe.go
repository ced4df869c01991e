package warehouse

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
)

// Recipe is the canonical description of everything that determines a
// warehouse's bytes. Its encoding is one "key=value" line per entry, sorted
// by key, each value escaped with %q-style quoting so that no value can
// forge a line. The version is sha256 of that encoding; the encoding itself
// is stored in the manifest as version_recipe so a person can see why two
// versions differ.
type Recipe struct {
	entries map[string]string
}

// Set records one key; setting a key twice is a programming error.
func (r *Recipe) Set(key string, value any) {
	if r.entries == nil {
		r.entries = map[string]string{}
	}
	if _, dup := r.entries[key]; dup {
		panic("warehouse: recipe key set twice: " + key)
	}
	r.entries[key] = fmt.Sprint(value)
}

// Encode returns the canonical encoding.
func (r *Recipe) Encode() string {
	keys := make([]string, 0, len(r.entries))
	for k := range r.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, r.entries[k])
	}
	return b.String()
}

// ID is the version key of the recipe.
func (r *Recipe) ID() ID { return sha256.Sum256([]byte(r.Encode())) }
