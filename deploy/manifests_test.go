package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// manifestDirs are the directories of Kubernetes manifests: the service's
// own, and the demo Redis its REDIS_URL names.
var manifestDirs = []string{"kubernetes", "kubernetes/demo"}

// manifests are the objects of a set of manifest files, by kind.
type manifests struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
}

// decodeManifests decodes every YAML document of data (a file named name)
// strictly into the Kubernetes API type of its apiVersion and kind: an
// unknown or duplicated field, a value of the wrong type, or a kind other
// than apps/v1 Deployment, v1 ConfigMap and v1 Service is an error naming
// the file and the document. Documents holding only comments are skipped.
func decodeManifests(name string, data []byte, into *manifests) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if err := decodeDocument(doc, into); err != nil {
			return fmt.Errorf("%s: document %d: %w", name, i, err)
		}
	}
}

func decodeDocument(doc []byte, into *manifests) error {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	if meta == (metav1.TypeMeta{}) && onlyComments(doc) {
		return nil
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			return fmt.Errorf("Deployment: %w", err)
		}
		into.deployments = append(into.deployments, &d)
	case "v1 Service":
		var s corev1.Service
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return fmt.Errorf("Service: %w", err)
		}
		into.services = append(into.services, &s)
	case "v1 ConfigMap":
		var c corev1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &c); err != nil {
			return fmt.Errorf("ConfigMap: %w", err)
		}
		into.configMaps = append(into.configMaps, &c)
	default:
		return fmt.Errorf("apiVersion %q kind %q: not one of apps/v1 Deployment, v1 Service, v1 ConfigMap", meta.APIVersion, meta.Kind)
	}
	return nil
}

func onlyComments(doc []byte) bool {
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

// loadManifests decodes every .yaml file of manifestDirs.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	var m manifests
	for _, dir := range manifestDirs {
		names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("no manifests in %s", dir)
		}
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := decodeManifests(name, data, &m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

func (m manifests) deployment(name string) *appsv1.Deployment {
	i := slices.IndexFunc(m.deployments, func(d *appsv1.Deployment) bool { return d.Name == name })
	if i < 0 {
		return nil
	}
	return m.deployments[i]
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	if m.deployment("sluice-serve") == nil || m.deployment("redis") == nil {
		t.Errorf("want the Deployments sluice-serve and redis, got %d Deployments", len(m.deployments))
	}
	if len(m.services) != 2 || len(m.configMaps) != 1 {
		t.Errorf("want 2 Services (sluice-serve, redis) and 1 ConfigMap, got %d and %d", len(m.services), len(m.configMaps))
	}
}

// TestDecodeRefuses holds decodeManifests to its contract, so that a
// manifest it accepts has no field the API server would drop or refuse by
// type.
func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: v1\nkind: Service\nspec:\n  selektor: {a: b}\n", `unknown field "selektor"`},
		{"misplaced field", "apiVersion: v1\nkind: ConfigMap\nspec: {}\n", `unknown field "spec"`},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\ndata: {c: d}\n", `"data" already set`},
		{"wrong type", "apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: two\n", "cannot unmarshal string"},
		{"unknown kind", "apiVersion: v1\nkind: Secret\n", `kind "Secret": not one of`},
		{"wrong apiVersion", "apiVersion: extensions/v1beta1\nkind: Deployment\n", "not one of"},
		{"no kind", "metadata: {name: x}\n", "not one of"},
		{"second document", "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: Service\nspec: {portz: []}\n", "document 2: Service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m manifests
			err := decodeManifests("bad.yaml", []byte(c.doc), &m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	var m manifests
	if err := decodeManifests("comments.yaml", []byte("# only a comment\n---\n# another\n"), &m); err != nil {
		t.Errorf("documents of comments only: %v", err)
	}
}
