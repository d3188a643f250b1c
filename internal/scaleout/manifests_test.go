//go:build unix

package scaleout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

type obj = map[string]any

// get walks a decoded YAML tree by keys (string) and indexes (int).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(obj)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string { s, _ := get(v, path...).(string); return s }

func list(v any, path ...any) []any { l, _ := get(v, path...).([]any); return l }

// loadManifests reads every document of deploy/kubernetes/*.yaml, keyed
// "Kind/name".
func loadManifests(t *testing.T) map[string]obj {
	t.Helper()
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no deploy/kubernetes/*.yaml")
	}
	out := map[string]obj{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc obj
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc == nil {
				continue
			}
			key := str(doc, "kind") + "/" + str(doc, "metadata", "name")
			if _, dup := out[key]; dup {
				t.Errorf("%s defined twice", key)
			}
			out[key] = doc
		}
	}
	return out
}

func must(t *testing.T, m map[string]obj, key string) obj {
	t.Helper()
	o, ok := m[key]
	if !ok {
		t.Fatalf("deploy/kubernetes: %s missing", key)
	}
	return o
}

// TestKubernetesManifests checks that the manifests refer to each other
// consistently: the gateway's ServiceAccount has the Role the k8s resolver
// needs, the resolver names the headless tier-2 Service and its port, the
// StatefulSet belongs to that Service, ConfigMap keys and mounts match,
// alert_sink's queue lives on the PVC, and both embedded configs pass
// `validate` with the real binaries.
//
//nolint:funlen // A checklist of cross-references between the manifests, one assertion per reference.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	root, _ := testproc.RepoRoot()
	const ns = "otelcol-loop"
	must(t, m, "Namespace/"+ns)
	for k, o := range m {
		if k != "Namespace/"+ns && k != "Kustomization/" && str(o, "metadata", "namespace") != ns {
			t.Errorf("%s: namespace %q, want %q", k, str(o, "metadata", "namespace"), ns)
		}
	}

	// RBAC for the k8s resolver.
	dep := must(t, m, "Deployment/otelcol-loop-gateway")
	sa := str(dep, "spec", "template", "spec", "serviceAccountName")
	must(t, m, "ServiceAccount/"+sa)
	var role obj
	for _, o := range m {
		if str(o, "kind") != "RoleBinding" {
			continue
		}
		for _, s := range list(o, "subjects") {
			if str(s, "kind") == "ServiceAccount" && str(s, "name") == sa && str(s, "namespace") == ns {
				if str(o, "roleRef", "kind") == "Role" {
					role = must(t, m, "Role/"+str(o, "roleRef", "name"))
				}
			}
		}
	}
	if role == nil {
		t.Fatalf("no RoleBinding gives ServiceAccount %s a Role", sa)
	}
	granted := func(group, resource string) bool {
		for _, r := range list(role, "rules") {
			if slices.Contains(list(r, "apiGroups"), any(group)) && slices.Contains(list(r, "resources"), any(resource)) {
				vs := list(r, "verbs")
				return slices.Contains(vs, any("get")) && slices.Contains(vs, any("list")) && slices.Contains(vs, any("watch"))
			}
		}
		return false
	}
	if !granted("discovery.k8s.io", "endpointslices") || !granted("", "endpoints") {
		t.Errorf("Role %s lacks get/list/watch on endpointslices/endpoints", str(role, "metadata", "name"))
	}

	// The gateway ConfigMap is config/gateway-k8s.yaml, mounted where args point.
	gwCM := must(t, m, "ConfigMap/otelcol-loop-gateway")
	gwCfg := str(gwCM, "data", "gateway.yaml")
	want, err := os.ReadFile(filepath.Join(root, "config", "gateway-k8s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if gwCfg != string(want) {
		t.Errorf("ConfigMap otelcol-loop-gateway data.gateway.yaml differs from config/gateway-k8s.yaml")
	}
	checkMount(t, dep, "otelcol-loop-gateway", "gateway.yaml")

	// The resolver names the headless Service and its port.
	var gw obj
	if err := yaml.Unmarshal([]byte(gwCfg), &gw); err != nil {
		t.Fatal(err)
	}
	k8s := get(gw, "exporters", "load_balancing", "resolver", "k8s")
	svcName, svcNS, _ := strings.Cut(str(k8s, "service"), ".")
	if svcNS != ns {
		t.Errorf("k8s resolver service %q: namespace %q, want %q", str(k8s, "service"), svcNS, ns)
	}
	svc := must(t, m, "Service/"+svcName)
	if str(svc, "spec", "clusterIP") != "None" {
		t.Errorf("Service %s must be headless (clusterIP: None)", svcName)
	}
	ports := list(k8s, "ports")
	if len(ports) != 1 || fmt.Sprint(ports[0]) != fmt.Sprint(get(svc, "spec", "ports", 0, "port")) {
		t.Errorf("k8s resolver ports %v vs Service %s port %v", ports, svcName, get(svc, "spec", "ports", 0, "port"))
	}
	if get(k8s, "return_hostnames") != true {
		t.Errorf("k8s resolver: return_hostnames should be true with the StatefulSet")
	}
	dns := readYAML(t, filepath.Join(root, "config", "gateway-dns.yaml"))
	if h := str(dns, "exporters", "load_balancing", "resolver", "dns", "hostname"); !strings.Contains(h, svcName+"."+ns+".svc") {
		t.Errorf("gateway-dns.yaml resolves %q, not the tier-2 Service %s.%s", h, svcName, ns)
	}

	// The StatefulSet behind that Service.
	sts := must(t, m, "StatefulSet/otelcol-loop-tier2")
	if str(sts, "spec", "serviceName") != svcName {
		t.Errorf("StatefulSet serviceName %q, want %q", str(sts, "spec", "serviceName"), svcName)
	}
	labels, _ := get(sts, "spec", "template", "metadata", "labels").(obj)
	sel, _ := get(svc, "spec", "selector").(obj)
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("Service %s selector %s=%v does not match the StatefulSet's pods", svcName, k, v)
		}
	}
	targetPort := str(svc, "spec", "ports", 0, "targetPort")
	c := get(sts, "spec", "template", "spec", "containers", 0)
	var containerPort any
	for _, p := range list(c, "ports") {
		if str(p, "name") == targetPort {
			containerPort = get(p, "containerPort")
		}
	}
	if fmt.Sprint(containerPort) != fmt.Sprint(get(svc, "spec", "ports", 0, "port")) {
		t.Errorf("Service targetPort %q -> containerPort %v, want %v", targetPort, containerPort, get(svc, "spec", "ports", 0, "port"))
	}
	// The gateway Service reaches the gateway pods.
	gsvc := must(t, m, "Service/otelcol-loop-gateway")
	for k, v := range get(gsvc, "spec", "selector").(obj) {
		if get(dep, "spec", "template", "metadata", "labels", k) != v {
			t.Errorf("Service otelcol-loop-gateway selector %s=%v does not match the Deployment's pods", k, v)
		}
	}

	// Tier-2 config: mounted, queue on the PVC, validated.
	t2CM := must(t, m, "ConfigMap/otelcol-loop-tier2")
	t2Cfg := str(t2CM, "data", "otelcol-loop.yaml")
	checkMount(t, sts, "otelcol-loop-tier2", "otelcol-loop.yaml")
	var t2 obj
	if err := yaml.Unmarshal([]byte(t2Cfg), &t2); err != nil {
		t.Fatal(err)
	}
	storage := str(t2, "exporters", "alert_sink", "sending_queue", "storage")
	dir := str(t2, "extensions", storage, "directory")
	if storage == "" || dir == "" {
		t.Fatalf("tier-2 alert_sink queue storage %q, directory %q", storage, dir)
	}
	onPVC := false
	for _, vct := range list(sts, "spec", "volumeClaimTemplates") {
		for _, vm := range list(c, "volumeMounts") {
			if str(vm, "name") == str(vct, "metadata", "name") && strings.HasPrefix(dir, str(vm, "mountPath")+"/") {
				onPVC = true
			}
		}
	}
	if !onPVC {
		t.Errorf("alert_sink's queue directory %s is not on a volumeClaimTemplate mount", dir)
	}
	for _, e := range list(c, "env") {
		if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil && str(ref, "name") != "otelcol-loop-webhook" {
			t.Errorf("env %s from Secret %q; the README creates otelcol-loop-webhook", str(e, "name"), str(ref, "name"))
		}
	}

	col, gwBin, _ := binaries(t)
	tmp := t.TempDir()
	p := filepath.Join(tmp, "tier2.yaml")
	cfg := strings.ReplaceAll(t2Cfg, "/var/lib/otelcol-loop", tmp)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(col, "validate", "--config=file:"+p)
	cmd.Env = append(os.Environ(), "LOOPDETECT_WEBHOOK_SECRET="+testproc.NewSecret(t), "LOOPDETECT_DIGEST_KEY=k",
		"SUPERVISOR_KILL_URL=https://agent-supervisor.agents.svc:9464/kill")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("otelcol-loop validate (tier-2 ConfigMap): %v\n%s", err, out)
	}
	p = filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(p, []byte(gwCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := validateGateway(gwBin, p); err != nil {
		t.Errorf("otelcol-loop-gateway validate (gateway ConfigMap): %v\n%s", err, out)
	}
}

// checkMount: the workload mounts ConfigMap cm with item key at the path its
// --config argument names.
func checkMount(t *testing.T, w obj, cm, key string) {
	t.Helper()
	spec := get(w, "spec", "template", "spec")
	var volName string
	for _, v := range list(spec, "volumes") {
		if str(v, "configMap", "name") == cm {
			volName = str(v, "name")
			for _, it := range list(v, "configMap", "items") {
				if str(it, "key") != key || str(it, "path") != key {
					t.Errorf("%s: volume %s item %s->%s, want %s", str(w, "metadata", "name"), volName, str(it, "key"), str(it, "path"), key)
				}
			}
		}
	}
	if volName == "" {
		t.Fatalf("%s mounts no ConfigMap %s", str(w, "metadata", "name"), cm)
	}
	c := get(spec, "containers", 0)
	var mount string
	for _, vm := range list(c, "volumeMounts") {
		if str(vm, "name") == volName {
			mount = str(vm, "mountPath")
		}
	}
	args := list(c, "args")
	if mount == "" || !slices.Contains(args, any(mount+"/"+key)) {
		t.Errorf("%s: args %v do not name %s/%s", str(w, "metadata", "name"), args, mount, key)
	}
}

func readYAML(t *testing.T, path string) obj {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o obj
	if err := yaml.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return o
}
