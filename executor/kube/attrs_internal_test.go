package kube

import (
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// TestAttributeValuesStayValues: a value in name=, namespace=, selector=
// or kind= must fit that field's grammar, so it cannot reach another
// object or widen a selector.
func TestAttributeValuesStayValues(t *testing.T) {
	b := &runbook.Block{ID: "b", Action: "get", Kind: "${K}", Name: "${N}", Namespace: "${NS}", Selector: "app=${APP}"}
	ok := map[string]string{"K": "roles.rbac.authorization.k8s.io", "N": "system::leader-locking", "NS": "kube-system", "APP": "web"}
	if _, err := newAction(b, ok); err != nil {
		t.Fatalf("good values refused: %v", err)
	}
	for k, v := range map[string]string{
		"N":   "../secrets/x",
		"NS":  "kube-system/../default",
		"APP": "web,tier!=x",
		"K":   "pods --all-namespaces",
	} {
		bad := map[string]string{}
		for kk, vv := range ok {
			bad[kk] = vv
		}
		bad[k] = v
		if _, err := newAction(b, bad); !errors.Is(err, executor.ErrBadParam) {
			t.Errorf("%s=%q: %v", k, v, err)
		}
	}
}
