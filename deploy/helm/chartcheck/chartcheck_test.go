package chartcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/control"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "../clawea"
	namespace   = "clawea"
	kubeVersion = "v1.31.0"
	monitoring  = "monitoring.coreos.com/v1/ServiceMonitor"
)

// valueSet is one configuration the chart is checked with.
type valueSet struct {
	name   string
	files  []string // relative to the chart
	apis   []string // extra API versions the "cluster" serves
	kinds  []string // kinds that must be rendered (Kind/count)
	absent []string // kinds that must not be rendered
}

var valueSets = []valueSet{
	{name: "default", files: []string{"ci/minimal-values.yaml"}, kinds: []string{"DaemonSet/1", "ConfigMap/1", "Service/1", "ServiceAccount/1"},
		absent: []string{"Deployment", "ServiceMonitor", "NetworkPolicy"}},
	{name: "sev-snp", files: []string{"ci/sev-snp-values.yaml"}, apis: []string{monitoring},
		kinds: []string{"DaemonSet/1", "ServiceMonitor/1", "NetworkPolicy/1"}, absent: []string{"Deployment"}},
	{name: "sev-snp-without-prometheus-operator", files: []string{"ci/sev-snp-values.yaml"},
		kinds: []string{"DaemonSet/1"}, absent: []string{"ServiceMonitor"}},
	{name: "tdx", files: []string{"ci/tdx-values.yaml"}, kinds: []string{"DaemonSet/1"}},
	{name: "verifier", files: []string{"ci/verifier-values.yaml"}, apis: []string{monitoring},
		kinds: []string{"DaemonSet/1", "Deployment/1", "HorizontalPodAutoscaler/1", "PodDisruptionBudget/1", "NetworkPolicy/1", "ServiceMonitor/1", "Service/2"}},
	{name: "openclaw", files: []string{"ci/openclaw-values.yaml"}, kinds: []string{"DaemonSet/1", "ConfigMap/2"}},
	{name: "sev-snp-with-verifier", files: []string{"ci/sev-snp-values.yaml", "ci/verifier-values.yaml"}, apis: []string{monitoring},
		kinds: []string{"DaemonSet/1", "Deployment/1", "ServiceMonitor/2", "NetworkPolicy/2"}},
}

func loadValues(t *testing.T, files []string, set ...string) map[string]any {
	t.Helper()
	opts := values.Options{Values: set}
	for _, f := range files {
		opts.ValueFiles = append(opts.ValueFiles, filepath.Join(chartDir, f))
	}
	v, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		t.Fatalf("values %v: %v", files, err)
	}
	return v
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// render runs `helm template` in process.
func render(t *testing.T, ch *chart.Chart, vals map[string]any, apis []string) (string, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly, inst.DryRun, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = "clawea", namespace
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	inst.KubeVersion = kv
	inst.APIVersions = append(slices.Clone(chartutil.DefaultVersionSet), apis...)
	for _, a := range apis {
		inst.APIVersions = append(inst.APIVersions, path.Dir(a))
	}
	rel, err := inst.Run(ch, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// rendered holds the decoded objects of one value set.
type rendered struct {
	all        []metav1.Object
	kinds      map[string]int
	configMaps map[string]*corev1.ConfigMap
	daemonSets []*appsv1.DaemonSet
	deploys    []*appsv1.Deployment
	services   []*corev1.Service
	hpas       []*autoscalingv2.HorizontalPodAutoscaler
	pdbs       []*policyv1.PodDisruptionBudget
	netpols    []*networkingv1.NetworkPolicy
	monitors   []*monitoringv1.ServiceMonitor
}

// appendNew appends a new, empty object to list and returns it, for the
// strict decoder to fill in.
func appendNew[T any](list *[]*T) *T {
	o := new(T)
	*list = append(*list, o)
	return o
}

// decode decodes every document strictly (unknown or duplicate fields fail)
// into its Kubernetes API type; a kind without a type here fails.
func decode(t *testing.T, manifest string) *rendered {
	t.Helper()
	r := &rendered{kinds: map[string]int{}, configMaps: map[string]*corev1.ConfigMap{}}
	docs := releaseutil.SplitManifests(manifest)
	if len(docs) == 0 {
		t.Fatal("nothing rendered")
	}
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		doc := docs[k]
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: %v\n%s", k, err, doc)
		}
		var obj metav1.Object
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			obj = o
			defer func() { r.configMaps[o.Name] = o }()
		case "v1/Service":
			obj = appendNew(&r.services)
		case "v1/ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "apps/v1/DaemonSet":
			obj = appendNew(&r.daemonSets)
		case "apps/v1/Deployment":
			obj = appendNew(&r.deploys)
		case "autoscaling/v2/HorizontalPodAutoscaler":
			obj = appendNew(&r.hpas)
		case "policy/v1/PodDisruptionBudget":
			obj = appendNew(&r.pdbs)
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = appendNew(&r.netpols)
		case "monitoring.coreos.com/v1/ServiceMonitor":
			obj = appendNew(&r.monitors)
		default:
			t.Fatalf("%s: rendered %s %s, which this check cannot decode strictly: add its type", k, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s (%s): strict decode: %v\n%s", k, tm.Kind, err, doc)
		}
		r.kinds[tm.Kind]++
		r.all = append(r.all, obj)
	}
	return r
}

func TestChartLintAndTemplate(t *testing.T) {
	ch := loadChart(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			vals := loadValues(t, vs.files)
			kv, _ := chartutil.ParseKubeVersion(kubeVersion)
			linter := lint.AllWithKubeVersion(chartDir, vals, namespace, kv)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
			manifest, err := render(t, ch, vals, vs.apis)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			r := decode(t, manifest)
			for _, want := range vs.kinds {
				kind, n, _ := strings.Cut(want, "/")
				if c, _ := strconv.Atoi(n); r.kinds[kind] != c {
					t.Errorf("rendered %d %s, want %s", r.kinds[kind], kind, n)
				}
			}
			for _, kind := range vs.absent {
				if r.kinds[kind] != 0 {
					t.Errorf("rendered %d %s, want none", r.kinds[kind], kind)
				}
			}
			checkNames(t, r)
			checkWorkloads(t, r)
			full, err := chartutil.CoalesceValues(ch, vals)
			if err != nil {
				t.Fatal(err)
			}
			checkAttester(t, r, full)
			checkReferences(t, r)
			checkVerifier(t, r)
		})
	}
}

func checkNames(t *testing.T, r *rendered) {
	for _, o := range r.all {
		if o.GetNamespace() != namespace {
			t.Errorf("%s: namespace %q, want %q", o.GetName(), o.GetNamespace(), namespace)
		}
		for _, msg := range validation.IsDNS1123Subdomain(o.GetName()) {
			t.Errorf("name %q: %s", o.GetName(), msg)
		}
		for k, v := range o.GetLabels() {
			for _, msg := range slices.Concat(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)) {
				t.Errorf("%s: label %s=%s: %s", o.GetName(), k, v, msg)
			}
		}
	}
	for _, s := range r.services {
		for _, msg := range validation.IsDNS1035Label(s.Name) {
			t.Errorf("Service name %q: %s", s.Name, msg)
		}
	}
}

var qualifiedImage = regexp.MustCompile(`^[a-z0-9.-]+\.[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$`)

// pods returns the pod templates of every workload by name.
func (r *rendered) pods() map[string]*corev1.PodTemplateSpec {
	m := map[string]*corev1.PodTemplateSpec{}
	for _, d := range r.daemonSets {
		m["DaemonSet/"+d.Name] = &d.Spec.Template
	}
	for _, d := range r.deploys {
		m["Deployment/"+d.Name] = &d.Spec.Template
	}
	return m
}

// podVolume is the volume of ps named name, or nil.
func podVolume(ps *corev1.PodSpec, name string) *corev1.Volume {
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == name {
			return &ps.Volumes[i]
		}
	}
	return nil
}

// checkWorkloads: selectors match their pods, every container is hardened,
// images are fully qualified, pods never get a service account token.
func checkWorkloads(t *testing.T, r *rendered) {
	sel := func(name string, s *metav1.LabelSelector, tpl *corev1.PodTemplateSpec) {
		ls, err := metav1.LabelSelectorAsSelector(s)
		if err != nil || ls.Empty() || !ls.Matches(labels.Set(tpl.Labels)) {
			t.Errorf("%s: selector %v does not match its pod labels %v (%v)", name, s, tpl.Labels, err)
		}
	}
	for _, d := range r.daemonSets {
		sel("DaemonSet/"+d.Name, d.Spec.Selector, &d.Spec.Template)
	}
	for _, d := range r.deploys {
		sel("Deployment/"+d.Name, d.Spec.Selector, &d.Spec.Template)
	}
	for name, tpl := range r.pods() {
		ps := tpl.Spec
		if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken is not false", name)
		}
		if ps.HostNetwork || ps.HostPID || ps.HostIPC {
			t.Errorf("%s: shares a host namespace", name)
		}
		psc := ps.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod security context %+v: want non-root and RuntimeDefault seccomp", name, psc)
		}
		for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
			cn := name + "/" + c.Name
			if !qualifiedImage.MatchString(c.Image) {
				t.Errorf("%s: image %q is not fully qualified with a tag or digest", cn, c.Image)
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
				!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s: security context %+v is not hardened", cn, sc)
				continue
			}
			isInit := slices.ContainsFunc(ps.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name })
			var allowed []corev1.Capability
			switch {
			case c.Name == "attester" && !isInit:
				allowed = []corev1.Capability{"IPC_LOCK"}
			case c.Name == "prepare-state" && isInit:
				allowed = []corev1.Capability{"CHOWN", "FOWNER"}
			}
			if !slices.Equal(sc.Capabilities.Add, allowed) {
				t.Errorf("%s: adds capabilities %v, want %v", cn, sc.Capabilities.Add, allowed)
			}
			if !isInit && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				t.Errorf("%s: runs as root", cn)
			}
			if !isInit && c.Name != "agent" && (c.ReadinessProbe == nil || c.LivenessProbe == nil) {
				t.Errorf("%s: no readiness or liveness probe", cn)
			}
			if c.Resources.Limits.Memory().IsZero() && !isInit && c.Name != "agent" {
				t.Errorf("%s: no memory limit", cn)
			}
		}
	}
}

// checkAttester ties the attester's rendered configuration to its pod: the
// listeners are the probed ports, the control socket's directory is in the
// volume the agent shares, the state directory is the state volume, and the
// ${file:...} secrets are mounted.
func checkAttester(t *testing.T, r *rendered, vals chartutil.Values) {
	if len(r.daemonSets) != 1 {
		t.Fatalf("rendered %d DaemonSets, want 1", len(r.daemonSets))
	}
	ds := r.daemonSets[0]
	ps := ds.Spec.Template.Spec
	var att, agent *corev1.Container
	for i := range ps.Containers {
		switch ps.Containers[i].Name {
		case "attester":
			att = &ps.Containers[i]
		case "agent":
			agent = &ps.Containers[i]
		}
	}
	if att == nil {
		t.Fatal("the DaemonSet has no attester container")
	}
	cm := r.configMaps[ds.Name]
	if cm == nil {
		t.Fatalf("no ConfigMap %s", ds.Name)
	}
	raw := cm.Data["attester.json"]
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var cfg struct {
		Attester map[string]any `json:"attester"`
		Agents   any            `json:"agents"`
		Tools    any            `json:"tools"`
	}
	if err := dec.Decode(&cfg); err != nil || dec.More() {
		t.Fatalf("attester.json: %v\n%s", err, raw)
	}
	// The attester's own parser accepts it; ${file:...} resolves only in
	// the mounted Secret's directory.
	var secrets []string
	_, _, err := control.ParseConfigWith([]byte(raw), control.ConfigOptions{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv: func(string) (string, bool) { return "", false },
		ReadFile: func(p string) ([]byte, error) {
			if !strings.HasPrefix(p, "/etc/clawea/secrets/") {
				return nil, fs.ErrNotExist
			}
			secrets = append(secrets, p)
			return []byte("example-secret-0123456789abcdef"), nil
		},
	})
	if err != nil {
		t.Errorf("the attester refuses the rendered attester.json: %v", err)
	}
	a := cfg.Attester
	want := vals["attester"].(map[string]any)
	if a["platform"] != want["platform"] {
		t.Errorf("platform %v, want %v", a["platform"], want["platform"])
	}

	port := func(c *corev1.Container, name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Errorf("%s has no port %s", c.Name, name)
		return -1
	}
	for key, pname := range map[string]string{"listen": "http", "metricsListen": "metrics"} {
		s, _ := a[key].(string)
		host, p, err := net.SplitHostPort(s)
		if err != nil || host != "0.0.0.0" || p != fmt.Sprint(port(att, pname)) {
			t.Errorf("%s = %q; want 0.0.0.0 and the %s container port %d", key, s, pname, port(att, pname))
		}
	}
	for _, pr := range []*corev1.Probe{att.StartupProbe, att.LivenessProbe, att.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.String() != "http" {
			t.Errorf("attester probe %+v: want an HTTP GET on port http", pr)
		}
	}
	if att.ReadinessProbe != nil && att.ReadinessProbe.HTTPGet != nil && att.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		att.LivenessProbe != nil && att.LivenessProbe.HTTPGet != nil && att.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("attester probes: want /readyz for readiness and /healthz for liveness")
	}

	vol := func(name string) *corev1.Volume { return podVolume(&ps, name) }
	mount := func(c *corev1.Container, p string) *corev1.VolumeMount {
		// The mount that holds path p (longest mount path wins).
		var best *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if (p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
				best = &c.VolumeMounts[i]
			}
		}
		return best
	}

	sock, _ := a["controlSocket"].(string)
	sockDir := path.Dir(sock)
	m := mount(att, sockDir)
	if !path.IsAbs(sock) || len(sock) > 100 || m == nil || m.ReadOnly || m.MountPath == sockDir {
		// The directory itself must be created by the attester (mode 0750):
		// a volume's root is 0777 for emptyDir.
		t.Fatalf("controlSocket %q: want it in a subdirectory of a writable volume mount of the attester (mount %+v)", sock, m)
	}
	if v := vol(m.Name); v == nil || v.EmptyDir == nil {
		t.Errorf("the control socket's volume %s is not a pod-local emptyDir", m.Name)
	}
	if agent != nil {
		am := mount(agent, sockDir)
		if am == nil || am.Name != m.Name || am.MountPath != m.MountPath {
			t.Errorf("the agent does not mount the control socket's volume %s at %s", m.Name, m.MountPath)
		}
		checkOrchestrator(t, ds, agent, a)
		var env []string
		for _, e := range agent.Env {
			if e.Name == "CLAWEA_CONTROL_SOCKET" {
				env = append(env, e.Value)
			}
		}
		if !slices.Equal(env, []string{sock}) {
			t.Errorf("agent CLAWEA_CONTROL_SOCKET = %v, want [%s]", env, sock)
		}
	}
	if sc := att.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.RunAsGroup != nil) {
		t.Errorf("the attester overrides the pod's uid/gid")
	}
	checkConfidentialNodes(t, ds, vals)

	state, _ := a["stateDir"].(string)
	if sm := mount(att, state); sm == nil || sm.MountPath != state || sm.ReadOnly {
		t.Errorf("stateDir %q is not a writable volume mount", state)
	} else if v := vol(sm.Name); v == nil || (v.HostPath == nil && v.EmptyDir == nil) {
		t.Errorf("state volume %s: want hostPath or emptyDir", sm.Name)
	}
	if cmount := mount(att, "/etc/clawea/attester.json"); cmount == nil || !cmount.ReadOnly {
		t.Errorf("the configuration is not mounted read-only")
	}
	if !slices.Contains(att.Args, "--config=/etc/clawea/attester.json") {
		t.Errorf("attester args %v do not name the mounted configuration", att.Args)
	}

	for _, ref := range regexp.MustCompile(`\$\{file:([^}]*)\}`).FindAllStringSubmatch(raw, -1) {
		sm := mount(att, ref[1])
		if sm == nil || !sm.ReadOnly {
			t.Errorf("secret %s is not on a read-only mount", ref[1])
			continue
		}
		if v := vol(sm.Name); v == nil || v.Secret == nil {
			t.Errorf("secret %s is not mounted from a Secret", ref[1])
		}
	}

	for _, c := range ps.Containers {
		for _, m := range c.VolumeMounts {
			if v := vol(m.Name); v == nil {
				t.Errorf("%s mounts undefined volume %s", c.Name, m.Name)
			} else if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, "/sys/") && !m.ReadOnly && v.HostPath.Path != "/sys/kernel/config" {
				t.Errorf("%s mounts %s writable", c.Name, v.HostPath.Path)
			}
		}
	}
}

// checkReferences: Services, PDBs, NetworkPolicies and ServiceMonitors
// select existing pods and ports; the HPA scales an existing Deployment
// that leaves its replica count to it.
func checkReferences(t *testing.T, r *rendered) {
	pods := r.pods()
	matches := func(what string, s labels.Selector) *corev1.PodTemplateSpec {
		var found *corev1.PodTemplateSpec
		for _, p := range pods {
			if s.Matches(labels.Set(p.Labels)) {
				if found != nil {
					t.Errorf("%s selects pods of two workloads", what)
				}
				found = p
			}
		}
		if found == nil {
			t.Errorf("%s selects no pods", what)
		}
		return found
	}
	hasPort := func(p *corev1.PodTemplateSpec, name string) bool {
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == name {
					return true
				}
			}
		}
		return false
	}
	for _, s := range r.services {
		p := matches("Service/"+s.Name, labels.SelectorFromSet(s.Spec.Selector))
		for _, sp := range s.Spec.Ports {
			if p != nil && !hasPort(p, sp.TargetPort.String()) {
				t.Errorf("Service/%s port %s targets %s, which its pods do not expose", s.Name, sp.Name, sp.TargetPort.String())
			}
		}
	}
	for _, pdb := range r.pdbs {
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		matches("PodDisruptionBudget/"+pdb.Name, s)
	}
	for _, np := range r.netpols {
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		p := matches("NetworkPolicy/"+np.Name, s)
		for _, in := range np.Spec.Ingress {
			for _, pt := range in.Ports {
				if p != nil && pt.Port != nil && !hasPort(p, pt.Port.String()) {
					t.Errorf("NetworkPolicy/%s allows port %s, which its pods do not expose", np.Name, pt.Port.String())
				}
			}
		}
	}
	for _, h := range r.hpas {
		ref := h.Spec.ScaleTargetRef
		i := slices.IndexFunc(r.deploys, func(d *appsv1.Deployment) bool { return d.Name == ref.Name })
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || i < 0 {
			t.Errorf("HPA/%s scales %s/%s, which is not rendered", h.Name, ref.Kind, ref.Name)
		} else if r.deploys[i].Spec.Replicas != nil {
			t.Errorf("Deployment/%s sets replicas while HPA/%s scales it", ref.Name, h.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HPA/%s: replicas %v..%d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	}
	for _, sm := range r.monitors {
		s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		var svc *corev1.Service
		for _, c := range r.services {
			if s.Matches(labels.Set(c.Labels)) {
				if svc != nil {
					t.Errorf("ServiceMonitor/%s selects two Services", sm.Name)
				}
				svc = c
			}
		}
		if svc == nil {
			t.Errorf("ServiceMonitor/%s selects no Service", sm.Name)
			continue
		}
		for _, ep := range sm.Spec.Endpoints {
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
				t.Errorf("ServiceMonitor/%s scrapes port %q, which Service/%s lacks", sm.Name, ep.Port, svc.Name)
			}
		}
	}
}

// TestChartRefusesBadValues: the schema and the templates refuse what would
// deploy something unsafe or broken.
func TestChartRefusesBadValues(t *testing.T) {
	ch := loadChart(t)
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{"no trusted templates", []string{"attester.config.attester.trustedTemplates=null"}, "attester.config.attester.trustedTemplates is required"},
		{"no model", []string{"attester.config.attester.model="}, "attester.config.attester.model are required"},
		{"simulated platform", []string{"attester.platform=simulated"}, "platform"},
		{"unknown key", []string{"attester.nodeselector.a=b"}, "nodeselector"},
		{"chart-owned config key", []string{"attester.config.attester.controlSocket=/tmp/x.sock"}, "config"},
		{"unqualified image", []string{"attester.image.repository=attester"}, "repository"},
		{"bad digest", []string{"attester.image.digest=sha256:abc"}, "digest"},
		{"agent without image", []string{"attester.agent.enabled=true"}, "attester.agent.image.repository"},
		{"both collateral sources", []string{"verifier.enabled=true", "verifier.earKey.existingSecret=k", "verifier.policies.a\\.json=x", "verifier.collateral.existingConfigMap=a", "verifier.collateral.existingClaim=b"}, "verifier.collateral"},
		{"verifier without ear key", []string{"verifier.enabled=true", "verifier.policies.a\\.json=x"}, "verifier.earKey.existingSecret is required"},
		{"verifier without policy", []string{"verifier.enabled=true", "verifier.earKey.existingSecret=k"}, "verifier.policies needs"},
		{"policy not .json", []string{"verifier.enabled=true", "verifier.earKey.existingSecret=k", "verifier.policies.a=x"}, "invalid propertyName 'a'"},
		{"unknown log level", []string{"attester.logLevel=trace"}, "logLevel"},
		{"tpm without node labels", []string{"attester.platform=tpm"}, "no labels for platform tpm"},
		{"no platform labels at all", []string{"attester.platformNodeLabels.sev-snp=null", "attester.platformNodeLabels.tdx=null"}, "platformNodeLabels"},
		{"agent as the attester's uid", []string{"attester.agent.enabled=true", "attester.agent.image.repository=ghcr.io/x/y", "attester.agent.runAsUser=65532"}, "attester.agent.runAsUser must differ"},
		{"agent as root", []string{"attester.agent.enabled=true", "attester.agent.image.repository=ghcr.io/x/y", "attester.agent.runAsUser=0"}, "runAsUser"},
		{"no control group", []string{"attester.podSecurityContext.fsGroup=0"}, "fsGroup is required"},
	}
	for _, tc := range tests {
		vals := loadValues(t, []string{"ci/minimal-values.yaml"}, tc.set...)
		_, err := render(t, ch, vals, nil)
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: render error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// checkVerifier: every file the verifier's flags name is on a read-only
// mount of the right kind (the EAR key from a Secret, policies from the
// ConfigMap that holds NAME.json files), and the listener is the probed port.
func checkVerifier(t *testing.T, r *rendered) {
	for _, d := range r.deploys {
		ps := d.Spec.Template.Spec
		c := ps.Containers[0]
		flags := map[string]string{}
		for _, a := range c.Args {
			k, v, ok := strings.Cut(a, "=")
			if !ok || !strings.HasPrefix(k, "--") {
				t.Errorf("verifier arg %q: want --flag=value", a)
				continue
			}
			if _, dup := flags[k]; dup {
				t.Errorf("verifier flag %s given twice", k)
			}
			flags[k] = v
		}
		if _, p, err := net.SplitHostPort(flags["--listen"]); err != nil || len(c.Ports) != 1 || p != fmt.Sprint(c.Ports[0].ContainerPort) || c.Ports[0].Name != "http" {
			t.Errorf("verifier --listen=%s does not match its port %+v", flags["--listen"], c.Ports)
		}
		vol := func(file string) (*corev1.VolumeMount, *corev1.Volume) {
			for i, m := range c.VolumeMounts {
				if file == m.MountPath || strings.HasPrefix(file, m.MountPath+"/") {
					for j := range ps.Volumes {
						if ps.Volumes[j].Name == m.Name {
							return &c.VolumeMounts[i], &ps.Volumes[j]
						}
					}
				}
			}
			return nil, nil
		}
		if m, v := vol(flags["--ear-key"]); m == nil || !m.ReadOnly || v.Secret == nil ||
			!slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return path.Join(m.MountPath, k.Path) == flags["--ear-key"] }) {
			t.Errorf("--ear-key=%s is not a file of a read-only Secret mount", flags["--ear-key"])
		}
		m, v := vol(flags["--policy-dir"])
		if m == nil || !m.ReadOnly || m.MountPath != flags["--policy-dir"] || v.ConfigMap == nil {
			t.Errorf("--policy-dir=%s is not a read-only ConfigMap mount", flags["--policy-dir"])
		} else if cm := r.configMaps[v.ConfigMap.Name]; cm == nil || len(cm.Data) == 0 {
			t.Errorf("the policy ConfigMap %s is missing or empty", v.ConfigMap.Name)
		} else {
			for name := range cm.Data {
				if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
					t.Errorf("policy file %s: the verifier reads only NAME.json", name)
				}
			}
		}
		if dir, ok := flags["--collateral"]; ok {
			if m, _ := vol(dir); m == nil || !m.ReadOnly || m.MountPath != dir {
				t.Errorf("--collateral=%s is not a read-only mount", dir)
			}
		}
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.String() != "http" {
				t.Errorf("verifier probe %+v: want HTTP on port http", pr)
			}
		}
	}
}

// checkOrchestrator: the orchestrator shares the attester's pod and process
// namespace (so the attester sees its pid through SO_PEERCRED), runs under
// its own non-root uid, which is the one uid in attester.controlUids, and
// reaches the socket through the pod's fsGroup (the control group). Its
// OpenClaw configuration and this node's sealed pack are read-only mounts.
func checkOrchestrator(t *testing.T, ds *appsv1.DaemonSet, agent *corev1.Container, a map[string]any) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	if ps.ShareProcessNamespace == nil || !*ps.ShareProcessNamespace {
		t.Errorf("the pod with the orchestrator does not share one process namespace")
	}
	psc := ps.SecurityContext
	if psc == nil || psc.RunAsUser == nil || psc.FSGroup == nil || *psc.FSGroup == 0 {
		t.Fatalf("pod securityContext %+v: want runAsUser and a non-zero fsGroup (the control group)", psc)
	}
	sc := agent.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || *sc.RunAsUser == 0 || *sc.RunAsUser == *psc.RunAsUser {
		t.Fatalf("the orchestrator's securityContext %+v: want its own non-root uid, not the attester's %d", sc, *psc.RunAsUser)
	}
	if *sc.RunAsGroup == *psc.FSGroup || psc.RunAsGroup != nil && *psc.RunAsGroup == *psc.FSGroup {
		t.Errorf("a primary gid is the control group %d: files of that container would be group-readable by the other", *psc.FSGroup)
	}
	uids, _ := a["controlUids"].([]any)
	if len(uids) != 1 || fmt.Sprint(uids[0]) != fmt.Sprint(*sc.RunAsUser) {
		t.Errorf("attester.controlUids = %v, want [%d] (the orchestrator's uid)", a["controlUids"], *sc.RunAsUser)
	}
	names := map[string]bool{}
	for _, c := range ps.Containers {
		names[c.Name] = true
	}
	if len(names) != 2 {
		t.Errorf("the attester pod runs containers %v: every container gets the control group (fsGroup), so only the attester and the orchestrator may be there", names)
	}

	env := map[string]*corev1.EnvVar{}
	for i, e := range agent.Env {
		env[e.Name] = &agent.Env[i]
	}
	if e := env["NODE_NAME"]; e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("the orchestrator's NODE_NAME is not the downward API's spec.nodeName")
	}
	vol := func(name string) *corev1.Volume { return podVolume(&ps, name) }
	if e := env["OPENCLAW_CONFIG_PATH"]; e != nil {
		i := slices.IndexFunc(agent.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == e.Value })
		if i < 0 || !agent.VolumeMounts[i].ReadOnly {
			t.Errorf("OPENCLAW_CONFIG_PATH=%s is not a read-only mount", e.Value)
		} else if v := vol(agent.VolumeMounts[i].Name); v == nil || v.ConfigMap == nil {
			t.Errorf("OPENCLAW_CONFIG_PATH=%s is not from a ConfigMap", e.Value)
		}
	}
	var pack []corev1.VolumeMount
	for _, m := range agent.VolumeMounts {
		if path.Dir(m.MountPath) == "/etc/openclaw/pack" {
			pack = append(pack, m)
		}
	}
	if len(pack) == 0 {
		return
	}
	want := []string{"/etc/openclaw/pack/prompt_pack.enc", "/etc/openclaw/pack/prompt_pack_manifest.json"}
	if len(pack) != len(want) {
		t.Errorf("pack mounts %v, want %v", pack, want)
	}
	for i, m := range pack {
		if i >= len(want) || m.MountPath != want[i] || !m.ReadOnly {
			t.Errorf("pack mount %+v: want %s read-only", m, want[min(i, len(want)-1)])
			continue
		}
		if v := vol(m.Name); v == nil || v.Secret == nil {
			t.Errorf("pack mount %s is not from a Secret", m.MountPath)
		}
		// Each node's attester has its own key: each pod takes its node's pack.
		if m.SubPathExpr != "$(NODE_NAME)."+path.Base(m.MountPath) && m.SubPath != path.Base(m.MountPath) {
			t.Errorf("pack mount %s: subPathExpr %q subPath %q, want $(NODE_NAME).%s (per node) or %[4]s", m.MountPath, m.SubPathExpr, m.SubPath, path.Base(m.MountPath))
		}
	}
}

// checkConfidentialNodes: the DaemonSet never lands on a node without a TEE:
// a required node affinity whose every term selects confidential nodes of
// an allowed platform.
func checkConfidentialNodes(t *testing.T, ds *appsv1.DaemonSet, vals map[string]any) {
	t.Helper()
	aff := ds.Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		t.Fatalf("the attester DaemonSet has no required node affinity: it would land on every node")
	}
	a := vals["attester"].(map[string]any)
	platform := a["platform"].(string)
	labels, _ := a["platformNodeLabels"].(map[string]any)
	user, _ := a["affinity"].(map[string]any)
	if _, own := user["nodeAffinity"]; own {
		return // the operator's node affinity replaces the chart's
	}
	for i, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		matched := ""
		for p, l := range labels {
			lm, _ := l.(map[string]any)
			if len(lm) == 0 || len(term.MatchExpressions) != len(lm) || (platform != "auto" && p != platform) {
				continue
			}
			ok := true
			for _, e := range term.MatchExpressions {
				if v, has := lm[e.Key]; !has || e.Operator != corev1.NodeSelectorOpIn || !slices.Equal(e.Values, []string{fmt.Sprint(v)}) {
					ok = false
				}
			}
			if ok {
				matched = p
			}
		}
		if matched == "" {
			t.Errorf("node affinity term %d %+v selects no confidential platform of %q", i, term, platform)
		}
	}
}
