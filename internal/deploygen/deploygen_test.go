package deploygen_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	dg "github.com/otelcol-loop/otelcol-loop/internal/deploygen"
	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// docs decodes every YAML document of a repository file, keyed
// "Kind/name" (or "values" for a values file, which has no kind).
func docs(t *testing.T, rel string) map[string]dg.Obj {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dg.Obj{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d dg.Obj
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		key := "values"
		if k := dg.Str(d, "kind"); k != "" {
			key = k + "/" + dg.Str(d, "metadata", "name")
		}
		out[key] = d
	}
	return out
}

func decode(t *testing.T, what, s string) dg.Obj {
	t.Helper()
	var o dg.Obj
	if err := yaml.Unmarshal([]byte(s), &o); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return o
}

// TestGeneratedFilesUpToDate: the committed Helm values and Operator
// resource are what deploygen makes from the current manifests and configs.
func TestGeneratedFilesUpToDate(t *testing.T) {
	r := root(t)
	files, err := dg.Generate(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dg.HelmGateway, dg.HelmTier2, dg.OperatorTier} {
		got, err := os.ReadFile(filepath.Join(r, p))
		if err != nil {
			t.Errorf("%s: %v (run make deploy-generate)", p, err)
			continue
		}
		if !bytes.Equal(got, files[p]) {
			t.Errorf("%s differs from what deploy/kubernetes and config/ give: run make deploy-generate", p)
		}
	}
	if len(files) != 3 {
		t.Errorf("Generate returned %d files, want 3", len(files))
	}
}

// forms are the collector configurations each generated file embeds, with
// the configuration each must equal.
type form struct {
	file   string
	key    string // document key in the file
	path   []any  // where the config sits in it
	source func(t *testing.T) string
	binary string // "collector" or "gateway"
}

func gatewaySource(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(root(t), dg.GatewayConfig))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tier2Source(t *testing.T) string {
	m, err := dg.Manifests(root(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := dg.Tier2Config(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var forms = []form{
	{dg.HelmGateway, "values", []any{"alternateConfig"}, gatewaySource, "gateway"},
	{dg.HelmTier2, "values", []any{"alternateConfig"}, tier2Source, "collector"},
	{dg.OperatorTier, "OpenTelemetryCollector/" + dg.Tier2Name, []any{"spec", "config"}, tier2Source, "collector"},
}

// TestEmbeddedConfigsAreTheSourcesAndValidate: the configuration in each
// generated file decodes to the same tree as its source (config/
// gateway-k8s.yaml, the tier-2 ConfigMap) and, as the chart or operator
// renders it (re-encoded), passes `validate` with the built binary.
func TestEmbeddedConfigsAreTheSourcesAndValidate(t *testing.T) {
	collector, gateway := binaries(t)
	for _, f := range forms {
		t.Run(f.file, func(t *testing.T) {
			d, ok := docs(t, f.file)[f.key]
			if !ok {
				t.Fatalf("no %s in %s", f.key, f.file)
			}
			got := dg.Get(d, f.path...)
			if want := decode(t, "source", f.source(t)); !reflect.DeepEqual(got, any(want)) {
				t.Fatalf("the configuration in %s differs from its source", f.file)
			}
			rendered, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			cfg := strings.ReplaceAll(string(rendered), "/var/lib/otelcol-loop", tmp)
			p := filepath.Join(tmp, "config.yaml")
			if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := map[string]string{"collector": collector, "gateway": gateway}[f.binary]
			cmd := exec.Command(bin, "validate", "--config=file:"+p)
			cmd.Env = append(os.Environ(), "LOOPDETECT_WEBHOOK_SECRET="+testproc.NewSecret(t), "LOOPDETECT_DIGEST_KEY=k",
				"SUPERVISOR_KILL_URL=https://agent-supervisor.agents.svc:9464/kill",
				"LOOP_OTLP_TOKEN=deploygen-test-otlp-token-0123", "LOOP_TIER2_TOKEN=deploygen-test-tier2-token-0123")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s validate (%s): %v\n%s", filepath.Base(bin), f.file, err, out)
			}
		})
	}
}

// port returns the port of a host:port endpoint in a config, after ${env:X:-default} expansion to its default.
func port(t *testing.T, endpoint string) int {
	t.Helper()
	e := endpoint
	if i := strings.Index(e, ":-"); strings.HasPrefix(e, "${env:") && i > 0 {
		e = strings.TrimSuffix(e[i+2:], "}")
	}
	_, ps, ok := strings.Cut(e, ":")
	n, err := strconv.Atoi(ps)
	if !ok || err != nil {
		t.Fatalf("endpoint %q has no port", endpoint)
	}
	return n
}

func num(v any) int {
	n, _ := v.(int)
	return n
}

// TestFormsAgree: the plain manifests, the Helm values and the Operator
// resource name the same images (the kustomization's, which are the ones
// `make image` builds), the same Services, ports, environment and volume
// paths, and those agree with the embedded configurations.
//
//nolint:funlen // A checklist comparing the three deployment forms field by field.
func TestFormsAgree(t *testing.T) {
	r := root(t)
	m, err := dg.Manifests(r)
	if err != nil {
		t.Fatal(err)
	}
	images, err := dg.Images(r)
	if err != nil {
		t.Fatal(err)
	}
	// The kustomization names exactly the images imagebuild makes, at the
	// ocb manifests' versions; the workloads use its placeholders.
	for _, im := range imagebuild.Images {
		dist, err := im.ReadDist(r)
		if err != nil {
			t.Fatal(err)
		}
		want := dg.Image{Name: im.Name, NewName: imagebuild.DefaultRepository + "/" + im.Name, NewTag: dist.Version}
		if images[im.Name] != want {
			t.Errorf("kustomization images[%s] = %+v, want %+v", im.Name, images[im.Name], want)
		}
	}
	if len(images) != len(imagebuild.Images) {
		t.Errorf("kustomization lists %d images, imagebuild builds %d", len(images), len(imagebuild.Images))
	}
	dep, sts := m["Deployment/"+dg.GatewayName], m["StatefulSet/"+dg.Tier2Name]
	depC := dg.Get(dep, "spec", "template", "spec", "containers", 0)
	stsC := dg.Get(sts, "spec", "template", "spec", "containers", 0)
	if dg.Str(depC, "image") != dg.GatewayName || dg.Str(stsC, "image") != "otelcol-loop" {
		t.Errorf("workload images %q, %q: want the kustomization's names", dg.Str(depC, "image"), dg.Str(stsC, "image"))
	}
	cport := func(c any, name string) int {
		for _, p := range dg.List(c, "ports") {
			if dg.Str(p, "name") == name {
				return num(dg.Get(p, "containerPort"))
			}
		}
		return 0
	}

	gwCfg := decode(t, dg.GatewayConfig, gatewaySource(t))
	t2Cfg := decode(t, "tier-2 ConfigMap", tier2Source(t))
	k8s := dg.Get(gwCfg, "exporters", "load_balancing", "resolver", "k8s")
	svcName, svcNS, _ := strings.Cut(dg.Str(k8s, "service"), ".")
	resolverPort := num(dg.Get(k8s, "ports", 0))
	storage := dg.Str(t2Cfg, "exporters", "alert_sink", "sending_queue", "storage")
	queueDir := dg.Str(t2Cfg, "extensions", storage, "directory")
	if svcName != dg.Tier2Name || svcNS != dg.Namespace || resolverPort == 0 || queueDir == "" {
		t.Fatalf("gateway resolver %s.%s:%d, tier-2 queue %q", svcName, svcNS, resolverPort, queueDir)
	}
	// The ports the configurations listen on are the ones declared.
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"gateway OTLP gRPC", port(t, dg.Str(gwCfg, "receivers", "otlp", "protocols", "grpc", "endpoint")), cport(depC, "otlp-grpc")},
		{"gateway OTLP HTTP", port(t, dg.Str(gwCfg, "receivers", "otlp", "protocols", "http", "endpoint")), cport(depC, "otlp-http")},
		{"gateway health", port(t, dg.Str(gwCfg, "extensions", "health_check", "endpoint")), cport(depC, "health")},
		{"tier-2 OTLP gRPC", port(t, dg.Str(t2Cfg, "receivers", "otlp", "protocols", "grpc", "endpoint")), cport(stsC, "otlp-grpc")},
		{"tier-2 OTLP gRPC = resolver port", resolverPort, cport(stsC, "otlp-grpc")},
		{"tier-2 health", port(t, dg.Str(t2Cfg, "extensions", "health_check", "endpoint")), cport(stsC, "health")},
		// The chart probes 13133 unless told otherwise.
		{"health port the chart probes", cport(stsC, "health"), 13133},
	} {
		if c.got != c.want || c.got == 0 {
			t.Errorf("%s: %d, declared %d", c.what, c.got, c.want)
		}
	}
	envNames := func(l []any) []string {
		var out []string
		for _, e := range l {
			out = append(out, dg.Str(e, "name")+"<-"+dg.Str(e, "valueFrom", "secretKeyRef", "name")+"/"+dg.Str(e, "valueFrom", "secretKeyRef", "key"))
		}
		return out
	}
	// The queue directory sits on the mount of a volume claim template.
	onClaim := func(what string, vcts, mounts []any) {
		t.Helper()
		for _, v := range vcts {
			for _, vm := range mounts {
				if dg.Str(vm, "name") == dg.Str(v, "metadata", "name") && strings.HasPrefix(queueDir, dg.Str(vm, "mountPath")+"/") {
					return
				}
			}
		}
		t.Errorf("%s: alert_sink's queue %s is on no volume claim template mount", what, queueDir)
	}
	onClaim("StatefulSet", dg.List(sts, "spec", "volumeClaimTemplates"), dg.List(stsC, "volumeMounts"))

	// Helm, gateway.
	hg := docs(t, dg.HelmGateway)["values"]
	gwImage := images[dg.GatewayName]
	for _, c := range []struct{ what, got, want string }{
		{"mode", dg.Str(hg, "mode"), "deployment"},
		{"fullnameOverride (Service name)", dg.Str(hg, "fullnameOverride"), dg.Str(dep, "metadata", "name")},
		{"image.repository", dg.Str(hg, "image", "repository"), gwImage.NewName},
		{"image.tag", dg.Str(hg, "image", "tag"), gwImage.NewTag},
		{"command.name (the binary at /<name> in the image)", "/" + dg.Str(hg, "command", "name"), mustImage(t, dg.GatewayName).BinaryPath()},
		{"serviceAccount.name", dg.Str(hg, "serviceAccount", "name"), dg.Str(dep, "spec", "template", "spec", "serviceAccountName")},
		{"otlp port", fmt.Sprint(dg.Get(hg, "ports", "otlp", "containerPort")), fmt.Sprint(cport(depC, "otlp-grpc"))},
		{"otlp-http port", fmt.Sprint(dg.Get(hg, "ports", "otlp-http", "containerPort")), fmt.Sprint(cport(depC, "otlp-http"))},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s %q, want %q", dg.HelmGateway, c.what, c.got, c.want)
		}
	}

	// Helm, tier 2.
	ht := docs(t, dg.HelmTier2)["values"]
	t2Image := images["otelcol-loop"]
	for _, c := range []struct{ what, got, want string }{
		{"mode", dg.Str(ht, "mode"), "statefulset"},
		{"fullnameOverride (headless Service, StatefulSet serviceName)", dg.Str(ht, "fullnameOverride"), svcName},
		{"service.clusterIP", dg.Str(ht, "service", "clusterIP"), "None"},
		{"image.repository", dg.Str(ht, "image", "repository"), t2Image.NewName},
		{"image.tag", dg.Str(ht, "image", "tag"), t2Image.NewTag},
		{"command.name (the binary at /<name> in the image)", "/" + dg.Str(ht, "command", "name"), mustImage(t, "otelcol-loop").BinaryPath()},
		{"otlp port", fmt.Sprint(dg.Get(ht, "ports", "otlp", "containerPort")), fmt.Sprint(resolverPort)},
		{"env", fmt.Sprint(envNames(dg.List(ht, "extraEnvs"))), fmt.Sprint(envNames(dg.List(stsC, "env")))},
		{"fsGroup", fmt.Sprint(dg.Get(ht, "podSecurityContext", "fsGroup")), strconv.Itoa(imagebuild.User)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s %q, want %q", dg.HelmTier2, c.what, c.got, c.want)
		}
	}
	onClaim(dg.HelmTier2, dg.List(ht, "statefulset", "volumeClaimTemplates"), dg.List(ht, "extraVolumeMounts"))

	// Operator, tier 2.
	od := docs(t, dg.OperatorTier)
	cr := od["OpenTelemetryCollector/"+dg.Tier2Name]
	svc := od["Service/"+svcName]
	if cr == nil || svc == nil {
		t.Fatalf("%s: want OpenTelemetryCollector %s and Service %s", dg.OperatorTier, dg.Tier2Name, svcName)
	}
	for _, c := range []struct{ what, got, want string }{
		{"apiVersion", dg.Str(cr, "apiVersion"), "opentelemetry.io/v1beta1"},
		{"namespace", dg.Str(cr, "metadata", "namespace"), dg.Namespace},
		{"mode", dg.Str(cr, "spec", "mode"), "statefulset"},
		{"image", dg.Str(cr, "spec", "image"), t2Image.Ref()},
		{"serviceName", dg.Str(cr, "spec", "serviceName"), svcName},
		{"Service namespace", dg.Str(svc, "metadata", "namespace"), svcNS},
		{"Service clusterIP", dg.Str(svc, "spec", "clusterIP"), "None"},
		{"Service port", fmt.Sprint(dg.Get(svc, "spec", "ports", 0, "port")), fmt.Sprint(resolverPort)},
		{"Service selects the operator's pods", dg.Str(svc, "spec", "selector", "app.kubernetes.io/instance"), dg.Namespace + "." + dg.Tier2Name},
		{"env", fmt.Sprint(envNames(dg.List(cr, "spec", "env"))), fmt.Sprint(envNames(dg.List(stsC, "env")))},
		{"fsGroup", fmt.Sprint(dg.Get(cr, "spec", "podSecurityContext", "fsGroup")), strconv.Itoa(imagebuild.User)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s %q, want %q", dg.OperatorTier, c.what, c.got, c.want)
		}
	}
	onClaim(dg.OperatorTier, dg.List(cr, "spec", "volumeClaimTemplates"), dg.List(cr, "spec", "volumeMounts"))
}

func mustImage(t *testing.T, name string) imagebuild.Image {
	t.Helper()
	im, err := imagebuild.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// --- binaries ----------------------------------------------------------------

var builds = testproc.Builds{Pattern: "otelcol-loop-deploygen-bin-"}
var bins struct{ collector, gateway string }

// binaries returns otelcol-loop ($OTELCOL_LOOP_BIN) and otelcol-loop-gateway
// ($OTELCOL_LOOP_GATEWAY_BIN), built once per test process when the
// environment does not name them (`make test` does).
func binaries(t *testing.T) (collector, gateway string) {
	t.Helper()
	builds.Once(t, func(root, dir string) error {
		if bins.collector = testproc.BinFromEnv(t.Logf, "OTELCOL_LOOP_BIN"); bins.collector == "" {
			bins.collector = filepath.Join(dir, "otelcol-loop")
			if err := testproc.GoBuild(t.Logf, filepath.Join(root, "cmd", "otelcol-loop"), bins.collector, "."); err != nil {
				return err
			}
		}
		if bins.gateway = testproc.BinFromEnv(t.Logf, "OTELCOL_LOOP_GATEWAY_BIN"); bins.gateway == "" {
			bins.gateway = filepath.Join(dir, "otelcol-loop-gateway")
			return testproc.GoBuild(t.Logf, filepath.Join(root, "cmd", "otelcol-loop-gateway"), bins.gateway, ".")
		}
		return nil
	})
	return bins.collector, bins.gateway
}

func TestMain(m *testing.M) {
	code := m.Run()
	builds.Remove()
	os.Exit(code)
}
