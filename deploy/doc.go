// Package deploy holds sluice-serve's deployment files and the tests that
// check them: the image's Dockerfile and build script (build-static.sh)
// and the Kubernetes manifests (kubernetes/), each held against what the
// sluice-serve binary reads (its environment, ports, health path and
// configuration directory). It has no API; deploy/README.md describes the
// files.
package deploy
