// Package chartcheck checks the clawea Helm chart (../clawea) without a
// cluster: helm lint and helm template for the main value sets, then every
// rendered object decoded strictly into the Kubernetes API types, and the
// cross-object rules a cluster would only reveal at run time (selectors,
// ports, the control socket shared with the agent, hardened containers).
//
// It is a separate Go module so that helm's dependency tree stays out of
// the attester's module. Run it with `make chart-check`.
package chartcheck
