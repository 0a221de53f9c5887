// Package shellsession is how a shell session (session=NAME) carries its
// state from one block to the next: the bash every session block runs
// after, and the marked line it leaves its state on. The executor and the
// exported scripts run the same text, so that a session behaves the same
// in the page, cairn run and an exported script.
package shellsession

// Mark starts the line that carries a session's state: a record
// separator no ordinary output has, the word, the nonce, the state.
const Mark = "\x1ecairn-session "

// Wrapper is bash that runs before a session block's script. The
// state is data: it arrives base64-encoded in the environment and is
// decoded into variables, never read as code.
const Wrapper = `cairn_sh_nonce=${CAIRN_SH_NONCE:-}
cairn_sh_state=${CAIRN_SH_STATE:-}
unset CAIRN_SH_NONCE CAIRN_SH_STATE
declare -A cairn_sh_was=()
for cairn_sh_n in $(compgen -e); do cairn_sh_was[$cairn_sh_n]=${!cairn_sh_n}; done
if [[ -n $cairn_sh_state ]]; then
	cairn_sh_dir=
	cairn_sh_first=1
	while IFS= read -r -d '' cairn_sh_kv; do
		if ((cairn_sh_first)); then cairn_sh_dir=$cairn_sh_kv cairn_sh_first=0; continue; fi
		if [[ ${cairn_sh_kv%%=*} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then export "${cairn_sh_kv%%=*}=${cairn_sh_kv#*=}"; fi
	done < <(printf '%s' "$cairn_sh_state" | base64 -d)
	if [[ -n $cairn_sh_dir ]] && ! cd -- "$cairn_sh_dir"; then
		echo "cairn: the session's directory $cairn_sh_dir is gone; this block starts in $PWD" >&2
	fi
fi
unset cairn_sh_n cairn_sh_kv cairn_sh_state cairn_sh_dir cairn_sh_first
cairn_sh_save() {
	local n
	[[ -n $cairn_sh_nonce ]] || return 0
	{
		printf '%s\0' "$PWD"
		for n in $(compgen -e); do
			case $n in CAIRN_* | PWD | OLDPWD | SHLVL | _) continue ;; esac
			if [[ ! -v cairn_sh_was[$n] || ${cairn_sh_was[$n]} != "${!n}" ]]; then printf '%s=%s\0' "$n" "${!n}"; fi
		done
	} | { printf '\036cairn-session %s ' "$cairn_sh_nonce"; base64 -w0; printf '\n'; }
}
trap cairn_sh_save EXIT
`
