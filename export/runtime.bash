# ---------------------------------------------------------------------------
# Runtime: the same in every script Cairn exports. The runbook's own part
# (parameters, blocks, steps) follows it.
#
# Needs bash >= 4.3, coreutils (timeout, base64, mktemp, date), GNU grep with
# -P (PCRE: expectations and captures are RE2 regular expressions, and PCRE
# reads the RE2 syntax runbooks use), sed, awk, and the clients the runbook
# calls: kubectl, ssh, scp.
# ---------------------------------------------------------------------------

cairn_mask_text='••••'
cairn_dry=0
cairn_yes=0
cairn_list=0
cairn_only_step=''
cairn_from_step=''
cairn_log=''
cairn_results='' # --results FILE: the run's verdicts as JSON lines (default: LOG's name, .results.jsonl)
cairn_sign=''    # --sign KEY: sign the results with ssh-keygen -Y sign when the script ends
cairn_run_id=''
cairn_hash=''    # the block's hash as exported (the journal's and the page's block hash)
cairn_t0=''      # the block's start: seconds.nanoseconds and RFC 3339
cairn_attempts=0
cairn_busy=0     # a block has begun and has no result yet
cairn_by=''      # user@machine that runs the script
cairn_bundle=''  # sha256 of the bundle's MANIFEST when the script runs from a bundle
cairn_self=''    # sha256 of this script
cairn_failed=0    # a block failed: only always=true blocks run from then on
cairn_stop_msg='' # the first failure's resume hint
cairn_context=''
cairn_ssh_config="${CAIRN_SSH_CONFIG:-}"
cairn_kubeconfig="${CAIRN_KUBECONFIG:-}"
cairn_kube_ready=0
cairn_kube_ctx=''
cairn_kube_pinned=''
cairn_tmp=''
cairn_verified=0
cairn_skipped=0
cairn_total=0
cairn_n=0
declare -A cairn_given=()
declare -A cairn_val=()
declare -A cairn_cap=()
declare -a cairn_masks=()
declare -a cairn_args=()
declare -a cairn_hosts=()
declare -a cairn_exit=()
declare -a cairn_err=()
declare -a cairn_reasons=()
declare -a cairn_split=()
declare -a cairn_argv=()
declare -a cairn_sel=()
cairn_sel_in=''
# shellcheck disable=SC2034 # read by the functions of kube actions, when there are any
cairn_disp=''
cairn_from=''
cairn_timeout_kills=0
cairn_id=''
cairn_target=''
cairn_node_pod='' # a node block's pod, JSON (runbook/nodepod)
cairn_npod='' # the node pod in use (cairn_node_up)
cairn_session='' # the block's shell session (session=), or ''
cairn_sh_nonce=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n') # this run's marker of a session's state line
cairn_run_body='' # the body a shell block runs: $cairn_body, after the session wrapper in a session
declare -A cairn_sh_state=() # each session's state by "SESSION|HOST": base64, as CAIRN_SH_STATE carries it
# The bash a session block's body runs after (executor.SessionWrapper).
cairn_sh_wrapper='@SESSIONWRAP@'

cairn_nfrom='' # a node copy's source node
declare -a cairn_nsrc=() cairn_nmode=() cairn_nsize=() cairn_nwhere=() cairn_ndst=() cairn_nbase=()
cairn_renv=()
cairn_step=''
cairn_line=0
cairn_refs=''
cairn_expects=''
cairn_timeout=''
cairn_interval=''
cairn_live=1
cairn_body=''
cairn_remote=''
cairn_sh=''
cairn_sp=''
cairn_su=''

cairn_say() { printf '%s\n' "$*"; }
cairn_warn() { printf '%s: %s\n' "$cairn_prog" "$*" >&2; }
cairn_die() {
	cairn_warn "$*"
	# A block that could not run is an error in the results, as in the journal.
	cairn_result_open error "$*"
	exit 1
}
cairn_usage_error() {
	printf '%s: %s\nTry: %s --help\n' "$cairn_prog" "$*" "$cairn_prog" >&2
	exit 2
}

# cairn_stopped STATUS: Ctrl+C or TERM; the block under way is recorded as
# cancelled.
cairn_stopped() {
	trap - INT TERM
	cairn_result_open cancelled cancelled
	exit "$1"
}

cairn_cleanup() {
	cairn_sign_results
	if [[ -n $cairn_tmp && -d $cairn_tmp ]]; then
		rm -rf -- "$cairn_tmp"
	fi
}

# cairn_oneline TEXT: TEXT with control characters (newlines included) as
# spaces, for messages and the log.
cairn_oneline() {
	local s=$1
	s=${s//[$'\001'-$'\037'$'\177']/ }
	printf '%s' "$s"
}

# --- masking ---------------------------------------------------------------

cairn_add_mask() {
	local v=$1 line
	[[ -n $v ]] || return 0
	while IFS= read -r line; do
		[[ -n $line ]] && cairn_masks+=("$line")
	done <<<"$v"
}

# The awk programs read their data from the environment (ENVIRON does not
# interpret backslashes, unlike -v), never from the program text.
cairn_awk_mask='
BEGIN { n = split(ENVIRON["CAIRN_MASK_VALUES"], v, "\n"); m = ENVIRON["CAIRN_MASK_TEXT"]; p = ENVIRON["CAIRN_MASK_PREFIX"] }
{
	line = $0
	if ((k = index(line, "\036cairn-session ")) > 0) {
		# A session block'"'"'s state (cairn_session_take): never shown.
		line = substr(line, 1, k - 1)
		if (line == "") next
	}
	for (i = 1; i <= n; i++) {
		if (v[i] == "") continue
		out = ""
		while ((j = index(line, v[i])) > 0) {
			out = out substr(line, 1, j - 1) m
			line = substr(line, j + length(v[i]))
		}
		line = out line
	}
	print p line
	fflush()
}'

# cairn_mask [PREFIX]: copies standard input to standard output with every
# secret value replaced by ••••, each line prefixed.
cairn_mask() {
	local IFS=$'\n'
	CAIRN_MASK_VALUES="${cairn_masks[*]}" CAIRN_MASK_TEXT="$cairn_mask_text" CAIRN_MASK_PREFIX="${1:-}" LC_ALL=C awk "$cairn_awk_mask"
}

cairn_mask_str() { printf '%s\n' "$1" | cairn_mask; }

# --- substitution of ${NAME} (and $NAME) in kube bodies and attributes -------

cairn_awk_sub='
BEGIN {
	n = split(ENVIRON["CAIRN_SUB_NAMES"], names, " ")
	for (i = 1; i <= n; i++) have[names[i]] = 1
	braced = ENVIRON["CAIRN_SUB_BRACED"] == "1"
	first = 1
}
{
	s = $0; out = ""
	while ((j = index(s, "$")) > 0) {
		out = out substr(s, 1, j - 1)
		rest = substr(s, j + 1)
		b = substr(rest, 1, 1) == "{"
		if (b) rest = substr(rest, 2)
		if (!b && braced) { out = out "$"; s = substr(s, j + 1); continue }
		if (match(rest, /^[A-Z][A-Z0-9_]*/)) {
			name = substr(rest, 1, RLENGTH)
			after = substr(rest, RLENGTH + 1)
			if (b && substr(after, 1, 1) != "}") { out = out "$"; s = substr(s, j + 1); continue }
			if (name in have) {
				out = out ENVIRON["CAIRN_V_" name]
				s = b ? substr(after, 2) : after
				continue
			}
		}
		out = out "$"; s = substr(s, j + 1)
	}
	printf "%s%s", (first ? "" : "\n"), out s
	first = 0
}'

# cairn_sub BRACED NAMES TEXT [display]: TEXT with the references to NAMES
# that have a value replaced by it; with display, secret values are masked
# and unknown captures stay as written.
cairn_sub() {
	local braced=$1 names=$2 text=$3 display=${4:-} name have=() n
	local -a kv=()
	for name in $names; do
		if [[ $name == CAIRN_HOST ]]; then
			kv+=("CAIRN_V_$name=${CAIRN_HOST:-}")
			have+=("$name")
		elif [[ -v cairn_val[$name] ]]; then
			if [[ -n $display && ${cairn_psecret[$name]:-0} == 1 ]]; then
				kv+=("CAIRN_V_$name=$cairn_mask_text")
			elif [[ -n $display ]]; then
				kv+=("CAIRN_V_$name=$(cairn_quote_shown "${cairn_val[$name]}")")
			else
				kv+=("CAIRN_V_$name=${cairn_val[$name]}")
			fi
			have+=("$name")
		elif [[ -v cairn_cap[$name] ]]; then
			if [[ -n $display ]]; then
				kv+=("CAIRN_V_$name=$(cairn_quote_shown "${cairn_cap[$name]}")")
			else
				kv+=("CAIRN_V_$name=${cairn_cap[$name]}")
			fi
			have+=("$name")
		fi
	done
	n="${have[*]}"
	printf '%s' "$text" | env "${kv[@]}" CAIRN_SUB_NAMES="$n" CAIRN_SUB_BRACED="$braced" LC_ALL=C awk "$cairn_awk_sub"
}

# cairn_quote_shown VALUE: the value as shown for a reader to copy: as it is
# when it is plain, else shell-quoted, so that pasting it runs nothing.
cairn_quote_shown() {
	if [[ $1 =~ ^[A-Za-z0-9@%+=:,./_-]*$ ]]; then
		printf '%s' "$1"
	else
		printf '%q' "$1"
	fi
}

# cairn_shell_view NAMES BODY: a shell block as a dry run shows it: the
# values it reads as shell assignments (quoted; secrets masked), then its
# text as written. Values are never pasted into shell text.
cairn_shell_view() {
	local name v
	for name in $1; do
		if [[ -v cairn_val[$name] ]]; then
			v=${cairn_val[$name]}
			[[ ${cairn_psecret[$name]:-0} == 1 ]] && v=$cairn_mask_text
		elif [[ -v cairn_cap[$name] ]]; then
			v=${cairn_cap[$name]}
			[[ ${cairn_csecret[$name]:-0} == 1 ]] && v=$cairn_mask_text
		else
			continue
		fi
		printf '%s=%q\n' "$name" "$v"
	done
	printf '%s' "$2"
}

# cairn_awk_json fills a kube body exported as JSON: each reference is
# marked \u0001NAME\u0002 (a plain YAML scalar that is only the reference)
# or \u0001NAME\u0003 (inside a string), always inside a JSON string. Values
# are JSON-escaped into that string; a plain one that reads as a number or
# true/false replaces the whole string, as YAML would read it. One pass, so
# a value is never looked at again.
cairn_awk_json='
BEGIN {
	n = split(ENVIRON["CAIRN_SUB_NAMES"], names, " ")
	for (i = 1; i <= n; i++) have[names[i]] = 1
	for (i = 1; i < 32; i++) ord[sprintf("%c", i)] = i
	first = 1
}
function esc(v,    o, k, c) {
	o = ""
	for (k = 1; k <= length(v); k++) {
		c = substr(v, k, 1)
		if (c == "\\") o = o "\\\\"
		else if (c == "\"") o = o "\\\""
		else if (c in ord) o = o sprintf("\\u%04x", ord[c])
		else o = o c
	}
	return o
}
{
	s = $0; out = ""
	while ((j = index(s, "\\u0001")) > 0) {
		pre = substr(s, 1, j - 1)
		rest = substr(s, j + 6)
		if (!match(rest, /^[A-Z][A-Z0-9_]*\\u000[23]/)) { out = out pre "\\u0001"; s = rest; continue }
		name = substr(rest, 1, RLENGTH - 6)
		plain = substr(rest, RLENGTH, 1) == "2"
		after = substr(rest, RLENGTH + 1)
		if (!(name in have)) { out = out pre "${" name "}"; s = after; continue }
		v = ENVIRON["CAIRN_V_" name]
		if (plain && substr(pre, length(pre), 1) == "\"" && substr(after, 1, 1) == "\"" && v ~ /^(true|false|-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)$/) {
			out = out substr(pre, 1, length(pre) - 1) v
			s = substr(after, 2)
			continue
		}
		out = out pre esc(v)
		s = after
	}
	printf "%s%s", (first ? "" : "\n"), out s
	first = 0
}'

# cairn_json_fill NAMES JSON [display]: the exported kube body with values
# filled in (see cairn_awk_json); with display, secret values are masked.
cairn_json_fill() {
	local names=$1 text=$2 display=${3:-} name have=() n
	local -a kv=()
	for name in $names; do
		if [[ -v cairn_val[$name] ]]; then
			if [[ -n $display && ${cairn_psecret[$name]:-0} == 1 ]]; then
				kv+=("CAIRN_V_$name=$cairn_mask_text")
			else
				kv+=("CAIRN_V_$name=${cairn_val[$name]}")
			fi
			have+=("$name")
		elif [[ -v cairn_cap[$name] ]]; then
			kv+=("CAIRN_V_$name=${cairn_cap[$name]}")
			have+=("$name")
		fi
	done
	n="${have[*]}"
	printf '%s' "$text" | env "${kv[@]}" CAIRN_SUB_NAMES="$n" LC_ALL=C awk "$cairn_awk_json"
}

# --- parameters ----------------------------------------------------------------

cairn_is_ipv4() {
	local IFS=. part
	local -a parts
	[[ $1 =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || return 1
	read -ra parts <<<"$1"
	for part in "${parts[@]}"; do
		[[ $part == 0 || $part != 0* ]] || return 1
		((10#$part <= 255)) || return 1
	done
}

cairn_is_ipv6() {
	local a=${1%%\%*}
	[[ $a == *:* && $a =~ ^[0-9A-Fa-f:.]+$ && $a != *:::* ]] || return 1
	local rest=${a#*::}
	[[ $rest != *::* ]] || return 1
}

cairn_is_ip() { cairn_is_ipv4 "$1" || cairn_is_ipv6 "$1"; }

cairn_valid_port() {
	local p=${1#:}
	# One spelling: no sign, no leading zero (known_hosts names depend on it).
	if [[ $1 != :* || ! $p =~ ^[1-9][0-9]{0,4}$ ]] || ((p > 65535)); then
		printf 'bad port in "%s": a number from 1 to 65535 written plainly (no sign, no leading zero)' "$2"
		return 1
	fi
}

# Host values have one spelling, as in the model (runbook/host.go): names
# lowercased without a final dot, IP addresses as Go's net/netip prints them
# (IPv4-mapped IPv6 as IPv4, IPv6 compressed), a name ending in a number
# refused, ports plain. ssh consults known_hosts under the name it is given,
# so a second spelling of an address would take a changed key for a new
# host's. export's TestHostSpellingMatchesModel holds the two to agree.

# cairn_inet_aton S: cairn_ip=S read as inet_aton(3) reads it (1 to 4
# parts, decimal, octal or hex), or return 1.
cairn_inet_aton() {
	local p d base n v=0 i last
	local -a parts nums=()
	IFS=. read -ra parts <<<"$1"
	[[ $1 != *. ]] || parts+=('')
	((${#parts[@]} >= 1 && ${#parts[@]} <= 4)) || return 1
	for p in "${parts[@]}"; do
		base=10 d=$p
		if [[ $p == 0x* ]]; then
			base=16 d=${p#0x}
			[[ -n $d ]] || d=0
			[[ $d =~ ^[0-9a-f]{1,8}$ ]] || return 1
		elif [[ $p == 0?* ]]; then
			base=8 d=${p#0}
			[[ $d =~ ^[0-7]{1,11}$ ]] || return 1
		else
			[[ $d =~ ^[0-9]{1,10}$ ]] || return 1
		fi
		n=$((${base}#$d))
		((n <= 4294967295)) || return 1
		nums+=("$n")
	done
	last=$((${#nums[@]} - 1))
	for ((i = 0; i < last; i++)); do
		((nums[i] <= 255)) || return 1
		((v |= nums[i] << (8 * (3 - i))))
	done
	((nums[last] < 1 << (8 * (4 - last)))) || return 1
	((v |= nums[last]))
	cairn_ip="$((v >> 24 & 255)).$((v >> 16 & 255)).$((v >> 8 & 255)).$((v & 255))"
}

# cairn_canon_ip ADDR: cairn_ip=ADDR in its one spelling; return 1 if ADDR
# is not an IP address, 2 if its IPv6 zone is not an interface name.
cairn_canon_ip() {
	local a=$1 zone='' v4 head tail i n run=0 start=0 best=-1 bestlen=0 g
	local -a o=() hg=() tg=() groups=()
	local h4='[0-9a-f]{1,4}'
	cairn_ip=''
	if cairn_is_ipv4 "$a"; then
		cairn_ip=$a
		return 0
	fi
	[[ $a == *:* ]] || return 1
	if [[ $a == *%* ]]; then
		zone=${a#*%}
		a=${a%%\%*}
		[[ $a =~ ^[0-9A-Fa-f:.]+$ && -n $zone ]] || return 1
		[[ $zone =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || return 2
		zone=%$zone
	fi
	[[ $a =~ ^[0-9A-Fa-f:.]+$ ]] || return 1
	a=${a,,}
	if [[ $a == *.* ]]; then
		v4=${a##*:}
		cairn_is_ipv4 "$v4" || return 1
		IFS=. read -ra o <<<"$v4"
		printf -v a '%s:%x:%x' "${a%:*}" $((10#${o[0]} * 256 + 10#${o[1]})) $((10#${o[2]} * 256 + 10#${o[3]}))
	fi
	if [[ $a == *::* ]]; then
		head=${a%%::*}
		tail=${a#*::}
		[[ $head =~ ^($h4(:$h4)*)?$ && $tail =~ ^($h4(:$h4)*)?$ ]] || return 1
		[[ -z $head ]] || IFS=: read -ra hg <<<"$head"
		[[ -z $tail ]] || IFS=: read -ra tg <<<"$tail"
		n=$((${#hg[@]} + ${#tg[@]}))
		((n <= 7)) || return 1
		groups=("${hg[@]}")
		for ((i = n; i < 8; i++)); do groups+=(0); done
		groups+=("${tg[@]}")
	else
		[[ $a =~ ^($h4:){7}$h4$ ]] || return 1
		IFS=: read -ra groups <<<"$a"
	fi
	for i in "${!groups[@]}"; do
		groups[i]=$((16#${groups[i]}))
	done
	if ((groups[0] == 0 && groups[1] == 0 && groups[2] == 0 && groups[3] == 0 && groups[4] == 0 && groups[5] == 65535)); then
		cairn_ip="$((groups[6] >> 8)).$((groups[6] & 255)).$((groups[7] >> 8)).$((groups[7] & 255))"
		return 0
	fi
	for ((i = 0; i < 8; i++)); do
		if ((groups[i] == 0)); then
			((run == 0)) && start=$i
			((++run > bestlen)) && bestlen=$run best=$start
		else
			run=0
		fi
	done
	((bestlen >= 2)) || best=-1
	for ((i = 0; i < 8; i++)); do
		if ((i == best)); then
			cairn_ip+='::'
			((i += bestlen - 1))
			continue
		fi
		[[ -n $cairn_ip && $cairn_ip != *:: ]] && cairn_ip+=':'
		printf -v g '%x' "${groups[i]}"
		cairn_ip+=$g
	done
	cairn_ip+=$zone
}

# cairn_canon_name NAME: cairn_name=NAME in its one spelling, or
# cairn_why=why it is not a host name and return 1.
cairn_canon_name() {
	local n=${1,,} last
	if [[ $n == *. ]]; then
		printf -v cairn_why 'write the name without the final dot (%s)' "${n%.}"
		return 1
	fi
	if ((${#n} > 253)); then
		printf -v cairn_why 'a host name has at most 253 characters'
		return 1
	fi
	if [[ ! $n =~ ^[a-z0-9][a-z0-9-]{0,62}(\.[a-z0-9][a-z0-9-]{0,62})*$ ]]; then
		printf -v cairn_why 'not a host name: labels are letters, digits and inner hyphens, 1 to 63 of them'
		return 1
	fi
	last=${n##*.}
	if [[ $last =~ ^[0-9]+$ || $last =~ ^0x[0-9a-f]*$ ]]; then
		if cairn_inet_aton "$n"; then
			printf -v cairn_why 'resolvers read it as the IPv4 address %s: write that' "$cairn_ip"
		else
			printf -v cairn_why 'a host name cannot end in a number (resolvers would read it as an IPv4 address)'
		fi
		return 1
	fi
	cairn_name=$n
}

# cairn_canon_host VALUE: cairn_host=VALUE ([user@]host[:port]) in its one
# spelling, or prints why it is not a host value and returns 1 (it prints
# nothing else: `why=$(cairn_canon_host V)` validates).
cairn_canon_host() {
	local v=$1 h=$1 user='' port='' addr rest rc
	cairn_host=''
	if [[ $h == *@* ]]; then
		user=${h%@*}
		h=${h##*@}
		if [[ -z $user || $user == *[[:cntrl:]\ :/@\'\"\$\`\;\\]* ]]; then
			printf 'bad user name in "%s"' "$v"
			return 1
		fi
		user+=@
	fi
	if [[ $h == \[* ]]; then
		if [[ $h != *\]* ]]; then
			printf 'not a host: "%s": missing ] after the IPv6 address' "$v"
			return 1
		fi
		addr=${h#\[}
		addr=${addr%%\]*}
		rest=${h#*\]}
		cairn_canon_ip "$addr" && rc=0 || rc=$?
		case $rc in
		1)
			printf 'not a host: "%s": "%s" is not an IP address' "$v" "$addr"
			return 1
			;;
		2)
			printf 'not a host: "%s": IPv6 zone "%s" is not an interface name' "$v" "${addr#*%}"
			return 1
			;;
		esac
		if [[ -n $rest ]]; then
			if [[ $rest != :* ]]; then
				printf 'not a host: "%s": want [address]:port' "$v"
				return 1
			fi
			cairn_valid_port "$rest" "$v" || return 1
			port=${rest#:}
		fi
	elif [[ $h == *:*:* ]]; then
		cairn_canon_ip "$h" && rc=0 || rc=$?
		case $rc in
		1)
			printf 'not a host name or IP address: "%s" (an IPv6 address with a port is written [address]:port)' "$v"
			return 1
			;;
		2)
			printf 'not a host: "%s": IPv6 zone "%s" is not an interface name' "$v" "${h#*%}"
			return 1
			;;
		esac
	else
		if [[ $h == *:* ]]; then
			port=${h#*:}
			h=${h%%:*}
			cairn_valid_port ":$port" "$v" || return 1
		fi
		if [[ -z $h ]]; then
			printf 'not a host: "%s": empty host name' "$v"
			return 1
		fi
		if cairn_is_ipv4 "$h"; then
			cairn_ip=$h
		else
			if ! cairn_canon_name "$h"; then
				printf 'not a host name or IP address: "%s": %s' "$v" "$cairn_why"
				return 1
			fi
			cairn_ip=$cairn_name
		fi
	fi
	if [[ -z $port ]]; then
		cairn_host=$user$cairn_ip
	elif [[ $cairn_ip == *:* ]]; then
		cairn_host="${user}[$cairn_ip]:$port"
	else
		cairn_host="$user$cairn_ip:$port"
	fi
}

# cairn_canon_hosts: cairn_split with every host in its one spelling (the
# values were validated with the parameters).
cairn_canon_hosts() {
	local i
	for i in "${!cairn_split[@]}"; do
		cairn_canon_host "${cairn_split[i]}" >/dev/null && cairn_split[i]=$cairn_host
	done
	return 0
}

cairn_split_hosts() {
	local v=${1//,/ }
	v=${v//$'\t'/ }
	v=${v//$'\n'/ }
	read -ra cairn_split <<<"$v"
}

cairn_pattern_ok() {
	local pat=${cairn_ppattern[$1]:-}
	[[ -z $pat ]] && return 0
	printf '%s' "$2" | LC_ALL=C grep -aqzP -e "$pat"
}

# cairn_validate NAME VALUE: prints why VALUE is not valid for NAME.
cairn_validate() {
	local k=$1 v=$2 h why
	case ${cairn_ptype[$k]} in
	int)
		if [[ ! $v =~ ^[+-]?[0-9]+$ ]]; then
			printf 'not an integer'
			return 1
		fi
		;;
	bool)
		if [[ $v != true && $v != false ]]; then
			printf 'must be true or false'
			return 1
		fi
		;;
	enum)
		local ok=0 x
		while IFS= read -r x; do
			[[ $x == "$v" ]] && ok=1
		done <<<"${cairn_pvalues[$k]}"
		if ((!ok)); then
			printf 'must be one of %s' "${cairn_pvalues[$k]//$'\n'/, }"
			return 1
		fi
		;;
	host)
		cairn_canon_host "$v" || return 1
		;;
	hosts)
		cairn_split_hosts "$v"
		if ((${#cairn_split[@]} == 0)); then
			printf 'needs at least one host'
			return 1
		fi
		for h in "${cairn_split[@]}"; do
			if ! why=$(cairn_canon_host "$h"); then
				printf '"%s": %s' "$h" "$why"
				return 1
			fi
			if ! cairn_pattern_ok "$k" "$h"; then
				printf '"%s": does not match pattern %s' "$h" "${cairn_ppattern[$k]}"
				return 1
			fi
		done
		return 0
		;;
	cidr)
		local a=${v%/*} bits=${v##*/} max=32
		cairn_is_ipv6 "$a" && max=128
		if [[ $v != */* || $a == *%* || ! $bits =~ ^[0-9]{1,3}$ ]] || ! cairn_is_ip "$a" || ((10#$bits > max)); then
			printf 'not a CIDR prefix such as 10.0.0.0/16'
			return 1
		fi
		;;
	duration)
		local re='^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$'
		if [[ ! $v =~ $re ]]; then
			printf 'not a duration such as 90s or 5m'
			return 1
		fi
		;;
	esac
	if ! cairn_pattern_ok "$k" "$v"; then
		printf 'does not match pattern %s' "${cairn_ppattern[$k]}"
		return 1
	fi
}

# cairn_resolve_params: --param values, else the environment, else defaults;
# every problem is reported at once, before anything runs.
cairn_resolve_params() {
	local k v have why
	local -a problems=() missing=() names=()
	mapfile -t names < <(printf '%s\n' "${!cairn_given[@]}" | LC_ALL=C sort)
	for k in "${names[@]}"; do
		[[ -n $k && ! -v cairn_ptype[$k] ]] && problems+=("unknown parameter $k")
	done
	for k in "${cairn_param_names[@]}"; do
		have=0
		v=''
		if [[ -v cairn_given[$k] ]]; then
			v=${cairn_given[$k]}
			have=1
		elif [[ -v $k ]]; then
			v=${!k}
			have=1
		fi
		if ((!have)) || [[ -z $v && ${cairn_ptype[$k]} != string ]]; then
			if [[ -v cairn_pdefault[$k] ]]; then
				v=${cairn_pdefault[$k]}
				have=1
			fi
		fi
		if ((!have)) && [[ ${cairn_psecret[$k]} == 1 && $cairn_dry == 0 && $cairn_list == 0 ]] && [[ -t 0 ]]; then
			printf '%s (%s, secret): ' "$k" "$(cairn_oneline "${cairn_ptitle[$k]}")" >&2
			if IFS= read -rs v; then
				have=1
			fi
			printf '\n' >&2
		fi
		if ((!have)) || [[ -z $v && ${cairn_prequired[$k]} == 1 ]]; then
			if [[ ${cairn_prequired[$k]} == 1 ]]; then
				missing+=("$k")
			else
				cairn_val[$k]='' # optional and not given: empty, so set -u blocks still run
			fi
			continue
		fi
		if [[ -z $v ]]; then
			cairn_val[$k]=''
			continue
		fi
		if ! why=$(cairn_validate "$k" "$v"); then
			problems+=("parameter $k: $why")
			continue
		fi
		cairn_val[$k]=$v
	done
	if ((${#missing[@]} > 0)); then
		local m
		m=$(printf '%s, ' "${missing[@]}")
		problems+=("missing required parameters: ${m%, }")
	fi
	if ((${#problems[@]} > 0)); then
		printf '%s: bad parameters:\n' "$cairn_prog" >&2
		printf '  %s\n' "${problems[@]}" >&2
		printf 'Set them with --param NAME=VALUE or as environment variables; see %s --help\n' "$cairn_prog" >&2
		exit 2
	fi
	for k in "${cairn_param_names[@]}"; do
		if [[ -v cairn_val[$k] ]]; then
			printf -v "$k" '%s' "${cairn_val[$k]}"
			export "${k?}"
			[[ ${cairn_psecret[$k]} == 1 ]] && cairn_add_mask "${cairn_val[$k]}"
		else
			unset "$k"
		fi
	done
}

# --- captures, kept between runs so that --from can resume ---------------------

cairn_state_file() { printf '%s.captures' "$cairn_log"; }

cairn_load_captures() {
	local f name enc
	f=$(cairn_state_file)
	[[ -f $f ]] || return 0
	while read -r name enc; do
		[[ -v cairn_csecret[$name] && ${cairn_csecret[$name]} == 0 && ! -v cairn_cap[$name] ]] || continue
		cairn_cap[$name]=$(printf '%s' "$enc" | base64 -d 2>/dev/null) || unset 'cairn_cap[$name]'
	done <"$f"
}

# cairn_has_secret VALUE: whether VALUE holds a masked secret.
cairn_has_secret() {
	local m
	for m in "${cairn_masks[@]}"; do
		[[ -n $m && $1 == *"$m"* ]] && return 0
	done
	return 1
}

# Only non-secret captures are saved, and none that holds a secret; the file
# is the user's alone (0600), like the log.
cairn_save_captures() {
	local f name
	f=$(cairn_state_file)
	(
		umask 077
		for name in "${cairn_capture_names[@]}"; do
			[[ -v cairn_cap[$name] && ${cairn_csecret[$name]} == 0 ]] || continue
			cairn_has_secret "${cairn_cap[$name]}" && continue
			printf '%s %s\n' "$name" "$(printf '%s' "${cairn_cap[$name]}" | base64 -w0)"
		done >"$f.tmp"
	) && mv -f -- "$f.tmp" "$f"
}

# cairn_requires checks what the runbook's front matter requires before the
# first block runs (binaries here and on the hosts of a parameter, API
# resources of the cluster) and stops with one message naming all of it.
cairn_requires() {
	local -a problems=() miss=() gone=()
	local b e param bins h out r served
	for b in "${cairn_req_local[@]}"; do
		command -v "$b" >/dev/null 2>&1 || miss+=("$b")
	done
	((${#miss[@]} == 0)) || problems+=("not installed on this machine: ${miss[*]}")
	if ((cairn_dry)); then
		((${#cairn_req_hosts[@]} + ${#cairn_req_resources[@]} == 0)) ||
			cairn_say "would check on the hosts and the cluster: ${cairn_req_hosts[*]} ${cairn_req_resources[*]}"
		((${#problems[@]} == 0)) || cairn_warn "${problems[*]}"
		return 0
	fi
	for e in "${cairn_req_hosts[@]}"; do
		param=${e%%:*}
		bins=${e#*:}
		cairn_split_hosts "${cairn_val[$param]:-}"
		cairn_canon_hosts
		((${#cairn_split[@]})) || problems+=("$param names no host to check for $bins")
		for h in "${cairn_split[@]}"; do
			cairn_ssh_argv "$h"
			if ! out=$(printf 'for b in %s; do command -v "$b" >/dev/null 2>&1 || printf " %%s" "$b"; done; echo\n' "$bins" |
				timeout -k 5 30 "${cairn_argv[@]}" "exec bash --noprofile --norc -s" 2>&1); then
				problems+=("$h: cannot check $bins: $(cairn_oneline "$out")")
			elif [[ -n ${out//[[:space:]]/} ]]; then
				problems+=("not installed on $h:$out")
			fi
		done
	done
	if ((${#cairn_req_resources[@]})); then
		cairn_kube_init
		if ! served=$(cairn_kctl api-resources -o name 2>&1); then
			problems+=("cannot list the cluster's API resources: $(cairn_oneline "$served")")
		else
			for r in "${cairn_req_resources[@]}"; do
				grep -qxF -- "$r" <<<"$served" || gone+=("$r")
			done
			((${#gone[@]} == 0)) || problems+=("API resources not served by context $cairn_kube_ctx: ${gone[*]}")
		fi
	fi
	if ((${#problems[@]})); then
		local IFS=';'
		cairn_die "requirements not met: ${problems[*]} (requires in the runbook's front matter; install them, or run against a cluster that has them)"
	fi
}

# cairn_need BLOCK NAME:BY ...: every capture the block reads must be known.
cairn_need() {
	local id=$1 nb name by
	local -a missing=()
	shift
	for nb in "$@"; do
		name=${nb%%:*}
		by=${nb#*:}
		[[ -v cairn_cap[$name] ]] || missing+=("\$$name (captured by block \"$by\")")
	done
	if ((${#missing[@]} > 0)); then
		if ((cairn_dry)); then
			printf '  (needs %s from an earlier run)\n' "${missing[*]}"
			return 0
		fi
		local IFS=,
		cairn_fail_now "$id" "block \"$id\" needs ${missing[*]}: run that block first (or pass --capture NAME=VALUE)"
	fi
}

# --- log ---------------------------------------------------------------------

cairn_log_line() {
	((cairn_dry || cairn_list)) && return 0
	local when
	when=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	(umask 077 && printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$when" "$1" "$2" "$3" "$4" "$(cairn_oneline "$(cairn_mask_str "${5:-}")")" >>"$cairn_log") ||
		cairn_warn "cannot write the log $cairn_log"
}

# --- results: what the run verified, for `cairn journal import` -----------------
#
# One JSON object per block that ran or was skipped, in the journal's export
# format (a Record), with "site" saying which run, script and bundle it came
# from. Output is masked and bounded like the journal's (the tail is kept).

cairn_results_max=1048576

# cairn_awk_jstr: standard input as one JSON string literal.
cairn_awk_jstr='
BEGIN { for (i = 1; i < 128; i++) ord[sprintf("%c", i)] = i; printf "\"" }
{
	s = $0
	gsub(/\\/, "\\\\\\\\", s)
	gsub(/"/, "\\\"", s)
	gsub(/\t/, "\\t", s)
	gsub(/\r/, "\\r", s)
	if (s ~ /[\001-\037\177]/) {
		out = ""
		for (i = 1; i <= length(s); i++) {
			c = substr(s, i, 1)
			if (c ~ /[\001-\037\177]/) out = out sprintf("\\u%04x", ord[c]); else out = out c
		}
		s = out
	}
	printf "%s\\n", s
}
END { printf "\"" }'

cairn_jstr() { # TEXT: as a JSON string (short texts: names, reasons)
	local v=$1
	v=${v//\\/\\\\}
	v=${v//\"/\\\"}
	v=${v//$'\n'/\\n}
	v=${v//$'\t'/\\t}
	v=${v//$'\r'/\\r}
	v=${v//[$'\001'-$'\037'$'\177']/ }
	printf '"%s"' "$v"
}

# cairn_masked_tail FILE: FILE's last cairn_results_max bytes as the
# journal keeps them: NUL bytes dropped (bash cannot hold them), secrets
# masked.
cairn_masked_tail() {
	[[ -s $1 ]] || return 0
	tail -c "$cairn_results_max" -- "$1" | tr -d '\000' | cairn_mask
}

# cairn_jtext: standard input as one JSON string.
cairn_jtext() { LC_ALL=C awk "$cairn_awk_jstr"; }

cairn_ns() { # SECONDS.NANOSECONDS -> nanoseconds
	local t=$1
	printf '%s' $((${t%.*} * 1000000000 + 10#${t#*.}))
}

cairn_results_init() {
	((cairn_dry || cairn_list)) && return 0
	cairn_results=${cairn_results:-${cairn_log%.log}.results.jsonl}
	local u h dir
	u=$(id -un 2>/dev/null || printf '%s' "${USER:-?}")
	h=$(hostname 2>/dev/null || uname -n)
	cairn_by="$u@$h"
	cairn_run_id=$(date -u +%Y%m%dT%H%M%SZ)-$$-$RANDOM
	cairn_self=$(sha256sum <"${BASH_SOURCE[0]}" 2>/dev/null) && cairn_self=${cairn_self%% *}
	dir=$(dirname "${BASH_SOURCE[0]}")
	if [[ -f $dir/../MANIFEST ]] && cairn_bundle=$(sha256sum <"$dir/../MANIFEST" 2>/dev/null); then
		cairn_bundle=${cairn_bundle%% *}
	fi
	if [[ -n $cairn_sign ]]; then
		command -v ssh-keygen >/dev/null 2>&1 || cairn_die "--sign needs ssh-keygen (OpenSSH 8.1 or later)"
		[[ -r $cairn_sign ]] || cairn_die "--sign $cairn_sign: no such key file (give a private key, or a public key whose private key ssh-agent holds)"
	fi
	(umask 077 && : >>"$cairn_results") || cairn_die "cannot write the results file $cairn_results (give --results FILE)"
	# A run killed while it wrote a record (kill -9, a power cut) leaves a
	# line cut short: it is dropped, so that the file stays one whole
	# record per line for cairn journal import.
	if [[ -s $cairn_results && $(tail -c 1 -- "$cairn_results" | od -An -tx1) != *0a* ]]; then
		sed -i '$d' -- "$cairn_results" || cairn_die "cannot repair the results file $cairn_results"
		cairn_warn "dropped the last line of $cairn_results: an earlier run was stopped while writing it"
	fi
}

# cairn_result STATUS [REASON]: appends the block's record (reasons from
# cairn_reasons unless REASON is given; hosts from cairn_hosts).
cairn_result() {
	((cairn_dry || cairn_list)) && return 0
	[[ -n $cairn_results && -n $cairn_hash ]] || return 0
	local status=$1 now d dur i n=${#cairn_hosts[@]} where='' sep='' p
	local -a reasons=("${cairn_reasons[@]}")
	(($# > 1)) && reasons=("$2")
	now=$(date +%s.%N)
	d=$(($(cairn_ns "$now") - $(cairn_ns "${cairn_t0%% *}")))
	dur=$(printf '%d.%03d' $((d / 1000000000)) $((d % 1000000000 / 1000000)))
	case $cairn_target in
	kube) where=$cairn_kube_ctx ;;
	local) ;;
	*) ((n)) && where=${cairn_hosts[*]} ;;
	esac
	{
		printf '{"id":%s,"runbook":%s,"path":%s,"block":%s' "$(cairn_jstr "site-$cairn_run_id-$cairn_n")" "$(cairn_jstr "$cairn_runbook")" "$(cairn_jstr "$cairn_source")" "$(cairn_jstr "$cairn_id")"
		[[ -n $cairn_step ]] && printf ',"step":%s' "$(cairn_jstr "$cairn_step")"
		printf ',"hash":%s,"target":%s' "$(cairn_jstr "$cairn_hash")" "$(cairn_jstr "$cairn_target")"
		[[ -n $where ]] && printf ',"where":%s' "$(cairn_jstr "$(cairn_mask_str "$where")")"
		printf ',"status":%s,"reasons":[' "$(cairn_jstr "$status")"
		for p in "${reasons[@]}"; do
			printf '%s%s' "$sep" "$(cairn_jstr "$(cairn_mask_str "$p")")"
			sep=,
		done
		printf '],"hosts":['
		sep=''
		for i in "${!cairn_hosts[@]}"; do
			printf '%s{"host":%s,"exit":%d' "$sep" "$(cairn_jstr "${cairn_hosts[i]}")" "${cairn_exit[i]:--1}"
			[[ -n ${cairn_err[i]:-} ]] && printf ',"error":%s' "$(cairn_jstr "$(cairn_mask_str "${cairn_err[i]}")")"
			# Per-host times are not measured here; the block's is.
			printf ',"duration":0'
			((n > 1)) && printf ',"output":%s' "$(cairn_masked_tail "$(cairn_out "$i")" | cairn_jtext)"
			printf '}'
			sep=,
		done
		printf '],"start":%s,"duration":%s,"params":{' "$(cairn_jstr "${cairn_t0#* }")" "$dur"
		sep=''
		for p in "${cairn_param_names[@]}"; do
			[[ -v cairn_val[$p] ]] || continue
			if [[ ${cairn_psecret[$p]:-0} == 1 ]]; then
				printf '%s%s:%s' "$sep" "$(cairn_jstr "$p")" "$(cairn_jstr "$cairn_mask_text")"
			else
				printf '%s%s:%s' "$sep" "$(cairn_jstr "$p")" "$(cairn_jstr "$(cairn_mask_str "${cairn_val[$p]}")")"
			fi
			sep=,
		done
		printf '},"output":'
		# One host's output as it is; several, each under its name (as
		# the journal's record has them).
		for i in "${!cairn_hosts[@]}"; do
			((n > 1)) && printf '── %s ──\n' "${cairn_hosts[i]}"
			cairn_masked_tail "$(cairn_out "$i")"
		done | cairn_jtext
		((cairn_attempts)) && printf ',"attempts":%d' "$cairn_attempts"
		printf ',"site":{"run":%s,"by":%s,"script":%s,"bundle":%s,"source":%s,"version":%s}}\n' \
			"$(cairn_jstr "$cairn_run_id")" "$(cairn_jstr "$cairn_by")" "$(cairn_jstr "$cairn_self")" "$(cairn_jstr "$cairn_bundle")" \
			"$(cairn_jstr "$cairn_source_hash")" "$(cairn_jstr "$cairn_version")"
	} >"$cairn_tmp/result.json"
	cairn_busy=0
	# One write of the whole line: a record is either all there or not at all.
	(umask 077 && cat -- "$cairn_tmp/result.json" >>"$cairn_results") || cairn_warn "cannot write the results file $cairn_results"
}

# cairn_result_open STATUS REASON: the block under way, if one is and has
# no result yet, ends with STATUS (a script stopping mid-block).
cairn_result_open() {
	((cairn_busy)) || return 0
	cairn_result "$1" "$2"
}

# cairn_sign_results: at the end, the results signed with ssh-keygen -Y sign
# (namespace cairn-results) into RESULTS.sig, written aside and renamed.
cairn_sign_results() {
	[[ -n $cairn_sign && -n $cairn_results && -s $cairn_results ]] || return 0
	((cairn_dry || cairn_list)) && return 0
	if ssh-keygen -q -Y sign -f "$cairn_sign" -n cairn-results <"$cairn_results" >"$cairn_results.sig.part"; then
		mv -f -- "$cairn_results.sig.part" "$cairn_results.sig"
		printf 'results: %s (signed: %s.sig)\n' "$cairn_results" "$cairn_results" >&2
	else
		rm -f -- "$cairn_results.sig.part"
		cairn_warn "could not sign $cairn_results with $cairn_sign; the results are there, unsigned"
	fi
}

# --- kube ----------------------------------------------------------------------

cairn_kctl() {
	local -a f=()
	[[ -n $cairn_kubeconfig ]] && f+=(--kubeconfig "$cairn_kubeconfig")
	[[ -n $cairn_kube_ctx ]] && f+=(--context "$cairn_kube_ctx")
	kubectl "${f[@]}" "$@"
}

# cairn_kube_init: choose and check the kube context (the runbook's
# kube.contexts, as globs) and pin it; kube shell blocks get a kubeconfig
# that holds only that context.
cairn_kube_init() {
	((cairn_kube_ready)) && return 0
	if ((cairn_dry)); then
		cairn_kube_ctx=${cairn_context:-${CAIRN_KUBE_CONTEXT:-}}
		return 0
	fi
	command -v kubectl >/dev/null || cairn_die "kube blocks need kubectl on PATH"
	local ctx=${cairn_context:-${CAIRN_KUBE_CONTEXT:-}} p ok=0
	if [[ -z $ctx ]]; then
		ctx=$(cairn_kctl config current-context 2>/dev/null) || cairn_die "no kube context: pass --context NAME (or set CAIRN_KUBE_CONTEXT)"
	fi
	if ((${#cairn_kube_contexts[@]} == 0)); then
		ok=1
	fi
	for p in "${cairn_kube_contexts[@]}"; do
		# shellcheck disable=SC2053 # p is a glob, as in the runbook's kube.contexts
		if [[ $ctx == "$p" || $ctx == $p ]]; then
			ok=1
		fi
	done
	if ((!ok)); then
		cairn_die "kube context \"$ctx\" is not one of the runbook's kube.contexts [${cairn_kube_contexts[*]}]; pass --context NAME"
	fi
	cairn_kube_ctx=$ctx
	cairn_kube_pinned="$cairn_tmp/kubeconfig"
	(umask 077 && cairn_kctl config view --minify --flatten --context "$ctx" >"$cairn_kube_pinned") ||
		cairn_die "cannot pin kube context \"$ctx\""
	cairn_kube_ready=1
}

# cairn_kube_apply MANIFEST: server-side apply; a kind whose CRD the same
# manifest defines is retried until it is served (up to 30s).
cairn_kube_apply() {
	local out rc n=0
	while :; do
		out=$(printf '%s\n' "$1" | cairn_kctl apply --server-side --field-manager=cairn --force-conflicts -f - 2>&1)
		rc=$?
		if ((rc != 0 && n < 30)) && [[ $out == *'ensure CRDs are installed first'* || $out == *'no matches for kind'* || $out == *'the server could not find the requested resource'* ]]; then
			n=$((n + 1))
			sleep 1
			continue
		fi
		printf '%s\n' "$out"
		return "$rc"
	done
}

# cairn_kube_wait SECS ARGS...: kubectl wait ARGS until SECS pass, waiting
# for objects that do not exist yet (kubectl wait alone fails at once).
cairn_kube_wait() {
	local secs=$1 out rc left deadline
	shift
	deadline=$((SECONDS + secs))
	while :; do
		left=$((deadline - SECONDS))
		((left < 1)) && left=1
		out=$(cairn_kctl "$@" --timeout="${left}s" 2>&1)
		rc=$?
		if ((rc != 0 && SECONDS < deadline)) && [[ $out == *NotFound* || $out == *'not found'* || $out == *'no matching resources'* ]]; then
			sleep 1
			continue
		fi
		printf '%s\n' "$out"
		return "$rc"
	done
}

# cairn_kube_values COLUMN: "NAME<TAB>VALUE" for every object of the block's
# selection (cairn_sel, with cairn_sel_in on standard input), VALUE the
# custom-columns expression COLUMN.
cairn_kube_values() {
	{
		if [[ -n $cairn_sel_in ]]; then
			printf '%s\n' "$cairn_sel_in" | cairn_kctl get "${cairn_sel[@]}" -o "custom-columns=O:.metadata.name,V:$1" --no-headers
		else
			cairn_kctl get "${cairn_sel[@]}" -o "custom-columns=O:.metadata.name,V:$1" --no-headers </dev/null
		fi
	} 2>/dev/null | awk '{ n = $1; $1 = ""; sub(/^ +/, ""); if ($0 == "<none>") $0 = ""; print n "\t" $0 }'
}

# --- ssh ------------------------------------------------------------------------

# cairn_ssh_target SPEC: splits [user@]host[:port] into cairn_sh (host for
# ssh), cairn_sp (port) and cairn_su (user@ or "").
cairn_ssh_target() {
	local spec=$1 h
	cairn_su=''
	cairn_sp=''
	if [[ $spec == *@* ]]; then
		cairn_su="${spec%@*}@"
		h=${spec##*@}
	else
		h=$spec
	fi
	if [[ $h == \[*\]:* ]]; then
		cairn_sp=${h##*:}
		h=${h#\[}
		h=${h%%\]*}
	elif [[ $h == \[*\] ]]; then
		h=${h#\[}
		h=${h%\]}
	elif [[ $h != *:*:* && $h == *:* ]]; then
		cairn_sp=${h##*:}
		h=${h%:*}
	fi
	cairn_sh=$h
}

# cairn_ssh_argv SPEC: cairn_argv=(ssh OPTIONS [user@]host). Host keys are
# checked as ssh always does (known_hosts; StrictHostKeyChecking untouched).
cairn_ssh_argv() {
	cairn_ssh_target "$1"
	cairn_argv=(ssh)
	[[ -n $cairn_ssh_config ]] && cairn_argv+=(-F "$cairn_ssh_config")
	cairn_argv+=(-o BatchMode=yes -o ConnectTimeout=10 -T)
	[[ -n $cairn_sp ]] && cairn_argv+=(-p "$cairn_sp")
	cairn_argv+=("$cairn_su$cairn_sh")
}

# cairn_scp_argv SPEC PATH: cairn_argv=(scp OPTIONS) and cairn_remote, the
# [user@]host:path operand (IPv6 in brackets).
cairn_scp_argv() {
	cairn_ssh_target "$1"
	cairn_argv=(scp -q -p)
	[[ -n $cairn_ssh_config ]] && cairn_argv+=(-F "$cairn_ssh_config")
	cairn_argv+=(-o BatchMode=yes -o ConnectTimeout=10)
	[[ -n $cairn_sp ]] && cairn_argv+=(-P "$cairn_sp")
	if [[ $cairn_sh == *:* ]]; then
		cairn_remote="${cairn_su}[${cairn_sh}]:$2"
	else
		cairn_remote="$cairn_su$cairn_sh:$2"
	fi
}

# cairn_remote_preamble CAPTURES...: exports for a remote bash, each value
# quoted with printf %q (the remote shell is bash).
cairn_remote_preamble() {
	local k
	for k in "${cairn_param_names[@]}"; do
		[[ -v cairn_val[$k] ]] && printf 'export %s=%q\n' "$k" "${cairn_val[$k]}"
	done
	for k in "$@"; do
		[[ -v cairn_cap[$k] ]] && printf 'export %s=%q\n' "$k" "${cairn_cap[$k]}"
	done
	return 0
}

# cairn_ssh_script HOST SUDO SECS CAPTURES...: the block body ($cairn_body)
# on HOST with bash -euo pipefail, read from standard input after the
# exports of the values it may use; parameter values never enter a command
# line.
cairn_ssh_script() {
	local host=$1 sudo=$2 secs=$3 bash='bash --noprofile --norc -euo pipefail -s'
	shift 3
	[[ $sudo == 1 ]] && bash="sudo -n $bash"
	cairn_ssh_argv "$host"
	{
		cairn_remote_preamble "$@"
		[[ -n $cairn_session ]] && printf 'export CAIRN_SH_NONCE=%q CAIRN_SH_STATE=%q\n' "$cairn_sh_nonce" "${cairn_sh_state[$cairn_session|$host]:-}"
		printf 'export CAIRN_BLOCK=%q CAIRN_HOST=%q\n{\n%s\n}\n' "$cairn_id" "$host" "$cairn_run_body"
	} | timeout -k 5 "$secs" "${cairn_argv[@]}" "exec $bash 2>&1"
}

# cairn_pods NAMESPACE HOW WHAT: the pods a pod block runs in, into
# cairn_hosts: HOW is name (WHAT is the pod), selector (a label selector)
# or workload (KIND/NAME: its matchLabels). Pods being deleted are left
# out; none at all is a reason, and false.
cairn_pods() {
	local ns=$1 how=$2 what=$3 sel
	local -a nsarg=()
	[[ -n $ns ]] && nsarg=(-n "$ns")
	cairn_hosts=()
	case $how in
	name)
		cairn_hosts=("$what")
		return 0
		;;
	workload)
		sel=$(cairn_kctl "${nsarg[@]}" get "$what" -o go-template='{{range $k, $v := .spec.selector.matchLabels}}{{$k}}={{$v}},{{end}}' 2>&1) || {
			cairn_reasons+=("workload $what: $(cairn_oneline "$sel")")
			return 1
		}
		sel=${sel%,}
		if [[ -z $sel ]]; then
			cairn_reasons+=("workload $what has no matchLabels to find its pods by")
			return 1
		fi
		;;
	*) sel=$what ;;
	esac
	cairn_names "pods of $sel" "${nsarg[@]}" get pods -l "$sel" -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' || return 1
	if ((${#cairn_hosts[@]} == 0)); then
		cairn_reasons+=("no pods: pods of $what${ns:+ in namespace $ns} match none")
		return 1
	fi
}

# cairn_names WHAT ARGS...: cairn_hosts from kubectl ARGS (a name a line);
# a failure is a reason, and false.
cairn_names() {
	local what=$1 out
	shift
	out=$(cairn_kctl "$@" 2>&1) || {
		cairn_reasons+=("list $what: $(cairn_oneline "$out")")
		return 1
	}
	mapfile -t cairn_hosts <<<"$out"
	[[ -z ${cairn_hosts[0]:-} ]] && cairn_hosts=()
	return 0
}

# cairn_nodes HOW WHAT: the nodes a node block runs on, into cairn_hosts:
# HOW is names (space or comma separated) or selector.
cairn_nodes() {
	local how=$1 what=$2
	cairn_hosts=()
	if [[ $how == names ]]; then
		read -ra cairn_hosts <<<"${what//,/ }"
	else
		cairn_names "nodes of $what" get nodes -l "$what" -o go-template='{{range .items}}{{.metadata.name}}{{"\n"}}{{end}}' || return 1
	fi
	if ((${#cairn_hosts[@]} == 0)); then
		cairn_reasons+=("no nodes: $what matches none")
		return 1
	fi
}

# cairn_kexec_argv NAMESPACE: kubectl with the pinned context, for exec.
cairn_kexec_argv() {
	cairn_argv=(kubectl)
	[[ -n $cairn_kubeconfig ]] && cairn_argv+=(--kubeconfig "$cairn_kubeconfig")
	[[ -n $cairn_kube_ctx ]] && cairn_argv+=(--context "$cairn_kube_ctx")
	[[ -n $1 ]] && cairn_argv+=(-n "$1")
	return 0
}

# cairn_remote_env HOST CAPTURES...: cairn_renv, the values a pod or
# node block may use as NAME VALUE argument pairs for the shell that
# exports them (each value one argument: values never become text), and
# CAIRN_BLOCK and CAIRN_HOST.
cairn_remote_env() {
	local k
	cairn_renv=()
	for k in "${cairn_param_names[@]}"; do
		[[ -v cairn_val[$k] ]] && cairn_renv+=("$k" "${cairn_val[$k]}")
	done
	for k in "${@:2}"; do
		[[ -v cairn_cap[$k] ]] && cairn_renv+=("$k" "${cairn_cap[$k]}")
	done
	cairn_renv+=(CAIRN_BLOCK "$cairn_id" CAIRN_HOST "$1")
	[[ -n $cairn_session ]] && cairn_renv+=(CAIRN_SH_NONCE "$cairn_sh_nonce" CAIRN_SH_STATE "${cairn_sh_state[$cairn_session|$1]:-}")
	return 0
}

# The shell a pod or node block's body runs under, the values its NAME
# VALUE arguments and the body its last (runbook/nodepod.Shell): kubectl exec -i loses a piped script
# now and then, so nothing goes through standard input.
cairn_pod_shell='@SHELL@'

# cairn_pod_script POD NAMESPACE CONTAINER SECS CAPTURES...: the block body
# in POD with kubectl exec, the values in its environment.
cairn_pod_script() {
	local pod=$1 ns=$2 c=$3 secs=$4
	shift 4
	cairn_remote_env "$pod" "$@"
	cairn_kexec_argv "$ns"
	cairn_argv+=(exec "$pod")
	[[ -n $c ]] && cairn_argv+=(-c "$c")
	timeout -k 5 "$secs" "${cairn_argv[@]}" -- /bin/sh -c "$cairn_pod_shell" cairn "${cairn_renv[@]}" "$cairn_run_body" </dev/null
}

# cairn_node_up NODE NAMESPACE IMAGE: the node pod of $cairn_node_pod (the
# executor's: runbook/nodepod) on NODE, made and waited for; its name in
# cairn_npod, kubectl for it in cairn_argv. cairn_node_down deletes it.
cairn_node_up() {
	local node=$1 ns=$2 image=$3 j
	cairn_npod=''
	case $node/$image in
	@NAMECHARS@)
		printf 'not a node name or an image: %s %s\n' "$node" "$image"
		return 1
		;;
	esac
	j=${cairn_node_pod//@NODESLOT@/$node}
	j=${j//@IMAGESLOT@/$image}
	cairn_kexec_argv "$ns"
	cairn_npod=$(printf '%s' "$j" | "${cairn_argv[@]}" create -f - -o name 2>&1) || {
		printf 'make the node pod: %s\n' "$cairn_npod"
		cairn_npod=''
		return 1
	}
	printf 'pod %s (image %s)\n' "${cairn_npod#pod/}" "$image"
	"${cairn_argv[@]}" wait --for=condition=Ready "$cairn_npod" --timeout=120s >/dev/null && return 0
	printf 'the node pod %s did not start within 120s\n' "$cairn_npod"
	return 1
}

cairn_node_down() {
	[[ -n $cairn_npod ]] && "${cairn_argv[@]}" delete "$cairn_npod" --grace-period=@GRACE@ --wait=false >/dev/null 2>&1
	cairn_npod=''
	return 0
}

# cairn_node_sh SECS SCRIPT ARGS...: sh -c SCRIPT cairn ARGS as root in the
# namespaces of the node of $cairn_npod.
cairn_node_sh() {
	local secs=$1
	shift
	timeout -k 5 "$secs" "${cairn_argv[@]}" exec -i "$cairn_npod" -- @NSENTER@ /bin/sh -c "$@"
}

# cairn_node_script NODE NAMESPACE IMAGE SECS CAPTURES...: the block body
# on NODE as root, in the namespaces of its PID 1, through its node pod,
# deleted whatever happened.
cairn_node_script() {
	local node=$1 ns=$2 image=$3 secs=$4 rc
	shift 4
	if cairn_node_up "$node" "$ns" "$image"; then
		cairn_remote_env "$node" "$@"
		timeout -k 5 "$secs" "${cairn_argv[@]}" exec "$cairn_npod" -- @NSENTER@ /bin/sh -c "$cairn_pod_shell" cairn "${cairn_renv[@]}" "$cairn_run_body" </dev/null
		rc=$?
	else
		rc=1
	fi
	cairn_node_down
	return "$rc"
}

# The shell scripts of a node copy (runbook/nodepod: Put, Stat, Cat).
cairn_node_put='@PUT@'
cairn_node_stat='@STAT@'
cairn_node_cat='@CAT@'

# cairn_node_stage FROM NAMESPACE IMAGE SECS: every SOURCE of a node copy
# block's lines read once, as the executor does: this machine's files
# where they are (FROM empty), a node's into $cairn_tmp through a node pod
# of its own; path, mode and size in cairn_nsrc, cairn_nmode, cairn_nsize,
# and its name in messages in cairn_nwhere. A source that cannot be read is
# a reason, and false.
cairn_node_stage() {
	local from=$1 ns=$2 image=$3 secs=$4 line src i=0 st out
	local -a parts
	cairn_nsrc=() cairn_nmode=() cairn_nsize=() cairn_nwhere=() cairn_ndst=() cairn_nbase=()
	if [[ -n $from ]]; then
		# Not in $(...): cairn_npod and cairn_argv are this shell's.
		cairn_node_up "$from" "$ns" "$image" >"$cairn_tmp/stage.out" 2>&1 || {
			cairn_reasons+=("copy source $from: $(cairn_oneline "$(<"$cairn_tmp/stage.out")")")
			cairn_node_down
			return 1
		}
	fi
	while IFS= read -r line; do
		read -ra parts <<<"$line"
		((${#parts[@]} > 0)) || continue
		src=$(cairn_sub 0 "$cairn_refs" "${parts[0]}")
		cairn_ndst[i]=${parts[1]:-${parts[0]}}
		cairn_nbase[i]=${src##*/}
		if [[ -z $from ]]; then
			cairn_nwhere[i]=$src
			src=${src/#\~/$HOME}
			if [[ -d $src || ! -f $src ]]; then
				[[ -d $src ]] && out='the source is a directory; list each file on its own line' || out="no such file: $src"
				cairn_reasons+=("copy source ${cairn_nwhere[i]}: $out")
				return 1
			fi
			cairn_nsrc[i]=$src
			cairn_nmode[i]=$(stat -L -c %a -- "$src")
			cairn_nsize[i]=$(stat -L -c %s -- "$src")
		else
			cairn_nwhere[i]=$from:$src
			cairn_nsrc[i]=$cairn_tmp/nstage.$i
			if ! st=$(cairn_node_sh "$secs" "$cairn_node_stat" cairn "$src" </dev/null 2>&1) ||
				! cairn_node_sh "$secs" "$cairn_node_cat" cairn "$src" </dev/null >"${cairn_nsrc[i]}"; then
				cairn_reasons+=("copy source ${cairn_nwhere[i]}: $(cairn_oneline "$st")")
				cairn_node_down
				return 1
			fi
			cairn_nmode[i]=${st%% *} cairn_nsize[i]=${st##* }
			if [[ $(stat -c %s -- "${cairn_nsrc[i]}") != "${cairn_nsize[i]}" ]]; then
				cairn_reasons+=("copy source ${cairn_nwhere[i]}: read $(stat -c %s -- "${cairn_nsrc[i]}") bytes of ${cairn_nsize[i]} (the file changed, or the stream was cut short); run the block again")
				cairn_node_down
				return 1
			fi
		fi
		i=$((i + 1))
	done <<<"$cairn_body"
	cairn_node_down
	cairn_nfrom=$from
	return 0
}

# cairn_node_copy NODE NAMESPACE IMAGE SECS: the staged files to NODE as
# root through its node pod; each lands whole (nodepod.Put) and the bytes
# it received are checked against the source's.
cairn_node_copy() {
	local node=$1 ns=$2 image=$3 secs=$4 i dst got to n rc=0
	cairn_node_up "$node" "$ns" "$image" || {
		cairn_node_down
		return 1
	}
	for i in "${!cairn_nsrc[@]}"; do
		dst=$(CAIRN_HOST=$node cairn_sub 0 "$cairn_refs CAIRN_HOST" "${cairn_ndst[i]}")
		if [[ -n $cairn_nfrom && $cairn_nfrom == "$node" && ${cairn_nwhere[i]#*:} == "$dst" ]]; then
			printf 'skipped %s: source and destination are the same file\n' "${cairn_nwhere[i]}"
			continue
		fi
		if ! got=$(cairn_node_sh "$secs" "$cairn_node_put" cairn "$dst" "$(printf '%04d' "${cairn_nmode[i]}")" "${cairn_nbase[i]}" "$RANDOM$RANDOM" <"${cairn_nsrc[i]}" 2>&1); then
			printf 'copy failed: %s: copy %s to %s: %s\n' "$node" "${cairn_nwhere[i]}" "$dst" "$(cairn_oneline "$got")"
			rc=1
			break
		fi
		to=${got% *} n=${got##* }
		if [[ $n != "${cairn_nsize[i]}" ]]; then
			printf 'copy failed: %s: copy %s to %s: %s received %s bytes of %s (the stream was cut short); the file there is unchanged; run the block again\n' "$node" "${cairn_nwhere[i]}" "$dst" "$to" "$n" "${cairn_nsize[i]}"
			rc=1
			break
		fi
		printf 'copied %s -> %s:%s (%d bytes, mode %04d)\n' "${cairn_nwhere[i]}" "$node" "$to" "$n" "${cairn_nmode[i]}"
	done
	cairn_node_down
	return "$rc"
}

# cairn_copy HOST SUDO SECS: every "SOURCE [DEST]" line of $cairn_body from
# $cairn_from (a host, or this machine) to HOST: fetched to this machine
# first, then sent (scp, or ssh with sudo -n for sudo blocks).
cairn_copy() {
	local host=$1 sudo=$2 secs=$3 line src dst stage n=0 mode qs qd
	local -a parts
	while IFS= read -r line; do
		read -ra parts <<<"$line"
		((${#parts[@]} > 0)) || continue
		src=$(CAIRN_HOST=$host cairn_sub 0 "$cairn_refs CAIRN_HOST" "${parts[0]}")
		dst=$(CAIRN_HOST=$host cairn_sub 0 "$cairn_refs CAIRN_HOST" "${parts[1]:-${parts[0]}}")
		if [[ -n $cairn_from && $cairn_from == "$host" && $src == "$dst" ]]; then
			printf 'skipped %s:%s: source and destination are the same file\n' "$cairn_from" "$src"
			continue
		fi
		n=$((n + 1))
		stage="$cairn_tmp/stage.$BASHPID.$n"
		qs=$(printf '%q' "$src")
		qd=$(printf '%q' "$dst")
		if [[ -z $cairn_from ]]; then
			cp -p -- "${src/#\~/$HOME}" "$stage" || return 1
		elif [[ $sudo == 1 ]]; then
			cairn_ssh_argv "$cairn_from"
			mode=$(timeout -k 5 "$secs" "${cairn_argv[@]}" "sudo -n stat -L -c %a -- $qs" </dev/null) || return 1
			timeout -k 5 "$secs" "${cairn_argv[@]}" "sudo -n cat -- $qs" </dev/null >"$stage" || return 1
			chmod "$mode" "$stage" || return 1
		else
			cairn_scp_argv "$cairn_from" "$src"
			timeout -k 5 "$secs" "${cairn_argv[@]}" "$cairn_remote" "$stage" </dev/null || return 1
		fi
		mode=$(stat -c %a -- "$stage")
		cairn_ssh_argv "$host"
		if [[ $sudo == 1 ]]; then
			timeout -k 5 "$secs" "${cairn_argv[@]}" "sudo -n mkdir -p -- \"\$(dirname -- $qd)\" && sudo -n tee -- $qd >/dev/null && sudo -n chmod $mode -- $qd" <"$stage" || return 1
		else
			timeout -k 5 "$secs" "${cairn_argv[@]}" "mkdir -p -- \"\$(dirname -- $qd)\"" </dev/null || return 1
			cairn_scp_argv "$host" "$dst"
			timeout -k 5 "$secs" "${cairn_argv[@]}" "$stage" "$cairn_remote" </dev/null || return 1
		fi
		printf 'copied %s -> %s:%s (%d bytes, mode %04d)\n' "${cairn_from:+$cairn_from:}$src" "$host" "$dst" "$(stat -c %s -- "$stage")" "$mode"
		rm -f -- "$stage"
	done <<<"$cairn_body"
}

# cairn_group PARAM PARALLEL EXPECTED-EXIT FUNC ARGS...: FUNC HOST ARGS on
# every host of PARAM, PARALLEL at a time; no host starts after one failed.
cairn_group() {
	local param=$1
	shift
	cairn_split_hosts "${cairn_val[$param]:-}"
	cairn_canon_hosts
	cairn_hosts=("${cairn_split[@]}")
	if ((${#cairn_hosts[@]} == 0)); then
		cairn_reasons+=("no hosts to run on (parameter $param is empty)")
		return 0
	fi
	cairn_fan "$@"
}

# cairn_fan PARALLEL EXPECTED-EXIT FUNC ARGS...: FUNC NAME ARGS for every
# name of cairn_hosts (hosts, pods, nodes), PARALLEL at a time; none starts
# after one failed.
cairn_fan() {
	local par=$1 want=$2 fn=$3 i running=0 failed=0 rc
	shift 3
	((par < 1)) && par=1
	for i in "${!cairn_hosts[@]}"; do
		rm -f -- "$cairn_tmp/exit.$i"
		if ((failed)); then
			cairn_exit[i]=-1
			cairn_err[i]='skipped: an earlier host failed'
			: >"$cairn_tmp/out.$i"
			continue
		fi
		if ((par == 1)); then
			((${#cairn_hosts[@]} > 1)) && printf '  ── %s ──\n' "${cairn_hosts[i]}"
			"$fn" "${cairn_hosts[i]}" "$@" </dev/null 2>&1 | tee "$cairn_tmp/out.$i" | cairn_show
			rc=${PIPESTATUS[0]}
			cairn_exit[i]=$rc
			cairn_host_failed "$i" "$want" && failed=1
			continue
		fi
		# The status file appears whole (written aside, then renamed): the
		# loop below reads every host's file while others are still writing.
		(
			"$fn" "${cairn_hosts[i]}" "$@" </dev/null >"$cairn_tmp/out.$i" 2>&1
			echo $? >"$cairn_tmp/exit.$i.part"
			mv -f -- "$cairn_tmp/exit.$i.part" "$cairn_tmp/exit.$i"
		) &
		running=$((running + 1))
		if ((running >= par)); then
			wait -n
			running=$((running - 1))
			local j
			for j in "${!cairn_hosts[@]}"; do
				if [[ -f $cairn_tmp/exit.$j ]]; then
					cairn_exit[j]=$(<"$cairn_tmp/exit.$j")
					cairn_host_failed "$j" "$want" && failed=1
				fi
			done
		fi
	done
	wait
	if ((par > 1)); then
		for i in "${!cairn_hosts[@]}"; do
			[[ -f $cairn_tmp/exit.$i ]] && cairn_exit[i]=$(<"$cairn_tmp/exit.$i")
			printf '  ── %s ──\n' "${cairn_hosts[i]}"
			cairn_show <"$cairn_tmp/out.$i"
		done
	fi
	for i in "${!cairn_hosts[@]}"; do
		if [[ ${cairn_exit[i]} == 124 && -z ${cairn_err[i]:-} ]]; then
			cairn_err[i]="timed out after $cairn_timeout"
		fi
	done
	return 0
}

# cairn_session_take: each host's session state, out of its output (the
# line marked with this run's nonce, as the engine takes it out), kept for
# the session's next block on that host.
cairn_session_take() {
	local i f line key
	for i in "${!cairn_hosts[@]}"; do
		f=$(cairn_out "$i")
		[[ -f $f ]] || continue
		line=$(LC_ALL=C grep -a -o $'\036'"cairn-session $cairn_sh_nonce [A-Za-z0-9+/=]*" "$f" | tail -n 1) || true
		key="$cairn_session|${cairn_hosts[i]}"
		[[ -n $line ]] && cairn_sh_state[$key]=${line##* }
		LC_ALL=C awk '{ k = index($0, "\036cairn-session "); if (k == 0) { print; next } if (k > 1) printf "%s", substr($0, 1, k - 1) }' "$f" >"$f.s" && mv -f -- "$f.s" "$f"
	done
	return 0
}

cairn_host_failed() { # INDEX EXPECTED
	[[ ${cairn_exit[$1]} == 124 ]] && return 0
	[[ $2 == any ]] && return 1
	[[ ${cairn_exit[$1]} != "$2" ]]
}

# cairn_single LABEL FUNC ARGS...: FUNC once (local, kube), output shown live.
cairn_single() {
	local label=$1 fn=$2
	shift 2
	cairn_hosts=("$label")
	"$fn" "$@" </dev/null 2>&1 | tee "$cairn_tmp/out.0" | cairn_show
	cairn_exit[0]=${PIPESTATUS[0]}
	if [[ ${cairn_exit[0]} == 124 && $cairn_timeout_kills == 1 ]]; then
		cairn_err[0]="timed out after $cairn_timeout"
	fi
	return 0
}

cairn_local() { # SECS [KUBECONFIG]
	local -a env=(CAIRN_BLOCK="$cairn_id")
	local k
	[[ -n ${2:-} ]] && env+=(KUBECONFIG="$2" CAIRN_KUBE_CONTEXT="$cairn_kube_ctx")
	for k in $cairn_refs; do
		[[ -v cairn_cap[$k] ]] && env+=("$k=${cairn_cap[$k]}")
	done
	[[ -n $cairn_session ]] && env+=(CAIRN_SH_NONCE="$cairn_sh_nonce" CAIRN_SH_STATE="${cairn_sh_state[$cairn_session|${cairn_hosts[0]}]:-}")
	env "${env[@]}" timeout -k 5 "$1" bash --noprofile --norc -e -u -o pipefail -c "$cairn_run_body"
}

cairn_show() {
	if ((cairn_live)); then
		cairn_mask '  │ '
	else
		cat >/dev/null
	fi
}

# --- expectations ---------------------------------------------------------------

cairn_out() { printf '%s/out.%s' "$cairn_tmp" "$1"; }

cairn_where() {
	if ((${#cairn_hosts[@]} > 1)) || [[ $cairn_target == ssh || $cairn_target == pod || $cairn_target == node ]]; then
		printf '%s: ' "${cairn_hosts[$1]}"
	fi
}

cairn_fail_check() { cairn_reasons+=("$(cairn_where "$1")$2"); }

cairn_expect_exit() { # I WANT
	[[ ${cairn_exit[$1]} == "$2" ]] || cairn_fail_check "$1" "expected exit status $2, got ${cairn_exit[$1]}"
}

cairn_expect_kube_ok() { # I: a kubectl failure is the reason; other checks are moot
	if [[ ${cairn_exit[$1]} != 0 ]]; then
		cairn_fail_check "$1" "kubectl failed (exit status ${cairn_exit[$1]}): $(grep -v '^[[:space:]]*$' "$(cairn_out "$1")" | tail -n 1)"
		return 1
	fi
}

cairn_expect_contains() {
	grep -aqF -e "$2" "$(cairn_out "$1")" || cairn_fail_check "$1" "output does not contain \"$2\""
}

cairn_expect_not_contains() {
	! grep -aqF -e "$2" "$(cairn_out "$1")" || cairn_fail_check "$1" "output contains \"$2\""
}

cairn_expect_match() { # I PCRE SHOWN
	LC_ALL=C grep -aqzP -e "$2" "$(cairn_out "$1")" || cairn_fail_check "$1" "output does not match /$3/"
}

# The similar algorithm of the executor: template lines (compiled to EREs
# when the script was exported) must match output lines in order, blank
# lines ignored; an "A" line stands for "..." (any number of lines).
cairn_awk_similar='
BEGIN { np = split(ENVIRON["CAIRN_SIM_PAT"], pat, "\n"); split(ENVIRON["CAIRN_SIM_TXT"], txt, "\n") }
$0 ~ /[^ \t\r\n\f\v]/ { lines[++nl] = $0 }
function mf(p, l,    i) {
	if (p > np) return 1
	if (pat[p] == "A") {
		for (i = l; i <= nl + 1; i++) if (mf(p + 1, i)) return 1
		return 0
	}
	if (l > nl) return 0
	if (lines[l] !~ substr(pat[p], 2)) return 0
	return mf(p + 1, l + 1)
}
END {
	for (s = 1; s <= nl + 1; s++) if (mf(1, s)) exit 0
	for (p = 1; p <= np; p++) {
		if (pat[p] == "A") continue
		re = substr(pat[p], 2); found = 0
		for (l = 1; l <= nl; l++) if (lines[l] ~ re) { found = 1; break }
		if (!found) { printf "no output line looks like \"%s\"", txt[p]; exit 1 }
	}
	printf "the expected lines appear, but not in this order"
	exit 1
}'

cairn_expect_similar() { # I LINE PATTERNS TEXTS
	local why
	why=$(CAIRN_SIM_PAT=$3 CAIRN_SIM_TXT=$4 LC_ALL=C awk "$cairn_awk_similar" "$(cairn_out "$1")") ||
		cairn_fail_check "$1" "output is not similar to the expected output (line $2 of it): $why"
}

cairn_expect_count() { # I N
	local n
	n=$(cairn_kube_values .metadata.name | grep -c .)
	[[ $n == "$2" ]] || cairn_fail_check "$1" "expected $2 objects, found $n"
}

# cairn_expect_lease I PCRE SHOWN: expect.lease. The selected Lease is held
# by a holder matching PCRE, and that holder renews it while the script
# watches (at most leaseDurationSeconds + 1 s): a holder that exited leaves
# its name in the Lease, and only a renewal tells it from a live one.
cairn_expect_lease() {
	local i=$1 re=$2 shown=$3 fmt='jsonpath={.spec.holderIdentity}{"\t"}{.spec.renewTime}{"\t"}{.spec.leaseDurationSeconds}'
	local line holder renew dur h2 r2 end t0
	if ! line=$(cairn_kctl get "${cairn_sel[@]}" -o "$fmt" </dev/null 2>&1); then
		cairn_fail_check "$i" "cannot read the lease: $(cairn_oneline "$line")"
		return 0
	fi
	IFS=$'\t' read -r holder renew dur <<<"$line"
	[[ $dur =~ ^[0-9]+$ ]] || dur=15
	if [[ -z $holder ]]; then
		cairn_fail_check "$i" "the lease has no holder"
		return 0
	fi
	if ! printf '%s\n' "$holder" | LC_ALL=C grep -qP -- "$re"; then
		cairn_fail_check "$i" "the lease is held by \"$holder\", want a holder matching $shown"
		return 0
	fi
	end=$((SECONDS + dur + 1))
	while ((SECONDS < end)); do
		sleep 0.25
		line=$(cairn_kctl get "${cairn_sel[@]}" -o "$fmt" </dev/null 2>/dev/null) || continue
		IFS=$'\t' read -r h2 r2 _ <<<"$line"
		if [[ $h2 != "$holder" || $r2 != "$renew" ]]; then
			cairn_say "  # lease held by $h2, renewed $renew -> $r2"
			return 0
		fi
	done
	t0=$(date -d "$renew" +%s 2>/dev/null) || t0=0
	if (($(date +%s) > t0 + dur)); then
		cairn_fail_check "$i" "holder \"$holder\" stopped renewing: last renewal $renew"
	else
		cairn_fail_check "$i" "holder \"$holder\" did not renew while watched (renewTime stayed $renew)"
	fi
}

# cairn_expect_jsonpath I COLUMN PATH OP VALUE: PATH (OP VALUE) on every
# object of the selection.
cairn_expect_jsonpath() {
	local i=$1 col=$2 path=$3 op=$4 want=$5 obj got bad=0 total=0 first=''
	while IFS=$'\t' read -r obj got; do
		[[ -n $obj ]] || continue
		total=$((total + 1))
		case $op in
		'') [[ -n $got ]] || { bad=$((bad + 1)) && first=${first:-"$obj has nothing"}; } ;;
		'=') [[ $got == "$want" ]] || { bad=$((bad + 1)) && first=${first:-"$obj has \"$got\""}; } ;;
		'!=') [[ $got != "$want" ]] || { bad=$((bad + 1)) && first=${first:-"$obj has \"$got\""}; } ;;
		esac
	done < <(cairn_kube_values "$col")
	if ((total == 0)); then
		cairn_fail_check "$i" "expected $path$op$want on every object; there are none"
	elif ((bad > 0)); then
		cairn_fail_check "$i" "expected $path$op$want on every object; $bad of $total do not: $first"
	fi
}

# --- captures --------------------------------------------------------------------

# cairn_capture_regex NAME SECRET PCRE SHOWN: the first group (made the
# whole match with \K and a lookahead when the script was exported).
cairn_capture_regex() {
	local name=$1 secret=$2 v
	if ! LC_ALL=C grep -aqzP -e "$3" "$(cairn_out 0)"; then
		cairn_reasons+=("capture $name: /$4/ did not match the output")
		return 0
	fi
	v=$(LC_ALL=C grep -aozP -e "$3" "$(cairn_out 0)" | head -z -n 1 | tr -d '\000')
	v=${v#"${v%%[![:space:]]*}"}
	v=${v%"${v##*[![:space:]]}"}
	cairn_set_capture "$name" "$secret" "$v"
}

cairn_capture_jsonpath() { # NAME SECRET COLUMN PATH
	local name=$1 secret=$2 v='' obj got
	while IFS=$'\t' read -r obj got; do
		[[ -n $got ]] && v="${v:+$v }$got"
	done < <(cairn_kube_values "$3")
	if [[ -z $v ]]; then
		cairn_reasons+=("capture $name: $4 found nothing")
		return 0
	fi
	cairn_set_capture "$name" "$secret" "$v"
}

cairn_set_capture() {
	cairn_cap[$1]=$3
	# A value that holds a secret becomes secret itself (as in the executor).
	if [[ $2 == 1 ]] || cairn_has_secret "$3"; then
		cairn_add_mask "$3"
		cairn_csecret[$1]=1
	fi
}

# cairn_learn_secrets PCRE...: secret captures are masked even in the output
# of the block that prints them (shown only after the run for that reason).
cairn_learn_secrets() {
	local re v
	for re in "$@"; do
		while IFS= read -r -d '' v; do
			cairn_add_mask "$v"
		done < <(LC_ALL=C grep -aozP -e "$re" "$(cairn_out 0)" 2>/dev/null)
	done
	return 0
}

# --- running a block -----------------------------------------------------------------

cairn_resume_hint() {
	local -a keep=()
	local i=0 a
	while ((i < ${#cairn_args[@]})); do
		a=${cairn_args[i]}
		case $a in
		--from | --step)
			i=$((i + 2))
			continue
			;;
		--from=* | --step=* | --dry-run | --list) ;;
		--param)
			local pkv=${cairn_args[i + 1]:-}
			[[ ${cairn_psecret[${pkv%%=*}]:-0} == 1 ]] || keep+=("$a" "$pkv")
			i=$((i + 2))
			continue
			;;
		*) keep+=("$a") ;;
		esac
		i=$((i + 1))
	done
	local q
	q=$(printf ' %q' "${keep[@]}" --from "$1")
	printf '%s%s' "$cairn_prog" "$q"
}

cairn_fail_now() { # BLOCK MESSAGE
	cairn_say "  ✗ $(cairn_mask_str "$2")"
	cairn_log_line "$cairn_step" "$1" - error "$2"
	cairn_result_open error "$2"
	printf 'stopped at %s (block "%s", step "%s"); after fixing, resume with:\n  %s\n' "$cairn_source" "$1" "$cairn_step" "$(cairn_resume_hint "$cairn_step")" >&2
	exit 1
}

# cairn_confirm BLOCK MESSAGE
cairn_confirm() {
	local ans
	((cairn_yes)) && return 0
	if ((cairn_dry)); then
		cairn_say "  (asks first: $2)"
		return 0
	fi
	printf '  %s. Run it? [y/N] ' "$2"
	if ! IFS= read -r ans && [[ -z $ans ]]; then
		printf '\n'
		if ((cairn_failed)); then
			# Clean-up after a failure: skip it, keep the failure's hint.
			cairn_say "  not run: it needs confirmation and standard input gave none (pass --yes)"
			return 1
		fi
		cairn_fail_now "$1" "block \"$1\" needs confirmation and standard input gave none; pass --yes"
	fi
	ans=${ans,,}
	ans=${ans//[[:space:]]/}
	[[ $ans == y || $ans == yes ]] || cairn_fail_now "$1" "block \"$1\" not confirmed; stopped"
}

# cairn_begin BLOCK TARGET BADGE HASH: announces a block; false when its
# condition is false (it is then skipped).
cairn_begin() {
	cairn_n=$((cairn_n + 1))
	cairn_id=$1
	cairn_target=$2
	cairn_hash=${4:-}
	((cairn_dry)) || cairn_t0=$(date -u '+%s.%N %Y-%m-%dT%H:%M:%S.%NZ')
	cairn_attempts=0
	cairn_busy=1
	cairn_hosts=()
	cairn_exit=()
	cairn_err=()
	cairn_reasons=()
	printf '[%d/%d] %s  %s\n' "$cairn_n" "$cairn_total" "$1" "$3"
}

cairn_skip() { # BLOCK COND
	cairn_say "  skipped: $2 is false"
	cairn_skipped=$((cairn_skipped + 1))
	cairn_log_line "$cairn_step" "$1" - skipped "$2"
	cairn_result skipped "$2 is false"
}

cairn_manual() { # BLOCK TEXT
	cairn_say "  manual step, do this by hand:"
	printf '%s\n' "$2" | cairn_mask '    '
	if ((cairn_dry)); then
		return 0
	fi
	if ((!cairn_yes)); then
		printf '  press Enter when done (Ctrl+C stops) '
		local ans
		if ! IFS= read -r ans; then
			printf '\n'
			cairn_fail_now "$1" "manual step \"$1\": no answer on standard input; pass --yes to go on"
		fi
	fi
	cairn_log_line "$cairn_step" "$1" - 'done' ''
	cairn_busy=0
}

# cairn_exec ATTEMPTS INTERVAL RUN VERIFY CAPTURE: runs the block (RUN),
# again until VERIFY finds nothing wrong or ATTEMPTS are used up, then
# CAPTURE; logs the result and stops the script on failure.
cairn_exec() {
	local attempts=$1 interval=$2 run=$3 verify=$4 capture=$5 attempt=1 i started status
	started=$SECONDS
	while :; do
		cairn_hosts=()
		cairn_exit=()
		cairn_err=()
		cairn_reasons=()
		cairn_attempts=$attempt
		cairn_run_body=$cairn_body
		[[ -n $cairn_session ]] && cairn_run_body=$cairn_sh_wrapper$cairn_body
		"$run"
		[[ -n $cairn_session ]] && cairn_session_take
		for i in "${!cairn_hosts[@]}"; do
			if [[ -n ${cairn_err[i]:-} ]]; then
				cairn_fail_check "$i" "${cairn_err[i]}"
				continue
			fi
			"$verify" "$i"
		done
		((${#cairn_hosts[@]} > 0)) || cairn_reasons+=("nothing ran")
		if ((${#cairn_reasons[@]} == 0 || attempt >= attempts)); then
			break
		fi
		local why
		if why=$(cairn_permanent); then
			cairn_reasons+=("not retried: $why")
			break
		fi
		local IFS=';'
		cairn_say "  … attempt $attempt of $attempts failed: $(cairn_mask_str "${cairn_reasons[*]}"); retrying in $cairn_interval"
		unset IFS
		sleep "$interval"
		attempt=$((attempt + 1))
	done
	if ((${#cairn_reasons[@]} == 0)); then
		"$capture"
		cairn_save_captures
	fi
	if ((!cairn_live)); then
		for i in "${!cairn_hosts[@]}"; do
			((${#cairn_hosts[@]} > 1)) && printf '  ── %s ──\n' "${cairn_hosts[i]}"
			cairn_mask '  │ ' <"$(cairn_out "$i")"
		done
	fi
	local exits
	exits=$(
		IFS=,
		printf '%s' "${cairn_exit[*]}"
	)
	if ((${#cairn_reasons[@]} == 0)); then
		cairn_verified=$((cairn_verified + 1))
		cairn_say "  ✓ verified in $((SECONDS - started))s"
		cairn_log_line "$cairn_step" "$cairn_id" "$exits" verified "attempts=$attempt"
		cairn_result verified
		return 0
	fi
	# A host that could not run at all (not a timeout, not one skipped after
	# another failed) makes it an error, as in the journal.
	status=failed
	for i in "${!cairn_hosts[@]}"; do
		case ${cairn_err[i]:-} in
		'' | 'timed out after'* | 'skipped: '*) ;;
		*) status=error ;;
		esac
	done
	local reasons
	reasons=$(
		IFS=';'
		printf '%s' "${cairn_reasons[*]}"
	)
	reasons=${reasons//;/; }
	cairn_say "  ✗ $status: $(cairn_mask_str "$reasons")"
	cairn_log_line "$cairn_step" "$cairn_id" "$exits" "$status" "$reasons"
	cairn_result "$status"
	{
		printf 'block "%s" (step "%s", %s:%s) failed:\n' "$cairn_id" "$cairn_step" "$cairn_source" "$cairn_line"
		printf '  expected: %s\n' "$cairn_expects"
		for i in "${cairn_reasons[@]}"; do
			printf '  problem:  %s\n' "$(cairn_mask_str "$i")"
		done
		printf '  got (last lines of output):\n'
		for i in "${!cairn_hosts[@]}"; do
			tail -n 15 "$(cairn_out "$i")" | cairn_mask "    $(cairn_where "$i")"
		done
	} >&2
	# Later blocks are skipped, but always=true ones (clean-up) still run;
	# the script ends with the first failure's resume hint and exit 1.
	if ((!cairn_failed)); then
		cairn_failed=1
		cairn_stop_msg=$(printf 'stopped at %s:%s (block "%s"); after fixing, resume with:\n  %s' "$cairn_source" "$cairn_line" "$cairn_id" "$(cairn_resume_hint "$cairn_step")")
	fi
	return 0
}

# cairn_permanent: prints why the failed attempt would fail the same way
# again (the executor's rule): a command not found or not runnable, or
# kubectl saying the resource type is not served or RBAC forbids it.
cairn_permanent() {
	local i out
	for i in "${!cairn_hosts[@]}"; do
		case ${cairn_exit[i]:-} in
		127) printf 'a command was not found (exit 127); install it or fix the name' && return 0 ;;
		126) printf 'a command could not be run (exit 126)' && return 0 ;;
		esac
		out=$(cairn_out "$i")
		[[ -f $out ]] || continue
		if grep -qF "error: the server doesn't have a resource type" "$out"; then
			printf 'the cluster does not serve that resource type (is its CRD installed?)' && return 0
		fi
		if grep -qE 'Error from server \(Forbidden\)|is forbidden: User ' "$out"; then
			printf 'the API refused it (RBAC forbidden)' && return 0
		fi
	done
	return 1
}

cairn_dry_show() { # TITLE TEXT
	cairn_say "  would run $1:"
	printf '%s\n' "$2" | cairn_mask '    '
}

# cairn_check_needs: before anything runs, every captured value a selected
# block reads must be at hand (--capture, or kept by an earlier run) or
# captured by a block before it that runs with these parameters; else the
# run stops here and says where to start (executor.UnmetError, same words).
cairn_check_needs() {
	local -A known=() seen=()
	local i j k name first='' firstblock=0 also='' msg froms='' st sets
	cairn_started=0
	for i in "${!cairn_nb_ids[@]}"; do
		cairn_want "${cairn_nb_steps[i]}" || continue
		[[ -z ${cairn_nb_when[i]} ]] || "${cairn_nb_when[i]}" || continue
		for name in ${cairn_nb_reads[i]}; do
			[[ -v known[$name] || -v cairn_cap[$name] ]] && continue
			known[$name]=1
			if [[ -z $first ]]; then
				first=$name
				firstblock=$i
			else
				also+=" \$$name"
			fi
		done
		for name in ${cairn_nb_sets[i]}; do
			known[$name]=1
		done
	done
	cairn_started=0
	[[ -n $first ]] || return 0
	i=$firstblock
	if [[ -n $cairn_from_step ]]; then
		msg="cannot start at step \"$cairn_from_step\": "
	elif [[ -n $cairn_only_step ]]; then
		msg="cannot run step \"$cairn_only_step\" alone: "
	else
		msg="cannot run: "
	fi
	msg+="block \"${cairn_nb_ids[i]}\" ($cairn_source:${cairn_nb_lines[i]}) needs \$$first, which no block before it in this run captures"
	[[ ${cairn_csecret[$first]:-0} == 1 ]] && msg+=" (a secret capture: it is not kept between runs)"
	for ((j = 0; j < i; j++)); do
		st=${cairn_nb_steps[j]}
		[[ -n $st && " ${cairn_nb_sets[j]} " == *" $first "* && ! -v seen[$st] ]] || continue
		seen[$st]=1
		if [[ -n ${cairn_nb_when[j]} ]] && ! "${cairn_nb_when[j]}"; then
			# Another block of the step may capture it with these values.
			sets=0
			for k in "${!cairn_nb_ids[@]}"; do
				[[ ${cairn_nb_steps[k]} == "$st" && " ${cairn_nb_sets[k]} " == *" $first "* ]] || continue
				[[ -z ${cairn_nb_when[k]} ]] || "${cairn_nb_when[k]}" || continue
				sets=1
			done
			((sets)) || st+=" (block \"${cairn_nb_ids[j]}\" runs when ${cairn_nb_whensrc[j]})"
		fi
		froms+="${froms:+, }--from $st"
	done
	if [[ -n $froms ]]; then
		msg+="; start at a step that captures it: $froms; or give it: --capture $first=VALUE"
	else
		msg+="; give it: --capture $first=VALUE"
	fi
	[[ -n $also ]] && msg+=" (also missing:$also)"
	if ((cairn_dry)); then
		cairn_warn "$msg"
		return 0
	fi
	cairn_usage_error "$msg"
}

# --- command line ------------------------------------------------------------------

cairn_main() {
	cairn_args=("$@")
	while (($# > 0)); do
		case $1 in
		-h | --help)
			cairn_usage
			exit 0
			;;
		--list) cairn_list=1 ;;
		--dry-run) cairn_dry=1 ;;
		-y | --yes) cairn_yes=1 ;;
		--param | --capture | --step | --from | --log | --results | --sign | --context | --kubeconfig | --ssh-config)
			(($# >= 2)) || cairn_usage_error "$1 needs a value"
			cairn_flag "$1" "$2"
			shift
			;;
		--param=* | --capture=* | --step=* | --from=* | --log=* | --results=* | --sign=* | --context=* | --kubeconfig=* | --ssh-config=*)
			cairn_flag "${1%%=*}" "${1#*=}"
			;;
		*) cairn_usage_error "unknown argument \"$1\"" ;;
		esac
		shift
	done
	if [[ -n $cairn_only_step && -n $cairn_from_step ]]; then
		cairn_usage_error "use only one of --step and --from"
	fi
	local s ok
	for s in "$cairn_only_step" "$cairn_from_step"; do
		[[ -z $s ]] && continue
		ok=0
		for i in "${cairn_step_ids[@]}"; do
			[[ $i == "$s" ]] && ok=1
		done
		((ok)) || cairn_usage_error "no step \"$s\" (steps: ${cairn_step_ids[*]})"
	done
	if ((cairn_list)); then
		cairn_print_list
		exit 0
	fi
	cairn_log=${cairn_log:-$cairn_default_log}
	if ((cairn_needs_pcre)) && ! printf 'a1\n' | LC_ALL=C grep -qP '\d' 2>/dev/null; then
		cairn_die "this script needs GNU grep with -P (PCRE) for its expectations and captures"
	fi
	cairn_resolve_params
	if ((!cairn_dry)); then
		cairn_load_captures
	fi
	cairn_check_needs
	cairn_tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-run.XXXXXX") || cairn_die "cannot make a temporary directory"
	trap cairn_cleanup EXIT
	trap 'cairn_stopped 130' INT
	trap 'cairn_stopped 143' TERM
	((cairn_dry)) && cairn_say "dry run: nothing is run; parameters are filled in, secrets masked"
	cairn_results_init
	cairn_requires
	cairn_log_line - - - start "$cairn_runbook $cairn_source_hash"
	cairn_plan
	cairn_say ""
	cairn_say "$cairn_verified verified, $cairn_skipped skipped of $cairn_total blocks"
	cairn_log_line - - - end "$cairn_verified verified, $cairn_skipped skipped of $cairn_total blocks"
	if ((cairn_failed)); then
		printf '%s\n' "$cairn_stop_msg" >&2
		exit 1
	fi
}

cairn_flag() {
	case $1 in
	--param)
		[[ $2 == *=* && -n ${2%%=*} ]] || cairn_usage_error "--param \"$2\": use NAME=VALUE"
		cairn_given[${2%%=*}]=${2#*=}
		;;
	--capture)
		[[ $2 == *=* && -n ${2%%=*} ]] || cairn_usage_error "--capture \"$2\": use NAME=VALUE"
		[[ -v cairn_csecret[${2%%=*}] ]] || cairn_usage_error "--capture: the runbook captures no \"${2%%=*}\""
		cairn_cap[${2%%=*}]=${2#*=}
		[[ ${cairn_csecret[${2%%=*}]} == 1 ]] && cairn_add_mask "${2#*=}"
		;;
	--step) cairn_only_step=$2 ;;
	--from) cairn_from_step=$2 ;;
	--log) cairn_log=$2 ;;
	--results) cairn_results=$2 ;;
	--sign) cairn_sign=$2 ;;
	--context) cairn_context=$2 ;;
	--kubeconfig) cairn_kubeconfig=$2 ;;
	--ssh-config) cairn_ssh_config=$2 ;;
	esac
}

# cairn_want STEP: whether --step/--from select STEP ("" for the blocks
# before the first step).
cairn_started=0
cairn_want() {
	if [[ -n $cairn_only_step ]]; then
		[[ $1 == "$cairn_only_step" ]]
		return
	fi
	if [[ -n $cairn_from_step ]]; then
		[[ $1 == "$cairn_from_step" ]] && cairn_started=1
		((cairn_started))
		return
	fi
	return 0
}
