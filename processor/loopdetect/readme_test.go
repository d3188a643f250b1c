package loopdetect_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// The README's configuration reference, metric list and status header are
// generated from the code: the keys by reflection over Config and its
// mapstructure tags, the defaults from the factory's default config, the
// metrics and stability from metadata.yaml. The meaning column is written by
// a person and kept by key across regenerations; a key without one gets its
// field's doc comment. Regenerate with
//
//	go test ./processor/loopdetect -run TestREADME -update
const readmePath = "README.md"

// notConfigurable are keys the decoder accepts but the processor refuses,
// with the row the README shows for them instead of a default.
var notConfigurable = map[string]string{
	"attributes.session": "| `attributes.session` | — | not read: rejected by validation. The session key is set with `session.keys` |",
}

// TestREADMEConfigReference fails when a key of Config, or a default of
// createDefaultConfig, is not in the README exactly as the code has it.
func TestREADMEConfigReference(t *testing.T) {
	docs := fieldDocs(t, ".", "extract", "engine")
	cfg := loopdetect.NewFactory().CreateDefaultConfig().(*loopdetect.Config)
	var rows []configRow
	collectRows(t, reflect.ValueOf(*cfg), "", docs, &rows)
	require.NotEmpty(t, rows)

	readme := readFile(t, readmePath)
	cur, err := section(readme, "config")
	require.NoError(t, err)
	meanings := existingMeanings(cur)

	var b strings.Builder
	b.WriteString("| key | default | meaning |\n|---|---|---|\n")
	for _, r := range rows {
		if row, ok := notConfigurable[r.key]; ok {
			b.WriteString(row + "\n")
			continue
		}
		meaning := meanings[r.key]
		if meaning == "" {
			meaning = r.doc
		}
		require.NotEmpty(t, meaning, "config key %s has neither a README meaning nor a doc comment on its field", r.key)
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.key, cell(r.def), meaning)
	}
	checkSection(t, readme, "config", b.String())
}

// TestREADMEMetricsAndStatus: the README's status header and metric list
// are those of metadata.yaml, and the degraded kinds the code counts are
// the ones the metric's description names.
func TestREADMEMetricsAndStatus(t *testing.T) {
	var md struct {
		Status struct {
			Stability map[string][]string `yaml:"stability"`
		} `yaml:"status"`
		Telemetry struct {
			Metrics map[string]struct {
				Description string `yaml:"description"`
				Unit        string `yaml:"unit"`
				Sum         *struct {
					Monotonic bool `yaml:"monotonic"`
				} `yaml:"sum"`
				Histogram *struct{} `yaml:"histogram"`
			} `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, "metadata.yaml")), &md))
	require.NotEmpty(t, md.Telemetry.Metrics)

	var status strings.Builder
	status.WriteString("| Status | |\n|---|---|\n")
	levels := make([]string, 0, len(md.Status.Stability))
	for level := range md.Status.Stability {
		levels = append(levels, level)
	}
	slices.Sort(levels)
	for _, level := range levels {
		fmt.Fprintf(&status, "| Stability | %s: %s |\n", level, strings.Join(md.Status.Stability[level], ", "))
	}
	status.WriteString("| Warnings | [Statefulness](#deployment-rules) |\n")

	var metrics strings.Builder
	metrics.WriteString("| metric (Prometheus name) | type | unit | description |\n|---|---|---|---|\n")
	names := make([]string, 0, len(md.Telemetry.Metrics))
	for name := range md.Telemetry.Metrics {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := md.Telemetry.Metrics[name]
		kind := "gauge"
		switch {
		case m.Histogram != nil:
			kind = "histogram"
		case m.Sum != nil && m.Sum.Monotonic:
			kind = "counter"
		case m.Sum != nil:
			kind = "up-down counter"
		}
		fmt.Fprintf(&metrics, "| `otelcol_%s` | %s | `%s` | %s |\n", name, kind, m.Unit, cell(m.Description))
	}

	readme := checkSection(t, readFile(t, readmePath), "status", status.String())
	checkSection(t, readme, "metrics", metrics.String())

	// Every degraded kind the code counts is named in the description.
	degraded := md.Telemetry.Metrics["loopdetect_degraded"].Description
	kinds := degradedKinds(t)
	require.NotEmpty(t, kinds)
	for _, k := range kinds {
		require.Contains(t, degraded, k, "metadata.yaml: loopdetect_degraded's description does not name kind %q, which the code counts", k)
	}
}

// --- rows ---------------------------------------------------------------------

type configRow struct {
	key, def, doc string
}

var durationType = reflect.TypeFor[time.Duration]()

// collectRows adds one row per leaf of v: scalars, lists and maps. Structs
// (the config's sections) are walked into, their keys joined with dots;
// squashed ones (the engine's settings, a rule's top-level keys) add
// their keys at v's level.
func collectRows(t *testing.T, v reflect.Value, prefix string, docs map[string]string, rows *[]configRow) {
	t.Helper()
	typ := v.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		fv := v.Field(i)
		if opts == "squash" {
			collectRows(t, fv, prefix, docs, rows)
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := prefix + name
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			collectRows(t, fv, key+".", docs, rows)
			continue
		}
		*rows = append(*rows, configRow{key: key, def: render(fv), doc: docs[typ.Name()+"."+f.Name]})
	}
}

// render writes a default value the way a user would write it in YAML.
func render(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		return "`" + shortDuration(x) + "`"
	case configopaque.String:
		if x == "" {
			return "empty"
		}
		return "set"
	case string:
		if x == "" {
			return "empty"
		}
		return "`" + x + "`"
	case extract.Match:
		s := "`" + x.Key
		switch {
		case x.Value != "":
			s += "=" + x.Value
		case x.Prefix != "":
			s += "=" + x.Prefix + "…"
		}
		s += "`"
		if x.Client != "" {
			s += " (" + x.Client + ")"
		}
		return s
	case extract.NameMatch:
		s := "`" + x.Name + "`"
		if x.Prefix != "" {
			s = "`" + x.Prefix + "…`"
		}
		if x.Client != "" {
			s += " (" + x.Client + ")"
		}
		return s
	case extract.ClientLines:
		return x.Client + ": lines starting `" + strings.Join(x.Prefixes, "`, `") + "`"
	case extract.ClientKey:
		s := x.Client + ": `" + x.Key + "`"
		if x.Path != "" {
			s += " at `" + x.Path + "`"
		}
		return s
	case extract.SubagentSpan:
		return "`" + x.Name + "` not of `" + x.MainAgent + "`"
	case extract.EventKey:
		s := "event `" + x.Event + "`: `" + x.Key + "`"
		if x.Event == "" {
			s = "span attribute `" + x.Key + "`"
		}
		if x.Path != "" {
			s += " at `" + x.Path + "`"
		}
		if len(x.DropLines) > 0 {
			s += ", without lines starting `" + strings.Join(x.DropLines, "`, `") + "`"
		}
		return s
	}
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			return "none"
		}
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = render(v.Index(i))
		}
		return strings.Join(parts, ", ")
	case reflect.Map:
		if v.Len() == 0 {
			return "none"
		}
		return fmt.Sprintf("%d entries", v.Len())
	default:
		return fmt.Sprintf("`%v`", v.Interface())
	}
}

// shortDuration is d as a config file spells it: 2h, 30m, 1s, 250ms.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// fieldDocs reads the doc comments of the struct fields declared in the
// non-test Go files of dirs, keyed "Type.Field". A comment above a group of
// fields without their own comment is theirs too.
func fieldDocs(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, dir+"/"+e.Name(), nil, parser.ParseComments)
			require.NoError(t, err)
			ast.Inspect(file, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				last := ""
				for _, f := range st.Fields.List {
					text := last
					if f.Doc != nil {
						text = docSentence(f.Doc.Text())
						last = text
					}
					for _, n := range f.Names {
						docs[ts.Name.Name+"."+n.Name] = text
					}
				}
				return false
			})
		}
	}
	return docs
}

var defaultSentence = regexp.MustCompile(`\s*Defaults?\b.*?(\.(\s|$)|$)`)

// docSentence is a doc comment as one line, with its "Default …" sentences
// left out (the default column shows the code's own value).
func docSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.TrimSpace(defaultSentence.ReplaceAllString(s, ""))
}

// degradedKinds are the kind values the processor passes to the degraded
// counter: the string literals given to addDegraded and to
// attribute.String("kind", …) in the non-test sources.
func degradedKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var lit ast.Expr
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				if fn.Sel.Name == "addDegraded" && len(call.Args) == 3 {
					lit = call.Args[1]
				}
				if x, ok := fn.X.(*ast.Ident); ok && x.Name == "attribute" && fn.Sel.Name == "String" && len(call.Args) == 2 {
					if k, ok := call.Args[0].(*ast.BasicLit); ok && k.Value == `"kind"` {
						lit = call.Args[1]
					}
				}
			}
			if bl, ok := lit.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				k := strings.Trim(bl.Value, `"`)
				if !slices.Contains(kinds, k) {
					kinds = append(kinds, k)
				}
			}
			return true
		})
	}
	return kinds
}

// --- README sections ------------------------------------------------------------

func marker(name string) (begin, end string) {
	return "<!-- generated:" + name + " (go test ./processor/loopdetect -run TestREADME -update) -->\n",
		"<!-- end generated:" + name + " -->\n"
}

// section returns the text between the README's markers for name.
func section(readme, name string) (string, error) {
	begin, end := marker(name)
	i := strings.Index(readme, begin)
	j := strings.Index(readme, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s has no %q … %q section", readmePath, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	return readme[i+len(begin) : j], nil
}

// existingMeanings maps each key of the current config table to its
// meaning cell.
func existingMeanings(table string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := splitRow(line)
		if len(cells) == 3 {
			m[strings.Trim(cells[0], "`")] = cells[2]
		}
	}
	return m
}

// splitRow splits a Markdown table row on unescaped pipes.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '|' {
			cur.WriteString(`\|`)
			i++
			continue
		}
		if line[i] == '|' {
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(line[i])
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// checkSection compares the README's section with want, or rewrites it
// with -update; it returns the README as it is now.
func checkSection(t *testing.T, readme, name, want string) string {
	t.Helper()
	got, err := section(readme, name)
	require.NoError(t, err)
	if got == want {
		return readme
	}
	if *update {
		begin, _ := marker(name)
		i := strings.Index(readme, begin) + len(begin)
		readme = readme[:i] + want + readme[i+len(got):]
		require.NoError(t, os.WriteFile(readmePath, []byte(readme), 0o644))
		t.Logf("rewrote the %s section of %s", name, readmePath)
		return readme
	}
	t.Errorf("%s: the %s section is not what the code says; run\n\tgo test ./processor/loopdetect -run TestREADME -update\nand review the diff (give new keys a meaning).\n%s",
		readmePath, name, firstLineDiff(got, want))
	return readme
}

func firstLineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("first difference, line %d:\n  README: %s\n  code:   %s", i+1, a, b)
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
