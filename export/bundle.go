package export

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/runbook"
)

// BundleRoot is the folder every file of a bundle lies in.
const BundleRoot = "cairn-bundle"

// BundleInput is what goes into an offline bundle. The caller builds the
// site (package site) and cross-compiles binaries; this package only packs.
type BundleInput struct {
	Version  string
	Runbooks []*runbook.Runbook // in the order of the site's index
	// Sources maps a runbook's Path to the path it is shown with (relative
	// to the content folder's parent, say); default Path.
	Sources map[string]string
	// Site is the built static site: slash-separated path → content.
	Site map[string][]byte
	// Binaries: file name under bin/ → content (cairn-linux-amd64, …).
	Binaries map[string][]byte
	// Disk: bundle path → a file on disk, read while the archive is written
	// (the image layout's blobs and the charts: too large to hold).
	Disk map[string]string
	// Images and Charts are what Disk carries, for the README, images.txt,
	// the Hauler manifest and the Zarf package definition.
	Images []BundleImage
	Charts []BundleChart
	// Omitted are required images the bundle leaves out: the site has them.
	Omitted []string
}

// BundleImage is one image of the bundle's OCI layout (images/).
type BundleImage struct {
	Ref    string // registry.k8s.io/pause:3.10.2
	Digest string // of its manifest in the layout
	Pulled string // of its manifest as the registry served it ("" when the same)
	Size   int64  // of its blobs
}

// source is the digest the registries know the image by.
func (im BundleImage) source() string {
	if im.Pulled != "" {
		return im.Pulled
	}
	return im.Digest
}

// BundleChart is one Helm chart of the bundle (charts/).
type BundleChart struct {
	Name    string // as requires.charts names it (cilium/cilium)
	Chart   string // Chart.yaml's name
	Version string
	Path    string // in the bundle: charts/cilium-1.19.1.tgz
}

// epoch is the time every archive entry carries, so that the same content
// gives the same bytes.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type bundleFile struct {
	name string
	data []byte
	disk string // read from here instead of data
	size int64
	sum  string
	mode int64
}

// Bundle writes a deterministic tar.gz: the site, one script per runbook,
// the manifests they apply, the runbooks, what to bring in beforehand with
// a mirror helper, a README and a MANIFEST of SHA-256 sums.
func Bundle(w io.Writer, in BundleInput) error {
	if err := CheckOffline(in.Site); err != nil {
		return err
	}
	files := map[string]bundleFile{}
	put := func(f bundleFile) error {
		f.name = path.Clean(f.name)
		if strings.HasPrefix(f.name, "../") || f.name == ".." || path.IsAbs(f.name) {
			return fmt.Errorf("bundle: bad path %q", f.name)
		}
		if _, dup := files[f.name]; dup {
			return fmt.Errorf("bundle: two files at %s", f.name)
		}
		files[f.name] = f
		return nil
	}
	add := func(name string, data []byte, mode int64) error {
		sum := sha256.Sum256(data)
		return put(bundleFile{name: name, data: data, sum: hex.EncodeToString(sum[:]), size: int64(len(data)), mode: mode})
	}
	for p, data := range in.Site {
		if err := add("site/"+p, data, 0o644); err != nil {
			return err
		}
	}
	var errs []error
	for _, rb := range in.Runbooks {
		src := rb.Path
		if s, ok := in.Sources[rb.Path]; ok {
			src = s
		}
		script, err := Script(rb, Options{Version: in.Version, Source: src})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, add("scripts/"+ScriptName(rb), script, 0o755))
		errs = append(errs, add("runbooks/"+rb.Slug+".md", rb.Source, 0o644))
		for _, b := range rb.Blocks {
			if b.Executable() && b.Target == runbook.TargetKube && (b.Action == "apply" || b.Action == "patch") {
				ext := ".yaml"
				if b.Action == "patch" {
					ext = ".patch"
					if strings.HasPrefix(strings.TrimSpace(b.Content), "[") || strings.HasPrefix(strings.TrimSpace(b.Content), "{") {
						ext = ".json"
					}
				}
				errs = append(errs, add("manifests/"+rb.Slug+"/"+b.ID+ext, []byte(b.Content), 0o644))
			}
		}
	}
	for name, data := range in.Binaries {
		errs = append(errs, add("bin/"+name, data, 0o755))
	}
	for name, disk := range in.Disk {
		sum, size, err := fileSum(disk)
		if err != nil {
			errs = append(errs, fmt.Errorf("bundle: %s: %w", name, err))
			continue
		}
		errs = append(errs, put(bundleFile{name: name, disk: disk, sum: sum, size: size, mode: 0o644}))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	req := requirements(in.Runbooks)
	if err := errors.Join(
		add("REQUIRES.txt", []byte(req.text()), 0o644),
		add("mirror.sh", []byte(req.mirrorScript()), 0o755),
		add("README.md", []byte(readme(in)), 0o644),
	); err != nil {
		return err
	}
	if err := carried(in, add); err != nil {
		return err
	}

	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var manifest strings.Builder
	for _, n := range names {
		fmt.Fprintf(&manifest, "%s  %s\n", files[n].sum, n)
	}
	files["MANIFEST"] = bundleFile{name: "MANIFEST", data: []byte(manifest.String()), size: int64(manifest.Len()), mode: 0o644}
	names = append(names, "MANIFEST")
	sort.Strings(names)

	// gzip without name or time in its header; tar entries with fixed
	// times, owners and modes, directories included, in sorted order.
	// Image layers are compressed already: a small bundle gets the best
	// compression; one that carries images, the fastest (measured on the
	// sandbox's 13 images, 467 MB of blobs: 0.8 s and 0.8 % larger than
	// the default level's 6.7 s).
	level := gzip.BestCompression
	if len(in.Disk) > 0 {
		level = gzip.BestSpeed
	}
	zw, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return err
	}
	zw.Header = gzip.Header{OS: 255}
	tw := tar.NewWriter(zw)
	dirs := map[string]bool{}
	var entries []string
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		entries = append(entries, d+"/")
	}
	entries = append(entries, names...)
	sort.Strings(entries)
	hdr := func(name string, mode int64, size int64, typ byte) *tar.Header {
		return &tar.Header{Name: BundleRoot + "/" + name, Mode: mode, Size: size, Typeflag: typ,
			ModTime: epoch, Uid: 0, Gid: 0, Uname: "root", Gname: "root", Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr("", 0o755, 0, tar.TypeDir)); err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e, "/") {
			if err := tw.WriteHeader(hdr(e, 0o755, 0, tar.TypeDir)); err != nil {
				return err
			}
			continue
		}
		f := files[e]
		if err := tw.WriteHeader(hdr(e, f.mode, f.size, tar.TypeReg)); err != nil {
			return err
		}
		if err := f.write(tw); err != nil {
			return fmt.Errorf("bundle: %s: %w", e, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func (f bundleFile) write(w io.Writer) error {
	if f.disk == "" {
		_, err := w.Write(f.data)
		return err
	}
	r, err := os.Open(f.disk)
	if err != nil {
		return err
	}
	defer r.Close()
	// The file must still be what MANIFEST says: hash it again on the way.
	h := sha256.New()
	n, err := io.Copy(w, io.TeeReader(io.LimitReader(r, f.size+1), h))
	if err != nil {
		return err
	}
	if n != f.size || hex.EncodeToString(h.Sum(nil)) != f.sum {
		return fmt.Errorf("%s changed while the bundle was written", f.disk)
	}
	return nil
}

func fileSum(p string) (string, int64, error) {
	r, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// urlRe finds absolute URLs; loadRe finds protocol-relative loads.
var (
	urlRe  = regexp.MustCompile(`(?i)\bhttps?://([^/\s"'<>()\\` + "`" + `]+)`)
	loadRe = regexp.MustCompile(`(?i)(?:\b(?:src|href|action|poster|data)\s*=\s*["']?|url\(\s*["']?|@import\s+["'])//[a-z0-9]`)
)

// offlineHosts may appear in a URL: XML namespace names (identifiers, never
// fetched) and this machine.
var offlineHosts = map[string]bool{
	"www.w3.org": true, "www.sitemaps.org": true,
	"127.0.0.1": true, "localhost": true, "[::1]": true,
}

// CheckOffline fails when a file of the site names a URL on another machine
// (a font, script, style sheet or link that would need the network).
// Placeholders without a dot (https://ETCD_0_IP:2379) are not machines.
func CheckOffline(site map[string][]byte) error {
	var bad []string
	names := make([]string, 0, len(site))
	for n := range site {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		text := string(site[n])
		for _, m := range urlRe.FindAllStringSubmatch(text, -1) {
			host := strings.ToLower(m[1])
			if i := strings.LastIndexByte(host, '@'); i >= 0 {
				host = host[i+1:]
			}
			if !strings.HasPrefix(host, "[") {
				host, _, _ = strings.Cut(host, ":")
			}
			if offlineHosts[host] || !strings.Contains(host, ".") {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s: %s", n, m[0]))
		}
		for _, m := range loadRe.FindAllString(text, -1) {
			bad = append(bad, fmt.Sprintf("%s: %s…", n, m))
		}
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("and %d more", len(bad)-20))
		}
		return fmt.Errorf("the site names URLs that need the network:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// reqs is what the runbooks say an air-gapped site must bring in.
type reqs struct {
	images, charts, binaries []reqItem
}

type reqItem struct {
	name string
	by   []string // runbook slugs
}

func requirements(rbs []*runbook.Runbook) reqs {
	collect := func(get func(runbook.Requires) []string) []reqItem {
		by := map[string][]string{}
		for _, rb := range rbs {
			for _, x := range get(rb.Meta.Requires) {
				x = strings.TrimSpace(x)
				if x != "" && (len(by[x]) == 0 || by[x][len(by[x])-1] != rb.Slug) {
					by[x] = append(by[x], rb.Slug)
				}
			}
		}
		var out []reqItem
		for n, s := range by {
			out = append(out, reqItem{name: n, by: s})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
		return out
	}
	return reqs{
		images:   collect(func(r runbook.Requires) []string { return r.Images }),
		charts:   collect(func(r runbook.Requires) []string { return r.Charts }),
		binaries: collect(func(r runbook.Requires) []string { return r.AllBinaries() }),
	}
}

func (r reqs) text() string {
	var b strings.Builder
	b.WriteString("# What the runbooks need that an air-gapped site must bring in beforehand.\n")
	b.WriteString("# KIND NAME (runbooks that need it). mirror.sh fetches them on a connected machine.\n")
	for _, sec := range []struct {
		kind  string
		items []reqItem
	}{{"image", r.images}, {"chart", r.charts}, {"binary", r.binaries}} {
		for _, it := range sec.items {
			fmt.Fprintf(&b, "%-7s %s (%s)\n", sec.kind, oneLine(it.name), strings.Join(it.by, ", "))
		}
	}
	return b.String()
}

func words(items []reqItem) string {
	var qs []string
	for _, it := range items {
		qs = append(qs, q(oneLine(it.name)))
	}
	return strings.Join(qs, " ")
}

func (r reqs) mirrorScript() string {
	return `#!/usr/bin/env bash
# Run on a machine WITH network access, then carry OUT_DIR to the site.
# (cairn export --bundle --images LIST carries the images in the bundle
# itself; this is for a machine without cairn.)
#
#   ./mirror.sh [--out DIR] [--registry MIRROR/PREFIX] [--tag IMAGE=TAG ...]
#               [--from REGISTRY=MIRROR ...] [--plain-http] [--images-only]
#
# Images: copied with skopeo (or docker/podman pull + save) into DIR/images as
# docker-archive tarballs named as the runbooks name them, or straight into your
# mirror registry with --registry. --from pulls a registry's images from a
# mirror of it (--from registry.k8s.io=mirror.internal:5000/k8s), --plain-http
# talks to such a mirror without TLS (skopeo only). Images listed without a tag
# need --tag IMAGE=TAG (the version your cluster runs); otherwise "latest" is
# taken, with a warning.
# Charts: helm pull into DIR/charts (add the chart repositories first).
# Binaries: listed in DIR/binaries.txt; fetch the versions you run.
set -u -o pipefail

images=(` + words(r.images) + `)
charts=(` + words(r.charts) + `)
binaries=(` + words(r.binaries) + `)

out=./cairn-mirror
registry=''
tls=true
only=0
declare -A tags=() from=()
while (($# > 0)); do
	case $1 in
	--out) out=${2:?--out needs a folder}; shift ;;
	--registry) registry=${2:?--registry needs MIRROR/PREFIX}; shift ;;
	--tag) tags[${2%%=*}]=${2#*=}; shift ;;
	--from)
		[[ ${2:-} == ?*=?* ]] || { echo "mirror.sh: --from needs REGISTRY=MIRROR" >&2; exit 2; }
		from[${2%%=*}]=${2#*=}
		shift
		;;
	--plain-http) tls=false ;;
	--images-only) only=1 ;;
	-h | --help) sed -n '2,20p' "$0"; exit 0 ;;
	*) echo "mirror.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$out/images" "$out/charts" || exit 1
status=0

ref() { # IMAGE -> IMAGE:TAG
	local img=$1 last=${1##*/}
	if [[ $last == *:* || $img == *@* ]]; then
		printf '%s' "$img"
	elif [[ -v tags[$img] ]]; then
		printf '%s:%s' "$img" "${tags[$img]}"
	else
		echo "mirror.sh: $img has no tag; taking latest (pass --tag $img=TAG)" >&2
		printf '%s:latest' "$img"
	fi
}

src() { # IMAGE:TAG -> where to pull it from (a --from mirror of its registry)
	local r=$1 reg=${1%%/*}
	if [[ -v from[$reg] ]]; then
		printf '%s/%s' "${from[$reg]}" "${r#*/}"
	else
		printf '%s' "$r"
	fi
}

for img in "${images[@]}"; do
	r=$(ref "$img")
	s=$(src "$r")
	file="$out/images/$(printf '%s' "$r" | tr '/:@' '___').tar"
	if [[ $s == "$r" ]]; then echo "mirror.sh: $r" >&2; else echo "mirror.sh: $r (from $s)" >&2; fi
	if [[ -n $registry ]]; then
		dest="$registry/${r#*/}"
		if command -v skopeo >/dev/null; then
			skopeo copy --all --src-tls-verify="$tls" --dest-tls-verify="$tls" "docker://$s" "docker://$dest" || status=1
		elif command -v docker >/dev/null; then
			{ docker pull "$s" && docker tag "$s" "$dest" && docker push "$dest"; } || status=1
		else
			echo "mirror.sh: need skopeo or docker for $r" >&2
			status=1
		fi
	elif command -v skopeo >/dev/null; then
		rm -f -- "$file"
		skopeo copy --src-tls-verify="$tls" "docker://$s" "docker-archive:$file:$r" || status=1
	elif command -v docker >/dev/null; then
		{ docker pull "$s" && docker tag "$s" "$r" && docker save -o "$file" "$r"; } || status=1
	elif command -v podman >/dev/null; then
		{ podman pull "$s" && podman tag "$s" "$r" && podman save -o "$file" "$r"; } || status=1
	else
		echo "mirror.sh: need skopeo, docker or podman for $r" >&2
		status=1
	fi
done

if ((!only)); then
	for chart in "${charts[@]}"; do
		if command -v helm >/dev/null; then
			helm pull "$chart" --destination "$out/charts" || status=1
		else
			echo "mirror.sh: need helm for $chart" >&2
			status=1
		fi
	done
	if ((${#binaries[@]} > 0)); then
		printf '%s\n' "${binaries[@]}" >"$out/binaries.txt"
		echo "mirror.sh: fetch these binaries yourself (see $out/binaries.txt): ${binaries[*]}"
	fi
fi
exit "$status"
`
}

func readme(in BundleInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Cairn offline bundle\n\nMade by Cairn %s for sites without network access.\n\n", oneLine(in.Version))
	b.WriteString("## Verify\n\n```sh\ncd " + BundleRoot + "\nsha256sum -c MANIFEST\n```\n\n")
	b.WriteString("Every file except MANIFEST itself is listed there with its SHA-256. Compare the archive's own\n")
	b.WriteString("checksum with the one you were given before unpacking.\n\n")
	b.WriteString("## Read\n\nOpen `site/index.html` in a browser: the site works from the file system and loads\n")
	b.WriteString("nothing from the network.\n\n")
	b.WriteString("## Run\n\nEach runbook is also a standalone bash script (bash 4.3+, coreutils, GNU grep, sed, awk, and\n")
	b.WriteString("the clients it calls: kubectl, ssh, scp):\n\n```sh\n")
	b.WriteString("scripts/SLUG.sh --help                 # parameters and options\nscripts/SLUG.sh --list                 # the steps\n")
	b.WriteString("scripts/SLUG.sh --dry-run --param K=V  # what would run\nscripts/SLUG.sh --param K=V            # run, checking every step\n")
	b.WriteString("scripts/SLUG.sh --from STEP            # resume after a failure\n```\n\n")
	b.WriteString("| script | runbook | steps |\n| --- | --- | --- |\n")
	for _, rb := range in.Runbooks {
		fmt.Fprintf(&b, "| `scripts/%s` | %s | %d |\n", ScriptName(rb), strings.ReplaceAll(oneLine(rb.Meta.Title), "|", "\\|"), len(rb.Steps))
	}
	b.WriteString("\nEvery run appends to SLUG.log next to the script (or `--log FILE`). The manifests the\n")
	b.WriteString("scripts apply are in `manifests/` (as written, before parameters are filled in); the\n")
	b.WriteString("runbooks themselves in `runbooks/`.\n\n")
	b.WriteString("## Bring in beforehand\n\n`REQUIRES.txt` lists the container images, Helm charts and binaries the runbooks need.\n")
	b.WriteString("On a machine with network access, `./mirror.sh --out DIR` (or `--registry MIRROR/PREFIX`)\n")
	b.WriteString("fetches them; carry DIR to the site.\n")
	if len(in.Images) > 0 || len(in.Charts) > 0 {
		var size int64
		for _, im := range in.Images {
			size += im.Size
		}
		fmt.Fprintf(&b, "\n## Images and charts carried\n\nThis bundle carries %d images (%d MB of blobs) and %d Helm charts; `images.txt` lists them\n", len(in.Images), (size+500_000)/1_000_000, len(in.Charts))
		b.WriteString("with their digests, and MANIFEST every blob with its SHA-256.\n\n")
		b.WriteString("- `images/` is an OCI image layout. Into a node's containerd (what kubelet uses), as root:\n\n")
		b.WriteString("  ```sh\n  tar -C images -cf - . | ctr -n k8s.io images import --all-platforms -\n  ```\n\n")
		b.WriteString("  Into a site registry: `skopeo copy oci:images:REF docker://REGISTRY/...` (or crane, oras; Hauler reads the\n")
		b.WriteString("  layout too). Every image is named in the layout as the runbooks name it (`org.opencontainers.image.ref.name`\n")
		b.WriteString("  and `io.containerd.image.name`).\n")
		if len(in.Omitted) > 0 {
			b.WriteString("\n  Not carried, as asked when the bundle was made (the site provides them): ")
			for i, o := range in.Omitted {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("`" + oneLine(o) + "`")
			}
			b.WriteString(".\n\n")
		}
		b.WriteString("- `charts/` holds the charts as `.tgz`: pass the file's path where a runbook asks for its chart.\n")
		b.WriteString("- `hauler-manifest.yaml` and `zarf.yaml` list the same images and charts for sites that carry their software\n")
		b.WriteString("  with Hauler or Zarf.\n")
		for _, c := range in.Charts {
			fmt.Fprintf(&b, "\n  `%s`: %s %s (for `%s`)\n", oneLine(c.Path), oneLine(c.Chart), oneLine(c.Version), oneLine(c.Name))
		}
	}
	if len(in.Binaries) > 0 {
		names := make([]string, 0, len(in.Binaries))
		for n := range in.Binaries {
			names = append(names, n)
		}
		sort.Strings(names)
		b.WriteString("\n## Cairn itself\n\n`bin/` holds cairn for Linux (")
		b.WriteString(strings.Join(names, ", "))
		b.WriteString("): `bin/cairn-linux-amd64 serve --content runbooks` serves the site with the executor.\n")
	}
	return b.String()
}
