package deploy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
)

// configVolume finds the ConfigMap the container mounts where sluice-serve
// reads its configuration ($RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/
// $RUNTIME_APPDIRECTORY), and checks that the mount is one sluice-serve
// reloads from: the whole volume (a subPath mount is never updated), with
// RUNTIME_WATCH_ROOT=false (the kubelet swaps the volume's ..data link
// inside that directory; RUNTIME_ROOT itself never changes) and
// RUNTIME_IGNOREDOTFILES=true (else the kubelet's ..<timestamp> directory
// is read as well, every file twice). It returns the files the volume
// holds, by path under the mount.
func (s *server) configVolume(m manifests) (map[string][]byte, error) {
	dir := path.Clean(s.settings.ConfigDir())
	i := slices.IndexFunc(s.container.VolumeMounts, func(vm corev1.VolumeMount) bool { return path.Clean(vm.MountPath) == dir })
	if i < 0 {
		return nil, fmt.Errorf("nothing is mounted at %s (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY), where sluice-serve reads its configuration", dir)
	}
	mount := s.container.VolumeMounts[i]
	var errs []error
	if mount.SubPath != "" || mount.SubPathExpr != "" {
		errs = append(errs, fmt.Errorf("volumeMount %s: a subPath mount is never updated by the kubelet", mount.Name))
	}
	if s.settings.RuntimeWatchRoot {
		errs = append(errs, errors.New("RUNTIME_WATCH_ROOT is not false: a ConfigMap update swaps a link inside the directory, not RUNTIME_ROOT, and would not be reloaded"))
	}
	if !s.settings.RuntimeIgnoreDotFiles {
		errs = append(errs, errors.New("RUNTIME_IGNOREDOTFILES is not true: the kubelet's ..<timestamp> directory would be read too, every file twice"))
	}
	v := slices.IndexFunc(s.pod.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if v < 0 || s.pod.Volumes[v].ConfigMap == nil {
		return nil, errors.Join(append(errs, fmt.Errorf("volumeMount %s: no configMap volume of that name", mount.Name))...)
	}
	source := s.pod.Volumes[v].ConfigMap
	cm := m.configMap(source.Name)
	if cm == nil {
		return nil, errors.Join(append(errs, fmt.Errorf("volume %s: no ConfigMap %s among the manifests", mount.Name, source.Name))...)
	}
	files := map[string][]byte{}
	for key, value := range cm.Data {
		files[key] = []byte(value)
	}
	for key, value := range cm.BinaryData {
		files[key] = value
	}
	if len(source.Items) > 0 {
		selected := map[string][]byte{}
		for _, item := range source.Items {
			data, ok := files[item.Key]
			if !ok {
				errs = append(errs, fmt.Errorf("volume %s: item %s: no such key in ConfigMap %s", mount.Name, item.Key, cm.Name))
			}
			selected[item.Path] = data
		}
		files = selected
	}
	if len(files) == 0 {
		errs = append(errs, fmt.Errorf("ConfigMap %s: no files", cm.Name))
	}
	return files, errors.Join(errs...)
}

// writeConfigMapVolume lays files out in dir as the kubelet lays out a
// ConfigMap volume: the files in a directory ..<timestamp>, a link ..data
// to it, and at the top a link per file (or first directory of a path)
// into ..data.
func writeConfigMapVolume(dir string, files map[string][]byte) error {
	const stamp = "..2026_12_03_14_00_00.000000001"
	for name, data := range files {
		full := filepath.Join(dir, stamp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return err
		}
		top, _, _ := strings.Cut(name, "/")
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", top), link); err != nil {
			return err
		}
	}
	return os.Symlink(stamp, filepath.Join(dir, "..data"))
}

// checkConfigContent loads the ConfigMap's files as sluice-serve loads
// them from the volume the kubelet writes: config.ReadDir of that layout
// with RUNTIME_IGNOREDOTFILES, then config.Load with MERGE_DOMAIN_CONFIG.
// Each file must be read once, and the set must load.
func (s *server) checkConfigContent(files map[string][]byte, dir string) error {
	if err := writeConfigMapVolume(dir, files); err != nil {
		return err
	}
	read, err := config.ReadDir(dir, s.settings.RuntimeIgnoreDotFiles)
	if err != nil {
		return err
	}
	if len(read) != len(files) {
		var names []string
		for _, f := range read {
			names = append(names, f.Path)
		}
		return fmt.Errorf("sluice-serve reads %d files from the ConfigMap's volume, not its %d: %s", len(read), len(files), strings.Join(names, ", "))
	}
	c, err := config.Load(read, s.settings.MergeDomainConfig)
	if err != nil {
		return fmt.Errorf("the ConfigMap's configuration does not load: %w", err)
	}
	if len(c.Rules()) == 0 {
		return errors.New("the ConfigMap's configuration has no rate_limit")
	}
	return nil
}

func (m manifests) configMap(name string) *corev1.ConfigMap {
	i := slices.IndexFunc(m.configMaps, func(c *corev1.ConfigMap) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return m.configMaps[i]
}
