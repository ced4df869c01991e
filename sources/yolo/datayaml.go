package yolo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on what data.yaml may declare. A real dataset is far below them;
// they keep a hostile file from making New allocate without bound.
const (
	// MaxDataYAMLBytes is the largest data.yaml read: ImageNet-21k's
	// 21,841 names take about 400 KiB.
	MaxDataYAMLBytes int64 = 4 << 20
	// maxClasses bounds names and nc.
	maxClasses = 1 << 16
	// maxKeypoints bounds kpt_shape's first value (COCO pose has 17).
	maxKeypoints = 1 << 10
)

// dataYAML is what New takes from data.yaml. Keys it does not read
// (download, channels, anything else) are ignored.
type dataYAML struct {
	path   string              // `path`, "" when absent, null or ""
	splits map[string][]string // train / val / validation / test: the entries as written; a falsy value is absent
	names  []string            // class names in index order, never empty
	// kptK and kptD are kpt_shape: keypoints per object and values per
	// keypoint (2 or 3); both 0 when the dataset is not a pose dataset.
	kptK, kptD int
}

// readKeys are the top-level keys parseDataYAML reads; each may appear
// once.
var readKeys = []string{"path", "train", "val", "validation", "test", "names", "nc", "kpt_shape"}

// parseDataYAML reads a data.yaml document. It walks the document as a
// yaml.Node tree and never decodes it into Go values, so aliases are
// followed one step where a value is read and are never expanded: an
// alias bomb costs no more than its text. The parser itself limits
// nesting depth (10,000). Errors say what is wrong, without the file name
// (New adds it).
func parseDataYAML(data []byte) (*dataYAML, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, errors.New("more than one YAML document")
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("empty document")
	}
	top := deref(doc.Content[0])
	if top.Kind != yaml.MappingNode {
		return nil, errors.New("the document is not a mapping of keys (path, train, val, names, ...)")
	}
	keys := map[string]*yaml.Node{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := deref(top.Content[i]), deref(top.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			continue // a complex key: nothing this package reads
		}
		if k.ShortTag() == "!!merge" {
			return nil, fmt.Errorf("line %d: merge keys (<<) are not supported", k.Line)
		}
		for _, name := range readKeys {
			if k.Value != name {
				continue
			}
			if _, dup := keys[name]; dup {
				return nil, fmt.Errorf("line %d: key %q appears twice", k.Line, name)
			}
			keys[name] = v
		}
	}

	d := &dataYAML{splits: map[string][]string{}}
	if v, ok := keys["path"]; ok && !isNull(v) {
		if !isString(v) {
			return nil, fmt.Errorf("line %d: path must be a string", v.Line)
		}
		d.path = v.Value
	}
	for _, k := range []string{"train", "val", "validation", "test"} {
		v, ok := keys[k]
		if !ok {
			continue
		}
		entries, err := splitEntries(k, v)
		if err != nil {
			return nil, err
		}
		if len(entries) > 0 {
			d.splits[k] = entries
		}
	}
	names, err := classNames(keys["names"], keys["nc"])
	if err != nil {
		return nil, err
	}
	d.names = names
	if v, ok := keys["kpt_shape"]; ok && !isNull(v) {
		if d.kptK, d.kptD, err = kptShape(v); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// splitEntries reads a split value: a string (a directory or a list file)
// or a sequence of strings. Like Ultralytics, a falsy value (null, "", an
// empty sequence) means the split is absent.
func splitEntries(key string, v *yaml.Node) ([]string, error) {
	switch {
	case isNull(v):
		return nil, nil
	case isString(v):
		if v.Value == "" {
			return nil, nil
		}
		return []string{v.Value}, nil
	case v.Kind == yaml.SequenceNode:
		out := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			e = deref(e)
			if !isString(e) || e.Value == "" {
				return nil, fmt.Errorf("line %d: %s: every entry must be a non-empty string (a directory or a list file)", e.Line, key)
			}
			out = append(out, e.Value)
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: %s must be a string or a list of strings", v.Line, key)
}

// classNames reads names (a sequence, or a mapping of index to name) and
// nc, following Ultralytics' check_det_dataset and check_class_names:
// names and nc must agree when both are given; nc alone means class_0 ..
// class_<nc-1>; mapping keys are integers (or strings of integers) that
// must be exactly 0..n-1.
func classNames(namesNode, ncNode *yaml.Node) ([]string, error) {
	nc := -1
	if ncNode != nil && !isNull(ncNode) {
		var v int64
		if ncNode.Kind != yaml.ScalarNode || ncNode.ShortTag() != "!!int" || ncNode.Decode(&v) != nil {
			return nil, fmt.Errorf("line %d: nc must be an integer", ncNode.Line)
		}
		if v < 0 || v > maxClasses {
			return nil, fmt.Errorf("line %d: nc %d is out of range 0..%d", ncNode.Line, v, maxClasses)
		}
		nc = int(v)
	}
	if namesNode == nil || isNull(namesNode) {
		switch {
		case nc < 0:
			return nil, errors.New("neither names nor nc is given")
		case nc == 0:
			return nil, errors.New("nc is 0 and there are no names: the dataset has no classes")
		}
		names := make([]string, nc)
		for i := range names {
			names[i] = "class_" + strconv.Itoa(i)
		}
		return names, nil
	}

	var names []string
	switch namesNode.Kind {
	case yaml.SequenceNode:
		if len(namesNode.Content) > maxClasses {
			return nil, fmt.Errorf("line %d: names lists more than %d classes", namesNode.Line, maxClasses)
		}
		for i, e := range namesNode.Content {
			name, err := className(deref(e), strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			names = append(names, name)
		}
	case yaml.MappingNode:
		n := len(namesNode.Content) / 2
		if n > maxClasses {
			return nil, fmt.Errorf("line %d: names lists more than %d classes", namesNode.Line, maxClasses)
		}
		names = make([]string, n)
		set := make([]bool, n)
		for i := 0; i+1 < len(namesNode.Content); i += 2 {
			k := deref(namesNode.Content[i])
			idx, ok := classIndex(k)
			if !ok {
				return nil, fmt.Errorf("line %d: names: key %q is not a class index (an integer 0..n-1)", k.Line, k.Value)
			}
			if idx >= int64(n) {
				return nil, fmt.Errorf("line %d: names: %d classes need the indices 0..%d, but the map has index %d", k.Line, n, n-1, idx)
			}
			if set[idx] {
				return nil, fmt.Errorf("line %d: names: index %d appears twice", k.Line, idx)
			}
			name, err := className(deref(namesNode.Content[i+1]), strconv.FormatInt(idx, 10))
			if err != nil {
				return nil, err
			}
			names[idx], set[idx] = name, true
		}
		// n distinct indices, each below n: every index 0..n-1 is set.
	default:
		return nil, fmt.Errorf("line %d: names must be a list or a map of index to name", namesNode.Line)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("line %d: names is empty", namesNode.Line)
	}
	if nc >= 0 && nc != len(names) {
		return nil, fmt.Errorf("line %d: names has %d classes but nc is %d", ncNode.Line, len(names), nc)
	}
	return names, nil
}

// className reads one class name: any scalar but null, as written (a
// number is its text, like Ultralytics' str(v)), not empty.
func className(v *yaml.Node, index string) (string, error) {
	if v.Kind != yaml.ScalarNode || isNull(v) {
		return "", fmt.Errorf("line %d: names[%s] must be a name", v.Line, index)
	}
	if strings.TrimSpace(v.Value) == "" {
		return "", fmt.Errorf("line %d: names[%s] is empty", v.Line, index)
	}
	return v.Value, nil
}

// classIndex reads a names map key: an integer, or a string holding one
// (Ultralytics converts keys with int()). Negative keys are not indices.
func classIndex(k *yaml.Node) (int64, bool) {
	if k.Kind != yaml.ScalarNode {
		return 0, false
	}
	var v int64
	switch k.ShortTag() {
	case "!!int":
		if k.Decode(&v) != nil {
			return 0, false
		}
	case "!!str":
		var err error
		if v, err = strconv.ParseInt(strings.TrimSpace(k.Value), 10, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return v, v >= 0
}

// kptShape reads kpt_shape: [keypoints, 2 or 3].
func kptShape(v *yaml.Node) (k, d int, err error) {
	bad := fmt.Errorf("line %d: kpt_shape must be [keypoints, 2 or 3]", v.Line)
	if v.Kind != yaml.SequenceNode || len(v.Content) != 2 {
		return 0, 0, bad
	}
	var vals [2]int64
	for i, e := range v.Content {
		e = deref(e)
		if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!int" || e.Decode(&vals[i]) != nil {
			return 0, 0, bad
		}
	}
	if vals[0] < 1 || vals[0] > maxKeypoints || (vals[1] != 2 && vals[1] != 3) {
		return 0, 0, bad
	}
	return int(vals[0]), int(vals[1]), nil
}

// deref follows an alias to its anchored node. The parser rejects an
// alias to an unknown anchor, and an anchored node is never an alias.
func deref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isString(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}
