// Package imagebuild declares the OCI images of otelcol-loop and
// otelcol-loop-gateway and builds what goes in them without a container
// daemon: static binaries cross-compiled for linux/amd64 and linux/arm64,
// CA certificates, a passwd entry for the non-root user and the default
// configuration, as tar layers. internal/devtools/ociimage assembles them
// into one image index per distribution (with go-containerregistry, a
// requirement of that module only). Every timestamp comes from the commit
// time, so one commit built twice gives the same digests.
//
// The values the images declare (user, entrypoint, configuration path,
// ports) are defined here once; the Dockerfile at the repository root
// repeats them for people who build with docker, and a test keeps the two in
// step.
package imagebuild

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// User is the numeric user (and group) the images run as: non-root, the
// same id the upstream collector images use, so volume permissions
// (fsGroup: 10001) carry over.
const User = 10001

// UserName is the passwd name of User.
const UserName = "otelcol"

// Source is the project's source URL, written into the OCI source label.
const Source = "https://github.com/otelcol-loop/otelcol-loop"

// DefaultRepository is the registry and namespace the images are named
// under unless the build is told otherwise.
const DefaultRepository = "ghcr.io/otelcol-loop"

// CACertsPath is where the CA bundle sits in the images: the path Go's
// crypto/x509 reads first on Linux.
const CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

// Platform is one operating system and architecture an image is built for.
type Platform struct {
	OS, Arch string
	// Variant is the OCI platform variant ("v8" for arm64), empty if none.
	Variant string
}

// String returns os/arch, the form go and docker use.
func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the platforms of every image index, in index order.
var Platforms = []Platform{
	{OS: "linux", Arch: "amd64"},
	{OS: "linux", Arch: "arm64", Variant: "v8"},
}

// Image declares one distribution's image.
type Image struct {
	// Name is the distribution's binary name, the image name and the
	// directory of its configuration under /etc.
	Name string
	// ModuleDir is the nested Go module (relative to the repository root)
	// the binary is built from.
	ModuleDir string
	// Manifest is the ocb manifest (relative to the repository root) whose
	// dist.version and dist.description label the image.
	Manifest string
	// Config is the configuration file (relative to the repository root)
	// baked in at ConfigPath.
	Config string
	// Ports are the TCP ports the image exposes: OTLP gRPC, OTLP HTTP and the
	// health check.
	Ports []int
	// DataDir, when set, is created in the image owned by User, for state
	// that must survive in a volume (alert_sink's persistent queue).
	DataDir string
}

// Images are the two distributions, built by `make image`.
var Images = []Image{
	{
		Name:      "otelcol-loop",
		ModuleDir: "cmd/otelcol-loop",
		Manifest:  "builder-config.yaml",
		Config:    "config/container.yaml",
		Ports:     []int{4317, 4318, 13133},
		DataDir:   "/var/lib/otelcol-loop",
	},
	{
		// The gateway's baked configuration finds tier 2 by DNS
		// (LOOP_TIER2_DNS_NAME), which works in Kubernetes, docker compose
		// and plain docker networks alike.
		Name:      "otelcol-loop-gateway",
		ModuleDir: "cmd/otelcol-loop-gateway",
		Manifest:  "cmd/otelcol-loop-gateway/builder-config.yaml",
		Config:    "config/gateway-dns.yaml",
		Ports:     []int{4317, 4318, 13133},
	},
}

// Lookup returns the image called name.
func Lookup(name string) (Image, error) {
	i := slices.IndexFunc(Images, func(im Image) bool { return im.Name == name })
	if i < 0 {
		return Image{}, fmt.Errorf("no image %q", name)
	}
	return Images[i], nil
}

// BinaryPath is where the binary sits in the image: at the root, where the
// upstream Helm chart's command.name expects it (/<command.name>).
func (im Image) BinaryPath() string { return "/" + im.Name }

// ConfigPath is where the default configuration is baked in, the layout of
// the upstream collector images (/etc/otelcol-contrib/config.yaml).
func (im Image) ConfigPath() string { return "/etc/" + im.Name + "/config.yaml" }

// Entrypoint is the image's ENTRYPOINT: the binary alone, so that the Helm
// chart and the Operator, which pass their own --config, can replace Cmd.
func (im Image) Entrypoint() []string { return []string{im.BinaryPath()} }

// Cmd is the image's default arguments: the baked configuration.
func (im Image) Cmd() []string { return []string{"--config", im.ConfigPath()} }

// ExposedPorts returns the ports in OCI form ("4317/tcp").
func (im Image) ExposedPorts() []string {
	out := make([]string, len(im.Ports))
	for i, p := range im.Ports {
		out[i] = strconv.Itoa(p) + "/tcp"
	}
	return out
}

// Dist is what an ocb manifest says about the distribution.
type Dist struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Version     string `yaml:"version"`
}

// ReadDist reads dist: from the image's ocb manifest under root.
func (im Image) ReadDist(root string) (Dist, error) {
	p := filepath.Join(root, im.Manifest)
	b, err := os.ReadFile(p)
	if err != nil {
		return Dist{}, fmt.Errorf("reading the ocb manifest of %s: %w", im.Name, err)
	}
	var m struct {
		Dist Dist `yaml:"dist"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return Dist{}, fmt.Errorf("%s: %w", p, err)
	}
	if m.Dist.Name != im.Name {
		return Dist{}, fmt.Errorf("%s: dist.name %q, want %q", p, m.Dist.Name, im.Name)
	}
	if m.Dist.Version == "" {
		return Dist{}, fmt.Errorf("%s: dist.version is empty", p)
	}
	return m.Dist, nil
}

// OCI annotation and label keys the images carry.
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelCreated     = "org.opencontainers.image.created"
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelLicenses    = "org.opencontainers.image.licenses"
	// RefName names an image index inside an OCI layout's index.json.
	RefName = "org.opencontainers.image.ref.name"
)
