package yolo

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDataYAML(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *dataYAML // nil when err is set
		err  string    // part of the error
	}{
		{name: "names list", yaml: "path: ../ds\ntrain: images/train\nval: images/val\nnames: [cat, dog]\n",
			want: &dataYAML{path: "../ds", splits: map[string][]string{"train": {"images/train"}, "val": {"images/val"}}, names: []string{"cat", "dog"}}},
		{name: "names block list", yaml: "train: a\nnames:\n  - cat\n  - 7\n  - 'yes'\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"cat", "7", "yes"}}},
		{name: "names map", yaml: "train: a\nnames:\n  1: dog\n  0: cat\n  2: bird\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"cat", "dog", "bird"}}},
		{name: "names map with string keys", yaml: "train: a\nnames: {'0': cat, \"1\": dog}\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"cat", "dog"}}},
		{name: "nc agrees", yaml: "train: a\nnc: 2\nnames: [cat, dog]\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"cat", "dog"}}},
		{name: "nc alone", yaml: "train: a\nnc: 3\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"class_0", "class_1", "class_2"}}},
		{name: "split list", yaml: "train: [images/a, images/b]\ntest: list.txt\nnames: [x]\n",
			want: &dataYAML{splits: map[string][]string{"train": {"images/a", "images/b"}, "test": {"list.txt"}}, names: []string{"x"}}},
		{name: "falsy splits are absent", yaml: "train: a\nval:\ntest: ''\nvalidation: []\nnames: [x]\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"x"}}},
		{name: "null path", yaml: "path: ~\ntrain: a\nnames: [x]\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"x"}}},
		{name: "pose", yaml: "train: a\nnames: [person]\nkpt_shape: [17, 3]\nflip_idx: [0, 2, 1]\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"person"}, kptK: 17, kptD: 3}},
		{name: "other keys ignored", yaml: "train: a\nnames: [x]\ndownload: |\n  import os\nchannels: 3\nnested: {a: [1, 2]}\n[complex, key]: 1\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"x"}}},
		{name: "aliases", yaml: "common: &dir images/train\nlist: &names [a, b]\ntrain: *dir\nval: [*dir]\nnames: *names\n",
			want: &dataYAML{splits: map[string][]string{"train": {"images/train"}, "val": {"images/train"}}, names: []string{"a", "b"}}},
		{name: "comments and document marker", yaml: "---\n# a dataset\ntrain: a # the images\nnames: [x]\n...\n",
			want: &dataYAML{splits: map[string][]string{"train": {"a"}}, names: []string{"x"}}},

		{name: "empty", yaml: "", err: "empty document"},
		{name: "only a comment", yaml: "# nothing\n", err: "empty document"},
		{name: "not yaml", yaml: "train: [a\n", err: "not valid YAML"},
		{name: "tab indentation", yaml: "names:\n\t- a\n", err: "not valid YAML"},
		{name: "two documents", yaml: "train: a\n---\ntrain: b\n", err: "more than one YAML document"},
		{name: "a list", yaml: "- train\n", err: "not a mapping"},
		{name: "a scalar", yaml: "hello\n", err: "not a mapping"},
		{name: "duplicate key", yaml: "train: a\ntrain: b\nnames: [x]\n", err: `line 2: key "train" appears twice`},
		{name: "merge key", yaml: "base: &b {train: a}\n<<: *b\nnames: [x]\n", err: "merge keys"},
		{name: "train number", yaml: "train: 5\nnames: [x]\n", err: "train must be a string"},
		{name: "train map", yaml: "train: {a: b}\nnames: [x]\n", err: "train must be a string"},
		{name: "train list with null", yaml: "train: [a, ~]\nnames: [x]\n", err: "every entry must be a non-empty string"},
		{name: "path number", yaml: "path: 1\ntrain: a\nnames: [x]\n", err: "path must be a string"},
		{name: "no classes", yaml: "train: a\n", err: "neither names nor nc"},
		{name: "nc zero", yaml: "train: a\nnc: 0\n", err: "no classes"},
		{name: "nc string", yaml: "train: a\nnc: '2'\nnames: [a, b]\n", err: "nc must be an integer"},
		{name: "nc float", yaml: "train: a\nnc: 2.0\nnames: [a, b]\n", err: "nc must be an integer"},
		{name: "nc negative", yaml: "train: a\nnc: -1\n", err: "out of range"},
		{name: "nc huge", yaml: "train: a\nnc: 100000000000\n", err: "out of range"},
		{name: "nc mismatch", yaml: "train: a\nnc: 3\nnames: [a, b]\n", err: "line 2: names has 2 classes but nc is 3"},
		{name: "nc mismatch map", yaml: "train: a\nnames: {0: a, 1: b}\nnc: 1\n", err: "names has 2 classes but nc is 1"},
		{name: "names empty", yaml: "train: a\nnames: []\n", err: "names is empty"},
		{name: "names empty map", yaml: "train: a\nnames: {}\n", err: "names is empty"},
		{name: "names scalar", yaml: "train: a\nnames: cat\n", err: "names must be a list or a map"},
		{name: "names null entry", yaml: "train: a\nnames: [a, ~]\n", err: "names[1] must be a name"},
		{name: "names nested", yaml: "train: a\nnames: [a, [b]]\n", err: "names[1] must be a name"},
		{name: "names blank", yaml: "train: a\nnames: [a, ' ']\n", err: "names[1] is empty"},
		{name: "names map gap", yaml: "train: a\nnames: {0: a, 2: c}\n", err: "2 classes need the indices 0..1, but the map has index 2"},
		{name: "names map from 1", yaml: "train: a\nnames:\n  1: a\n  2: b\n", err: "line 4: names: 2 classes need the indices 0..1"},
		{name: "names map negative", yaml: "train: a\nnames: {-1: a, 0: b}\n", err: `key "-1" is not a class index`},
		{name: "names map word key", yaml: "train: a\nnames: {zero: a}\n", err: `key "zero" is not a class index`},
		{name: "names map float key", yaml: "train: a\nnames: {0.0: a}\n", err: `key "0.0" is not a class index`},
		{name: "names map duplicate index", yaml: "train: a\nnames: {0: a, '0': b}\n", err: "index 0 appears twice"},
		{name: "names map list value", yaml: "train: a\nnames: {0: [a]}\n", err: "names[0] must be a name"},
		{name: "kpt_shape bad", yaml: "train: a\nnames: [p]\nkpt_shape: [17, 4]\n", err: "kpt_shape"},
		{name: "kpt_shape scalar", yaml: "train: a\nnames: [p]\nkpt_shape: 17\n", err: "kpt_shape"},
		{name: "recursive alias", yaml: "train: a\nnames: &n [x, *n]\n", err: "names[1] must be a name"},
	}
	for _, tt := range tests {
		got, err := parseDataYAML([]byte(tt.yaml))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// TestParseDataYAMLAliasBomb checks that a billion-laughs document costs
// nothing: aliases are never expanded.
func TestParseDataYAMLAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("train: images\nnames: *a9\n")
	_, err := parseDataYAML([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "names[0] must be a name") {
		t.Fatalf("err = %v", err)
	}
	d, err := parseDataYAML([]byte(strings.Replace(b.String(), "names: *a9", "names: *a0", 1)))
	if err != nil || len(d.names) != 10 {
		t.Fatalf("names through an alias: %v %v", d, err)
	}
}
