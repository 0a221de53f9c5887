package export

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// carried writes what lists the images and charts a bundle carries, for
// people and for the air-gap tools a site may already use:
//   - images.txt: REF DIGEST SIZE, one image per line;
//   - hauler-manifest.yaml: Hauler's Images and Charts (hauler store sync -f);
//   - zarf.yaml: a Zarf package definition (zarf package create).
//
// Nothing is written when the bundle carries neither.
func carried(in BundleInput, add func(string, []byte, int64) error) error {
	if len(in.Images) == 0 && len(in.Charts) == 0 {
		return nil
	}
	var list, hauler, zarf strings.Builder
	list.WriteString("# The images of images/ (an OCI image layout): REFERENCE DIGEST BYTES [REGISTRY-DIGEST]\n")
	list.WriteString("# REGISTRY-DIGEST: the digest the registry serves, when a Docker image was carried as OCI.\n")
	for _, im := range in.Images {
		fmt.Fprintf(&list, "%s %s %d", oneLine(im.Ref), oneLine(im.Digest), im.Size)
		if im.Pulled != "" && im.Pulled != im.Digest {
			fmt.Fprintf(&list, " %s", oneLine(im.Pulled))
		}
		list.WriteString("\n")
	}
	for _, o := range in.Omitted {
		fmt.Fprintf(&list, "# not carried (the site provides it): %s\n", oneLine(o))
	}
	for _, c := range in.Charts {
		fmt.Fprintf(&list, "# chart %s: %s (%s %s)\n", oneLine(c.Name), oneLine(c.Path), oneLine(c.Chart), oneLine(c.Version))
	}

	hauler.WriteString("# Hauler: hauler store sync -f hauler-manifest.yaml (run in the unpacked bundle on the connected side\n")
	hauler.WriteString("# to fetch the same content with Hauler; images/ is already an OCI layout Hauler reads).\n")
	if len(in.Images) > 0 {
		hauler.WriteString("apiVersion: content.hauler.cattle.io/v1\nkind: Images\nmetadata:\n  name: cairn-bundle-images\nspec:\n  images:\n")
		for _, im := range in.Images {
			fmt.Fprintf(&hauler, "    - name: %s # %s\n", yq(im.Ref), oneLine(im.source()))
		}
	}
	if len(in.Charts) > 0 {
		if len(in.Images) > 0 {
			hauler.WriteString("---\n")
		}
		hauler.WriteString("apiVersion: content.hauler.cattle.io/v1\nkind: Charts\nmetadata:\n  name: cairn-bundle-charts\nspec:\n  charts:\n")
		for _, c := range in.Charts {
			fmt.Fprintf(&hauler, "    - name: %s # %s, a local chart of this bundle\n      version: %s\n", yq(c.Path), oneLine(c.Name), yq(c.Version))
		}
	}

	zarf.WriteString("# Zarf: zarf package create (in the unpacked bundle, on the connected side).\n")
	zarf.WriteString("kind: ZarfPackageConfig\nmetadata:\n  name: cairn-bundle\n")
	fmt.Fprintf(&zarf, "  description: Images and charts the Cairn runbooks of this bundle require\n  version: %s\n", yq(in.Version))
	zarf.WriteString("components:\n  - name: cairn-runbooks\n    required: true\n")
	if len(in.Images) > 0 {
		zarf.WriteString("    images:\n")
		for _, im := range in.Images {
			ref := im.Ref
			if d := im.source(); d != "" && !strings.Contains(ref, "@") {
				ref += "@" + d
			}
			fmt.Fprintf(&zarf, "      - %s\n", yq(ref))
		}
	}
	if len(in.Charts) > 0 {
		zarf.WriteString("    charts:\n")
		for _, c := range in.Charts {
			// Zarf needs a namespace to deploy a chart into; the runbooks
			// install theirs themselves, so this one is only a default.
			fmt.Fprintf(&zarf, "      - name: %s\n        version: %s\n        localPath: %s\n        namespace: kube-system\n", yq(c.Chart), yq(c.Version), yq(c.Path))
		}
	}
	return errors.Join(
		add("images.txt", []byte(list.String()), 0o644),
		add("hauler-manifest.yaml", []byte(hauler.String()), 0o644),
		add("zarf.yaml", []byte(zarf.String()), 0o644),
	)
}

// yq is a YAML double-quoted scalar (JSON's string syntax is YAML's).
func yq(s string) string { return strconv.Quote(oneLine(s)) }
