package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestWriteCiliumValues writes the nodes' chart values and reads them back
// as helm does: the load balancer by name and port, tags instead of
// digests, and no container asking for CAP_SYS_RESOURCE, which no process
// here holds (runc would fail to start it). That the chart installs and
// its agents run with them is TestBundledKubeadmOnNodes's job.
func TestWriteCiliumValues(t *testing.T) {
	sb := &Sandbox{dir: t.TempDir(), children: map[int]*child{}}
	if err := sb.writeCiliumValues(&LBInfo{Name: LBName, Port: 41234}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(sb.dir, CiliumValuesFile))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		K8sServiceHost  string                    `json:"k8sServiceHost"`
		K8sServicePort  string                    `json:"k8sServicePort"`
		Image           struct{ UseDigest *bool } `json:"image"`
		SecurityContext struct {
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"securityContext"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if v.K8sServiceHost != LBName || v.K8sServicePort != "41234" {
		t.Errorf("API server %s:%s, want %s:41234", v.K8sServiceHost, v.K8sServicePort, LBName)
	}
	if v.Image.UseDigest == nil || *v.Image.UseDigest {
		t.Errorf("image.useDigest not false:\n%s", data)
	}
	if len(v.SecurityContext.Capabilities) < 2 {
		t.Errorf("capability lists missing:\n%s", data)
	}
	for name, caps := range v.SecurityContext.Capabilities {
		for _, c := range caps {
			if strings.EqualFold(c, "SYS_RESOURCE") {
				t.Errorf("%s asks for SYS_RESOURCE", name)
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(sb.dir, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
