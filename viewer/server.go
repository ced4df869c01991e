package viewer

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"warehouse-etl/validate"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"pct":         func(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" },
	"f3":          func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) },
	"f4":          func(x float32) string { return strconv.FormatFloat(float64(x), 'f', 4, 64) },
	"px":          func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) },
	"inc":         func(n int) int { return n + 1 },
	"runsPerPage": func() int { return RunsPerPage },
	"mb":          func(b int64) string { return strconv.FormatFloat(float64(b)/1e6, 'f', 1, 64) + " MB" },
	"optf": func(v *float64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatFloat(*v, 'f', 4, 64)
	},
	"opts": func(v *string) string {
		if v == nil {
			return "(absent)"
		}
		return strconv.Quote(*v)
	},
	"count":        func(x float64) string { return strconv.FormatInt(int64(x), 10) },
	"dcount":       func(x float64) string { return fmt.Sprintf("%+d", int64(x)) },
	"join":         strings.Join,
	"bar":          func(used float64) string { return strconv.FormatFloat(100*min(used, 1), 'f', 1, 64) },
	"filterReason": func(code string) Filter { return Filter{Reason: code} },
	"filterRun":    func(i int) Filter { return Filter{Run: i + 1} },
	"filterStatus": func(s string) Filter { return Filter{Status: s} },
	"tileOf":       func(p page, t tile) tileView { return tileView{L: p.L, tile: t} },
}).ParseFS(templateFS, "templates/*.html"))

// tileView is a tile with the links of the page it is on.
type tileView struct {
	L links
	tile
}

// render executes template name for a page.
func (v *Viewer) render(name, title string, l links, static bool, body any) ([]byte, error) {
	var b bytes.Buffer
	p := page{Title: title, L: l, Version: v.m.Version[:16], HasDiff: v.against != "", Static: static, Body: body}
	if err := templates.ExecuteTemplate(&b, name, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Handler serves the pages. Every route is a fixed path or a number; every
// query parameter a number or a value the manifest lists: anything else is
// refused with 400 before any file is touched.
//
// The samples.jsonl index the grid needs (about 1.5 s for 100,000 samples
// on one core) starts building in the background here, so it is ready by
// the time someone leaves the overview; then, for COCO, YOLO and episode
// sources, the pass that opens the source again for rejected samples'
// labels and frames (source.go).
func (v *Viewer) Handler() http.Handler {
	go func() {
		v.sampleIndex()
		v.labelSource()
	}()
	mux := http.NewServeMux()
	l := serverLinks{}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		runPage, ok := v.runPageParam(w, r)
		if !ok {
			return
		}
		v.writePage(w, "overview", "overview", l, v.overviewBody(runPage, l), nil)
	})
	mux.HandleFunc("GET /samples", func(w http.ResponseWriter, r *http.Request) {
		f, pageNo, err := v.parseFilter(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g, err := v.gridBody(f, pageNo, l)
		v.writePage(w, "grid", "samples", l, g, err)
	})
	mux.HandleFunc("GET /sample/{seq}", func(w http.ResponseWriter, r *http.Request) {
		seq, ok := v.seqParam(w, r)
		if !ok {
			return
		}
		s, err := v.sampleBody(seq)
		v.writePage(w, "sample", fmt.Sprintf("sample %d", seq), l, s, err)
	})
	mux.HandleFunc("GET /img/{size}/{file}", func(w http.ResponseWriter, r *http.Request) {
		size := r.PathValue("size")
		num, ok := strings.CutSuffix(r.PathValue("file"), ".png")
		if (size != "thumb" && size != "full") || !ok || !decimal.MatchString(num) || r.URL.RawQuery != "" {
			http.Error(w, "no such image", http.StatusNotFound)
			return
		}
		seq, err := strconv.Atoi(num)
		if err != nil {
			http.Error(w, "no such image", http.StatusNotFound)
			return
		}
		b, err := v.samplePNG(seq, size == "full")
		if errors.Is(err, errNoImage) {
			http.Error(w, "this sample has no image to show", http.StatusNotFound)
			return
		} else if err != nil {
			v.log.Error("rendering a sample", "seq", seq, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Cache-Control", "private, max-age=3600")
		w.Write(b)
	})
	mux.HandleFunc("GET /diff", func(w http.ResponseWriter, r *http.Request) {
		if !noQuery(w, r) {
			return
		}
		if v.against == "" {
			http.Error(w, "started without --against: no version to compare with", http.StatusNotFound)
			return
		}
		d, err := v.diffBody(r.Context())
		v.writePage(w, "diff", "drift", l, d, err)
	})
	mux.HandleFunc("GET /static/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		b, err := fs.ReadFile(staticFS, "static/"+name)
		if !staticName.MatchString(name) || err != nil || r.URL.RawQuery != "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Write(b)
	})
	return securityHeaders(mux)
}

var (
	decimal    = regexp.MustCompile(`^[0-9]{1,10}$`)
	staticName = regexp.MustCompile(`^[a-z]+\.css$`)
)

// securityHeaders: no scripts at all, nothing from elsewhere, no sniffing,
// and only GET and HEAD.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery != "" {
		http.Error(w, "this page takes no parameters", http.StatusBadRequest)
		return false
	}
	return true
}

// runPageParam reads the overview's one parameter, runs: a page of the
// run table that exists.
func (v *Viewer) runPageParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	if r.URL.RawQuery == "" {
		return 0, true
	}
	q := r.URL.Query()
	raw := q.Get("runs")
	n, err := strconv.Atoi(raw)
	if len(q) != 1 || len(q["runs"]) != 1 || !decimal.MatchString(raw) || err != nil || n*RunsPerPage >= max(1, len(v.m.Summary.Runs)) {
		http.Error(w, "the overview takes one parameter, runs: a page of the run table", http.StatusBadRequest)
		return 0, false
	}
	return n, true
}

func (v *Viewer) seqParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	raw := r.PathValue("seq")
	seq, err := strconv.Atoi(raw)
	if !decimal.MatchString(raw) || err != nil || int64(seq) >= v.m.InputSamples || r.URL.RawQuery != "" {
		http.Error(w, "no such sample", http.StatusNotFound)
		return 0, false
	}
	return seq, true
}

// parseFilter reads the grid's parameters; each must be one the page
// offers.
func (v *Viewer) parseFilter(r *http.Request) (Filter, int, error) {
	var f Filter
	page := 0
	q := r.URL.Query()
	for key, vals := range q {
		if len(vals) != 1 {
			return f, 0, fmt.Errorf("parameter %q given %d times", key, len(vals))
		}
		val := vals[0]
		if val == "" {
			continue
		}
		number := func(limit int) (int, error) {
			n, err := strconv.Atoi(val)
			if !decimal.MatchString(val) || err != nil || n >= limit {
				return 0, fmt.Errorf("parameter %s: %q is not one of the choices", key, val)
			}
			return n, nil
		}
		var err error
		switch key {
		case "run":
			var n int
			n, err = number(len(v.m.Summary.Runs))
			f.Run = n + 1
		case "class":
			var n int
			n, err = number(len(v.m.Classes))
			f.Class = n + 1
		case "page":
			page, err = number(1 << 30)
		case "reason":
			if _, ok := v.m.Summary.Total.ByReason[validate.Reason(val)]; !ok {
				err = fmt.Errorf("parameter reason: %q is not a reason of this version", val)
			}
			f.Reason = val
		case "status":
			if val != "kept" && val != "rejected" {
				err = fmt.Errorf("parameter status: want kept or rejected")
			}
			f.Status = val
		default:
			err = fmt.Errorf("unknown parameter %q", key)
		}
		if err != nil {
			return Filter{}, 0, err
		}
	}
	return f, page, nil
}

// writePage renders a page or the error that stopped it.
func (v *Viewer) writePage(w http.ResponseWriter, name, title string, l links, body any, err error) {
	if err == nil {
		var b []byte
		if b, err = v.render(name, title, l, false, body); err == nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(b)
			return
		}
	}
	v.log.Error("page failed", "page", name, "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
