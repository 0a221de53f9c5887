package runbook

import "testing"

// TestShowShell: each value is quoted for where it stands, so that the
// shown script, pasted into bash, does what the runbook's own run does with
// the values in its environment.
func TestShowShell(t *testing.T) {
	vals := map[string]string{"HOSTS": "cp1 cp2", "USER_": "root", "Q": `a"b$c`, "EMPTY": "", "V": "v1.37.2"}
	for _, tc := range []struct{ name, src, want string }{
		{"bare word", `echo $USER_`, `echo root`},
		{"bare with spaces", `for h in $HOSTS; do :; done`, `for h in 'cp1 cp2'; do :; done`},
		{"in double quotes", `for h in $(echo "$HOSTS" | tr ',' ' '); do`, `for h in $(echo "cp1 cp2" | tr ',' ' '); do`},
		{"braced in double quotes", `scp f "${USER_}"@$h:`, `scp f "root"@$h:`},
		{"escaped in double quotes", `echo "[$Q]"`, `echo "[a\"b\$c]"`},
		{"single quotes untouched", `echo '$HOSTS'`, `echo '$HOSTS'`},
		{"comment untouched", "# uses $HOSTS\necho $V", "# uses $HOSTS\necho v1.37.2"},
		{"operator forms stay", `echo ${EMPTY:+--flag "$EMPTY"}`, `echo ${EMPTY:+--flag ""}`},
		{"unquoted heredoc: raw", "cat <<EOF\nversion: ${V}\nhosts: $HOSTS\nEOF\necho $HOSTS", "cat <<EOF\nversion: v1.37.2\nhosts: cp1 cp2\nEOF\necho 'cp1 cp2'"},
		{"quoted heredoc untouched", "cat <<'EOF'\n$HOSTS\nEOF\n", "cat <<'EOF'\n$HOSTS\nEOF\n"},
		{"here-string is not a heredoc", `tr a b <<< "$HOSTS"`, `tr a b <<< "cp1 cp2"`},
		{"unknown name stays", `echo $OTHER $V`, `echo $OTHER v1.37.2`},
		{"empty value", `x=$EMPTY`, `x=`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShowShell(tc.src, vals); got != tc.want {
				t.Errorf("ShowShell(%q)\n got %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}
