package deploy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkServe holds the sluice-serve Deployment of m to what the binary
// reads and to the image: its environment, ports, Prometheus's scrape
// annotations, probes, Services, Redis, security, command, and the
// configuration it mounts (laid out in dir, an empty directory, as the
// kubelet would).
func checkServe(m manifests, img image, dir string) error {
	s, err := readServer(m, "sluice-serve")
	if err != nil {
		return err
	}
	errs := []error{s.checkPorts(), s.checkScrape(), s.checkProbes(), s.checkServices(m), s.checkRedis(m), s.checkSecurity(img), s.checkCommand(img)}
	files, err := s.configVolume(m)
	errs = append(errs, err)
	if files != nil {
		errs = append(errs, s.checkConfigContent(files, dir))
	}
	return errors.Join(errs...)
}

func TestServeManifests(t *testing.T) {
	if err := checkServe(loadManifests(t), readDockerfile(t), t.TempDir()); err != nil {
		t.Errorf("deploy/kubernetes:\n%v", err)
	}
}

// TestServeChecksRefuse breaks the manifests one way at a time and wants
// checkServe to say what broke.
func TestServeChecksRefuse(t *testing.T) {
	container := func(m manifests) *corev1.Container {
		return &m.deployment("sluice-serve").Spec.Template.Spec.Containers[0]
	}
	setEnv := func(m manifests, name, value string) {
		c := container(m)
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 {
			c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
		} else {
			c.Env[i].Value = value
		}
	}
	dropEnv := func(m manifests, name string) {
		c := container(m)
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	}
	config := func(m manifests, data map[string]string) { m.configMap("sluice-serve-config").Data = data }
	annotations := func(m manifests) map[string]string { return m.deployment("sluice-serve").Spec.Template.Annotations }
	for _, c := range []struct {
		name   string
		mutate func(manifests)
		want   string
	}{
		{"misspelled variable", func(m manifests) { setEnv(m, "REDIS_URLS", "redis:6379") }, "REDIS_URLS: not one of envoyproxy/ratelimit's variables"},
		{"unsupported value", func(m manifests) { setEnv(m, "USE_STATSD", "true") }, "USE_STATSD"},
		{"malformed value", func(m manifests) { setEnv(m, "RUNTIME_WATCH_ROOT", "no") }, "RUNTIME_WATCH_ROOT"},
		{"variable from a secret", func(m manifests) {
			c := container(m)
			c.Env = append(c.Env, corev1.EnvVar{Name: "REDIS_AUTH", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "password"}}})
		}, "REDIS_AUTH: valueFrom"},
		{"http elsewhere", func(m manifests) { setEnv(m, "PORT", "9000") }, "containerPort http 8080: sluice-serve listens on none such"},
		{"grpc on loopback", func(m manifests) { setEnv(m, "GRPC_HOST", "127.0.0.1") }, "listens on 127.0.0.1 only"},
		{"metrics off", func(m manifests) { setEnv(m, "USE_PROMETHEUS", "false") }, "containerPort metrics 9090"},
		{"scrape port", func(m manifests) { annotations(m)["prometheus.io/port"] = "8080" }, `prometheus.io/port "8080": the metrics are on PROMETHEUS_ADDR's port, 9090`},
		{"no scrape port", func(m manifests) { delete(annotations(m), "prometheus.io/port") }, "prometheus.io/port is not set"},
		{"metrics moved", func(m manifests) { setEnv(m, "PROMETHEUS_ADDR", ":9102") }, `prometheus.io/port "9090": the metrics are on PROMETHEUS_ADDR's port, 9102`},
		{"scrape path", func(m manifests) { annotations(m)["prometheus.io/path"] = "/stats/prometheus" }, `prometheus.io/path "/stats/prometheus": the metrics are at PROMETHEUS_PATH, /metrics`},
		{"metrics path moved", func(m manifests) { setEnv(m, "PROMETHEUS_PATH", "/stats/prometheus") }, `prometheus.io/path "/metrics": the metrics are at PROMETHEUS_PATH, /stats/prometheus`},
		{"default scrape path", func(m manifests) {
			delete(annotations(m), "prometheus.io/path")
			setEnv(m, "PROMETHEUS_PATH", "/stats/prometheus")
		}, `prometheus.io/path "" (Prometheus's /metrics): the metrics are at PROMETHEUS_PATH, /stats/prometheus`},
		{"scraped with no metrics", func(m manifests) { setEnv(m, "USE_PROMETHEUS", "false") }, "prometheus.io/scrape is true, but sluice-serve serves no metrics"},
		{"probe path", func(m manifests) { container(m).ReadinessProbe.HTTPGet.Path = "/healthz" }, "readinessProbe: GET /healthz"},
		{"probe port", func(m manifests) { container(m).StartupProbe.HTTPGet.Port = intstr.FromString("metrics") }, "startupProbe: GET /healthcheck on port metrics"},
		{"grpc probe port", func(m manifests) { container(m).LivenessProbe.GRPC.Port = 8080 }, "livenessProbe: gRPC health on 8080"},
		{"exec probe", func(m manifests) {
			container(m).LivenessProbe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
		}, "no shell"},
		{"no readiness", func(m manifests) { container(m).ReadinessProbe = nil }, "want a readinessProbe"},
		{"service target", func(m manifests) { m.services[0].Spec.Ports[0].TargetPort = intstr.FromString("grcp") }, "targetPort grcp is none of the container's ports"},
		{"service selector", func(m manifests) { m.services[0].Spec.Selector = map[string]string{"app": "other"} }, "no Service selects the pods"},
		{"redis elsewhere", func(m manifests) { setEnv(m, "REDIS_URL", "redis-master:6379") }, "no Service redis-master with port 6379"},
		{"no redis", func(m manifests) { dropEnv(m, "REDIS_URL") }, "embedded store"},
		{"mount path", func(m manifests) { container(m).VolumeMounts[0].MountPath = "/data/config" }, "nothing is mounted at /data/ratelimit/config"},
		{"sub path", func(m manifests) { container(m).VolumeMounts[0].SubPath = "edge.yaml" }, "subPath"},
		{"watch root", func(m manifests) { dropEnv(m, "RUNTIME_WATCH_ROOT") }, "RUNTIME_WATCH_ROOT is not false"},
		{"dot files", func(m manifests) { dropEnv(m, "RUNTIME_IGNOREDOTFILES") }, "RUNTIME_IGNOREDOTFILES is not true"},
		{"dot files read", func(m manifests) {
			dropEnv(m, "RUNTIME_IGNOREDOTFILES")
			container(m).Env = append(container(m).Env, corev1.EnvVar{Name: "MERGE_DOMAIN_CONFIG", Value: "true"})
		}, "reads 2 files from the ConfigMap's volume, not its 1"},
		{"no configmap", func(m manifests) { m.configMaps[0].Name = "other" }, "no ConfigMap sluice-serve-config"},
		{"unknown key", func(m manifests) {
			config(m, map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 2}\n"})
		}, "does not load"},
		{"domain twice", func(m manifests) {
			one := "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
			config(m, map[string]string{"a.yaml": one, "b.yaml": one})
		}, "does not load"},
		{"root", func(m manifests) { container(m).SecurityContext.RunAsUser = new(int64) }, "runAsUser 0"},
		{"writable root", func(m manifests) { container(m).SecurityContext.ReadOnlyRootFilesystem = nil }, "readOnlyRootFilesystem"},
		{"escalation", func(m manifests) { container(m).SecurityContext.AllowPrivilegeEscalation = nil }, "allowPrivilegeEscalation"},
		{"capabilities", func(m manifests) { container(m).SecurityContext.Capabilities.Drop = nil }, "capabilities"},
		{"no limits", func(m manifests) { container(m).Resources = corev1.ResourceRequirements{} }, "resources"},
		{"a shell", func(m manifests) { container(m).Command = []string{"/bin/sh", "-c", "sluice-serve"} }, "want the image's entrypoint"},
		{"flags", func(m manifests) { container(m).Args = []string{"--config", "/etc/policies.yaml"} }, "no arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := loadManifests(t).deepCopy()
			c.mutate(m)
			err := checkServe(m, readDockerfile(t), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	t.Run("ratelimit as the command", func(t *testing.T) {
		m := loadManifests(t)
		container(m).Command = []string{"/bin/ratelimit"}
		if err := checkServe(m, readDockerfile(t), t.TempDir()); err != nil {
			t.Errorf("command /bin/ratelimit, as Envoy Gateway gives it: %v", err)
		}
	})
}

func (m manifests) deepCopy() manifests {
	var out manifests
	for _, d := range m.deployments {
		out.deployments = append(out.deployments, d.DeepCopy())
	}
	for _, s := range m.services {
		out.services = append(out.services, s.DeepCopy())
	}
	for _, c := range m.configMaps {
		out.configMaps = append(out.configMaps, c.DeepCopy())
	}
	return out
}
