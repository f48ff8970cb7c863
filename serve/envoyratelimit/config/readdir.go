package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ReadDir returns every file under dir, subdirectories included, in
// lexical order of their paths, as lyft/goruntime's loader walks the
// runtime directory for envoyproxy/ratelimit: whatever their names (not
// only .yaml); symbolic links to files are read, while links to
// directories and dangling links are skipped (it does not follow them);
// with ignoreDotFiles (RUNTIME_IGNOREDOTFILES) files and directories whose
// names start with '.' are skipped, which is what keeps a Kubernetes
// ConfigMap volume's "..2024_01_01_..." directory from being read twice.
// Each File's Path is dir joined with the file's path under it.
//
// Where goruntime logs a file it cannot read and loads the others,
// ReadDir returns an error: a configuration missing a file is not loaded.
func ReadDir(dir string, ignoreDotFiles bool) ([]File, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("config: %s is not a directory", dir)
	}
	var files []File
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if path == dir {
			return nil
		}
		dot := ignoreDotFiles && strings.HasPrefix(d.Name(), ".")
		if d.IsDir() {
			if dot {
				return filepath.SkipDir
			}
			return nil
		}
		if dot {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Stat(path)
			if err != nil || !target.Mode().IsRegular() {
				return nil // as goruntime: a link it cannot read as a file
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		files = append(files, File{Path: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}
