package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// stripComments replaces // line comments and /* block */ comments outside
// JSON strings with spaces, keeping every newline and every byte offset, so
// that decoder offsets still map to the line the user wrote.
func stripComments(src []byte) ([]byte, error) {
	out := bytes.Clone(src)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			start := i
			out[i], out[i+1] = ' ', ' '
			for i += 2; ; i++ {
				if i+1 >= len(out) {
					return nil, fmt.Errorf("line %d: unterminated /* comment", lineOf(src, int64(start)))
				}
				if out[i] == '*' && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		}
	}
	return out, nil
}

// lineOf returns the 1-based line of a byte offset.
func lineOf(src []byte, off int64) int {
	if off > int64(len(src)) {
		off = int64(len(src))
	}
	return bytes.Count(src[:off], []byte{'\n'}) + 1
}

// checkKeys walks the JSON token stream and reports the first object key
// that the target type does not declare, with its line. encoding/json's
// DisallowUnknownFields names the key but not where it is.
func checkKeys(src []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	if err := walkValue(dec, src, t, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("line %d: unexpected data after the top-level object", lineOf(src, dec.InputOffset()))
	}
	return nil
}

func walkValue(dec *json.Decoder, src []byte, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return syntaxErr(src, dec, err)
	}
	delim, isDelim := tok.(json.Delim)
	if !isDelim {
		return nil
	}
	switch delim {
	case '{':
		var fields map[string]reflect.Type
		isStruct := t != nil && t.Kind() == reflect.Struct
		switch {
		case t == reflect.TypeFor[Source]():
			fields = sourceKeys()
		case isStruct:
			fields = jsonKeys(t)
		}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return syntaxErr(src, dec, err)
			}
			key := keyTok.(string)
			var ft reflect.Type
			if isStruct {
				var ok bool
				if ft, ok = fields[key]; !ok {
					where := "at the top level"
					if path != "" {
						where = "in " + path
					}
					return fmt.Errorf("line %d: unknown key %q %s (known: %s)",
						lineOf(src, dec.InputOffset()), key, where, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
				}
			} else if t != nil && t.Kind() == reflect.Map {
				ft = t.Elem()
			}
			if err := walkValue(dec, src, ft, joinPath(path, key)); err != nil {
				return err
			}
		}
	case '[':
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, src, et, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return syntaxErr(src, dec, err)
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func syntaxErr(src []byte, dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// The decoder's SyntaxError offset is relative to its internal
		// buffer; the position after the last good token, past separators,
		// is where the bad character is.
		off := dec.InputOffset()
		for off < int64(len(src)) && strings.IndexByte(" \t\r\n:,", src[off]) >= 0 {
			off++
		}
		return syntaxAt(src, off, se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("line %d: unexpected end of file", lineOf(src, int64(len(src))))
	}
	return fmt.Errorf("line %d: %v", lineOf(src, dec.InputOffset()), err)
}

// decode unmarshals comment-free JSON into v, turning type errors into
// messages with the line and the dotted field path. Keys v does not have
// are ignored: checkKeys has reported those no part of the config has.
func decode(src []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("line %d: %s: expected %s, got JSON %s", lineOf(src, te.Offset), te.Field, te.Type, te.Value)
		}
		return syntaxErr(src, dec, err)
	}
	return nil
}

// decodeLoose unmarshals comment-free JSON into v, ignoring unknown keys;
// used to probe which optional sections a file spells out.
func decodeLoose(src []byte, v any) error {
	if err := json.Unmarshal(src, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// se.Offset is just past the bad character.
			return syntaxAt(src, max(se.Offset-1, 0), se)
		}
		// Type errors are reported, with the field, by decodeStrict.
	}
	return nil
}

// syntaxAt reports syntax error se at the bad character src[off], with a
// hint for the mistake JSON with comments invites: a comma before a
// closing } or ] (JSON allows none), named with the line of the comma.
func syntaxAt(src []byte, off int64, se *json.SyntaxError) error {
	if off < int64(len(src)) && (src[off] == '}' || src[off] == ']') {
		prev := off - 1
		for prev >= 0 && strings.IndexByte(" \t\r\n", src[prev]) >= 0 {
			prev--
		}
		if prev >= 0 && src[prev] == ',' {
			return fmt.Errorf("line %d: trailing comma before %c at line %d: JSON allows none, remove it (%v)",
				lineOf(src, prev), src[off], lineOf(src, off), se)
		}
	}
	return fmt.Errorf("line %d: %v", lineOf(src, off), se)
}
