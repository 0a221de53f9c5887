// Package nodepod is the pod a target=node block runs through, one per
// node: what the executor makes, what the page's Copy and the exported
// script make with kubectl, so that all three run a node block the same
// way.
package nodepod

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations of node pods.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelRole       = "cairn.dev/role"
	LabelOwner      = "cairn.dev/owner" // which machine and user
	LabelRun        = "cairn.dev/run"
	AnnotationPID   = "cairn.dev/pid" // the executor's process: a live owner or a killed one
	AnnotationBlock = "cairn.dev/block"
	Role            = "node-shell"
	Container       = "node"
)

// DefaultImage is the pod's image when nothing names one: busybox has
// nsenter and sleep.
const DefaultImage = "busybox:1.37"

// Grace is the pod's termination grace and the grace of its deletion, in
// seconds: its processes are the run's, already ended or reaped, and sleep
// ignores SIGTERM as PID 1. Not 0: a deletion with 0 is forced, and removes
// the object before the kubelet has stopped the container.
const Grace = 1

// Beyond is how long the pod may outlive its block's timeout
// (activeDeadlineSeconds): then the kubelet ends it, whatever became of
// whoever made it.
const Beyond = time.Minute

// Nsenter enters the namespaces of the node's PID 1 (the pod shares the
// node's PID namespace): its mounts, UTS, IPC, network and PIDs, as
// kubectl debug node's sysadmin profile lets one do.
var Nsenter = []string{"nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--"}

// Spec says which pod: where, with what, for whom.
type Spec struct {
	Namespace string // "" leaves it to the client (the context's)
	Node      string
	Image     string
	Timeout   time.Duration // the block's
	RunID     string
	Block     string
	Owner     string // a label value
	PID       string
}

// Deadline is the pod's activeDeadlineSeconds.
func (s Spec) Deadline() int64 { return int64((s.Timeout + Beyond) / time.Second) }

// Pod is the pod: pinned by nodeName (no scheduler, every taint
// tolerated), privileged, in the node's PID, network and IPC namespaces,
// sleeping until its deadline. No service account token, no service links.
func (s Spec) Pod() *corev1.Pod {
	deadline := s.Deadline()
	t, f, grace := true, false, int64(Grace)
	prefix := "cairn-node-" + s.Node
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	labels := map[string]string{LabelManagedBy: "cairn", LabelRole: Role}
	if s.Owner != "" {
		labels[LabelOwner] = s.Owner
	}
	if s.RunID != "" {
		labels[LabelRun] = s.RunID
	}
	ann := map[string]string{AnnotationBlock: s.Block}
	if s.PID != "" {
		ann[AnnotationPID] = s.PID
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: strings.TrimRight(prefix, "-.") + "-",
			Namespace:    s.Namespace,
			Labels:       labels,
			Annotations:  ann,
		},
		Spec: corev1.PodSpec{
			NodeName:                      s.Node,
			HostPID:                       true,
			HostNetwork:                   true,
			HostIPC:                       true,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            Container,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", strconv.FormatInt(deadline, 10)},
				SecurityContext: &corev1.SecurityContext{Privileged: &t},
			}},
		},
	}
}

// Shell runs a pod or node block's script, as the page's Copy and the
// exported script do with kubectl exec: sh -c Shell cairn NAME VALUE ...
// SCRIPT. Each NAME VALUE pair is exported (a value is one argument, never
// text), then SCRIPT, the last argument, runs under bash when the
// container or node has it, else sh, with standard error joined to
// standard output. It needs nothing but the shell: containers without env
// (Cilium's agent image) run it too. It gets no standard input: kubectl
// exec -i loses a piped script now and then (measured: 1 in 20 runs ran an
// empty one). NAMEs are identifiers (the runbook's parameter and capture
// names, CAIRN_BLOCK, CAIRN_HOST).
const Shell = `while [ "$#" -gt 1 ]; do export "$1=$2"; shift 2; done; if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc -euo pipefail -c "$1" 2>&1; else exec sh -eu -c "$1" 2>&1; fi`

// NameChars are the characters a node name or an image reference may hold
// (a shell case pattern of what is outside them): checked before either
// lands in the pod's JSON in a copied command or an exported script.
const NameChars = `*[!A-Za-z0-9._/:@-]*`

// Placeholders in Template's JSON.
const (
	NodeSlot  = "@CAIRN_NODE@"
	ImageSlot = "@CAIRN_IMAGE@"
)

// Template is the pod as one line of JSON for kubectl create -f -, with
// NodeSlot and ImageSlot where the node and the image go, and no
// namespace (kubectl's -n, or the context's), owner or pid.
func Template(block string, timeout time.Duration) string {
	p := Spec{Node: NodeSlot, Image: ImageSlot, Timeout: timeout, Block: block}.Pod()
	p.GenerateName = "cairn-node-"
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Pod always marshals
	}
	return string(b)
}

// Put writes standard input to a file on the node, as action=copy does:
// sh -c Put cairn DEST MODE BASE TAG, run as root in the node's namespaces.
// A DEST ending in / or naming a directory gets BASE (the source's file
// name); ~ is root's home. The bytes go to a hidden file beside DEST, which
// takes MODE and is then renamed over DEST, so DEST is whole or untouched.
// It prints the path written and the bytes it received: the sender
// compares them with what it sent (a stream cut short is an error, not a
// short file).
const Put = `set -eu
to=$1 mode=$2 base=$3 tag=$4
case $to in "~" | "~/"*) to=${HOME:-/root}${to#"~"} ;; esac
case $to in */) to=$to$base ;; *) if [ -d "$to" ]; then to=$to/$base; fi ;; esac
dir=$(dirname -- "$to")
mkdir -p -- "$dir"
tmp=$dir/.$(basename -- "$to").cairn-$tag
trap 'rm -f -- "$tmp"' EXIT
cat >"$tmp"
chmod "$mode" -- "$tmp"
n=$(wc -c <"$tmp")
mv -f -- "$tmp" "$to"
trap - EXIT
printf '%s %s\n' "$to" $n`

// Stat says what a copy reads on a source node: sh -c Stat cairn SOURCE
// prints "MODE SIZE" of a regular file (octal mode), else fails saying why.
const Stat = `set -eu
f=$1
case $f in "~" | "~/"*) f=${HOME:-/root}${f#"~"} ;; esac
if [ -d "$f" ]; then echo "the source is a directory; list each file on its own line" >&2; exit 1; fi
if [ ! -e "$f" ]; then echo "no such file: $f" >&2; exit 1; fi
if [ ! -f "$f" ]; then echo "the source is not a regular file" >&2; exit 1; fi
stat -L -c '%a %s' -- "$f"`

// Cat prints a source file: sh -c Cat cairn SOURCE.
const Cat = `f=$1
case $f in "~" | "~/"*) f=${HOME:-/root}${f#"~"} ;; esac
exec cat -- "$f"`
