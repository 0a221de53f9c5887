// Package nodetest runs the bundled runbooks end to end with the cairn
// binary on sandbox nodes: content/kubeadm-ha.md builds an HA cluster on
// real kubelets, containerd and kubeadm, and content/ccm-leader-migration.md
// then moves that control plane's cloud controllers.
//
// These are the slowest tests of the repository (about ten minutes, two
// clusters at a time). They are a package of their own, and not among
// cmd/cairn's tests, so that go test runs them beside cmd/cairn's other
// tests instead of after them: most of their time is spent waiting on the
// nodes, not computing. The package has no code but its tests.
package nodetest
