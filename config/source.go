package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"warehouse-etl/sources"
	"warehouse-etl/sources/registry"
)

// sourceKeys are the keys a "source" object may hold: kind, root and the
// settings keys of every kind (a key of another kind than the file's is
// then checked by decodeSourceSettings), each with its type.
func sourceKeys() map[string]reflect.Type {
	keys := jsonKeys(reflect.TypeFor[Source]())
	for _, k := range registry.Kinds() {
		for name, t := range jsonKeys(reflect.TypeOf(k.NewSettings())) {
			if _, dup := keys[name]; !dup {
				keys[name] = t
			}
		}
	}
	return keys
}

// decodeSourceSettings decodes the file's "source" object into the settings
// of s.Kind (s.Settings, nil for an unknown kind). A key of another kind is
// an error unless it holds that kind's default, as setting it had no effect
// on the source and none on the version recipe before each kind had its own
// settings: the returned otherKeys are these errors, for Validate's to join.
// err is a type error in the object.
func decodeSourceSettings(src []byte, s *Source) (otherKeys, err error) {
	k, ok := registry.Lookup(s.Kind)
	if !ok {
		s.Settings = nil
		return nil, nil
	}
	s.Settings = k.NewSettings()
	if err := decodeSettings(src, s.Settings); err != nil {
		return nil, err
	}
	var probe struct {
		Source map[string]json.RawMessage `json:"source"`
	}
	if err := decodeLoose(src, &probe); err != nil {
		return nil, err
	}
	own := jsonKeys(reflect.TypeOf(s.Settings))
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(probe.Source)) {
		if _, isOwn := own[key]; isOwn || key == "kind" || key == "root" {
			continue
		}
		var owners []string
		var value, def reflect.Value
		for _, other := range registry.Kinds() {
			defaults := other.NewSettings()
			if _, has := jsonKeys(reflect.TypeOf(defaults))[key]; !has {
				continue
			}
			if owners = append(owners, other.Name); len(owners) > 1 {
				continue
			}
			set := other.NewSettings()
			if err := decodeSettings(src, set); err != nil {
				return nil, err
			}
			value, def = jsonField(set, key), jsonField(defaults, key)
		}
		if isDefault(value, def) {
			continue
		}
		e := otherKindError(key, s.Kind, owners)
		if !slices.ContainsFunc(errs, func(x error) bool { return x.Error() == e.Error() }) {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...), nil
}

// decodeSettings decodes the "source" object of the file into settings,
// the keys of other kinds and the file's other keys ignored.
func decodeSettings(src []byte, settings sources.Settings) error {
	target := struct {
		Source sources.Settings `json:"source"`
	}{settings}
	return decode(src, &target)
}

// otherKindMessages are the errors for a key of another kind whose wording
// predates the registry; %[1]s is the file's kind, %[2]s the kinds that
// have the key. Any other key gets "source.<key> applies to <kinds>
// sources only".
var otherKindMessages = map[string]string{
	"camera":      "source.camera and source.extras apply to episode sources, not %[1]s",
	"extras":      "source.camera and source.extras apply to episode sources, not %[1]s",
	"annotations": "source.annotations: required for %[2]s sources and for them only",
	"boxes":       "source.boxes and source.box_classes apply to %[2]s sources only",
	"box_classes": "source.boxes and source.box_classes apply to %[2]s sources only",
}

func otherKindError(key, kind string, owners []string) error {
	list := strings.Join(owners, ", ")
	if i := strings.LastIndex(list, ", "); i >= 0 {
		list = list[:i] + " and " + list[i+2:]
	}
	if msg, ok := otherKindMessages[key]; ok {
		return fmt.Errorf(msg, kind, list)
	}
	return fmt.Errorf("source.%s applies to %s sources only", key, list)
}

// isDefault reports whether a setting holds its default; an empty list is
// an absent one.
func isDefault(value, def reflect.Value) bool {
	if value.Kind() == reflect.Slice && value.Len() == 0 && def.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(value.Interface(), def.Interface())
}

// jsonKeys are the JSON keys of a struct type (or a pointer to one), those
// of its fields with a json tag, and their types.
func jsonKeys(t reflect.Type) map[string]reflect.Type {
	keys := map[string]reflect.Type{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return keys
	}
	for _, f := range reflect.VisibleFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys[name] = f.Type
		}
	}
	return keys
}

// jsonField is the field of settings whose JSON key is key.
func jsonField(settings sources.Settings, key string) reflect.Value {
	v := reflect.ValueOf(settings).Elem()
	for _, f := range reflect.VisibleFields(v.Type()) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key {
			return v.FieldByIndex(f.Index)
		}
	}
	panic("config: no settings field " + key)
}
