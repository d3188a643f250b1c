// Package deploygen writes the Helm values files (upstream
// opentelemetry-collector chart) and the OpenTelemetry Operator resource of
// the two-tier deployment from the plain manifests in deploy/kubernetes and
// the collector configurations they carry, so the three forms cannot drift:
// the collector configurations are embedded as their text, indented; image,
// replicas, environment, resources, ports and the queue's volume come from
// the Deployment and StatefulSet. `make deploy-generate` rewrites the files;
// a test fails when they differ from what Generate returns.
package deploygen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Files Generate writes, relative to the repository root.
const (
	HelmGateway  = "deploy/helm/gateway-values.yaml"
	HelmTier2    = "deploy/helm/tier2-values.yaml"
	OperatorTier = "deploy/operator/tier2.yaml"
)

// Sources of the generated files, relative to the repository root.
const (
	GatewayConfig = "config/gateway-k8s.yaml"
	Kustomization = "deploy/kubernetes/kustomization.yaml"
	ManifestsDir  = "deploy/kubernetes"
)

// Names shared by every form of the deployment.
const (
	Namespace   = "otelcol-loop"
	GatewayName = "otelcol-loop-gateway"
	Tier2Name   = "otelcol-loop-tier2"
	// Tier2ConfigKey is the key of the tier-2 ConfigMap holding its
	// collector configuration.
	Tier2ConfigKey = "otelcol-loop.yaml"
)

// Obj is a decoded YAML mapping.
type Obj = map[string]any

// Get walks a decoded YAML tree by keys (string) and indexes (int).
func Get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(Obj)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k < 0 || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// Str is Get for a string ("" when absent).
func Str(v any, path ...any) string { s, _ := Get(v, path...).(string); return s }

// List is Get for a list.
func List(v any, path ...any) []any { l, _ := Get(v, path...).([]any); return l }

// Manifests reads every document of deploy/kubernetes/*.yaml under root,
// keyed "Kind/name".
func Manifests(root string) (map[string]Obj, error) {
	files, err := filepath.Glob(filepath.Join(root, ManifestsDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]Obj{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc Obj
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if doc != nil {
				out[Str(doc, "kind")+"/"+Str(doc, "metadata", "name")] = doc
			}
		}
	}
	return out, nil
}

// Image is one entry of the kustomization's images: the one place that
// sets the repository and tag of both images.
type Image struct {
	// Name is the placeholder the manifests use.
	Name string `yaml:"name"`
	// NewName is the repository.
	NewName string `yaml:"newName"`
	// NewTag is the tag.
	NewTag string `yaml:"newTag"`
}

// Ref is repository:tag.
func (im Image) Ref() string { return im.NewName + ":" + im.NewTag }

// Images reads the kustomization's images, keyed by placeholder name.
func Images(root string) (map[string]Image, error) {
	b, err := os.ReadFile(filepath.Join(root, Kustomization))
	if err != nil {
		return nil, err
	}
	var k struct {
		Images []Image `yaml:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", Kustomization, err)
	}
	out := map[string]Image{}
	for _, im := range k.Images {
		if im.Name == "" || im.NewName == "" || im.NewTag == "" {
			return nil, fmt.Errorf("%s: images entry %+v lacks name, newName or newTag", Kustomization, im)
		}
		out[im.Name] = im
	}
	return out, nil
}

// Tier2Config returns the tier-2 collector configuration: the text of the
// tier-2 ConfigMap.
func Tier2Config(m map[string]Obj) (string, error) {
	cfg := Str(m["ConfigMap/"+Tier2Name], "data", Tier2ConfigKey)
	if cfg == "" {
		return "", fmt.Errorf("ConfigMap %s has no data.%s", Tier2Name, Tier2ConfigKey)
	}
	return cfg, nil
}

// Generate returns every generated file, keyed by its path relative to
// root.
func Generate(root string) (map[string][]byte, error) {
	m, err := Manifests(root)
	if err != nil {
		return nil, err
	}
	images, err := Images(root)
	if err != nil {
		return nil, err
	}
	gwCfg, err := os.ReadFile(filepath.Join(root, GatewayConfig))
	if err != nil {
		return nil, err
	}
	t2Cfg, err := Tier2Config(m)
	if err != nil {
		return nil, err
	}
	dep, ok := m["Deployment/"+GatewayName]
	if !ok {
		return nil, fmt.Errorf("%s: no Deployment %s", ManifestsDir, GatewayName)
	}
	sts, ok := m["StatefulSet/"+Tier2Name]
	if !ok {
		return nil, fmt.Errorf("%s: no StatefulSet %s", ManifestsDir, Tier2Name)
	}
	gw, err := helmGateway(dep, images, string(gwCfg))
	if err != nil {
		return nil, err
	}
	t2, err := helmTier2(sts, images, t2Cfg)
	if err != nil {
		return nil, err
	}
	op, err := operatorTier2(sts, m["Service/"+Tier2Name], images, t2Cfg)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{HelmGateway: gw, HelmTier2: t2, OperatorTier: op}, nil
}

// Write writes every generated file under root.
func Write(root string) error {
	files, err := Generate(root)
	if err != nil {
		return err
	}
	for p, b := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// container is the workload's first (only) container.
func container(w Obj) Obj {
	c, _ := Get(w, "spec", "template", "spec", "containers", 0).(Obj)
	return c
}

// image resolves the container's placeholder through the kustomization.
func image(w Obj, images map[string]Image) (Image, error) {
	name := Str(container(w), "image")
	im, ok := images[name]
	if !ok {
		return Image{}, fmt.Errorf("%s %s: image %q has no entry in %s images", Str(w, "kind"), Str(w, "metadata", "name"), name, Kustomization)
	}
	return im, nil
}

// containerPort returns the port the container names name (0 if none).
func containerPort(w Obj, name string) int {
	for _, p := range List(container(w), "ports") {
		if Str(p, "name") == name {
			n, _ := Get(p, "containerPort").(int)
			return n
		}
	}
	return 0
}

// helmPorts is the chart's ports: value, enabling the workload's OTLP and
// metrics ports and disabling the chart's Jaeger and Zipkin defaults (no
// such receivers in these distributions).
func helmPorts(w Obj) yaml.Node {
	var n yaml.Node
	port := func(container int) Obj {
		if container == 0 {
			return Obj{"enabled": false}
		}
		return Obj{"enabled": true, "containerPort": container, "servicePort": container, "protocol": "TCP"}
	}
	_ = n.Encode(Obj{
		"otlp":           port(containerPort(w, "otlp-grpc")),
		"otlp-http":      port(containerPort(w, "otlp-http")),
		"metrics":        port(containerPort(w, "metrics")),
		"jaeger-compact": Obj{"enabled": false},
		"jaeger-thrift":  Obj{"enabled": false},
		"jaeger-grpc":    Obj{"enabled": false},
		"zipkin":         Obj{"enabled": false},
	})
	return n
}

// helmValues is the part of the chart's values these files set, in the
// order they are written.
type helmValues struct {
	Mode             string           `yaml:"mode"`
	FullnameOverride string           `yaml:"fullnameOverride"`
	Image            helmImage        `yaml:"image"`
	Command          helmCommand      `yaml:"command"`
	ReplicaCount     any              `yaml:"replicaCount"`
	ServiceAccount   *helmSA          `yaml:"serviceAccount,omitempty"`
	Service          *helmService     `yaml:"service,omitempty"`
	Ports            yaml.Node        `yaml:"ports"`
	ExtraEnvs        any              `yaml:"extraEnvs,omitempty"`
	PodSecurity      any              `yaml:"podSecurityContext,omitempty"`
	Resources        any              `yaml:"resources,omitempty"`
	TerminationGrace any              `yaml:"terminationGracePeriodSeconds,omitempty"`
	StatefulSet      *helmStatefulSet `yaml:"statefulset,omitempty"`
	ExtraVolumes     any              `yaml:"extraVolumes,omitempty"`
	ExtraVolumeMount any              `yaml:"extraVolumeMounts,omitempty"`
}

type helmImage struct {
	Repository string `yaml:"repository"`
	Tag        string `yaml:"tag"`
}

type helmCommand struct {
	Name string `yaml:"name"`
}

type helmSA struct {
	Create bool   `yaml:"create"`
	Name   string `yaml:"name"`
}

type helmService struct {
	ClusterIP string `yaml:"clusterIP"`
}

type helmStatefulSet struct {
	VolumeClaimTemplates any    `yaml:"volumeClaimTemplates"`
	PodManagementPolicy  string `yaml:"podManagementPolicy"`
}

const generatedBy = "# Generated by `make deploy-generate` (internal/deploygen) from deploy/kubernetes/"

func helmGateway(dep Obj, images map[string]Image, config string) ([]byte, error) {
	im, err := image(dep, images)
	if err != nil {
		return nil, err
	}
	v := helmValues{
		Mode:             "deployment",
		FullnameOverride: GatewayName,
		Image:            helmImage{Repository: im.NewName, Tag: im.NewTag},
		Command:          helmCommand{Name: GatewayName},
		ReplicaCount:     Get(dep, "spec", "replicas"),
		// The Role the k8s resolver needs comes with rbac.yaml.
		ServiceAccount: &helmSA{Create: false, Name: Str(dep, "spec", "template", "spec", "serviceAccountName")},
		Ports:          helmPorts(dep),
		Resources:      Get(container(dep), "resources"),
		PodSecurity:    Get(dep, "spec", "template", "spec", "securityContext"),
		// The CA of tier 2's certificate, from its Secret.
		ExtraVolumes:     secretVolumes(dep),
		ExtraVolumeMount: secretMounts(dep),
	}
	head := generatedBy + "gateway.yaml and\n# " + GatewayConfig + ": edit those, not this file.\n" +
		"#\n# Tier 1 with the upstream chart (open-telemetry/opentelemetry-collector), after\n" +
		"# namespace.yaml and rbac.yaml (the ServiceAccount and Role of the k8s resolver):\n" +
		"#   helm install " + GatewayName + " open-telemetry/opentelemetry-collector -n " + Namespace + " -f " + HelmGateway + "\n" +
		"# alternateConfig replaces the chart's default configuration (Jaeger, Zipkin and\n" +
		"# debug components this distribution does not have) instead of merging into it.\n"
	return values(head, v, config)
}

func helmTier2(sts Obj, images map[string]Image, config string) ([]byte, error) {
	im, err := image(sts, images)
	if err != nil {
		return nil, err
	}
	spec := Get(sts, "spec", "template", "spec")
	v := helmValues{
		Mode:             "statefulset",
		FullnameOverride: Tier2Name,
		Image:            helmImage{Repository: im.NewName, Tag: im.NewTag},
		Command:          helmCommand{Name: "otelcol-loop"},
		ReplicaCount:     Get(sts, "spec", "replicas"),
		// Headless: the gateway's resolver routes to the pods themselves.
		Service:          &helmService{ClusterIP: "None"},
		Ports:            helmPorts(sts),
		ExtraEnvs:        Get(container(sts), "env"),
		PodSecurity:      Get(spec, "securityContext"),
		Resources:        Get(container(sts), "resources"),
		TerminationGrace: Get(spec, "terminationGracePeriodSeconds"),
		StatefulSet: &helmStatefulSet{
			VolumeClaimTemplates: Get(sts, "spec", "volumeClaimTemplates"),
			PodManagementPolicy:  Str(sts, "spec", "podManagementPolicy"),
		},
		// The TLS certificate and key from their Secret.
		ExtraVolumes:     secretVolumes(sts),
		ExtraVolumeMount: append(claimMounts(sts), secretMounts(sts)...),
	}
	head := generatedBy + "tier2.yaml (StatefulSet and\n# ConfigMap " + Tier2Name + "): edit that, not this file.\n" +
		"#\n# Tier 2 with the upstream chart (open-telemetry/opentelemetry-collector), after\n" +
		"# the Secret otelcol-loop-webhook (deploy/kubernetes/README.md):\n" +
		"#   helm install " + Tier2Name + " open-telemetry/opentelemetry-collector -n " + Namespace + " -f " + HelmTier2 + "\n" +
		"# The release's headless Service is " + Tier2Name + ", the one the gateway's resolver\n" +
		"# watches; alert_sink's queue is on the volume claim template.\n"
	return values(head, v, config)
}

// secretVolumes are the workload's volumes of Secrets (TLS material); the
// chart and the operator add their own ConfigMap volume for the config.
func secretVolumes(w Obj) []any {
	var out []any
	for _, v := range List(w, "spec", "template", "spec", "volumes") {
		if Get(v, "secret") != nil {
			out = append(out, v)
		}
	}
	return out
}

// secretMounts are the container's mounts of secretVolumes.
func secretMounts(w Obj) []any {
	secrets := map[string]bool{}
	for _, v := range secretVolumes(w) {
		secrets[Str(v, "name")] = true
	}
	var out []any
	for _, vm := range List(container(w), "volumeMounts") {
		if secrets[Str(vm, "name")] {
			out = append(out, vm)
		}
	}
	return out
}

// claimMounts are the container's mounts of the StatefulSet's volume claim
// templates (the chart adds its own config mount).
func claimMounts(sts Obj) []any {
	claims := map[string]bool{}
	for _, c := range List(sts, "spec", "volumeClaimTemplates") {
		claims[Str(c, "metadata", "name")] = true
	}
	var out []any
	for _, vm := range List(container(sts), "volumeMounts") {
		if claims[Str(vm, "name")] {
			out = append(out, vm)
		}
	}
	return out
}

func values(head string, v helmValues, config string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(head)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	buf.WriteString("alternateConfig:\n")
	buf.WriteString(Indent(config, 2))
	return buf.Bytes(), nil
}

// operator is the OpenTelemetryCollector resource (v1beta1), without its
// config (written after it as text).
type operator struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   operatorMeta `yaml:"metadata"`
	Spec       operatorSpec `yaml:"spec"`
}

type operatorMeta struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

type operatorSpec struct {
	Mode                 string `yaml:"mode"`
	Image                string `yaml:"image"`
	Replicas             any    `yaml:"replicas"`
	ServiceName          string `yaml:"serviceName"`
	PodManagementPolicy  string `yaml:"podManagementPolicy,omitempty"`
	Env                  any    `yaml:"env,omitempty"`
	PodSecurityContext   any    `yaml:"podSecurityContext,omitempty"`
	Resources            any    `yaml:"resources,omitempty"`
	TerminationGrace     any    `yaml:"terminationGracePeriodSeconds,omitempty"`
	VolumeClaimTemplates any    `yaml:"volumeClaimTemplates,omitempty"`
	Volumes              any    `yaml:"volumes,omitempty"`
	VolumeMounts         any    `yaml:"volumeMounts,omitempty"`
}

func operatorTier2(sts, svc Obj, images map[string]Image, config string) ([]byte, error) {
	im, err := image(sts, images)
	if err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, fmt.Errorf("%s: no Service %s", ManifestsDir, Tier2Name)
	}
	spec := Get(sts, "spec", "template", "spec")
	cr := operator{
		APIVersion: "opentelemetry.io/v1beta1",
		Kind:       "OpenTelemetryCollector",
		Metadata:   operatorMeta{Name: Tier2Name, Namespace: Namespace},
		Spec: operatorSpec{
			Mode:     "statefulset",
			Image:    im.Ref(),
			Replicas: Get(sts, "spec", "replicas"),
			// The operator's own headless Service is <name>-collector-headless;
			// the gateway's resolver watches otelcol-loop-tier2, defined below
			// (the operator does not create a custom serviceName's Service).
			ServiceName:          Tier2Name,
			PodManagementPolicy:  Str(sts, "spec", "podManagementPolicy"),
			Env:                  Get(container(sts), "env"),
			PodSecurityContext:   Get(spec, "securityContext"),
			Resources:            Get(container(sts), "resources"),
			TerminationGrace:     Get(spec, "terminationGracePeriodSeconds"),
			VolumeClaimTemplates: Get(sts, "spec", "volumeClaimTemplates"),
			Volumes:              secretVolumes(sts),
			VolumeMounts:         append(claimMounts(sts), secretMounts(sts)...),
		},
	}
	// The headless Service of the plain manifests, selecting the operator's
	// pods by the labels it puts on them.
	service := Obj{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   Obj{"name": Tier2Name, "namespace": Namespace, "labels": Get(svc, "metadata", "labels")},
		"spec": Obj{
			"clusterIP":                "None",
			"publishNotReadyAddresses": Get(svc, "spec", "publishNotReadyAddresses"),
			"selector": Obj{
				"app.kubernetes.io/managed-by": "opentelemetry-operator",
				"app.kubernetes.io/instance":   Namespace + "." + Tier2Name,
				"app.kubernetes.io/component":  "opentelemetry-collector",
			},
			"ports": operatorServicePorts(svc),
		},
	}
	var buf bytes.Buffer
	buf.WriteString(generatedBy + "tier2.yaml (StatefulSet,\n# Service and ConfigMap " + Tier2Name + "): edit that, not this file.\n" +
		"#\n# Tier 2 with the OpenTelemetry Operator (statefulset mode), after the Secret\n" +
		"# otelcol-loop-webhook (deploy/kubernetes/README.md):\n" +
		"#   kubectl apply -f " + OperatorTier + "\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(service); err != nil {
		return nil, err
	}
	if err := enc.Encode(cr); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	buf.WriteString("  config:\n")
	buf.WriteString(Indent(config, 4))
	return buf.Bytes(), nil
}

// operatorServicePorts are the plain Service's ports with numeric target
// ports: the operator names its container ports after the receivers, not
// as the plain manifests do.
func operatorServicePorts(svc Obj) []any {
	var out []any
	for _, p := range List(svc, "spec", "ports") {
		out = append(out, Obj{"name": Str(p, "name"), "port": Get(p, "port"), "targetPort": Get(p, "port")})
	}
	return out
}

// Indent prefixes every non-empty line of s with n spaces; the embedded
// configuration keeps its comments and stays the same YAML below its key.
func Indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			b.WriteString(pad)
		}
		b.WriteString(l)
	}
	out := b.String()
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}

// Unindent is the inverse of Indent: the text of a block embedded n spaces
// deep.
func Unindent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimPrefix(l, pad))
	}
	return b.String()
}
