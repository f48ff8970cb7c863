package settings

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// variablesDoc is docs/serve-variables.md, which lists Variables.
const variablesDoc = "../../../docs/serve-variables.md"

// renderVariables writes Variables as the document's table.
func renderVariables() string {
	var b strings.Builder
	b.WriteString("| variable | their default | Sluice | refused values | note |\n| --- | --- | --- | --- | --- |\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, v := range Variables {
		def := "`" + v.Default + "`"
		if v.Default == "" {
			def = ""
		}
		note := v.Note
		if v.Upstream != "" {
			note = "added after 3fb702589d36 (" + v.Upstream + "): " + note
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", v.Name, def, v.Supported, cell(v.Refuses), cell(note))
	}
	return b.String()
}

// TestVariablesDoc: docs/serve-variables.md lists every variable of
// envoyproxy/ratelimit with what sluice-serve does with it, as Variables
// (which FromEnv follows) says. SLUICE_UPDATE_DOCS=1 rewrites the table.
func TestVariablesDoc(t *testing.T) {
	const begin, end = "<!-- settings.Variables -->\n", "<!-- end settings.Variables -->\n"
	data, err := os.ReadFile(variablesDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q block", variablesDoc, begin, end)
	}
	want := doc[:i+len(begin)] + renderVariables() + doc[j:]
	if want == doc {
		return
	}
	if os.Getenv("SLUICE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(variablesDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s does not list settings.Variables as they are: run SLUICE_UPDATE_DOCS=1 go test -run TestVariablesDoc ./envoyratelimit/settings in serve/", variablesDoc)
}
