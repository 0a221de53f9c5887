// Package controllers stands in for sigs.k8s.io/mcs-api/controllers, which
// the module proxy does not serve. cilium v1.20.2 takes one name from it,
// DerivedServiceAnnotation, used only by its Multi-Cluster Services API
// support (off by default, and never enabled by the sandbox). The value is the
// annotation the MCS API defines for a ServiceImport's derived Service.
package controllers

// DerivedServiceAnnotation names, on a ServiceImport, the Service derived
// from it.
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
