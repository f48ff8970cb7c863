package deploy

import (
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sluicehq/sluice/serve/envoyratelimit/settings"
)

// healthPath is envoyproxy/ratelimit's health check, which sluice-serve
// serves on HOST:PORT as it does.
const healthPath = "/healthcheck"

// server is the sluice-serve container of a Deployment and what the binary
// makes of its environment.
type server struct {
	deployment *appsv1.Deployment
	pod        *corev1.PodSpec
	container  *corev1.Container
	settings   settings.Settings
	ports      map[int32]string // the ports the binary listens on: what each is
}

// readServer finds the container of the Deployment named name and reads
// its environment as sluice-serve does (settings.FromEnv): a variable that
// is not one of envoyproxy/ratelimit's (misspelled), set twice, taken from
// elsewhere (which this check cannot read), malformed or asking for what
// Sluice does not do is an error.
func readServer(m manifests, name string) (*server, error) {
	d := m.deployment(name)
	if d == nil {
		return nil, fmt.Errorf("no Deployment %s", name)
	}
	pod := &d.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("Deployment %s: no container %s", name, name)
	}
	c := &pod.Containers[i]
	var errs []error
	if len(c.EnvFrom) > 0 {
		errs = append(errs, errors.New("envFrom: its variables cannot be checked here; list each in env"))
	}
	var environ []string
	seen := map[string]bool{}
	for _, e := range c.Env {
		switch {
		case !slices.ContainsFunc(settings.Variables, func(v settings.Variable) bool { return v.Name == e.Name }):
			errs = append(errs, fmt.Errorf("env %s: not one of envoyproxy/ratelimit's variables (misspelled?)", e.Name))
		case seen[e.Name]:
			errs = append(errs, fmt.Errorf("env %s: set twice", e.Name))
		case e.ValueFrom != nil:
			errs = append(errs, fmt.Errorf("env %s: valueFrom cannot be checked here", e.Name))
		}
		seen[e.Name] = true
		environ = append(environ, e.Name+"="+e.Value)
	}
	s, err := settings.FromEnv(environ)
	if err != nil {
		errs = append(errs, fmt.Errorf("sluice-serve refuses its environment: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("Deployment %s, container %s: %w", name, c.Name, err)
	}
	srv := &server{deployment: d, pod: pod, container: c, settings: s, ports: map[int32]string{}}
	return srv, srv.listeners()
}

// listeners fills ports from the settings; each listener must take
// connections from other hosts (a Service, a probe), not loopback only.
func (s *server) listeners() error {
	var errs []error
	add := func(what, host string, port int) {
		if host != "" && !net.ParseIP(host).IsUnspecified() {
			errs = append(errs, fmt.Errorf("%s listens on %s only: neither the Service nor the kubelet's probes reach it", what, host))
		}
		s.ports[int32(port)] = what
	}
	set := s.settings
	if set.GRPCUDS != "" {
		errs = append(errs, errors.New("GRPC_UDS: gRPC on a unix socket is out of the Service's reach"))
	}
	add("gRPC (GRPC_HOST:GRPC_PORT)", set.GRPCHost, set.GRPCPort)
	add("HTTP (HOST:PORT)", set.Host, set.Port)
	add("debug (DEBUG_HOST:DEBUG_PORT)", set.DebugHost, set.DebugPort)
	if set.PrometheusEnabled() {
		host, port, err := net.SplitHostPort(set.PrometheusAddr)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			errs = append(errs, fmt.Errorf("PROMETHEUS_ADDR %q: want host:port", set.PrometheusAddr))
		} else {
			add("metrics (PROMETHEUS_ADDR)", host, n)
		}
	}
	if len(s.ports) < 3 || set.PrometheusEnabled() && len(s.ports) < 4 {
		errs = append(errs, errors.New("two listeners share a port"))
	}
	return errors.Join(errs...)
}

// containerPort resolves a port by number or by the name of one of the
// container's ports, to the number the container listens on.
func (s *server) containerPort(p intstr.IntOrString) (int32, bool) {
	for _, cp := range s.container.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// checkPorts: every declared container port is one the binary listens on,
// and gRPC, HTTP and (when enabled) the metrics are declared.
func (s *server) checkPorts() error {
	var errs []error
	declared := map[int32]bool{}
	for _, cp := range s.container.Ports {
		if _, ok := s.ports[cp.ContainerPort]; !ok {
			errs = append(errs, fmt.Errorf("containerPort %s %d: sluice-serve listens on none such (%s)", cp.Name, cp.ContainerPort, s.listening()))
		}
		declared[cp.ContainerPort] = true
	}
	want := []int{s.settings.GRPCPort, s.settings.Port}
	if s.settings.PrometheusEnabled() {
		_, port, _ := net.SplitHostPort(s.settings.PrometheusAddr)
		n, _ := strconv.Atoi(port)
		want = append(want, n)
	}
	for _, p := range want {
		if !declared[int32(p)] {
			errs = append(errs, fmt.Errorf("no containerPort for %s on %d", s.ports[int32(p)], p))
		}
	}
	return errors.Join(errs...)
}

// Prometheus's annotations of a pod, as its kubernetes-pods scrape
// configuration reads them: scrape "true" to be scraped, on port (every
// declared port when unset), at path (/metrics when unset).
const (
	scrapeAnnotation = "prometheus.io/scrape"
	portAnnotation   = "prometheus.io/port"
	pathAnnotation   = "prometheus.io/path"
)

// checkScrape: a pod annotated to be scraped serves metrics (USE_PROMETHEUS
// on), and its port and path annotations are PROMETHEUS_ADDR's port and
// PROMETHEUS_PATH, where sluice-serve serves them; a port or path
// annotation is held to them even with no scrape annotation.
func (s *server) checkScrape() error {
	a := s.deployment.Spec.Template.Annotations
	set := s.settings
	if !set.PrometheusEnabled() {
		if a[scrapeAnnotation] == "true" {
			return fmt.Errorf("%s is true, but sluice-serve serves no metrics (USE_PROMETHEUS=true and no DISABLE_STATS=true serve them)", scrapeAnnotation)
		}
		return nil
	}
	var errs []error
	_, port, _ := net.SplitHostPort(set.PrometheusAddr) // checked by listeners
	switch p, ok := a[portAnnotation]; {
	case ok && p != port:
		errs = append(errs, fmt.Errorf("%s %q: the metrics are on PROMETHEUS_ADDR's port, %s", portAnnotation, p, port))
	case !ok && a[scrapeAnnotation] == "true":
		errs = append(errs, fmt.Errorf("%s is not set: Prometheus would scrape every port of the pod for metrics, which are on PROMETHEUS_ADDR's port, %s", portAnnotation, port))
	}
	if p, ok := a[pathAnnotation]; ok && p != set.PrometheusPath {
		errs = append(errs, fmt.Errorf("%s %q: the metrics are at PROMETHEUS_PATH, %s", pathAnnotation, p, set.PrometheusPath))
	} else if !ok && a[scrapeAnnotation] == "true" && set.PrometheusPath != "/metrics" {
		errs = append(errs, fmt.Errorf("%s \"\" (Prometheus's /metrics): the metrics are at PROMETHEUS_PATH, %s", pathAnnotation, set.PrometheusPath))
	}
	return errors.Join(errs...)
}

func (s *server) listening() string {
	var out []string
	for p, what := range s.ports {
		out = append(out, fmt.Sprintf("%s on %d", what, p))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// checkProbes: readiness and liveness are set; an HTTP probe asks for the
// health path on HOST:PORT, a gRPC probe asks GRPC_PORT's grpc.health.v1
// (for "" or "ratelimit", the services sluice-serve reports), a TCP probe
// a port sluice-serve listens on. An exec probe has no shell to run in.
func (s *server) checkProbes() error {
	var errs []error
	c := s.container
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		errs = append(errs, errors.New("want a readinessProbe and a livenessProbe"))
	}
	for what, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p == nil {
			continue
		}
		switch h := p.ProbeHandler; {
		case h.HTTPGet != nil:
			port, ok := s.containerPort(h.HTTPGet.Port)
			if h.HTTPGet.Path != healthPath || !ok || int(port) != s.settings.Port || h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
				errs = append(errs, fmt.Errorf("%s: GET %s on port %s: want %s on HTTP (HOST:PORT, %d)", what, h.HTTPGet.Path, h.HTTPGet.Port.String(), healthPath, s.settings.Port))
			}
		case h.GRPC != nil:
			if int(h.GRPC.Port) != s.settings.GRPCPort || h.GRPC.Service != nil && *h.GRPC.Service != "" && *h.GRPC.Service != "ratelimit" {
				errs = append(errs, fmt.Errorf("%s: gRPC health on %d: want GRPC_PORT (%d), service \"\" or \"ratelimit\"", what, h.GRPC.Port, s.settings.GRPCPort))
			}
		case h.TCPSocket != nil:
			if port, ok := s.containerPort(h.TCPSocket.Port); !ok || s.ports[port] == "" {
				errs = append(errs, fmt.Errorf("%s: TCP port %s: sluice-serve listens on none such", what, h.TCPSocket.Port.String()))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: want httpGet, grpc or tcpSocket (the image has no shell for exec)", what))
		}
	}
	return errors.Join(errs...)
}

// checkServices: every Service that selects the pods targets a port the
// container declares (so, by checkPorts, one sluice-serve listens on), and
// some Service exposes gRPC, HTTP and (when enabled) the metrics.
func (s *server) checkServices(m manifests) error {
	var errs []error
	labels := s.deployment.Spec.Template.Labels
	exposed := map[int32]bool{}
	selecting := 0
	for _, svc := range m.services {
		if len(svc.Spec.Selector) == 0 || !subset(svc.Spec.Selector, labels) {
			continue
		}
		selecting++
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target == (intstr.IntOrString{}) {
				target = intstr.FromInt32(p.Port)
			}
			port, ok := s.containerPort(target)
			if !ok {
				errs = append(errs, fmt.Errorf("Service %s port %s: targetPort %s is none of the container's ports", svc.Name, p.Name, target.String()))
				continue
			}
			exposed[port] = true
		}
	}
	if selecting == 0 {
		errs = append(errs, fmt.Errorf("no Service selects the pods (labels %v)", labels))
	}
	for _, cp := range s.container.Ports {
		if !exposed[cp.ContainerPort] {
			errs = append(errs, fmt.Errorf("no Service exposes %s (%d)", s.ports[cp.ContainerPort], cp.ContainerPort))
		}
	}
	if sel := s.deployment.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 || !subset(sel.MatchLabels, labels) {
		errs = append(errs, errors.New("the Deployment's selector does not select its pods"))
	}
	return errors.Join(errs...)
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkRedis: replicas share limits only through Redis, so more than one
// needs REDIS_URL; each of its tcp addresses names a Service of the
// manifests and one of its ports.
func (s *server) checkRedis(m manifests) error {
	set := s.settings
	if !set.RedisURLSet() {
		if r := s.deployment.Spec.Replicas; r == nil || *r > 1 {
			return errors.New("no REDIS_URL: each replica would keep its own limits on the embedded store")
		}
		return nil
	}
	if set.RedisSocketType != "tcp" {
		return fmt.Errorf("REDIS_SOCKET_TYPE %q: want tcp, to a Service", set.RedisSocketType)
	}
	addrs := strings.Split(set.RedisURL, ",")
	if set.RedisType == "sentinel" {
		addrs = addrs[1:] // the first is the master's name
	}
	var errs []error
	for _, addr := range addrs {
		host, port, err := net.SplitHostPort(addr)
		name, _, _ := strings.Cut(host, ".") // name, name.namespace, name.namespace.svc...
		i := slices.IndexFunc(m.services, func(svc *corev1.Service) bool {
			return svc.Name == name && slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port })
		})
		if err != nil || i < 0 {
			errs = append(errs, fmt.Errorf("REDIS_URL %s: no Service %s with port %s among the manifests", addr, name, port))
		}
	}
	return errors.Join(errs...)
}

// checkSecurity: the pod runs as the image's non-root user, and the
// container cannot gain privileges or write its root filesystem, with
// every capability dropped and resources requested.
func (s *server) checkSecurity(img image) error {
	var errs []error
	pod, c := s.pod.SecurityContext, s.container.SecurityContext
	if c == nil {
		return errors.New("no container securityContext")
	}
	uid := img.uid
	if pod != nil && pod.RunAsUser != nil {
		uid = int(*pod.RunAsUser)
	}
	if c.RunAsUser != nil {
		uid = int(*c.RunAsUser)
	}
	nonRoot := c.RunAsNonRoot != nil && *c.RunAsNonRoot || c.RunAsNonRoot == nil && pod != nil && pod.RunAsNonRoot != nil && *pod.RunAsNonRoot
	switch {
	case !nonRoot:
		errs = append(errs, errors.New("runAsNonRoot is not true"))
	case uid != img.uid:
		errs = append(errs, fmt.Errorf("runAsUser %d: not the image's USER %d", uid, img.uid))
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		errs = append(errs, errors.New("allowPrivilegeEscalation is not false"))
	}
	if c.Privileged != nil && *c.Privileged {
		errs = append(errs, errors.New("privileged"))
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		errs = append(errs, errors.New("readOnlyRootFilesystem is not true"))
	}
	if c.Capabilities == nil || !slices.Contains(c.Capabilities.Drop, "ALL") || len(c.Capabilities.Add) > 0 {
		errs = append(errs, errors.New("capabilities: want drop [ALL] and no add"))
	}
	r := s.container.Resources
	if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
		errs = append(errs, errors.New("resources: want cpu and memory requests and a memory limit"))
	}
	return errors.Join(errs...)
}

// checkCommand: the container runs the image's sluice-serve (its
// entrypoint, or /bin/ratelimit as Envoy Gateway does) with no arguments,
// which is what makes it read envoyproxy/ratelimit's environment.
func (s *server) checkCommand(img image) error {
	c := s.container
	if len(c.Command) > 0 && !slices.Contains([]string{img.entrypoint[0], path.Join(img.binDir, "ratelimit")}, c.Command[0]) {
		return fmt.Errorf("command %q: want the image's entrypoint %s or /bin/ratelimit", c.Command, img.entrypoint[0])
	}
	if len(c.Command) > 1 || len(c.Args) > 0 || len(img.entrypoint) > 1 {
		return fmt.Errorf("command %q, args %q: sluice-serve reads envoyproxy/ratelimit's environment only when started with no arguments", c.Command, c.Args)
	}
	return nil
}
